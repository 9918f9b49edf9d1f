/**
 * The visit summary and the share (src/mapping/response/visit-summary.ts, benefit-model.ts): the
 * contract's clear cases as a table, string percentages, the 0 maximum, the deductible read as a
 * per-visit amount, the choice of block, the short line and the Markdown; and the share's
 * properties over arbitrary fees and figures (fast-check).
 */
import { readFileSync } from 'node:fs';
import type {
  CoverageEligibilityResponseInsuranceItem as Item,
  CoverageEligibilityResponseInsuranceItemBenefit as Benefit,
} from 'fhir/r4.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { benefitModelOf, shareOf, shareRuleOf } from '../../src/mapping/response/benefit-model.js';
import type { ShareRule } from '../../src/mapping/response/benefit-model.js';
import { mapEnvelope } from '../../src/mapping/response/index.js';
import {
  askedCategories,
  isFoundInForce,
  summaryLine,
  summaryMarkdown,
  summaryXhtml,
  visitLineOf,
  visitSummary,
} from '../../src/mapping/response/visit-summary.js';
import { categoryByCode, serviceCategories } from '../../src/mapping/response/vocabulary.js';
import { estimateClaimResponse, estimateItems } from '../../src/mapping/response/estimate.js';
import { expectValidFhir } from '../support/fhir.js';
import { benefitsContext } from '../support/cer-context.js';
import { envelopeSchema } from '../../src/upstream/contract.js';

const TYPE = 'http://terminology.hl7.org/CodeSystem/benefit-type';
const OWN_TYPE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/benefit-type';
const SERVICE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';
const SOURCE = 'http://fhir-eligibility-adapter.org/fhir/StructureDefinition/benefit-source';
const EX = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';

const percent = (value: number | string): Benefit =>
  typeof value === 'number'
    ? { type: { coding: [{ system: TYPE, code: 'copay-percent' }] }, allowedUnsignedInt: value }
    : { type: { coding: [{ system: TYPE, code: 'copay-percent' }] }, allowedString: value };
const amount = (code: string, value: number, system = TYPE): Benefit => ({
  type: { coding: [{ system, code }] },
  allowedMoney: { value, currency: 'AED' },
});

/** A CER item as items.ts writes it. */
function item(code: string, benefit: Benefit[], extra: Partial<Item> & { source?: string } = {}): Item {
  const { source, ...rest } = extra;
  return {
    extension: [{ url: SOURCE, valueString: source ?? 'copay_analysis.copay_details[0]' }],
    category: { coding: [{ system: SERVICE, code }] },
    name: `${code} - Outpatient`,
    benefit,
    ...rest,
  };
}

const consultation = categoryByCode('consultation')!;
const sentence = (items: Item[]): string => visitLineOf(items, consultation).sentence;

