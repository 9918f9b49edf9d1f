/**
 * Dates from the portal into FHIR `date` (https://hl7.org/fhir/R4/datatypes.html#date). The
 * document promises YYYY-MM-DD; DD/MM/YYYY (the UAE writing) is read too. Anything else is
 * not guessed at.
 */
import type { Period } from 'fhir/r4.js';

/** Days of each month in a common year. */
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** Gregorian leap years (as JavaScript's Date counts them, back to year 1000 and beyond). */
function isLeapYear(y: number): boolean {
  return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
}

/**
 * True for a YYYY-MM-DD string that names a real calendar day. Checked by the month's length,
 * without building a Date (this runs for every date of every mapping).
 */
export function isCalendarDate(value: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) return false;
  const y = Number(match[1]);
  const m = Number(match[2]);
  const d = Number(match[3]);
  if (y < 1000 || m < 1 || m > 12 || d < 1) return false;
  const days = m === 2 && isLeapYear(y) ? 29 : (DAYS_IN_MONTH[m - 1] ?? 0);
  return d <= days;
}

/** A FHIR date from YYYY-MM-DD (a time part is dropped) or DD/MM/YYYY / DD-MM-YYYY; undefined otherwise. */
export function fhirDate(value: string | null | undefined): string | undefined {
  if (!value) return undefined;
  const text = value.trim();
  const iso = /^(\d{4}-\d{2}-\d{2})(?:[T ][\d:.]+Z?)?$/.exec(text)?.[1];
  if (iso) return isCalendarDate(iso) ? iso : undefined;
  const dmy = /^(\d{2})[/-](\d{2})[/-](\d{4})$/.exec(text);
  if (dmy) {
    const date = `${dmy[3]}-${dmy[2]}-${dmy[1]}`;
    return isCalendarDate(date) ? date : undefined;
  }
  return undefined;
}

/**
 * A Period from a start and end as given. per-1 requires start <= end
 * (https://hl7.org/fhir/R4/datatypes.html#Period): an inverted or unreadable pair gives no
 * period, and `asGiven` keeps the portal's text so nothing is lost.
 */
export function periodOf(
  start: string | null | undefined,
  end: string | null | undefined,
): { period?: Period; asGiven?: string } {
  const s = fhirDate(start);
  const e = fhirDate(end);
  const unreadable = (start && !s) || (end && !e);
  if (s && e && s > e) return { asGiven: `${start} to ${end}` };
  const period: Period = { ...(s ? { start: s } : {}), ...(e ? { end: e } : {}) };
  const result: { period?: Period; asGiven?: string } = {};
  if (s || e) result.period = period;
  if (unreadable) result.asGiven = `${start ?? ''} to ${end ?? ''}`.trim();
  return result;
}
