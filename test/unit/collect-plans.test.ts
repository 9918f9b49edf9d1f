/**
 * What to collect on plans shaped like real UAE ones (issue 35), from recorded portal answers
 * (test/fixtures/mapping/found-eligible-deductible.json: a plan shaped like Dubai's Essential
 * Benefits Plan; found-eligible-maternity.json: a maternity benefit beside a Maternity block that
 * repeats the outpatient values): strings for numbers, figures only in values_to_fill, blocks that
 * repeat each other, two lists naming one benefit. The same answers in the summary, the
 * narrative's tables and the estimate.
 */
import type { ClaimResponse, CoverageEligibilityResponse } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { mapEnvelope } from '../../src/mapping/response/index.js';
import { estimateClaimResponse, estimateItems } from '../../src/mapping/response/estimate.js';
import { visitSummary } from '../../src/mapping/response/visit-summary.js';
import { categoryByCode } from '../../src/mapping/response/vocabulary.js';
import { benefitsContext } from '../support/cer-context.js';
import { expectValidFhir } from '../support/fhir.js';
import { mappingFixture } from '../support/fixture-upstream.js';

const SERVICE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';

const ctx = benefitsContext('c35', 'NAS');

type Plan = 'found-eligible-deductible' | 'found-eligible-maternity';
const cers = new Map<Plan, CoverageEligibilityResponse>();
function cerOf(plan: Plan): CoverageEligibilityResponse {
  let cer = cers.get(plan);
  if (!cer) {
    cer = mapEnvelope(mappingFixture(plan), ctx);
    expectValidFhir(cer);
    cers.set(plan, cer);
  }
  return cer;
}

const asked = (code: string) => [{ coding: [{ system: SERVICE, code }] }];
const sentenceOf = (plan: Plan, code: string) => visitSummary(cerOf(plan), asked(code))[0]?.lines[0];

describe('the visit summary of a plan shaped like a real one', () => {
  it.each<[string, Plan, string, string]>([
    [
      'a per-visit deductible given only in values_to_fill (the analysis line has no figure)',
      'found-eligible-deductible',
      'lab',
      "Laboratory (Outpatient, RN): AED 25 per visit (the portal's deductible, a fixed amount per visit)",
    ],
    [
      'the same deductible on DIAGNOSTICS, in every block',
      'found-eligible-deductible',
      'diagnostics',
      "Diagnostics (Outpatient, RN): AED 25 per visit (the portal's deductible, a fixed amount per visit)",
    ],
    [
      '20% up to AED 500 in the analysis, its form line adding an AED 20 deductible',
      'found-eligible-deductible',
      'consultation',
      "Consultation (Outpatient, RN): AED 20 per visit (the portal's deductible) plus 20% of the fee, the 20% at most AED 500 per visit",
    ],
    [
      'maternity from the maternity benefit, not from the Maternity block repeating the outpatient AED 40',
      'found-eligible-maternity',
      'maternity',
      'Maternity (Outpatient): 10% of the fee, at most AED 500 per visit',
    ],
    [
      'the outpatient consultation of that plan stays AED 40',
      'found-eligible-maternity',
      'consultation',
      'Consultation (Outpatient, GN): AED 40 per visit',
    ],
    [
      'inpatient from the two lists with the same figures',
      'found-eligible-deductible',
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, at most AED 1000 per admission',
    ],
    [
      'inpatient covered in full in the two lists',
      'found-eligible-maternity',
      'inpatient',
      'Inpatient (Inpatient): covered, no copay figures given by the portal',
    ],
  ])('%s', (_name, plan, code, sentence) => {
    expect(sentenceOf(plan, code)?.sentence).toBe(sentence);
  });

  it.each<[string, Plan, string, RegExp]>([
    [
      'says where the deductible comes from and how the two charges combine',
      'found-eligible-deductible',
      'consultation',
      /two charges of one line[^]*added: AED 20 \(at most the fee\) plus 20% of the fee up to AED 500, the whole at most the fee[^]*deductible of AED 20 per visit is from Outpatient - CONSULTATION/,
    ],
    [
      'reads the deductible as per visit',
      'found-eligible-deductible',
      'lab',
      /deductible is read as a fixed amount per visit[^]*The portal also gives Laboratory - Outpatient: covered, no copay figures/,
    ],
    [
      'names the block the maternity figures come from',
      'found-eligible-maternity',
      'maternity',
      /figures of the portal's Outpatient block \(Maternity - Outpatient\)/,
    ],
  ])('notes: %s', (_name, plan, code, note) => {
    expect(sentenceOf(plan, code)?.notes.join(' ')).toMatch(note);
  });
});

