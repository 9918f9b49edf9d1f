/**
 * The operator view's part about the EHR's schedule (docs/ehr-schedule.md): whether the clinic
 * reads it, when it was last read, how that went and what it found. No patient data.
 */
import type { RoundCounts, ScheduleRound } from '../checks/store/ehr-schedule-store.js';
import type { Tenant } from '../config.js';

export interface ScheduleView {
  /** Every how many minutes it is read. */
  everyMinutes: number;
  daysAhead: number;
  /** The last round, or null before the first. */
  last: (RoundCounts & { at: string; outcome: string; problem: string | null }) | null;
  /** When the next round is due. */
  nextAt: string | null;
}

/** The view, or null when the clinic does not read its schedule from an EHR. */
export function scheduleView(tenant: Tenant, round: ScheduleRound | null): ScheduleView | null {
  const settings = tenant.ehrSchedule;
  if (!settings) return null;
  const counts = round?.lastCounts;
  return {
    everyMinutes: settings.everyMinutes,
    daysAhead: settings.daysAhead,
    last:
      round?.lastAt != null && round.lastOutcome && counts
        ? {
            at: new Date(round.lastAt).toISOString(),
            outcome: round.lastOutcome,
            problem: round.lastProblem,
            read: counts.read,
            booked: counts.booked,
            moved: counts.moved,
            cancelled: counts.cancelled,
            notChecked: counts.notChecked,
            requests: counts.requests,
          }
        : null,
    nextAt: round ? new Date(round.nextRunAt).toISOString() : null,
  };
}
