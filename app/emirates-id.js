/**
 * The typo guard's copy for the page (the service's is in src/mapping/request/patient.ts, and a
 * test holds the two to the same answers): a complete Emirates ID whose 15th digit is not the
 * Luhn check digit of the first 14, or a placeholder for a person without one, is said under the
 * field before anything is sent. The value itself is never repeated in the message.
 */

const PLACEHOLDERS = new Set(['000000000000000', '111111111111111', '222222222222222', '999999999999999']);

/** The Luhn check digit of the first 14 digits. */
export function checkDigit(first14) {
  let sum = 0;
  for (let i = 0; i < 14; i += 1) {
    let digit = Number(first14[13 - i]);
    if (i % 2 === 0) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return (10 - (sum % 10)) % 10;
}

/** `placeholder`, `check-digit`, or null (fine, a card number, or not complete yet). */
export function emiratesIdProblem(value) {
  const digits = value.replace(/[\s-]/g, '');
  if (PLACEHOLDERS.has(digits)) return 'placeholder';
  if (!/^784\d{12}$/.test(digits)) return null;
  return checkDigit(digits) === Number(digits[14]) ? null : 'check-digit';
}

/** What the desk reads under the field, for each problem. */
export const PROBLEM_TEXT = {
  'check-digit':
    "This Emirates ID does not add up: one digit is probably mistyped. Re-type it from the patient's Emirates ID card.",
  placeholder:
    'This is a placeholder for a person without an Emirates ID: no payer can find a member by it. Use the insurance card number instead.',
};
