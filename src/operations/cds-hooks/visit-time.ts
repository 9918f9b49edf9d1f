/**
 * What an appointment-book card says of a check it started: the appointment's time in the
 * clinic's zone and, when the appointment is more than one lead away, when it is re-checked
 * (docs/previsit.md: booked less than one lead before its start, the booking check is the
 * pre-visit check). Pure.
 */
import { leadMs, type PrevisitSettings } from '../../checks/previsit.js';

const FORMATS = new Map<string, Intl.DateTimeFormat>();

/** `3 Dec 2026, 09:30` in `timeZone`. */
export function visitTime(start: string, timeZone: string): string {
  let format = FORMATS.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-GB', {
      timeZone,
      day: 'numeric',
      month: 'short',
      year: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    FORMATS.set(timeZone, format);
  }
  return format.format(new Date(start));
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