describe('the visit summary sentence', () => {
  it.each<[string, Benefit[], Partial<Item>, string]>([
    [
      'a percentage with a per-visit maximum',
      [percent(20), amount('copay-maximum', 50)],
      { term: { text: 'per claim' } },
      'Consultation (Outpatient): 20% of the fee, at most AED 50 per visit',
    ],
    [
      'a percentage given as the string "20%"',
      [percent('20%'), amount('copay-maximum', 50)],
      { term: { text: 'per visit' } },
      'Consultation (Outpatient): 20% of the fee, at most AED 50 per visit',
    ],
    [
      'a decimal percentage string "12.5%"',
      [percent('12.5%')],
      {},
      'Consultation (Outpatient): 12.5% of the fee, no maximum given by the portal',
    ],
    [
      'a percentage with a maximum of 0',
      [percent(10), amount('copay', 0), amount('copay-maximum', 0)],
      {},
      'Consultation (Outpatient): 10% of the fee, no maximum given by the portal',
    ],
    ['a fixed amount', [amount('copay', 25)], {}, 'Consultation (Outpatient): AED 25 per visit'],
    [
      'a fixed amount and the same deductible beside a 0%',
      [percent(0), amount('copay', 25), amount('copay-maximum', 0), amount('deductible', 25)],
      {},
      'Consultation (Outpatient): AED 25 per visit',
    ],
    [
      'a deductible alone',
      [amount('deductible', 20)],
      {},
      "Consultation (Outpatient): AED 20 per visit (the portal's deductible, a fixed amount per visit)",
    ],
    ['not covered', [], { excluded: true }, 'Consultation (Outpatient): not covered'],
    [
      'covered without figures',
      [],
      { excluded: false },
      'Consultation (Outpatient): covered, no copay figures given by the portal',
    ],
    [
      'a percentage and a fixed amount together',
      [percent(20), amount('copay', 50)],
      {},
      'Consultation (Outpatient): 20% of the fee, AED 50 per visit; the portal does not say how both a percentage and a fixed amount per visit combine, so no share is given',
    ],
    [
      'a yearly aggregate cap',
      [
        percent(20),
        amount('copay-maximum', 50),
        {
          type: { coding: [{ system: OWN_TYPE, code: 'copay-aggregate-cap' }] },
          allowedString: 'AED 500 per year',
        },
      ],
      { term: { text: 'per claim' } },
      'Consultation (Outpatient): 20% of the fee, at most AED 50 per visit; yearly cap on copays: AED 500 per year',
    ],
  ])('reads %s', (_name, benefits, extra, expected) => {
    expect(sentence([item('consultation', benefits, extra)])).toBe(expected);
  });

  it('never writes a maximum of 0 that reads as "pay nothing"', () => {
    const line = visitLineOf([item('consultation', [percent(10), amount('copay-maximum', 0)])], consultation);
    expect(line.sentence).not.toMatch(/AED 0\b/);
    expect(line.rule).toEqual({ kind: 'percent', percent: 10 });
    expect(line.notes.join(' ')).toContain('no maximum');
  });

  it('reads a yearly maximum as a yearly cap, not a per-visit one', () => {
    const line = visitLineOf(
      [
        item('consultation', [percent(10), amount('copay-maximum', 500)], {
          term: {
            coding: [{ system: 'http://terminology.hl7.org/CodeSystem/benefit-term', code: 'annual' }],
          },
        }),
      ],
      consultation,
    );
    expect(line.rule).toEqual({ kind: 'percent', percent: 10 });
    expect(line.sentence).toContain('yearly cap on copays: AED 500 per year');
    expect(line.notes.join(' ')).toContain('not applied');
  });

  it('says when the answer has no item for the category', () => {
    const line = visitLineOf([item('lab', [percent(10)])], consultation);
    expect(line.sentence).toBe("Consultation: not in the portal's answer");
    expect(line.rule).toEqual({ kind: 'no-figures' });
  });

  it('takes the copay analysis before the form block, and notes what the block says otherwise', () => {
    const form = item('consultation', [percent(20), amount('copay-maximum', 0)], {
      source: 'copay_details_to_fill[0].values_to_fill.CONSULTATION',
      name: 'Outpatient - CONSULTATION',
      network: { text: 'GN+' },
    });
    const analysis = item('consultation', [percent(20), amount('copay-maximum', 50)], {
      name: 'Consultation - Outpatient - UAE',
      network: { text: 'GN+' },
      term: { text: 'per claim' },
    });
    const line = visitLineOf([form, analysis], consultation);
    expect(line.sentence).toBe('Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit');
    expect(line.notes.join(' ')).toContain(
      'The portal also gives Outpatient - CONSULTATION: 20% of the fee, no maximum',
    );
  });

  it('reads a maternity visit from the Maternity block, never the Outpatient one', () => {
    const maternity = categoryByCode('maternity')!;
    const items = [
      item('maternity', [percent(0)], {
        source: 'copay_details_to_fill[0].values_to_fill.X',
        name: 'Outpatient - X',
      }),
      item('maternity', [percent(10)], {
        source: 'copay_details_to_fill[1].values_to_fill.X',
        name: 'Maternity - X',
      }),
    ];
    expect(visitLineOf(items, maternity).sentence).toBe(
      'Maternity (Maternity): 10% of the fee, no maximum given by the portal',
    );
  });
});

