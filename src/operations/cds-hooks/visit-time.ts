/**
 * What an appointment-book card says of a check it started: the appointment's time in the
 * clinic's zone and, when the appointment is more than one lead away, when it is re-checked
 * (docs/previsit.md: booked less than one lead before its start, the booking check is the
 * pre-visit check). Pure.
 */
import { leadMs, localDay, localTime, type PrevisitSettings } from '../../checks/previsit.js';

/** `2026-12-03 09:30` in `timeZone` (the clinic's day and time, as the pre-visit checks read them). */
export function visitTime(start: string, timeZone: string): string {
  const at = Date.parse(start);
  return `${localDay(at, timeZone)} ${localTime(at, timeZone)}`;
}

/** The lead in words: `2 hours`, `90 minutes`, `1 hour`, `1.5 minutes`. */
export function leadText(minutes: number): string {
  if (minutes >= 60 && minutes % 60 === 0) {
    const hours = minutes / 60;
    return `${hours} hour${hours === 1 ? '' : 's'}`;
  }
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

/** The summary of an appointment's card while its booking check runs. */
export function startedAt(start: string, settings: PrevisitSettings, now: number): string {
  const when = visitTime(start, settings.timeZone);
  const recheck = Date.parse(start) - now > leadMs(settings);
  return `Eligibility check started for the appointment of ${when}${recheck ? `; re-checked ${leadText(settings.leadMinutes)} before it` : ''}`;
}
