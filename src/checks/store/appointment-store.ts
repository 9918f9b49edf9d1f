/**
 * Appointments (docs/previsit.md): a stored request whose service starts in the future, with its
 * booking check and its one pending re-check. The re-check is a row, claimed with a lease like a
 * check or a subscription delivery, so a restart or a killed replica never loses or doubles it.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import type { CheckInput } from '../../mapping/types.js';
import type { Check, CheckStore, DateRange, NewCheck } from './check-store.js';
import type { SessionStore } from './session-store.js';
import type { EvidenceStore } from './evidence-store.js';
import type { EhrScheduleStore } from './ehr-schedule-store.js';

/**
 * The check store with its appointments and evidence, in the same database (what openStore returns). Apart
 * from CheckStore so that the check store's contract does not import this one.
 */
export type Store = CheckStore & {
  readonly appointments: AppointmentStore;
  readonly sessions: SessionStore;
  /** The kept documents of final answers (evidence-store.ts). */
  readonly evidence: EvidenceStore;
  /** What reading the EHR's schedule keeps (ehr-schedule-store.ts). */
  readonly ehrSchedule: EhrScheduleStore;
};

/**
 * - scheduled: the re-check is pending (due at dueAt);
 * - rechecked: the re-check was started (recheckId is its check);
 * - skipped:   an answer reusable at the start existed when it was due;
 * - cancelled: the request was cancelled; no re-check is ever started after that.
 */
export const APPOINTMENT_STATES = ['scheduled', 'rechecked', 'skipped', 'cancelled'] as const;
export type AppointmentState = (typeof APPOINTMENT_STATES)[number];

export interface Appointment {
  /** The stored request's id (CoverageEligibilityRequest/{id}). */
  id: string;
  tenantId: string;
  /** `system|value` of the request's identifier, the idempotency key; null when absent. */
  idempotencyKey: string | null;
  /** What a check of it needs, its request (id = this id, status as last patched) included. */
  input: CheckInput;
  /** The booking answer: the check started at booking, or the answer reused then. */
  bookingCheckId: string;
  /** The re-check, once started. */
  recheckId: string | null;
  /** The appointment's start (epoch ms). */
  startAt: number;
  /** When the re-check is next decided (start - lead, or later while the booking check runs). */
  dueAt: number;
  state: AppointmentState;
  leaseOwner: string | null;
  leaseUntil: number | null;
  createdAt: number;
  updatedAt: number;
}

export type NewAppointment = Pick<
  Appointment,
  'id' | 'tenantId' | 'idempotencyKey' | 'input' | 'bookingCheckId' | 'startAt' | 'dueAt'
> & { now: number };

export interface AppointmentClaim {
  owner: string;
  now: number;
  leaseMs: number;
  limit: number;
}

export interface AppointmentStore {
  /**
   * Stores an appointment with its booking check in one transaction (check null: the booking
   * answer is a reused one, nothing else is written). Idempotent: a check whose identifier is
   * already stored writes nothing and returns that check with its appointment (null when it was
   * none); an appointment whose identifier is already stored is returned as it is.
   */
  book(
    appointment: NewAppointment,
    check: NewCheck | null,
  ): Promise<{ appointment: Appointment | null; check?: { check: Check; created: boolean } }>;
  /** A tenant's appointment by its request id; null for an unknown id or another tenant's. */
  get(tenantId: string, id: string): Promise<Appointment | null>;
  /** A tenant's appointment by its request identifier (idempotency key). */
  findByKey(tenantId: string, idempotencyKey: string): Promise<Appointment | null>;
  /**
   * Claims scheduled appointments whose dueAt has come (by `now`) and that no live lease holds,
   * earliest first (PostgreSQL: FOR UPDATE SKIP LOCKED, so replicas never claim the same one).
   */
  claimDue(claim: AppointmentClaim): Promise<Appointment[]>;
  /** Decides again at `dueAt`; false when the claim was lost (another replica or a cancel). */
  postpone(id: string, owner: string, dueAt: number, now: number): Promise<boolean>;
  /** Marks the re-check skipped; false when the claim was lost. */
  skip(id: string, owner: string, now: number): Promise<boolean>;
  /**
   * Starts the re-check: the appointment turns `rechecked` and the check is inserted, in one
   * transaction, only while the caller holds the claim and the appointment is still scheduled
   * (a cancel in between wins). False when nothing was written.
   */
  startRecheck(id: string, owner: string, check: NewCheck, now: number): Promise<boolean>;
  /**
   * Stores a stored request as patched (its status cancelled): in its appointment, which turns
   * `cancelled` whatever lease holds it, and in the check of the same id, in one transaction; a
   * re-check written but still waiting for a tenant slot (not started) is dropped with it.
   * Returns the appointment's state before (null: the request is not an appointment), or null
   * when the tenant has no stored request of that id.
   */
  cancel(
    tenantId: string,
    id: string,
    request: CoverageEligibilityRequest,
    now: number,
  ): Promise<{ appointment: Appointment | null; previous: AppointmentState | null } | null>;
  /**
   * Moves an appointment to a new start (the EHR's schedule moved it, docs/ehr-schedule.md): its
   * start, its re-check's due time and its request (as stored, and in the check of the same id),
   * in one transaction; a re-check already run or skipped is pending again (the answer it gave
   * was for the old time). A cancelled appointment is left as it is. The appointment as now
   * stored, or null when the tenant has none of that id.
   */
  move(
    tenantId: string,
    id: string,
    to: { startAt: number; dueAt: number; request: CoverageEligibilityRequest },
    now: number,
  ): Promise<Appointment | null>;
  /** A tenant's appointments whose start is in every range, by start time, at most `count`. */
  search(tenantId: string, starts: DateRange[], count: number): Promise<Appointment[]>;
  /**
   * The clock every replica shares, which decides when a re-check is due: PostgreSQL's
   * (clock_timestamp() of the database server); on SQLite, whose replicas are one process on one
   * host, that host's clock.
   */
  clock(): Promise<number>;
  /** Drops every lease this owner holds (graceful shutdown). */
  releaseAll(owner: string): Promise<void>;
}