describe('the categories asked', () => {
  it.each([
    [EX, '3', 'consultation'],
    [EX, '69', 'maternity'],
    [EX, '4', 'radiology'],
    [EX, '1', 'consultation'],
    [SERVICE, 'physiotherapy', 'physiotherapy'],
    ['http://fhir-eligibility-adapter.org/fhir/CodeSystem/visit-type', 'pharmacy', 'medicines'],
  ])('reads %s|%s as %s', (system, code, expected) => {
    expect(askedCategories([{ coding: [{ system, code }] }]).map((c) => c.code)).toEqual([expected]);
  });

  it("gives the visit type's usual categories when none is asked", () => {
    expect(askedCategories([]).map((c) => c.code)).toEqual(['consultation', 'lab', 'radiology', 'medicines']);
  });
});

const ctx = benefitsContext('c1', 'Daman');

const cerOf = (name: string) =>
  mapEnvelope(
    envelopeSchema.parse(
      JSON.parse(readFileSync(new URL(`../fixtures/upstream/${name}.json`, import.meta.url), 'utf8')),
    ),
    ctx,
  );

describe('the summary of a CER', () => {
  it('gives the sandbox eligible answer one sentence per usual category, and a short line', () => {
    const cer = cerOf('found-eligible');
    const summaries = visitSummary(cer);
    expect(summaries).toHaveLength(1);
    expect(summaries[0]!.lines.map((l) => l.sentence)).toEqual([
      'Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit; yearly cap on copays: AED 500 per year',
      'Laboratory (Outpatient): 10% of the fee, no maximum given by the portal',
      'Radiology (Outpatient): 10% of the fee, at most AED 200 per visit',
      'Medicines (Outpatient): 12.5% of the fee, at most AED 100 per visit',
    ]);
    const line = summaryLine(cer, summaries);
    expect(line.startsWith('Eligible: Enhanced Plus; consultation 20% up to AED 50')).toBe(true);
    expect(line.length).toBeLessThanOrEqual(140);
  });

  it('gives the categories asked only', () => {
    const cer = cerOf('found-eligible');
    const summaries = visitSummary(cer, [
      { coding: [{ system: SERVICE, code: 'physiotherapy' }] },
      { coding: [{ system: EX, code: '35' }] },
    ]);
    expect(summaries[0]!.lines.map((l) => l.sentence)).toEqual([
      'Physiotherapy (Outpatient): AED 25 per visit',
      'Dental: not covered',
    ]);
  });

  it('gives no summary for a not-eligible, a not-found or a queued answer, and says the outcome in the short line', () => {
    const notEligible = cerOf('found-not-eligible');
    expect(visitSummary(notEligible)).toEqual([]);
    expect(summaryLine(notEligible, [])).toMatch(/^Not eligible: /);
    expect(visitSummary(cerOf('member-not-found'))).toEqual([]);
    expect(visitSummary(cerOf('in-flight-queued'))).toEqual([]);
  });

  it('keeps the short line within 140 characters however long the plan name', () => {
    const cer = cerOf('found-eligible');
    const summaries = visitSummary(cer).map((s) => ({ ...s, plan: 'P'.repeat(300) }));
    expect(summaryLine(cer, summaries).length).toBeLessThanOrEqual(140);
  });

  it('writes Markdown and XHTML with the heading and one entry per category, portal text escaped', () => {
    const summaries = visitSummary(cerOf('found-eligible'));
    const markdown = summaryMarkdown(summaries);
    expect(markdown.split('\n')[0]).toBe('**What to collect**');
    expect(markdown).toContain('- Laboratory (Outpatient): 10% of the fee, no maximum given by the portal');
    const xhtml = summaryXhtml([{ lines: [{ ...summaries[0]!.lines[0]!, sentence: 'A <b> & "c"' }] }]);
    expect(xhtml).toBe(
      '<div><h2>What to collect</h2><ul><li>A &lt;b&gt; &amp; &quot;c&quot;</li></ul></div>',
    );
  });
});

