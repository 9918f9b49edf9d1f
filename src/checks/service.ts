/**
 * Accepting checks and waiting for them. The scheduler does the upstream work; this module
 * writes the row, wakes the scheduler and waits (bounded) for the row to change.
 */
import { isStoreUnavailable } from './store/outage.js';
import { decideAnswer } from '../mapping/response/answer.js';
import { randomUUID } from 'node:crypto';
import { DEFAULT_REUSE_WINDOW_MINUTES, type Tenant } from '../config.js';
import type { CheckInput } from '../mapping/types.js';
import { adapterErrorCer, queuedCer } from '../mapping/response/index.js';
import { OperationOutcomeError, outcome, unprocessable } from '../fhir/outcomes.js';
import { adapterError } from '../mapping/response/adapter-errors.js';
import type { AdapterErrorCode } from '../mapping/response/adapter-errors.js';
import { cerContext } from './lifecycle.js';
import type { LifecycleEvent } from './lifecycle.js';
import type { Scheduler } from './scheduler.js';
import { guardRefusal } from './guards.js';
import { isAnswered } from './store/check-store.js';
import { reuseKeyOf } from './store/rows.js';
import type { Check, NewCheck } from './store/check-store.js';
import type { Appointment, Store } from './store/appointment-store.js';
import { deskSlotsOf, queuePlaceOf } from '../mapping/request/queue-place.js';
import type { CheckSource, QueuePlace } from '../mapping/request/queue-place.js';
import { queueWaitOf, waitingNote } from '../mapping/response/queue-wait.js';
import { typicalTaskMs } from './poll-schedule.js';
import type { QueueWait } from '../mapping/response/queue-wait.js';
import type { PayerDurationBook } from './payer-durations.js';
import {
  appointmentStart,
  previsitSettings,
  recheckDueAt,
  servicedProblem,
  servicedStart,
  type PrevisitEvent,
  type PrevisitSettings,
  type ServicedStart,
} from './previsit.js';

/** A new check's row, and the payer guard that answered it at once, if any. */
export interface PreparedCheck {
  check: NewCheck;
  guard: AdapterErrorCode | undefined;
}

/**
 * Where accept() was called from (docs/queue.md): a request for now ($submit, the page, a CDS
 * patient-view), a batch entry, or an appointment (a CDS appointment-book). A request whose service
 * starts in the future is an appointment whatever its source.
 */
export type AcceptSource = 'request' | 'batch-entry' | 'appointment';

/** What accept() did with a request. */
export interface Accepted {
  check: Check;
  created: boolean;
  reused?: boolean;
  /** The appointment the request is (docs/previsit.md), when its service starts in the future. */
  appointment?: Appointment;
}

export interface CheckServiceOptions {
  baseUrl: string;
  checkTimeoutMs: number;
  searchAllTimeoutMs: number;
  /** Fallback re-read interval while waiting (another replica may be advancing the check). */
  waitPollMs: number;
  now: () => number;
  /** Metrics: a check answered by a payer guard at once is counted as done. */
  onEvent?: (event: LifecycleEvent) => void;
  /** PREVISIT_LEAD_MINUTES: the service's re-check lead (a tenant's previsitLeadMinutes overrides it). */
  previsitLeadMinutes?: number;
  /** Metrics of pre-visit checks (check-ins answered by reuse). */
  onPrevisit?: (event: PrevisitEvent) => void;
  /** BACKGROUND_DEADLINE_MINUTES (docs/queue.md); absent: 60. */
  backgroundDeadlineMinutes?: number;
  /** The payers' learned durations: a queued CER says about when it will be sent. */
  durations?: Pick<PayerDurationBook, 'get'>;
}

export class CheckService {
  constructor(
    readonly store: Store,
    private readonly scheduler: Scheduler,
    private readonly options: CheckServiceOptions,
  ) {}

