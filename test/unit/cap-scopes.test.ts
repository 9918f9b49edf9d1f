/**
 * A copay maximum is read in the scope the portal gives it (issue 35, leftover): from the recorded
 * answer shaped like Dubai's Essential Benefits Plan (test/fixtures/mapping/found-eligible-deductible.json:
 * `Inpatient | Covered | 20% | 1000 (per admission)` in both lists, the consultation's 20% up to
 * AED 500 without a scope), with the scopes the portal writes (`per admission`, `per_case`,
 * `Per Policy Period`, `annual`, `per claim`, none). The summary, the narrative and `$estimate`
 * say the portal's scope; only a per-visit maximum (or one without scope on an outpatient line)
 * caps the share of one fee, any other is said in a note and not applied.
 */
import { readFileSync } from 'node:fs';
import type { ClaimResponse, CoverageEligibilityResponse } from 'fhir/r4.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { benefitModelOf, shareOf, shareRuleOf } from '../../src/mapping/response/benefit-model.js';
import { estimateClaimResponse, estimateItems } from '../../src/mapping/response/estimate.js';
import { mapEnvelope } from '../../src/mapping/response/index.js';
import { summaryLine, visitSummary } from '../../src/mapping/response/visit-summary.js';
import { categoryByCode } from '../../src/mapping/response/vocabulary.js';
import { benefitsContext } from '../support/cer-context.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import { expectValidFhir } from '../support/fhir.js';

const SERVICE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';
const TYPE = 'http://terminology.hl7.org/CodeSystem/benefit-type';

const ctx = benefitsContext('c35b', 'NAS');

const raw = readFileSync(
  new URL('../fixtures/mapping/found-eligible-deductible.json', import.meta.url),
  'utf8',
);

interface Scopes {
  /** The inpatient maximum's scope in both lists (copay_details[3], benefits[1]). */
  inpatient?: string | null;
  /** The consultation maximum's scope (copay_details[0]). */
  consultation?: string | null;
}

/** The recorded answer with the maximum scopes the portal writes, as the portal writes them. */
function cerWith(scopes: Scopes): CoverageEligibilityResponse {
  type Scoped = { copay_max_scope?: string | null; copay_maximum_scope?: string | null };
  const json = JSON.parse(raw) as {
    eligibility_result: {
      data_dump: {
        data: {
          copay_analysis: {
            copay_details: Scoped[];
            new_version_of_copay_analysis: { benefits: { cost_sharing: Scoped[] }[] };
          };
        };
      };
    };
  };
  const analysis = json.eligibility_result.data_dump.data.copay_analysis;
  if (scopes.inpatient !== undefined) {
    analysis.copay_details[3]!.copay_max_scope = scopes.inpatient;
    analysis.new_version_of_copay_analysis.benefits[1]!.cost_sharing[0]!.copay_maximum_scope =
      scopes.inpatient;
  }
  if (scopes.consultation !== undefined) analysis.copay_details[0]!.copay_max_scope = scopes.consultation;
  const cer = mapEnvelope(envelopeSchema.parse(json), ctx);
  expectValidFhir(cer);
  return cer;
}

const lineOf = (cer: CoverageEligibilityResponse, code: string) =>
  visitSummary(cer, [{ coding: [{ system: SERVICE, code }] }])[0]!.lines[0]!;

function estimate(cer: CoverageEligibilityResponse, code: string, fee: number): ClaimResponse {
  const items = cer.insurance?.find((i) => i.inforce === true)?.item ?? [];
  const claim = estimateClaimResponse(
    cer,
    estimateItems(items, [{ category: categoryByCode(code)!, fee }]),
    '2026-11-22T10:05:00.000Z',
  );
  expectValidFhir(claim);
  return claim;
}

const copayOf = (claim: ClaimResponse) =>
  claim.item?.[0]?.adjudication.find((a) => a.category.coding?.[0]?.code === 'copay')?.amount?.value;
const notesOf = (claim: ClaimResponse) => (claim.processNote ?? []).map((n) => n.text).join(' ');