const rules: fc.Arbitrary<ShareRule> = fc.oneof(
  fc.constant<ShareRule>({ kind: 'not-covered' }),
  fc.record({ kind: fc.constant('percent' as const), percent: fc.double({ min: 0, max: 150, noNaN: true }) }),
  fc.record({
    kind: fc.constant('percent' as const),
    percent: fc.double({ min: 0, max: 150, noNaN: true }),
    cap: fc.double({ min: 0.01, max: 10_000, noNaN: true }),
  }),
  fc.record({
    kind: fc.constant('fixed' as const),
    amount: fc.double({ min: 0.01, max: 10_000, noNaN: true }),
    fromDeductible: fc.boolean(),
  }),
  // A per-visit deductible beside a percentage, with or without a maximum (issue 35).
  fc.record(
    {
      kind: fc.constant('percent' as const),
      percent: fc.double({ min: 0, max: 150, noNaN: true }),
      cap: fc.double({ min: 0.01, max: 10_000, noNaN: true }),
      deductible: fc.double({ min: 0.01, max: 10_000, noNaN: true }),
    },
    { requiredKeys: ['kind', 'percent', 'deductible'] },
  ),
);
const fees = fc.integer({ min: 0, max: 10_000_000 }).map((cents) => cents / 100);
const cents = (value: number): number => Math.round(value * 100);

describe('the share (properties)', () => {
  it('is never below 0 nor above the fee, and share + benefit = fee', () => {
    fc.assert(
      fc.property(rules, fees, (rule, fee) => {
        const share = shareOf(rule, fee)!;
        expect(share.copay).toBeGreaterThanOrEqual(0);
        expect(share.copay).toBeLessThanOrEqual(fee);
        expect(cents(share.copay) + cents(share.benefit)).toBe(cents(fee));
        expect(share.copay).toBe(cents(share.copay) / 100);
      }),
    );
  });

  it('never exceeds a per-visit cap', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.integer({ min: 1, max: 100_000 }),
        fees,
        (p, capCents, fee) => {
          const cap = capCents / 100;
          expect(shareOf({ kind: 'percent', percent: p, cap }, fee)!.copay).toBeLessThanOrEqual(cap);
        },
      ),
    );
  });

  it('with a per-visit deductible: at least min(deductible, fee), the percentage part never above its cap', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.option(fc.integer({ min: 1, max: 100_000 }), { nil: undefined }),
        fc.integer({ min: 1, max: 100_000 }),
        fees,
        (p, capCents, deductibleCents, fee) => {
          const deductible = deductibleCents / 100;
          const rule: ShareRule =
            capCents === undefined
              ? { kind: 'percent', percent: p, deductible }
              : { kind: 'percent', percent: p, cap: capCents / 100, deductible };
          const share = shareOf(rule, fee)!;
          const floor = Math.min(cents(deductible), cents(fee));
          expect(cents(share.copay)).toBeGreaterThanOrEqual(floor);
          expect(share.copay).toBeLessThanOrEqual(fee);
          expect(cents(share.copay) + cents(share.benefit)).toBe(cents(fee));
          // The percentage part (the share less the deductible) never exceeds the per-visit cap.
          if (capCents !== undefined) expect(cents(share.copay) - floor).toBeLessThanOrEqual(capCents);
        },
      ),
    );
  });

  it('reads a deductible beside a percentage as one rule, and a copay amount beside a different deductible as none', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 1000 }),
        (p, d, a) => {
          const withDeductible = shareRuleOf(
            benefitModelOf(item('consultation', [percent(p), amount('deductible', d)])),
          );
          expect(withDeductible).toEqual({ kind: 'percent', percent: p, deductible: d });
          const both = shareRuleOf(
            benefitModelOf(item('consultation', [amount('copay', a), amount('deductible', d)])),
          );
          expect(both.kind).toBe(a === d ? 'fixed' : 'unclear');
        },
      ),
    );
  });

  it('gives no share for a category without figures or with figures that do not combine', () => {
    fc.assert(
      fc.property(fees, fc.string(), (fee, reason) => {
        expect(shareOf({ kind: 'no-figures' }, fee)).toBeUndefined();
        expect(shareOf({ kind: 'unclear', reason }, fee)).toBeUndefined();
      }),
    );
  });

  it('gives no share from items whose benefits have no figure', () => {
    fc.assert(
      fc.property(
        fc.option(fc.boolean(), { nil: undefined }),
        fc.constantFrom('As per policy', 'Nil', ''),
        fees,
        (excluded, text, fee) => {
          const model = benefitModelOf(
            item('lab', text ? [percent(text)] : [], excluded === undefined ? {} : { excluded }),
          );
          const rule = shareRuleOf(model);
          if (excluded === true) expect(shareOf(rule, fee)?.copay).toBe(fee);
          else expect(shareOf(rule, fee)).toBeUndefined();
        },
      ),
    );
  });
});