  /**
   * Stores a new check, or returns the existing one with the same identifier (idempotency), or a
   * recent found-member answer to the same question (reuse, docs/batch-and-reuse.md). The
   * identifier takes precedence: a request whose identifier is already stored gets that check,
   * never a reused one.
   */
  async accept(
    tenant: Tenant,
    input: CheckInput,
    allowance: ReuseAllowance = {},
    source: AcceptSource = 'request',
  ): Promise<Accepted> {
    const settings = this.previsitSettings(tenant);
    const now = this.options.now();
    const problem = servicedProblem(input.request, settings, now);
    if (problem) throw unprocessable(problem.text, problem.expression, 'value');
    // A search-all asks which payers know the patient; it is no visit's check.
    const start = input.isSearchAll ? null : appointmentStart(input.request, settings, now);
    if (start) return this.book(tenant, input, allowance, start, settings);
    const reusable = await this.reusableFor(tenant, input, allowance);
    if (reusable && !(await this.existingFor(tenant, input))) {
      this.options.onEvent?.({ type: 'reuse', tenantId: tenant.id });
      if (this.wasPrevisit(reusable, settings))
        this.options.onPrevisit?.({ type: 'checkin-reused', tenantId: tenant.id });
      return { check: reusable, created: false, reused: true };
    }
    return this.insert(tenant, input, this.sourceOf(source, input, settings));
  }

  /**
   * An accepted request's source for its place in the line. An appointment that is not booked as
   * one (it starts now, or has started) is still an appointment's check: its start is its deadline.
   */
  private sourceOf(source: AcceptSource, input: CheckInput, settings: PrevisitSettings): CheckSource {
    if (source !== 'appointment') return { kind: source };
    return { kind: 'appointment', startAt: servicedStart(input.request, settings)?.at ?? this.options.now() };
  }

  /** The pre-visit settings of a tenant (its own, else PREVISIT_LEAD_MINUTES and the defaults). */
  previsitSettings(tenant: Tenant): PrevisitSettings {
    return previsitSettings(tenant, this.options.previsitLeadMinutes);
  }

  /**
   * Books an appointment (docs/previsit.md): the request, its booking check (or the answer $submit
   * would reuse) and its pending re-check at start - lead, in one transaction. The same
   * identifier again returns the appointment already booked, with its latest check.
   */
  private async book(
    tenant: Tenant,
    input: CheckInput,
    allowance: ReuseAllowance,
    start: ServicedStart,
    settings: PrevisitSettings,
  ): Promise<Accepted> {
    const key = input.idempotencyKey;
    const booked = key === null ? null : await this.store.appointments.findByKey(tenant.id, key);
    if (booked) return this.alreadyBooked(tenant, booked, input);
    const id = randomUUID();
    const appointment = {
      id,
      tenantId: tenant.id,
      idempotencyKey: key,
      input: { ...input, request: { ...input.request, id } },
      startAt: start.at,
      dueAt: recheckDueAt(start.at, settings),
      now: this.options.now(),
    };
    const reusable = await this.reusableFor(tenant, input, allowance);
    if (reusable && !(await this.existingFor(tenant, input))) {
      const stored = await this.store.appointments.book(
        { ...appointment, bookingCheckId: reusable.id },
        null,
      );
      this.options.onEvent?.({ type: 'reuse', tenantId: tenant.id });
      if (stored.appointment && stored.appointment.bookingCheckId !== reusable.id)
        return this.alreadyBooked(tenant, stored.appointment, input);
      return { check: reusable, created: false, reused: true, ...withAppointment(stored.appointment) };
    }
    const stored: { appointment: Appointment | null } = { appointment: null };
    const result = await this.insert(
      tenant,
      input,
      { kind: 'appointment', startAt: start.at },
      id,
      async (check) => {
        const written = await this.store.appointments.book({ ...appointment, bookingCheckId: id }, check);
        stored.appointment = written.appointment;
        if (!written.check) throw new Error(`booking check ${id} was neither inserted nor found`);
        return written.check;
      },
    );
    return { ...result, ...withAppointment(stored.appointment) };
  }

  /** An appointment booked before with the same identifier: its latest check. */
  private async alreadyBooked(tenant: Tenant, booked: Appointment, input: CheckInput): Promise<Accepted> {
    const latest =
      (booked.recheckId ? await this.store.get(tenant.id, booked.recheckId) : null) ??
      (await this.store.get(tenant.id, booked.bookingCheckId));
    if (!latest) throw new Error(`appointment ${booked.id} has no check`);
    if (!sameCheck(latest, input)) throw identifierConflict();
    return { check: latest, created: false, appointment: booked };
  }

