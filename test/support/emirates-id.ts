/**
 * Emirates IDs for tests and benchmarks: 784-YYYY-NNNNNNN-C with the Luhn check digit C that the
 * adapter's typo guard demands (src/mapping/request/patient.ts).
 */
import { emiratesIdCheckDigit } from '../../src/mapping/request/patient.js';

/** The Emirates ID of a year and a seven-digit serial (padded with zeros), with its check digit. */
export function emiratesId(year: number | string, serial: number | string): string {
  const yyyy = String(year).padStart(4, '0');
  const nnnnnnn = String(serial).padStart(7, '0');
  return `784-${yyyy}-${nnnnnnn}-${emiratesIdCheckDigit(`784${yyyy}${nnnnnnn}`)}`;
}