describe('a maximum in the scope the portal gives it', () => {
  it.each<[string, Scopes, string, string, number, number, RegExp]>([
    [
      'per admission (the recorded answer): said so, not applied to one fee',
      {},
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, at most AED 1000 per admission',
      8000,
      1600,
      /the maximum of AED 1000 is per admission, not per visit: it is not applied to this fee as if per visit, since what the patient has already paid this admission is not known here; the patient pays at most AED 1000 per admission in all/,
    ],
    [
      'per_admission as the benefit list writes it',
      { inpatient: 'per_admission' },
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, at most AED 1000 per admission',
      3000,
      600,
      /AED 1000 is per admission, not per visit/,
    ],
    [
      'Per Case',
      { inpatient: 'Per Case' },
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, at most AED 1000 per case',
      8000,
      1600,
      /AED 1000 is per case, not per visit[^]*already paid this case/,
    ],
    [
      'annual: a yearly cap, not applied',
      { inpatient: 'annual' },
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, no per-visit maximum given by the portal; yearly cap on copays: AED 1000 per year',
      8000,
      1600,
      /the yearly cap \(AED 1000 per year\) is not applied/,
    ],
    [
      'Per Policy Period: a yearly cap in the portal words, not applied',
      { inpatient: 'Per Policy Period' },
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, no per-visit maximum given by the portal; yearly cap on copays: AED 1000 per policy period',
      8000,
      1600,
      /the yearly cap \(AED 1000 per policy period\) is not applied/,
    ],
    [
      'no scope on an inpatient line: said, not applied',
      { inpatient: null },
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, at most AED 1000 (no scope given by the portal)',
      8000,
      1600,
      /maximum of AED 1000 on an inpatient line without its scope[^]*not applied to this fee as if per visit/,
    ],
    [
      'per visit on an inpatient line: applied',
      { inpatient: 'per visit' },
      'inpatient',
      'Inpatient (Inpatient): 20% of the fee, at most AED 1000 per visit',
      8000,
      1000,
      /the patient pays AED 1000 of AED 8000/,
    ],
    [
      'no scope on an outpatient line (the recorded answer): read as per visit, noted',
      {},
      'consultation',
      "Consultation (Outpatient, RN): AED 20 per visit (the portal's deductible) plus 20% of the fee, the 20% at most AED 500 per visit",
      3000,
      520,
      /the maximum without its scope; it is read as per visit/,
    ],
    [
      'per claim on an outpatient line: one claim is one visit',
      { consultation: 'per claim' },
      'consultation',
      "Consultation (Outpatient, RN): AED 20 per visit (the portal's deductible) plus 20% of the fee, the 20% at most AED 500 per visit",
      3000,
      520,
      /the patient pays AED 520 of AED 3000/,
    ],
  ])('%s', (_name, scopes, code, sentence, fee, copay, note) => {
    const cer = cerWith(scopes);
    expect(lineOf(cer, code).sentence).toBe(sentence);
    const claim = estimate(cer, code, fee);
    expect(copayOf(claim)).toBe(copay);
    expect(notesOf(claim)).toMatch(note);
    if (!sentence.includes('AED 1000 per visit')) expect(notesOf(claim)).not.toContain('AED 1000 per visit');
  });

  it('the narrative says the scope in its summary and its table, never "per visit" for it', () => {
    const cer = mapEnvelope(envelopeSchema.parse(JSON.parse(raw)), {
      ...ctx,
      request: { ...ctx.request, item: [{ category: { coding: [{ system: SERVICE, code: 'inpatient' }] } }] },
    });
    expectValidFhir(cer);
    const div = cer.text?.div ?? '';
    expect(div).toContain('<li>Inpatient (Inpatient): 20% of the fee, at most AED 1000 per admission</li>');
    expect(div).toContain('<td>1000 (per admission)</td>');
    expect(div).not.toContain('AED 1000 per visit');
  });

  it.each<[Scopes, string]>([
    [{}, 'inpatient 20% up to AED 1000 per admission'],
    [{ inpatient: null }, 'inpatient 20% up to AED 1000, no scope given'],
  ])('the short line (a card summary) says the scope: %j', (scopes, part) => {
    const cer = cerWith(scopes);
    const line = summaryLine(cer, visitSummary(cer, [{ coding: [{ system: SERVICE, code: 'inpatient' }] }]));
    expect(line).toContain(part);
  });
});

describe('the share under a scoped maximum (properties)', () => {
  const wider = fc.constantFrom(
    'per admission',
    'per_admission',
    'Per Case',
    'per day',
    'lifetime',
    'annual',
    'per policy period',
  );
  const visit = fc.constantFrom('per visit', 'per claim', 'per_claim', 'Per Encounter');
  const fees = fc.integer({ min: 0, max: 10_000_000 }).map((cents) => cents / 100);
  const itemWith = (p: number, cap: number, scope: string, code = 'inpatient') => ({
    category: { coding: [{ system: SERVICE, code }] },
    name: `${code} - Inpatient`,
    term: { text: scope },
    benefit: [
      { type: { coding: [{ system: TYPE, code: 'copay-percent' }] }, allowedUnsignedInt: p },
      {
        type: { coding: [{ system: TYPE, code: 'copay-maximum' }] },
        allowedMoney: { value: cap, currency: 'AED' },
      },
    ],
  });

  it('a maximum over a wider scope is never applied to one fee: the share is the percentage of the fee', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 1, max: 100_000 }),
        wider,
        fees,
        (p, cap, scope, fee) => {
          const rule = shareRuleOf(benefitModelOf(itemWith(p, cap, scope)));
          expect(rule).toEqual({ kind: 'percent', percent: p });
          const share = shareOf(rule, fee)!;
          expect(share.copay).toBe(Math.round((Math.round(fee * 100) * p) / 100) / 100);
          expect(Math.round(share.copay * 100) + Math.round(share.benefit * 100)).toBe(Math.round(fee * 100));
        },
      ),
    );
  });

  it('a per-visit (or per-claim) maximum is never exceeded', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 1, max: 100_000 }),
        visit,
        fees,
        (p, cap, scope, fee) => {
          const rule = shareRuleOf(benefitModelOf(itemWith(p, cap, scope, 'consultation')));
          expect(rule).toEqual({ kind: 'percent', percent: p, cap });
          const share = shareOf(rule, fee)!;
          expect(share.copay).toBeLessThanOrEqual(Math.min(cap, fee));
          expect(share.copay).toBeGreaterThanOrEqual(0);
        },
      ),
    );
  });
});