  /** Whether a check was a pre-visit check: asked before its service's start. */
  private wasPrevisit(check: Check, settings: PrevisitSettings): boolean {
    const start: ServicedStart | null = servicedStart(check.request, settings);
    return start !== null && start.at > check.createdAt;
  }

  /**
   * The answer $submit would give again instead of a new check: the tenant's newest done check
   * with a found-member CER (complete or partial, 200, at least one insurance) for the same payer,
   * visit type and patient identifier, answered within the tenant's reuseWindowMinutes (narrowed
   * by Cache-Control max-age; none with no-cache). Null when there is none.
   */
  async reusableFor(
    tenant: Tenant,
    input: CheckInput,
    allowance: ReuseAllowance = {},
  ): Promise<Check | null> {
    const windowMs = reuseWindowMs(tenant, allowance);
    // No reuse allowed (Cache-Control: no-cache): the key (a JSON text and its SHA-256) is not made.
    if (windowMs <= 0) return null;
    return this.reusableSince(tenant, input, this.options.now() - windowMs);
  }

  /**
   * The newest found-member answer to the same question given at or after `since` (epoch ms), as
   * reusableFor decides it; the pre-visit re-check asks for one still reusable at the start.
   */
  async reusableSince(tenant: Tenant, input: CheckInput, since: number): Promise<Check | null> {
    const key = reuseKeyOf({ ...input, upstreamRequest: input.upstream });
    if (key === null) return null;
    const found = await this.store.findReusable(tenant.id, key, since);
    if (!found) return null;
    // The newest answer decides: a newer error or member-not-found is never skipped for an older
    // found answer.
    const answer = found.answer;
    const foundMember =
      (found.outcome === 'complete' || found.outcome === 'partial') &&
      (answer === null || (answer.status < 300 && answer.outcome === undefined)) &&
      (found.cer.insurance?.length ?? 0) > 0;
    return foundMember ? found : null;
  }

  /** The tenant's check stored with the same request identifier (the idempotency key), if any. */
  async existingFor(tenant: Tenant, input: CheckInput): Promise<Check | null> {
    const key = input.idempotencyKey;
    const value = input.requestIdentifierValue;
    if (key === null || value == null) return null;
    const system = key.slice(0, key.length - value.length - 1);
    const { checks } = await this.store.search(
      tenant.id,
      { requestIdentifier: [[{ system, value }]] },
      { count: 1, offset: 0, total: false },
    );
    return checks[0] ?? null;
  }

  /** Whether an existing check answers the same question as an input with its identifier. */
  static sameCheck(existing: Check, input: CheckInput): boolean {
    return sameCheck(existing, input);
  }

  /**
   * Stores a new check of the given id (by `write`: the booking of an appointment writes it with
   * its appointment).
   */
  private async insert(
    tenant: Tenant,
    input: CheckInput,
    source: CheckSource,
    id: string = randomUUID(),
    write: (check: NewCheck) => Promise<{ check: Check; created: boolean }> = (check) =>
      this.store.insert(check),
  ): Promise<{ check: Check; created: boolean }> {
    const prepared = await this.prepare(tenant, input, id, source);
    const result = await write(prepared.check);
    if (result.created) this.started(prepared);
    // The identifier is an idempotency key, not a licence to answer for another patient.
    else if (!sameCheck(result.check, input)) throw identifierConflict();
    return result;
  }

