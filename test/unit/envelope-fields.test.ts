/**
 * A text field (`str`) and a loose number (`looseNumber`) of the envelope contract are one
 * transform under `.optional()`, cheaper than the catch(optional(nullable(...))) they replaced.
 * They must read every value exactly as that form did: the same value (-0 kept), the text of an odd
 * one (a non-finite number included: z.number() refuses Infinity, so it was caught as text), and
 * an absent key absent. Held here against the old form, on the schemas that use them.
 */
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { asText, costSharingSchema, documentEntrySchema } from '../../src/upstream/contract.js';

/** The forms before the transform. */
const oldStr = z
  .string()
  .nullable()
  .optional()
  .catch((ctx) => asText(ctx.input));
const oldLooseNumber = z
  .union([z.number(), z.string()])
  .nullable()
  .optional()
  .catch((ctx) => asText(ctx.input));

const oldCostSharing = z.looseObject({
  visit_type: oldStr,
  visit_setting: oldStr,
  copay_amount: oldLooseNumber,
  copay_currency: oldStr,
  copay_percentage: oldLooseNumber,
  copay_maximum_scope: oldStr,
  copay_maximum_amount: oldLooseNumber,
  coinsurance_percentage: oldLooseNumber,
});
const oldDocument = z.looseObject({
  s3_url: z.string(),
  tag: oldStr,
  id: oldStr,
  original_filename: oldStr,
});

const odd = fc.oneof(
  fc.jsonValue(),
  fc.constantFrom(Infinity, -Infinity, Number.NaN, -0, 0, 1e308, '', '20%', 'AED 1,500', null, true, false),
  fc.double(),
  fc.constant(undefined),
);

/** An object with some of the keys, each with an odd value (or absent). */
function objects(keys: string[]): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(Object.fromEntries(keys.map((k) => [k, odd])), { requiredKeys: [] });
}

function same(a: z.ZodType, b: z.ZodType, input: unknown): void {
  const x = a.safeParse(input);
  const y = b.safeParse(input);
  expect(x.success).toBe(y.success);
  if (x.success && y.success) expect(isDeepStrictEqual(x.data, y.data)).toBe(true);
  else expect(JSON.stringify(x.error?.issues)).toBe(JSON.stringify(y.error?.issues));
}

describe('envelope text and loose-number fields', () => {
  it('cost_sharing reads every value as the catch form did', () => {
    const keys = ['visit_type', 'visit_setting', 'copay_amount', 'copay_currency', 'copay_percentage'];
    fc.assert(
      fc.property(objects([...keys, 'copay_maximum_amount', 'coinsurance_percentage', 'extra']), (input) => {
        same(costSharingSchema, oldCostSharing, input);
      }),
      { numRuns: 5_000 },
    );
  });

  it('a document entry reads every value as the catch form did', () => {
    fc.assert(
      fc.property(objects(['s3_url', 'tag', 'id', 'original_filename']), (input) => {
        same(documentEntrySchema, oldDocument, input);
      }),
      { numRuns: 5_000 },
    );
  });

  it('named cases: non-finite numbers become text, -0 stays -0, null stays null, absent stays absent', () => {
    expect(costSharingSchema.parse({ copay_amount: Infinity, visit_type: -Infinity })).toEqual({
      copay_amount: 'Infinity',
      visit_type: '-Infinity',
    });
    expect(Object.is(costSharingSchema.parse({ copay_amount: -0 }).copay_amount, -0)).toBe(true);
    const parsed = costSharingSchema.parse({ copay_amount: null, visit_type: 12 });
    expect(parsed).toEqual({ copay_amount: null, visit_type: '12' });
    expect('copay_currency' in parsed).toBe(false);
    expect(costSharingSchema.parse({ visit_type: { a: 1 }, copay_amount: [1] })).toEqual({
      visit_type: '{"a":1}',
      copay_amount: '[1]',
    });
  });
});
