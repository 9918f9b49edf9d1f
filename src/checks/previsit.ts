/**
 * Pre-visit checks (docs/previsit.md), the pure part: when a stored request is an appointment,
 * when its re-check is due, and whether the re-check runs, waits or is skipped. No I/O, no clock:
 * every time is given (epoch ms), so the rule is tested alone (test/unit/previsit.test.ts).
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import { DEFAULT_PREVISIT_LEAD_MINUTES, DEFAULT_TIME_ZONE, type Tenant } from '../config.js';

/** A clinic's settings for appointments (tenants file, PREVISIT_LEAD_MINUTES). */
export interface PrevisitSettings {
  /** Minutes before the start at which the re-check runs. */
  leadMinutes: number;
  /** `HH:MM`: where a `servicedDate` appointment starts, in `timeZone`. */
  dayStart: string;
  /** IANA zone of the clinic. */
  timeZone: string;
}

export const DEFAULT_DAY_START = '08:00';
/** An appointment at most this far ahead (days); farther is refused with a 422. */
export const MAX_DAYS_AHEAD = 366;

/**
 * The effective settings of a tenant: its own `previsitLeadMinutes`, `previsitDayStart` and
 * `timeZone`, else the service's lead (PREVISIT_LEAD_MINUTES) and the defaults.
 */
export function previsitSettings(
  tenant: Pick<Tenant, 'previsitLeadMinutes' | 'previsitDayStart' | 'timeZone'>,
  serviceLeadMinutes: number = DEFAULT_PREVISIT_LEAD_MINUTES,
): PrevisitSettings {
  return {
    leadMinutes: tenant.previsitLeadMinutes ?? serviceLeadMinutes,
    dayStart: tenant.previsitDayStart ?? DEFAULT_DAY_START,
    timeZone: tenant.timeZone ?? DEFAULT_TIME_ZONE,
  };
}

/** The lead of a clinic in ms. */
export function leadMs(settings: PrevisitSettings): number {
  return Math.round(settings.leadMinutes * 60_000);
}

/** What pre-visit checks count (GET /metrics). */
export type PrevisitEvent =
  | { type: 'recheck-run' | 'recheck-skipped' | 'recheck-cancelled'; tenantId: string }
  /** A $submit answered by reuse with the answer of a pre-visit check (booking or re-check). */
  | { type: 'checkin-reused'; tenantId: string };

/** A problem with the request's serviced[x], for a 422 naming the element. */
export interface ServicedProblem {
  text: string;
  expression: string;
}