/** The narrative's tables: block title -> rows of cells. */
function tables(cer: CoverageEligibilityResponse): Map<string, string[][]> {
  const div = cer.text?.div ?? '';
  const found = new Map<string, string[][]>();
  for (const match of div.matchAll(/<h3>([^<]*)<\/h3><table>.*?<tbody>(.*?)<\/tbody><\/table>/g)) {
    const rows = [...(match[2] ?? '').matchAll(/<tr>(.*?)<\/tr>/g)].map((r) =>
      [...(r[1] ?? '').matchAll(/<td>(.*?)<\/td>/g)].map((c) => c[1] ?? ''),
    );
    found.set(match[1] ?? '', rows);
  }
  return found;
}

describe("the narrative's tables: one row per fact in a block", () => {
  it.each<[string, Plan, string, RegExp, string[]]>([
    [
      'Inpatient and Inpatient & Day Care with the same figures',
      'found-eligible-deductible',
      'Inpatient benefits',
      /^Inpatient/,
      ['Inpatient', 'Covered', '20%', '', '1000 (per admission)', 'AED', 'Prior approval required'],
    ],
    [
      'Inpatient and Inpatient & Day Care covered in full',
      'found-eligible-maternity',
      'Inpatient benefits',
      /^Inpatient/,
      ['Inpatient', 'Covered', '', '', '', '', 'Covered in full'],
    ],
    [
      'the analysis consultation and its form line with the deductible',
      'found-eligible-deductible',
      'Outpatient benefits',
      /^(Consultation|CONSULTATION)/,
      [
        'Consultation (RN)',
        'Covered',
        '20%',
        '',
        '500',
        'AED',
        '20% up to AED 500 per visit; Deductible (per visit): 20 AED',
      ],
    ],
  ])('%s', (_name, plan, block, name, row) => {
    const rows = (tables(cerOf(plan)).get(block) ?? []).filter((r) => name.test(r[0] ?? ''));
    expect(rows).toEqual([row]);
  });

  it.each<[Plan, string]>([
    [
      'found-eligible-deductible',
      'Consultation (Outpatient, RN): AED 20 per visit (the portal&#39;s deductible) plus 20% of the fee, the 20% at most AED 500 per visit',
    ],
    [
      'found-eligible-deductible',
      'Laboratory (Outpatient, RN): AED 25 per visit (the portal&#39;s deductible, a fixed amount per visit)',
    ],
    ['found-eligible-maternity', 'Consultation (Outpatient, GN): AED 40 per visit'],
  ])('%s: the summary at the top of the narrative says %s', (plan, sentence) => {
    expect(cerOf(plan).text?.div).toContain(`<li>${sentence}</li>`);
  });

  it('a maternity check: the narrative summary reads the maternity benefit', () => {
    const cer = mapEnvelope(mappingFixture('found-eligible-maternity'), {
      ...ctx,
      request: { ...ctx.request, item: [{ category: asked('maternity')[0] }] },
    });
    expectValidFhir(cer);
    expect(cer.text?.div).toContain(
      '<li>Maternity (Outpatient): 10% of the fee, at most AED 500 per visit</li>',
    );
    expect(cer.text?.div).not.toContain('Maternity (Maternity');
  });
});

const copayOf = (claim: ClaimResponse, code: string) =>
  claim.total?.find((t) => t.category.coding?.[0]?.code === code)?.amount.value;

function estimate(plan: Plan, fees: [string, number][]): ClaimResponse {
  const cer = cerOf(plan);
  const items = cer.insurance?.find((i) => i.inforce === true)?.item ?? [];
  const estimates = estimateItems(
    items,
    fees.map(([code, fee]) => ({ category: categoryByCode(code)!, fee })),
  );
  const claim = estimateClaimResponse(cer, estimates, '2026-11-22T10:05:00.000Z');
  expectValidFhir(claim);
  return claim;
}

