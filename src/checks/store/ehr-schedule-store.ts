/**
 * What reading the EHR's schedule keeps (docs/ehr-schedule.md): per tenant its rounds (when the
 * next is due, the lease that gives a round to one replica, how the last one went), and per
 * appointment read from the EHR what it was when last read: its start and status, the stored
 * requests booked for it (one per payer), or why it could not be checked.
 */

/** How a round went. */
export const ROUND_OUTCOMES = ['ok', 'ehr-unavailable', 'ehr-refused', 'ehr-garbage', 'failed'] as const;
export type RoundOutcome = (typeof ROUND_OUTCOMES)[number];

/** What a round found. */
export interface RoundCounts {
  /** Appointments read from the EHR (Patient participant and start). */
  read: number;
  booked: number;
  moved: number;
  cancelled: number;
  /** Appointments listed as not checked after the round (new or still). */
  notChecked: number;
  /** Requests to the EHR (its token endpoint's included). */
  requests: number;
}

export interface ScheduleRound {
  tenantId: string;
  nextRunAt: number;
  lastAt: number | null;
  lastOutcome: RoundOutcome | null;
  lastCounts: RoundCounts | null;
  /** What went wrong, in words without patient data or address (an EhrError's message). */
  lastProblem: string | null;
}

/** An appointment read from the EHR, as last read. */
export interface ScheduleEntry {
  tenantId: string;
  /** `<fhirBaseUrl>/Appointment/<id>`. */
  appointmentUrl: string;
  startAt: number;
  status: string;
  /** The stored requests (CoverageEligibilityRequest ids) booked for it, one per payer. */
  requestIds: string[];
  /** Why it is not checked; null when it is (or was cancelled before it could be). */
  reason: string | null;
  /** The patient's name as the EHR gave it, for the page's row (not checked only). */
  patientName: string | null;
  updatedAt: number;
}

export interface EhrScheduleStore {
  /**
   * Takes the tenant's round when it is due (`next_run_at` reached, no live lease): the row is
   * created on first use, due at once. True when this owner holds it now (until `leaseUntil`).
   */
  claimRound(tenantId: string, owner: string, now: number, leaseUntil: number): Promise<boolean>;
  /**
   * Ends a round held by `owner`: how it went (`at`: when it started), and when the next is due
   * (unless a "read now" during the round made it due sooner).
   */
  finishRound(
    tenantId: string,
    owner: string,
    result: { at: number; outcome: RoundOutcome; counts: RoundCounts; problem: string | null },
    nextRunAt: number,
  ): Promise<void>;
  /**
   * Makes the tenant's next round due now ("Read the schedule now"); a round already due or under
   * way is that round (pressing twice, or on two replicas, makes one round).
   */
  dueNow(tenantId: string, now: number): Promise<void>;
  round(tenantId: string): Promise<ScheduleRound | null>;
  /** The tenant's entries of these appointment URLs. */
  entries(tenantId: string, urls: readonly string[]): Promise<ScheduleEntry[]>;
  /** Writes (inserts or replaces) entries. */
  putEntries(entries: readonly ScheduleEntry[]): Promise<void>;
  /** The tenant's appointments not checked whose start is in [from, before), by start. */
  notChecked(tenantId: string, from: number, before: number): Promise<ScheduleEntry[]>;
  /** Lets go of every round lease of a replica (shutdown). */
  releaseAll(owner: string): Promise<void>;
}