/** When the request's service starts, and where that was read from. */
export interface ServicedStart {
  /** Epoch ms of the start. */
  at: number;
  /** Given as a day (servicedDate, or a date-only servicedPeriod.start): it starts at dayStart. */
  dayOnly: boolean;
  /** The local day of the start in the clinic's zone, `YYYY-MM-DD`. */
  day: string;
  element: string;
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * The start of a request's service, or null when it names none (no serviced[x], a period with no
 * start, or a partial date such as `2026-11`). FHIR `date` and a date-only `dateTime` have no
 * time: the service starts at the clinic's dayStart in its zone
 * (https://hl7.org/fhir/R4/datatypes.html#dateTime: a dateTime with a time carries its zone).
 */
export function servicedStart(
  request: Pick<CoverageEligibilityRequest, 'servicedDate' | 'servicedPeriod'>,
  settings: PrevisitSettings,
): ServicedStart | null {
  const [value, element] = request.servicedDate
    ? [request.servicedDate, 'CoverageEligibilityRequest.servicedDate']
    : [request.servicedPeriod?.start, 'CoverageEligibilityRequest.servicedPeriod.start'];
  if (!value) return null;
  const date = DATE_ONLY.exec(value);
  if (date) {
    const [hour, minute] = settings.dayStart.split(':').map(Number) as [number, number];
    const at = zonedTime(settings.timeZone, Number(date[1]), Number(date[2]), Number(date[3]), hour, minute);
    return { at, dayOnly: true, day: value, element };
  }
  if (!DATE_TIME.test(value)) return null;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return null;
  return { at, dayOnly: false, day: localDay(at, settings.timeZone), element };
}

/**
 * The serviced[x] problems a check refuses with a 422: a period that ends before it starts, and
 * an appointment more than MAX_DAYS_AHEAD days ahead. Null when there is none.
 */
export function servicedProblem(
  request: Pick<CoverageEligibilityRequest, 'servicedDate' | 'servicedPeriod'>,
  settings: PrevisitSettings,
  now: number,
): ServicedProblem | null {
  const period = request.servicedPeriod;
  if (period?.start && period.end) {
    const start = Date.parse(period.start);
    const end = Date.parse(period.end);
    if (!Number.isNaN(start) && !Number.isNaN(end) && end < start)
      return {
        text: 'servicedPeriod.end is before servicedPeriod.start',
        expression: 'CoverageEligibilityRequest.servicedPeriod.end',
      };
  }
  const start = servicedStart(request, settings);
  if (start && start.at - now > MAX_DAYS_AHEAD * 86_400_000)
    return {
      text: `The appointment is more than ${MAX_DAYS_AHEAD} days ahead; book its check closer to the date`,
      expression: start.element,
    };
  return null;
}

/**
 * The start of the appointment a request is, or null when it is none: an appointment is a request
 * whose service starts in the future; a day-only service on the clinic's today (or earlier) is
 * checked now, as any request, and is never an appointment.
 */
export function appointmentStart(
  request: Pick<CoverageEligibilityRequest, 'servicedDate' | 'servicedPeriod'>,
  settings: PrevisitSettings,
  now: number,
): ServicedStart | null {
  const start = servicedStart(request, settings);
  if (!start || start.at <= now) return null;
  if (start.dayOnly && start.day <= localDay(now, settings.timeZone)) return null;
  return start;
}

/** When the re-check of an appointment starting at `startAt` is due. */
export function recheckDueAt(startAt: number, settings: PrevisitSettings): number {
  return startAt - leadMs(settings);
}

/** What the re-check decision reads about an appointment at the moment it is made. */
export interface RecheckFacts {
  now: number;
  dueAt: number;
  startAt: number;
  /** The request was cancelled (PATCH status = cancelled). */
  cancelled: boolean;
  /** The appointment's latest check (the booking check) has no answer yet. */
  running: boolean;
  /**
   * When the newest found-member answer $submit would reuse for this question was given (epoch
   * ms), or null when there is none (an error or member-not-found newer than it counts as none).
   */
  reusableAnsweredAt: number | null;
  /** The tenant's reuse window (ms); 0 = reuse is off. */
  reuseWindowMs: number;
  /** How long to wait before deciding again while the booking check runs. */
  retryMs: number;
}

export type RecheckDecision =
  { action: 'cancelled' } | { action: 'wait'; until: number } | { action: 'skip' } | { action: 'run' };

/**
 * The re-check rule (docs/previsit.md): never for a cancelled request; not before it is due; not
 * while the booking check runs (it is not doubled: decided again once it has its answer);
 * skipped when an answer reusable at the appointment's start exists; else run now.
 */
export function decideRecheck(facts: RecheckFacts): RecheckDecision {
  if (facts.cancelled) return { action: 'cancelled' };
  if (facts.now < facts.dueAt) return { action: 'wait', until: facts.dueAt };
  if (facts.running) return { action: 'wait', until: facts.now + facts.retryMs };
  if (reusableAt(facts.startAt, facts.reusableAnsweredAt, facts.reuseWindowMs)) return { action: 'skip' };
  return { action: 'run' };
}

/** Whether an answer given at `answeredAt` is still reusable at `at`. */
function reusableAt(at: number, answeredAt: number | null, reuseWindowMs: number): boolean {
  return answeredAt !== null && reuseWindowMs > 0 && answeredAt + reuseWindowMs >= at;
}

// ---- time zones ------------------------------------------------------------------------------

const partsFormats = new Map<string, Intl.DateTimeFormat>();

function partsFormat(timeZone: string): Intl.DateTimeFormat {
  let format = partsFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    partsFormats.set(timeZone, format);
  }
  return format;
}

/** The wall-clock fields of an instant in a zone. */
function wallClock(
  at: number,
  timeZone: string,
): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  const parts: Record<string, number> = {};
  for (const part of partsFormat(timeZone).formatToParts(new Date(at)))
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  return {
    year: parts.year ?? 0,
    month: parts.month ?? 0,
    day: parts.day ?? 0,
    hour: parts.hour ?? 0,
    minute: parts.minute ?? 0,
    second: parts.second ?? 0,
  };
}

/** The local day (`YYYY-MM-DD`) of an instant in a zone. */
export function localDay(at: number, timeZone: string): string {
  const { year, month, day } = wallClock(at, timeZone);
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/** The local time (`HH:MM`) of an instant in a zone. */
export function localTime(at: number, timeZone: string): string {
  const { hour, minute } = wallClock(at, timeZone);
  return `${String(hour).padStart(2, '0')}:${String(minute).padStart(2, '0')}`;
}

/** The zone's offset from UTC at an instant (ms, east positive). */
function offsetMs(at: number, timeZone: string): number {
  const w = wallClock(at, timeZone);
  return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - Math.floor(at / 1000) * 1000;
}

/**
 * The instant of a wall-clock time in a zone. Around a daylight-saving change the offset is taken
 * again at the first guess, so a time that exists once is found exactly.
 */
export function zonedTime(
  timeZone: string,
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
): number {
  const guess = Date.UTC(year, month - 1, day, hour, minute);
  const first = guess - offsetMs(guess, timeZone);
  return guess - offsetMs(first, timeZone);
}

/** The instants [from, before) of a local day `YYYY-MM-DD` in a zone. */
export function dayBounds(day: string, timeZone: string): { from: number; before: number } {
  const [year, month, date] = day.split('-').map(Number) as [number, number, number];
  const next = new Date(Date.UTC(year, month - 1, date + 1));
  return {
    from: zonedTime(timeZone, year, month, date, 0, 0),
    before: zonedTime(timeZone, next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), 0, 0),
  };
}