describe('$estimate on those plans', () => {
  it.each<[string, Plan, [string, number][], (number | undefined)[]]>([
    ['a lab fee of AED 90: the AED 25 deductible', 'found-eligible-deductible', [['lab', 90]], [25]],
    ['a lab fee below the deductible: the fee', 'found-eligible-deductible', [['diagnostics', 10]], [10]],
    ['a consultation of AED 400: AED 20 + 20%', 'found-eligible-deductible', [['consultation', 400]], [100]],
    [
      'a consultation of AED 3,000: AED 20 + the AED 500 cap',
      'found-eligible-deductible',
      [['consultation', 3000]],
      [520],
    ],
    ['a consultation of AED 12: the fee', 'found-eligible-deductible', [['consultation', 12]], [12]],
    ['maternity of AED 300: 10%', 'found-eligible-maternity', [['maternity', 300]], [30]],
    ['maternity of AED 8,000: the AED 500 cap', 'found-eligible-maternity', [['maternity', 8000]], [500]],
    ['an outpatient consultation: AED 40', 'found-eligible-maternity', [['consultation', 300]], [40]],
    [
      'a category without figures: submitted only',
      'found-eligible-deductible',
      [['maternity', 300]],
      [undefined],
    ],
  ])('%s', (_name, plan, fees, copays) => {
    const claim = estimate(plan, fees);
    const got = (claim.item ?? []).map(
      (item) => item.adjudication.find((a) => a.category.coding?.[0]?.code === 'copay')?.amount?.value,
    );
    expect(got).toEqual(copays);
    claim.item?.forEach((item, i) => {
      const copay = item.adjudication.find((a) => a.category.coding?.[0]?.code === 'copay')?.amount?.value;
      const benefit = item.adjudication.find((a) => a.category.coding?.[0]?.code === 'benefit')?.amount
        ?.value;
      if (copay !== undefined)
        expect(Math.round((copay + (benefit ?? 0)) * 100)).toBe(Math.round(fees[i]![1] * 100));
    });
  });

  it.each<[string, Plan, [string, number][], Record<string, number | undefined>, RegExp]>([
    [
      'one item without figures: totals over the others, the item named',
      'found-eligible-deductible',
      [
        ['lab', 90],
        ['maternity', 300],
        ['consultation', 400],
      ],
      { submitted: 790, copay: 125, benefit: 365 },
      /totals count only the items with an estimated share; not counted: item 2 \(Maternity, AED 300\)/,
    ],
    [
      'no item with figures: no copay or benefit total, said so',
      'found-eligible-deductible',
      [
        ['maternity', 300],
        ['emergency', 50],
      ],
      { submitted: 350, copay: undefined, benefit: undefined },
      /No copay or benefit total: no item has an estimated share \(item 1 \(Maternity, AED 300\) and item 2 \(Emergency, AED 50\)/,
    ],
    [
      'every item with figures: totals of all, no such note',
      'found-eligible-maternity',
      [
        ['maternity', 300],
        ['consultation', 300],
      ],
      { submitted: 600, copay: 70, benefit: 530 },
      /^(?![^]*not counted)/,
    ],
  ])('totals: %s', (_name, plan, fees, totals, note) => {
    const claim = estimate(plan, fees);
    expect({
      submitted: copayOf(claim, 'submitted'),
      copay: copayOf(claim, 'copay'),
      benefit: copayOf(claim, 'benefit'),
    }).toEqual(totals);
    expect((claim.processNote ?? []).map((n) => n.text).join('\n')).toMatch(note);
  });
});

describe('the choice of figures never crosses into another network', () => {
  it('an in-network line without figures does not give way to out-of-network figures', () => {
    const envelope = mappingFixture('found-eligible-deductible');
    const data = envelope.eligibility_result?.data_dump?.data;
    const outpatient = data?.copay_details_to_fill?.[0];
    if (!outpatient?.primary_network) throw new Error('fixture changed');
    outpatient.primary_network.network = 'Out of Network';
    const cer = mapEnvelope(envelope, ctx);
    expectValidFhir(cer);
    expect(visitSummary(cer, asked('lab'))[0]?.lines[0]?.sentence).toBe(
      'Laboratory (Outpatient, RN): covered, no copay figures given by the portal',
    );
  });
});
