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
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { adapterError } from '../mapping/response/adapter-errors.js';
import type { AdapterErrorCode } from '../mapping/response/adapter-errors.js';
import { cerContext } from './lifecycle.js';
import type { LifecycleEvent } from './lifecycle.js';
import type { Scheduler } from './scheduler.js';
import { guardRefusal } from './guards.js';
import { isAnswered } from './store/check-store.js';
import { reuseKeyOf } from './store/rows.js';
import type { Check, CheckStore, NewCheck } from './store/check-store.js';

export interface CheckServiceOptions {
  baseUrl: string;
  checkTimeoutMs: number;
  searchAllTimeoutMs: number;
  /** Fallback re-read interval while waiting (another replica may be advancing the check). */
  waitPollMs: number;
  now: () => number;
  /** Metrics: a check answered by a payer guard at once is counted as done. */
  onEvent?: (event: LifecycleEvent) => void;
}

export class CheckService {
  constructor(
    readonly store: CheckStore,
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
  ): Promise<{ check: Check; created: boolean; reused?: boolean }> {
    const reusable = await this.reusableFor(tenant, input, allowance);
    if (reusable && !(await this.existingFor(tenant, input))) {
      this.options.onEvent?.({ type: 'reuse', tenantId: tenant.id });
      return { check: reusable, created: false, reused: true };
    }
    return this.insert(tenant, input);
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
    const key = reuseKeyOf({ ...input, upstreamRequest: input.upstream });
    if (key === null) return null;
    const found = await this.store.findReusable(tenant.id, key, this.options.now() - windowMs);
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

  private async insert(tenant: Tenant, input: CheckInput): Promise<{ check: Check; created: boolean }> {
    const timeout = input.isSearchAll ? this.options.searchAllTimeoutMs : this.options.checkTimeoutMs;
    const now = this.options.now();
    // An open payer guard (after invalid_credentials or a portal backoff) answers at once, even
    // when every tenant slot is taken: the check would otherwise wait for a slot only to be
    // refused by the same guard in the scheduler (which still checks, for guards opened later).
    const guard = guardRefusal(await this.store.getGuard(tenant.id, input.payerCode), now);
    const result = await this.store.insert(
      newCheckOf(input, {
        id: randomUUID(),
        tenantId: tenant.id,
        now,
        timeoutMs: timeout,
        baseUrl: this.options.baseUrl,
        guard,
      }),
    );
    if (result.created && guard) {
      this.options.onEvent?.({ type: 'done', tenantId: tenant.id, outcome: guard });
    } else if (result.created) this.scheduler.wake();
    else if (!sameCheck(result.check, input)) {
      // The identifier is an idempotency key, not a licence to answer for another patient.
      throw new OperationOutcomeError(
        outcome(
          'conflict',
          'This request identifier was already used for a different check (another patient, payer or service). Send a new identifier for a new check.',
          { expression: ['CoverageEligibilityRequest.identifier[0]'] },
        ),
        409,
      );
    }
    return result;
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
  },
): NewCheck {
  const { id, now } = at;
  const request = { ...input.request, id };
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
    : queuedCer(ctx);
  return {
    id,
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
