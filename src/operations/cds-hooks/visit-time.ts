/**
 * The appointment's time and the re-check's lead as a card says them. Pure.
 */
import type { Tenant } from '../../config.js';

/** The zone appointments are shown in (the clinics' zone; a tenant setting comes with pre-visit checks). */
export const VISIT_TIME_ZONE = 'Asia/Dubai';
/** The pre-visit re-check's lead (PREVISIT_LEAD_MINUTES' default) until the tenant's own is known here. */
export const DEFAULT_LEAD_MINUTES = 120;

const FORMAT = new Intl.DateTimeFormat('en-GB', {
  timeZone: VISIT_TIME_ZONE,
  day: 'numeric',
  month: 'short',
  year: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
});

/** `27 Nov 2026, 09:30` in the clinic's zone. */
export function visitTime(start: string): string {
  return FORMAT.format(new Date(start));
}

/** The lead in words: `2 hours`, `90 minutes`, `1 hour`. */
export function leadText(minutes: number): string {
  if (minutes >= 60 && minutes % 60 === 0) {
    const hours = minutes / 60;
    return `${hours} hour${hours === 1 ? '' : 's'}`;
  }
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

/** How long before an appointment its re-check runs, for a tenant. */
export function reCheckLead(_tenant: Tenant): string {
  return leadText(DEFAULT_LEAD_MINUTES);
}