  /**
   * The row of a new check, not yet written: waiting for a slot, or already answered by an open
   * payer guard (after invalid_credentials or a portal backoff), even when every tenant slot is
   * taken: the check would otherwise wait for a slot only to be refused by the same guard in the
   * scheduler (which still checks, for guards opened later). `source`: where it comes from, which
   * decides its place in the tenant's line, once (docs/queue.md). `requestId`: the stored request
   * it checks when not its own (a pre-visit re-check: the appointment's).
   */
  async prepare(
    tenant: Tenant,
    input: CheckInput,
    id: string,
    source: CheckSource,
    requestId?: string,
  ): Promise<PreparedCheck> {
    const timeout = input.isSearchAll ? this.options.searchAllTimeoutMs : this.options.checkTimeoutMs;
    const now = this.options.now();
    const guard = guardRefusal(await this.store.getGuard(tenant.id, input.payerCode), now);
    const place = queuePlaceOf(input.request, source, now, this.options.backgroundDeadlineMinutes);
    const wait = guard ? null : await this.waitOf(tenant, input, place, now);
    const check = newCheckOf(input, {
      id,
      tenantId: tenant.id,
      now,
      timeoutMs: timeout,
      baseUrl: this.options.baseUrl,
      guard,
      place,
      ...(wait ? { wait } : {}),
      ...(requestId === undefined ? {} : { requestId }),
    });
    return { check, guard };
  }

  /**
   * Where a new check stands in its tenant's line, for its queued CER (docs/queue.md): the checks
   * ahead of it, and about when it is sent, from its payer's learned durations. Null when a slot
   * of its class is free and nothing is ahead: it is sent at once.
   */
  private async waitOf(
    tenant: Tenant,
    input: CheckInput,
    place: QueuePlace,
    now: number,
  ): Promise<QueueWait | null> {
    const [ahead, counts, durations] = await Promise.all([
      this.store.countAhead(tenant.id, place, now),
      this.store.countQueueByClass(tenant.id),
      this.options.durations?.get(input.payerCode, now) ?? Promise.resolve(null),
    ]);
    return queueWaitOf({
      ahead,
      place,
      counts,
      maxInFlight: tenant.maxInFlight,
      deskSlots: deskSlotsOf(tenant.maxInFlight, tenant.deskSlots),
      taskMs: typicalTaskMs(durations),
    });
  }

  /** After a prepared check was written: the scheduler woken, or a guard's answer counted as done. */
  started({ check, guard }: PreparedCheck): void {
    if (guard) this.options.onEvent?.({ type: 'done', tenantId: check.tenantId, outcome: guard });
    else this.scheduler.wake();
  }

  /**
   * Seconds until a check refused by a backoff guard may be tried again (its guard's end), for
   * Retry-After; undefined for any other check, or when the guard has since closed.
   */
  async retryAfterSeconds(check: Check): Promise<number | undefined> {
    const refused = check.cer.error?.some((e) => e.code.coding?.some((c) => c.code === 'backoff-guard'));
    if (!refused) return undefined;
    const guard = await this.store.getGuard(check.tenantId, check.payerCode);
    const left = guard?.until != null ? guard.until - this.options.now() : 0;
    return left > 0 ? Math.ceil(left / 1000) : undefined;
  }

  /** Reads a tenant's check; null for an unknown id or another tenant's check. */
  get(tenantId: string, id: string): Promise<Check | null> {
    return this.store.get(tenantId, id);
  }

  /** Waits until the check is done or `waitMs` has passed; returns its latest row. */
  async waitForDone(check: Check, waitMs: number): Promise<Check> {
    if (isAnswered(check) || waitMs <= 0) return check;
    const deadline = this.options.now() + waitMs;
    let latest = check;
    while (!isAnswered(latest)) {
      const left = deadline - this.options.now();
      if (left <= 0) break;
      await this.changed(check.id, Math.min(left, this.options.waitPollMs));
      try {
        latest = (await this.store.get(check.tenantId, check.id)) ?? latest;
      } catch (error) {
        // The check is stored and runs on: while the store cannot be read, the last row read (a
        // queued CER, answered with its Location) is the answer, not an error.
        if (isStoreUnavailable(error)) return latest;
        throw error;
      }
    }
    return latest;
  }

  /** Resolves when the scheduler reports a change of this check, or after `ms`. */
  private changed(id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const onChange = (changedId: string) => {
        if (changedId !== id) return;
        finish();
      };
      const timer = setTimeout(() => finish(), ms);
      const finish = () => {
        clearTimeout(timer);
        this.scheduler.events.off('changed', onChange);
        resolve();
      };
      this.scheduler.events.on('changed', onChange);
    });
  }
}