describe('the share (clear cases)', () => {
  it.each<[string, ShareRule, number, number]>([
    ['20% capped at 50 of 400', { kind: 'percent', percent: 20, cap: 50 }, 400, 50],
    ['20% capped at 50 of 200', { kind: 'percent', percent: 20, cap: 50 }, 200, 40],
    ['12.5% without a maximum of 333.33', { kind: 'percent', percent: 12.5 }, 333.33, 41.67],
    ['a fixed 25 of 300', { kind: 'fixed', amount: 25, fromDeductible: false }, 300, 25],
    ['a fixed 25 of 10', { kind: 'fixed', amount: 25, fromDeductible: true }, 10, 10],
    ['not covered of 180.5', { kind: 'not-covered' }, 180.5, 180.5],
    ['0% of 500', { kind: 'percent', percent: 0 }, 500, 0],
    [
      'AED 20 deductible plus 20% up to 500 of 400',
      { kind: 'percent', percent: 20, cap: 500, deductible: 20 },
      400,
      100,
    ],
    [
      'AED 20 deductible plus 20% up to 500 of 5000',
      { kind: 'percent', percent: 20, cap: 500, deductible: 20 },
      5000,
      520,
    ],
    ['AED 20 deductible plus 20% of 15', { kind: 'percent', percent: 20, deductible: 20 }, 15, 15],
    ['AED 20 deductible plus 10% of 90.55', { kind: 'percent', percent: 10, deductible: 20 }, 90.55, 29.06],
  ])('%s', (_name, rule, fee, expected) => {
    const share = shareOf(rule, fee)!;
    expect(share.copay).toBe(expected);
    expect(share.benefit).toBe(Math.round((fee - expected) * 100) / 100);
  });
});

describe('the estimate of every found answer in force (every category)', () => {
  const fixtures = [
    'found-eligible',
    'multi-card',
    'found-by-card-number',
    'search-all-complete-two-eligible',
  ];
  it.each(fixtures)('%s: a valid ClaimResponse, copay + benefit = fee per item', (name) => {
    const cer = cerOf(name);
    expect(isFoundInForce(cer)).toBe(true);
    const items = cer.insurance?.find((i) => i.inforce === true)?.item ?? [];
    const asked = serviceCategories().map((category, i) => ({ category, fee: 100 + i * 17.35 }));
    const estimates = estimateItems(items, asked);
    const claim = estimateClaimResponse(cer, estimates, '2026-11-22T10:05:00.000Z');
    expectValidFhir(claim);
    for (const estimate of estimates) {
      if (!estimate.share) continue;
      expect(cents(estimate.share.copay) + cents(estimate.share.benefit)).toBe(cents(estimate.item.fee));
    }
    // The first note of each item is its sentence.
    claim.item?.forEach((item, i) => {
      expect(claim.processNote?.[(item.noteNumber?.[0] ?? 0) - 1]?.text).toBe(estimates[i]?.line.sentence);
    });
  });
});
