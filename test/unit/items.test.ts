/**
 * Items of cost shares (src/mapping/response/items.ts): the de-duplication rules, held against
 * their definition by JSON (what a reader of the CER sees), since the code compares field by field.
 */
import fc from 'fast-check';
import type { CoverageEligibilityResponseInsuranceItemBenefit as Benefit } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import type { CostShare, Figures } from '../../src/mapping/response/cost-shares.js';
import { benefitsOf, itemsOf } from '../../src/mapping/response/items.js';
import { categoryFor } from '../../src/mapping/response/vocabulary.js';

/** Figures as portals write them, and the odd ones: percent signs, currencies, -0, numbers too long for a double. */
const loose = fc.constantFrom<string | number | null | undefined>(
  undefined,
  null,
  '',
  '0',
  '-0',
  0,
  -0,
  20,
  '20',
  '20%',
  '12.5',
  'AED 50',
  '1,500',
  '12,5%',
  'Not Covered',
  '9'.repeat(400),
  `-${'9'.repeat(400)}`,
  'see <policy> & "terms"',
);
const currency = fc.constantFrom<string | null | undefined>(
  undefined,
  null,
  'AED',
  'usd',
  'Dhs',
  'Dirham',
  'XYZ',
);
const figures: fc.Arbitrary<Figures> = fc.record(
  {
    percent: loose,
    amount: loose,
    maximum: loose,
    coinsurance: loose,
    aggregateCap: loose,
    deductible: loose,
    deductibleMaximum: loose,
    deductibleLegacy: loose,
    currency,
  },
  { requiredKeys: [] },
);

function share(source: string, f: Figures): CostShare {
  return {
    source,
    label: 'Consultation',
    category: categoryFor('Consultation'),
    referralGated: false,
    name: undefined,
    coverageStatus: undefined,
    network: undefined,
    term: undefined,
    figures: f,
    notes: [],
  };
}

const json = (b: Benefit) => JSON.stringify(b);

describe('items of cost shares', () => {
  it('benefitsOf never gives two benefits with the same JSON (one type per figure)', () => {
    fc.assert(
      fc.property(figures, (f) => {
        const keys = benefitsOf(f).map(json);
        expect(new Set(keys).size).toBe(keys.length);
      }),
      { numRuns: 2000 },
    );
  });

  it('compares numbers as JSON writes them: -0 is 0, and every non-finite number is null', () => {
    const huge = '9'.repeat(400);
    const pairs: Array<[Figures, Figures, number]> = [
      [{ amount: 0 }, { amount: '-0' }, 1],
      [{ amount: huge }, { amount: `-${huge}` }, 1],
      [{ amount: huge }, { amount: 1e308 }, 2],
      [{ amount: 20, currency: 'AED' }, { amount: 20, currency: 'usd' }, 2],
      [{ amount: 20 }, { amount: '20' }, 1],
    ];
    const source = 'copay_analysis.copay_details[0]';
    for (const [parent, child, length] of pairs) {
      const items = itemsOf([share(source, parent), share(`${source}.cost_sharing`, child)], undefined);
      const known = new Set(benefitsOf(parent).map(json));
      expect(benefitsOf(child).every((b) => known.has(json(b)))).toBe(length === 1);
      expect(items).toHaveLength(length);
    }
  });

  it('drops a cost_sharing block exactly when each of its benefits is, as JSON, one of its entry', () => {
    fc.assert(
      fc.property(figures, figures, fc.boolean(), (parent, changes, fresh) => {
        const source = 'copay_analysis.copay_details[0]';
        // Mostly the entry repeated with a few figures changed (a real block's shape), else any figures.
        const child = fresh ? changes : { ...parent, ...changes };
        const items = itemsOf([share(source, parent), share(`${source}.cost_sharing`, child)], undefined);
        const known = new Set(benefitsOf(parent).map(json));
        const addsNothing = benefitsOf(child).every((b) => known.has(json(b)));
        expect(items).toHaveLength(addsNothing ? 1 : 2);
      }),
      { numRuns: 3000 },
    );
  });
});