function identifierConflict(): OperationOutcomeError {
  return new OperationOutcomeError(
    outcome(
      'conflict',
      'This request identifier was already used for a different check (another patient, payer or service). Send a new identifier for a new check.',
      { expression: ['CoverageEligibilityRequest.identifier[0]'] },
    ),
    409,
  );
}

function withAppointment(appointment: Appointment | null): { appointment?: Appointment } {
  return appointment ? { appointment } : {};
}

/** What the client's Cache-Control allows of a reuse (docs/batch-and-reuse.md). */
export interface ReuseAllowance {
  /** `no-cache`: always a new check. */
  noCache?: boolean;
  /** `max-age=N`: only an answer at most N seconds old. */
  maxAgeSeconds?: number;
}

/** How old (ms) a reused answer may be for a tenant and a request; 0 = no reuse. */
export function reuseWindowMs(tenant: Tenant, allowance: ReuseAllowance = {}): number {
  if (allowance.noCache) return 0;
  const windowMs = (tenant.reuseWindowMinutes ?? DEFAULT_REUSE_WINDOW_MINUTES) * 60_000;
  return allowance.maxAgeSeconds === undefined
    ? windowMs
    : Math.min(windowMs, allowance.maxAgeSeconds * 1000);
}

/** Whether an existing check answers the same question as a new input with its identifier. */
function sameCheck(existing: Check, input: CheckInput): boolean {
  return (
    existing.patientKey === input.patientKey &&
    existing.payerCode === input.payerCode &&
    existing.isSearchAll === input.isSearchAll &&
    existing.upstreamRequest.id_type === input.upstream.id_type &&
    existing.upstreamRequest.visit_type === input.upstream.visit_type &&
    existing.upstreamRequest.extra_args.title === input.upstream.extra_args.title
  );
}

/**
 * The row of a new check: waiting for a slot, with its queued CER; or, when a payer guard is
 * open, already done with the guard's error (no upstream call is ever made for it).
 */
export function newCheckOf(
  input: CheckInput,
  at: {
    id: string;
    tenantId: string;
    now: number;
    timeoutMs: number;
    baseUrl: string;
    guard?: AdapterErrorCode | undefined;
    /** The stored request it checks, when not its own (a pre-visit re-check: the appointment's). */
    requestId?: string;
    /** Its place in the tenant's line (queue-place.ts); absent: a desk check of normal priority. */
    place?: QueuePlace;
    /** Checks ahead of it and about how long until it is sent, said in its queued CER. */
    wait?: QueueWait;
  },
): NewCheck {
  const { id, now } = at;
  const request = { ...input.request, id: at.requestId ?? id };
  const ctx = cerContext(
    {
      id,
      request,
      isSearchAll: input.isSearchAll,
      createdAt: now,
      patient: input.patient,
      insurer: input.insurer,
    },
    at.baseUrl,
  );
  const cer = at.guard
    ? adapterErrorCer(ctx, { code: at.guard, text: adapterError(at.guard).text })
    : queuedCer(ctx, at.wait ? waitingNote(at.wait) : undefined);
  return {
    id,
    ...(at.place ?? {}),
    tenantId: at.tenantId,
    idempotencyKey: input.idempotencyKey,
    payerCode: input.payerCode,
    isSearchAll: input.isSearchAll,
    patientKey: input.patientKey,
    ...(input.patientValue === undefined ? {} : { patientValue: input.patientValue }),
    ...(input.requestIdentifierValue === undefined
      ? {}
      : { requestIdentifierValue: input.requestIdentifierValue }),
    request,
    upstreamRequest: input.upstream,
    state: at.guard ? 'done' : 'waiting',
    upstreamTaskId: null,
    upstreamStatus: null,
    tasksCreated: 0,
    pollFailures: 0,
    nextRunAt: now,
    deadlineAt: now + at.timeoutMs,
    envelope: null,
    cer,
    outcome: cer.outcome,
    // A guard's refusal is answered at once: decided here, as the lifecycle decides the others.
    answer: at.guard ? decideAnswer(cer, null, input.isSearchAll) : null,
    now,
  };
}
