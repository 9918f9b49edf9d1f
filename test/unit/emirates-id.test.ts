/**
 * The typo guard (docs/request-mapping.md, "The Emirates ID's check digit"): the 15th digit of an
 * Emirates ID is the Luhn check digit of the first 14, and eClaimLink's placeholders name nobody.
 * What the guard must catch is stated as properties over every valid ID fast-check makes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  emiratesIdCheckDigit,
  emiratesIdProblem,
  normalizeEmiratesId,
} from '../../src/mapping/request/patient.js';
import { SCENARIOS } from '../../src/sandbox/scenarios.js';
import { emiratesId } from '../support/emirates-id.js';

/** What every entry point accepts: the right shape and no problem. */
const accepted = (value: string) => normalizeEmiratesId(value) !== null && emiratesIdProblem(value) === null;

const validIds = fc
  .tuple(fc.integer({ min: 1900, max: 2030 }), fc.integer({ min: 0, max: 9_999_999 }))
  .map(([year, serial]) => emiratesId(year, serial).replace(/-/g, ''));

const dashed = (d: string) => `${d.slice(0, 3)}-${d.slice(3, 7)}-${d.slice(7, 14)}-${d.slice(14)}`;

describe('the Emirates ID check digit', () => {
  it('accepts every valid ID, with dashes, without, and with spaces', () => {
    fc.assert(
      fc.property(validIds, (digits) => {
        expect(accepted(digits)).toBe(true);
        expect(accepted(dashed(digits))).toBe(true);
        expect(accepted(dashed(digits).replace(/-/g, ' '))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses every single-digit change of a valid ID', () => {
    fc.assert(
      fc.property(validIds, (digits) => {
        for (let at = 0; at < 15; at += 1)
          for (let d = 0; d <= 9; d += 1) {
            if (String(d) === digits[at]) continue;
            const typo = `${digits.slice(0, at)}${d}${digits.slice(at + 1)}`;
            expect(accepted(typo), `${at}:${d}`).toBe(false);
          }
      }),
      { numRuns: 300 },
    );
  });

  it('refuses every swap of two different neighbouring digits, except 0 and 9 (the blind spot of Luhn)', () => {
    // Luhn doubles one digit of each neighbouring pair: 0 doubled is 0 and 9 doubled is 9 (18 - 9),
    // so a swapped "09" or "90" adds up the same. No check digit of this kind can catch it.
    let blindSpots = 0;
    fc.assert(
      fc.property(validIds, (digits) => {
        for (let at = 0; at < 14; at += 1) {
          const [a, b] = [digits[at]!, digits[at + 1]!];
          if (a === b) continue;
          const swapped = `${digits.slice(0, at)}${b}${a}${digits.slice(at + 2)}`;
          const blind = (a === '0' && b === '9') || (a === '9' && b === '0');
          if (blind && at >= 3) {
            blindSpots += 1;
            expect(accepted(swapped)).toBe(true);
          } else expect(accepted(swapped), `${at}`).toBe(false);
        }
      }),
      { numRuns: 2000 },
    );
    expect(blindSpots).toBeGreaterThan(0);
  });

  it('catches the swap a receptionist makes (784-1987-4521001-7 typed 784-1987-4521010-7)', () => {
    expect(emiratesIdProblem('784-1987-4521001-7')).toBeNull();
    expect(emiratesIdProblem('784-1987-4521010-7')).toBe('check-digit');
  });

  it.each([
    '000-0000-0000000-0',
    '111-1111-1111111-1',
    '222-2222-2222222-2',
    '999-9999-9999999-9',
    '999999999999999',
  ])('refuses the placeholder %s', (value) => {
    expect(emiratesIdProblem(value)).toBe('placeholder');
  });

  it('never compares the year digits with anything: any year with a right check digit passes', () => {
    for (const year of ['0000', '1900', '1990', '2031', '9999']) {
      const first14 = `784${year}1234567`;
      expect(accepted(`${first14}${emiratesIdCheckDigit(first14)}`)).toBe(true);
    }
  });

  it('computes the check digit of known IDs', () => {
    expect(emiratesIdCheckDigit('78419900000001')).toBe(0);
    expect(emiratesIdCheckDigit('78419901234567')).toBe(6);
  });

  it("every sandbox scenario's example Emirates ID has its check digit", () => {
    const examples = SCENARIOS.map((s) => s.example).filter((e) => /^784/.test(e.replace(/\D/g, '')));
    expect(examples.length).toBeGreaterThan(10);
    for (const example of examples) expect(emiratesIdProblem(example), example).toBeNull();
  });
});
