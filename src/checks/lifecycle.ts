/**
 * One step of a claimed check: start it (create-task), poll it, or finish it.
 *
 * Rules of the upstream service (docs/upstream.md):
 * - create-task runs a real portal session, so it is sent at most once per attempt: it is
 *   re-sent only when it is certain no request reached the upstream (connection refused).
 *   An ambiguous failure ends the check rather than risk a duplicate.
 * - Polling stops on the terminal set only; any other status (even one never seen) is in flight.
 * - A poll that fails is retried with backoff, never replaced by a second task.
 * - failed/error are retried once; invalid_credentials and backoff open payer-account guards.
 */
import { decideAnswer } from '../mapping/response/answer.js';
import { isDeepStrictEqual } from 'node:util';
import type { CoverageEligibilityResponse, Reference } from 'fhir/r4.js';
import type { Tenant } from '../config.js';
import type { Logger } from '../log.js';
import { safeLabel } from '../log.js';
import type { CerContext } from '../mapping/types.js';
import {
  adapterErrorCer,
  mapEnvelope,
  outcomeKey,
  outcomeRuleFor,
  queuedCer,
  searchAllCutOffCer,
  stillCheckingCer,
} from '../mapping/response/index.js';
import type { OutcomeKey } from '../mapping/response/index.js';
import type { Envelope } from '../upstream/contract.js';
import { envelopeSchema, isFinished, isTerminalStatus } from '../upstream/contract.js';
import { adapterError } from '../mapping/response/adapter-errors.js';
import type { AdapterErrorCode } from '../mapping/response/adapter-errors.js';
import { isAnswered } from './store/check-store.js';
import { guardRefusal, openGuard, openSearchAllGuards } from './guards.js';
import type { Slots } from './slots.js';
import type { Check, CheckPatch, CheckStore, ClaimedCheck } from './store/check-store.js';
import { describeFailure } from '../upstream/port.js';
import type { UpstreamFailure, UpstreamPort } from '../upstream/port.js';
import type { PayerDurationBook } from './payer-durations.js';
import { nextPollAt, parseUpstreamTime, quantile, taskDurations, trusted } from './poll-schedule.js';
import type { PollSettings } from './poll-schedule.js';
import { isStoreUnavailable, sleep } from './store/outage.js';

export interface LifecycleDeps {
  store: CheckStore;
  upstream: UpstreamPort;
  tenant: (id: string) => Tenant | undefined;
  logger: Logger;
  owner: string;
  now: () => number;
  baseUrl: string;
  pollIntervalMs: number;
  /** CHECK_TIMEOUT_MS or SEARCH_ALL_TIMEOUT_MS. */
  timeoutMs: (isSearchAll: boolean) => number;
  /** Poll interval once a check is past its timeout ("still checking"). */
  slowPollIntervalMs: number;
  /** How long a payer backoff guard stays open. */
  backoffGuardMs: number;
  onEvent?: (event: LifecycleEvent) => void;
  /**
   * How many create-task calls may be out at once in this replica (the upstream client's pool).
   * A check is written `creating` only when its call can go out at once, so a crash leaves few
   * ambiguous checks behind, not every check queued for a connection.
   */
  createSlots?: Slots;
  /**
   * Adaptive polling (docs/polling.md): the schedule's settings and the payers' durations.
   * Absent, or strategy `fixed`: a poll every pollIntervalMs, as before.
   */
  polling?: { settings: PollSettings; durations: PayerDurationBook };
  /**
   * Checks whose create-task answer this replica holds until the store takes it (a store outage;
   * recordCreatedTask): a claim of one of them in `creating` is not an ambiguous create-task.
   */
  heldTasks?: Set<string>;
  /** True once the replica is stopping: a held task id is then given up (and logged). */
  stopping?: () => boolean;
}

export type LifecycleEvent =
  | { type: 'create'; tenantId: string; result: string }
  | { type: 'poll'; tenantId: string; result: string; lateMs: number }
  | { type: 'done'; tenantId: string; outcome: string }
  /** A recent answer was given again instead of a new check (docs/batch-and-reuse.md). */
  | { type: 'reuse'; tenantId: string };

/**
 * Upper bound of the backoff after repeated failed polls. A poll only reads a task (no portal
 * session), and the answer may already be there: a front desk should not wait minutes for one
 * more poll. 30 s is six recommended intervals (docs/upstream.md, "Recommended poll interval"):
 * during an outage each task costs a sixth of the polls (bench drill b: a check unlucky with
 * 30 % 5xx and 10 % stalls waited 3.5 minutes more with a 5-minute cap).
 */
const MAX_POLL_BACKOFF_MS = 30_000;
/** Upper bound of the wait before create-task is tried again after it was refused (nothing ran). */
const MAX_CREATE_BACKOFF_MS = 5 * 60_000;
/** How many tasks one check may create: the first, plus one retry on failed/error. */
const MAX_TASKS = 2;
/** Consecutive unreadable answers (schema violations) before a check ends as unreadable-result. */
const MAX_UNREADABLE_POLLS = 3;
/** A check still not finished this many timeouts after its task started is abandoned (frees the slot). */
const ABANDON_AFTER_TIMEOUTS = 6;

/** The check's timeout (CHECK_TIMEOUT_MS or SEARCH_ALL_TIMEOUT_MS). */
function timeoutOf(check: Pick<Check, 'isSearchAll'>, deps: LifecycleDeps): number {
  return deps.timeoutMs(check.isSearchAll);
}

/** The mapper's context for a check. */
export function cerContext(
  check: Pick<Check, 'id' | 'request' | 'isSearchAll' | 'createdAt'> & {
    patient: Reference;
    insurer: Reference;
  },
  baseUrl: string,
): CerContext {
  return {
    checkId: check.id,
    patient: check.patient,
    insurer: check.insurer,
    request: check.request,
    isSearchAll: check.isSearchAll,
    baseUrl,
    now: new Date(check.createdAt).toISOString(),
  };
}

/** The context of a stored check: the patient and insurer references live in its CER. */
function contextOf(check: Check, deps: LifecycleDeps): CerContext {
  return cerContext({ ...check, patient: check.cer.patient, insurer: check.cer.insurer }, deps.baseUrl);
}

/** Compares two CERs without their meta, so a poll that changes nothing keeps the version. */
function sameCer(a: CoverageEligibilityResponse, b: CoverageEligibilityResponse): boolean {
  // Cheap differences first: a check's final CER is never compared as text with its queued one.
  if (a.outcome !== b.outcome || a.disposition !== b.disposition) return false;
  const strip = ({ meta: _meta, ...rest }: CoverageEligibilityResponse) => JSON.stringify(rest);
  return strip(a) === strip(b);
}

/**
 * Performs the next step of a check this replica holds the lease on, then releases it. The claim
 * read the row without its documents; a step that starts a task or maps an answer reads them
 * (withDocuments), a poll that sees the same answer as the last never does.
 */
export async function advanceCheck(check: ClaimedCheck, lifecycle: LifecycleDeps): Promise<void> {
  const deps: StepDeps = { ...lifecycle, released: false };
  try {
    switch (check.state) {
      case 'starting': {
        const full = await withDocuments(check, deps);
        if (full) await startCheck(full, deps);
        break;
      }
      case 'creating': {
        const full = await withDocuments(check, deps);
        if (!full) break;
        // This replica holds the answer of its create-task and writes it once the store takes it.
        if (deps.heldTasks?.has(full.id)) break;
        if (full.outcome !== 'queued') {
          // The slot hold of an ambiguous create-task is over.
          await write(full, deps, { state: 'done' }, 'ambiguous create-task: slot hold over');
          break;
        }
        // Found in `creating` with an expired lease: a replica died while create-task was out.
        await holdAmbiguous(full, deps);
        break;
      }
      case 'polling':
        await pollCheck(check, deps);
        break;
      case 'waiting':
      case 'done':
        break;
    }
  } finally {
    // A step whose last write already dropped the lease needs no separate release.
    if (!deps.released) {
      await deps.store.release(check.id, check.leaseOwner ?? deps.owner);
      deps.logger.debug('lease released', { checkId: check.id, state: check.state });
    }
  }
}

/** Whether a check carries its documents (read in full, or loaded by withDocuments). */
function hasDocuments(check: ClaimedCheck | Check): check is Check {
  return 'request' in check;
}

/** The check with its documents, read now when the claim did not; null when the row is gone. */
async function withDocuments(check: ClaimedCheck | Check, deps: StepDeps): Promise<Check | null> {
  if (hasDocuments(check)) return check;
  const documents = await deps.store.documents(check.id);
  if (!documents) {
    deps.logger.warn('check gone; step dropped', { checkId: check.id });
    return null;
  }
  return { ...check, ...documents };
}

/** What a step may write without the check's documents: the schedule of its next poll. */
type SchedulePatch = Pick<CheckPatch, 'nextRunAt' | 'pollFailures' | 'taskPolls' | 'taskStartedAt'>;

/** The dependencies of one step, and what the step has done so far. */
interface StepDeps extends LifecycleDeps {
  /** The step's last write dropped the lease (see write). */
  released: boolean;
}

/**
 * Writes a step's patch. A patch that schedules the next step (`nextRunAt`) or ends the check
 * (`state: done`) is the step's last write: it drops the lease in the same statement, which saves
 * one write transaction per step (bench/README.md, figure 1).
 */
async function write(check: Check, deps: StepDeps, patch: CheckPatch, why: string): Promise<Check | null>;
async function write(
  check: ClaimedCheck,
  deps: StepDeps,
  patch: SchedulePatch,
  why: string,
): Promise<ClaimedCheck | null>;
async function write(
  check: ClaimedCheck | Check,
  deps: StepDeps,
  patch: CheckPatch,
  why: string,
): Promise<ClaimedCheck | null> {
  const documents = hasDocuments(check) ? check : null;
  // (Typed out too: a check claimed without its documents is written only its next poll's
  // schedule. A CER, answer or envelope written without them would skip the comparisons below.)
  if (!documents && ['cer', 'answer', 'envelope'].some((field) => field in patch)) {
    throw new Error("a document written without the check's documents");
  }
  if (patch.cer && documents && sameCer(patch.cer, documents.cer)) delete patch.cer;
  if (patch.state !== undefined || patch.outcome !== undefined) {
    if (!documents) throw new Error("a state change written without the check's documents");
    // The answer is decided here, once, when the check becomes answered (done, or an error while
    // its slot is held), and stored with it: $submit and the async status read it as it is.
    const answered = isAnswered({
      state: patch.state ?? check.state,
      outcome: patch.outcome ?? check.outcome,
    });
    const envelope = 'envelope' in patch ? patch.envelope : check.envelope;
    patch.answer = answered ? decideAnswer(patch.cer ?? documents.cer, envelope, check.isSearchAll) : null;
  }
  const token = check.leaseOwner ?? deps.owner;
  const release = patch.nextRunAt !== undefined || patch.state === 'done';
  // The claim token (unique per scheduler round) fences a step that outlived its lease: once the
  // check was claimed again, the old step's writes are refused.
  const now = deps.now();
  // The CER's first final version: the store writes the subscriptions' events with it (outbox).
  const final = patch.answer != null && !isAnswered(check) && (patch.outcome ?? check.outcome) !== 'queued';
  const updated = await deps.store.update(check.id, token, patch, now, check, { release, final });
  if (!updated) {
    deps.logger.warn('lease lost; step dropped', { checkId: check.id, why });
    return null;
  }
  if (release) deps.released = true;
  // One PHI-free line per decision, for an operator following a check at LOG_LEVEL=debug
  // (guarded: a disabled winston level still costs a stream write, about 3 µs).
  if (deps.logger.isDebugEnabled())
    deps.logger.debug('check step', {
      checkId: check.id,
      tenantId: check.tenantId,
      state: updated.state,
      why,
      ...(patch.nextRunAt !== undefined ? { nextStepInMs: Math.max(0, patch.nextRunAt - now) } : {}),
      ...(release ? { lease: 'released' } : {}),
    });
  return updated;
}

async function finishWithAdapterError(
  claimed: ClaimedCheck | Check,
  deps: StepDeps,
  code: AdapterErrorCode,
): Promise<void> {
  const check = await withDocuments(claimed, deps);
  if (!check) return;
  const row = adapterError(code);
  const cer = adapterErrorCer(contextOf(check, deps), { code, text: row.text });
  // envelope cleared: an earlier task's envelope (before a retry) must not decide the answer.
  await write(
    check,
    deps,
    { state: 'done', cer, outcome: cer.outcome, envelope: null },
    `adapter error ${code}`,
  );
  deps.onEvent?.({ type: 'done', tenantId: check.tenantId, outcome: code });
}

async function startCheck(check: Check, deps: StepDeps): Promise<void> {
  const tenant = deps.tenant(check.tenantId);
  if (!tenant) {
    deps.logger.error('check of an unknown tenant; retried in a minute', {
      checkId: check.id,
      tenantId: check.tenantId,
    });
    await write(check, deps, { nextRunAt: deps.now() + 60_000 }, 'unknown tenant: retry in a minute');
    return;
  }
  const now = deps.now();
  const refusal = guardRefusal(await deps.store.getGuard(check.tenantId, check.payerCode), now);
  if (refusal) {
    await finishWithAdapterError(check, deps, refusal);
    return;
  }
  // Only after create-task was refused (nothing sent) until the timeout; time spent waiting for a
  // tenant slot does not count against the check. The same for the retry's second task (its
  // deadline is the first task's): a create-task refused for ever must not hold a slot for ever.
  if (now >= check.deadlineAt && check.pollFailures > 0) {
    await finishWithAdapterError(check, deps, 'upstream-unreachable');
    return;
  }
  await deps.createSlots?.acquire();
  let result: Awaited<ReturnType<UpstreamPort['createTask']>>;
  let creating: Check | null;
  try {
    // Written before create-task goes out: a crash from here on is treated as ambiguous.
    creating = await write(check, deps, { state: 'creating' }, 'create-task going out');
    if (!creating) return;
    result = await deps.upstream.createTask(tenant.upstream, check.upstreamRequest);
  } finally {
    deps.createSlots?.release();
  }
  deps.onEvent?.({
    type: 'create',
    tenantId: check.tenantId,
    result: result.ok ? 'ok' : describeFailure(result.error),
  });
  if (result.ok) {
    const ctx = contextOf(creating, deps);
    const cer = creating.tasksCreated === 0 ? queuedCer(ctx) : creating.cer;
    await recordCreatedTask(creating, deps, result.value.task_id, {
      state: 'polling',
      outcome: cer.outcome,
      upstreamTaskId: result.value.task_id,
      upstreamStatus: 'IN_QUEUE',
      tasksCreated: creating.tasksCreated + 1,
      pollFailures: 0,
      ...(await nextPoll(creating, deps, null, 'created')),
      // The timeout runs from the first task upstream, not from arrival in the queue.
      deadlineAt: creating.tasksCreated === 0 ? deps.now() + timeoutOf(creating, deps) : creating.deadlineAt,
      cer,
    });
    return;
  }
  await onCreateFailure(creating, deps, result.error);
}

/** Waits between two tries to write a held task id: short, so the store's return is met soon. */
const HELD_TASK_RETRY_MS = { first: 200, max: 2_000 } as const;
/** How long an adopted check's lease lasts (the write that follows drops it). */
const ADOPT_LEASE_MS = 60_000;

/**
 * Writes what create-task answered (the task id, state `polling`). The upstream has started a
 * real portal session: its id is never lost to a store outage. While the store cannot take the
 * write, the id is held here and the write tried again (200 ms doubling to 2 s); meanwhile a claim
 * of the check by this replica leaves it alone (heldTasks), and when the lease was lost (it ran
 * out and the check was claimed again, here or by another replica) the check is adopted back
 * (adoptCreating: only while it still waits for this very create-task) and written. Only a replica
 * that stops or dies with the id unwritten loses it; the check is then ambiguous, as when a
 * replica dies with create-task out, and the id is in the log for the operator.
 */
async function recordCreatedTask(
  creating: Check,
  deps: StepDeps,
  taskId: string,
  patch: CheckPatch & { upstreamTaskId: string },
): Promise<void> {
  const why = 'task created: first poll';
  let target: Check = creating;
  deps.heldTasks?.add(creating.id);
  try {
    for (let attempt = 0; ; attempt += 1) {
      try {
        // write() completes the patch it is given (answer, cer): each try gets a fresh copy.
        if (await write(target, deps, { ...patch }, why)) return;
        const adopted = await deps.store.adoptCreating(
          creating.id,
          creating.tasksCreated,
          `${deps.owner}:adopt`,
          deps.now() + ADOPT_LEASE_MS,
        );
        if (!adopted) {
          deps.logger.warn('create-task answer not written: the check moved on', {
            checkId: creating.id,
            upstreamTaskId: taskId,
          });
          return;
        }
        deps.logger.warn('check adopted back to write its create-task answer', { checkId: creating.id });
        // The row as it is now (another replica may have answered it ambiguous meanwhile): the
        // patch's queued CER and outcome are then written over that answer, not compared away.
        const documents = await deps.store.documents(creating.id);
        if (!documents) return;
        target = { ...creating, ...adopted, ...documents };
        // A lease taken back is written at once (not after a wait).
        if (await write(target, deps, { ...patch }, why)) return;
      } catch (error) {
        if (!isStoreUnavailable(error)) throw error;
        if (deps.stopping?.()) {
          deps.logger.error('stopping with a create-task answer the store did not take', {
            checkId: creating.id,
            upstreamTaskId: taskId,
          });
          throw error;
        }
        if (attempt === 0)
          deps.logger.warn('store unavailable: create-task answer held until it is back', {
            checkId: creating.id,
            kind: error.kind,
          });
      }
      await sleep(Math.min(HELD_TASK_RETRY_MS.first * 2 ** Math.min(attempt, 10), HELD_TASK_RETRY_MS.max));
    }
  } finally {
    deps.heldTasks?.delete(creating.id);
  }
}

async function onCreateFailure(check: Check, deps: StepDeps, error: UpstreamFailure): Promise<void> {
  deps.logger.warn('create-task failed', { checkId: check.id, failure: describeFailure(error) });
  // 503 and 429 say the request was not processed (RFC 9110 15.6.4, RFC 6585 4): like a refused
  // connection, no task exists (an assumption named in the README). Any other failure may have
  // created one.
  const notProcessed = error.kind === 'http' && (error.status === 503 || error.status === 429);
  if ((error.kind === 'network' && !error.sentRequest) || notProcessed) {
    // Certain that nothing reached the upstream: safe to try again later.
    const delay = Math.min(deps.pollIntervalMs * 2 ** Math.min(check.pollFailures, 6), MAX_CREATE_BACKOFF_MS);
    await write(
      check,
      deps,
      {
        state: 'starting',
        pollFailures: check.pollFailures + 1,
        nextRunAt: deps.now() + delay,
      },
      'create-task not sent: retry',
    );
    return;
  }
  if (error.kind === 'http' && error.status >= 400 && error.status < 500 && error.status !== 408) {
    // The upstream answered and refused: no task exists.
    await finishWithAdapterError(check, deps, 'upstream-rejected');
    return;
  }
  await holdAmbiguous(check, deps);
}

/**
 * An ambiguous create-task: the answer (an error, never a second real check) is given at once,
 * but the row keeps its `creating` state, and so the tenant's slot, until a task it may have
 * started upstream must be over (one check timeout): maxInFlight holds even for tasks the adapter
 * cannot see.
 */
async function holdAmbiguous(check: Check, deps: StepDeps): Promise<void> {
  const row = adapterError('ambiguous-create');
  const cer = adapterErrorCer(contextOf(check, deps), { code: 'ambiguous-create', text: row.text });
  await write(
    check,
    deps,
    {
      state: 'creating',
      cer,
      outcome: cer.outcome,
      envelope: null,
      nextRunAt: deps.now() + Math.max(timeoutOf(check, deps), deps.pollIntervalMs),
    },
    'ambiguous create-task: answered, slot held for one timeout',
  );
  deps.onEvent?.({ type: 'done', tenantId: check.tenantId, outcome: 'ambiguous-create' });
}

async function pollCheck(check: ClaimedCheck, deps: StepDeps): Promise<void> {
  const tenant = deps.tenant(check.tenantId);
  if (!tenant || !check.upstreamTaskId) {
    await finishWithAdapterError(check, deps, 'task-lost');
    return;
  }
  const lateMs = Math.max(0, deps.now() - check.nextRunAt);
  const result = await deps.upstream.getResult(tenant.upstream, check.upstreamTaskId);
  deps.onEvent?.({
    type: 'poll',
    tenantId: check.tenantId,
    result: result.ok ? 'ok' : describeFailure(result.error),
    lateMs,
  });
  if (!result.ok) {
    await onPollFailure(check, deps, result.error);
    return;
  }
  await onEnvelope(check, deps, result.value);
}

async function onPollFailure(check: ClaimedCheck, deps: StepDeps, error: UpstreamFailure): Promise<void> {
  const now = deps.now();
  if (error.kind === 'http' && error.status === 404 && now >= check.deadlineAt) {
    await finishWithAdapterError(check, deps, 'task-lost');
    return;
  }
  const failures = check.pollFailures + 1;
  if (now >= abandonAt(check, deps)) {
    // Polls failing long after the timeout (a rotated key answered 401, a long outage): the
    // check is ended as any other check that never finishes, and its tenant slot freed.
    deps.logger.warn('check abandoned long after its timeout; polls failing', {
      checkId: check.id,
      failure: describeFailure(error),
    });
    await finishWithAdapterError(check, deps, 'abandoned');
    return;
  }
  if (error.kind === 'invalid-body' && failures >= MAX_UNREADABLE_POLLS) {
    deps.logger.warn('upstream answer unreadable; check ended', { checkId: check.id, failures });
    await finishWithAdapterError(check, deps, 'unreadable-result');
    return;
  }
  const delay = Math.min(
    deps.pollIntervalMs * 2 ** Math.min(failures - 1, 6),
    Math.max(MAX_POLL_BACKOFF_MS, deps.pollIntervalMs),
  );
  const patch: SchedulePatch = {
    pollFailures: failures,
    nextRunAt: now + Math.max(delay, deps.pollIntervalMs, adaptive(deps)?.minGapMs ?? 0),
    ...(adaptive(deps) ? { taskPolls: check.taskPolls + 1 } : {}),
  };
  if (now >= check.deadlineAt && check.outcome === 'queued') {
    // Past the timeout the CER says the check is still running: that needs its documents.
    const full = await withDocuments(check, deps);
    if (!full) return;
    const cer = stillCheckingCer(contextOf(full, deps), parsedEnvelope(full));
    await write(full, deps, { ...patch, cer }, 'poll failed: backoff');
    return;
  }
  await write(check, deps, patch, 'poll failed: backoff');
}

/** When a check still not finished is given up: ABANDON_AFTER_TIMEOUTS timeouts after its start. */
function abandonAt(check: ClaimedCheck, deps: LifecycleDeps): number {
  return check.deadlineAt + (ABANDON_AFTER_TIMEOUTS - 1) * timeoutOf(check, deps);
}

function parsedEnvelope(check: ClaimedCheck): Envelope | undefined {
  const parsed = envelopeSchema.safeParse(check.envelope);
  return parsed.success ? parsed.data : undefined;
}

async function onEnvelope(check: ClaimedCheck, deps: StepDeps, envelope: Envelope): Promise<void> {
  const now = deps.now();
  const late = now >= check.deadlineAt;
  if (check.isSearchAll && late && isTerminalStatus(envelope.status) && !isFinished(envelope, true)) {
    // The dispatching task is over but no completion rule held by the timeout: what answered is
    // the answer (completion never promised every payer, docs/upstream.md "Search-all status").
    const full = await withDocuments(check, deps);
    if (!full) return;
    await finish(full, deps, envelope, { ...envelope, search_all_status: 'SEARCH_ALL_COMPLETE' }, true);
    return;
  }
  if (!isFinished(envelope, check.isSearchAll)) {
    if (now >= abandonAt(check, deps)) {
      deps.logger.warn('check abandoned long after its timeout', {
        checkId: check.id,
        status: safeLabel(envelope.status),
      });
      await finishWithAdapterError(check, deps, 'abandoned');
      return;
    }
    if (!late && isDeepStrictEqual(envelope, check.envelope)) {
      // The same answer as the last poll (most polls of a task: its status changes a few times in
      // minutes): the stored CER was mapped from this very envelope and the same check, so only
      // the next poll is written (bench/README.md, figure 3). Past the timeout the full path
      // runs, as the CER must then say the check is still running. (After a restart with another
      // PUBLIC_BASE_URL, an interim CER keeps its old links until the envelope next changes.)
      await write(
        check,
        deps,
        {
          ...(check.pollFailures !== 0 ? { pollFailures: 0 } : {}),
          ...(await nextPoll(check, deps, envelope, 'polled')),
        },
        'status unchanged',
      );
      return;
    }
    const full = await withDocuments(check, deps);
    if (!full) return;
    const ctx = contextOf(full, deps);
    await write(
      full,
      deps,
      {
        envelope,
        upstreamStatus: envelope.status,
        pollFailures: 0,
        ...(late
          ? {
              nextRunAt: now + deps.slowPollIntervalMs,
              ...(adaptive(deps) ? { taskPolls: check.taskPolls + 1 } : {}),
            }
          : await nextPoll(check, deps, envelope, 'polled')),
        cer: late ? stillCheckingCer(ctx, envelope) : mapEnvelope(envelope, ctx),
      },
      late ? 'past the timeout: slow polls' : 'status changed',
    );
    return;
  }
  const full = await withDocuments(check, deps);
  if (!full) return;
  await finish(full, deps, envelope, envelope);
  // After the final write, so the answer does not wait for it (the previous envelope is still the
  // one `check` holds).
  await learnDurations(check, deps, envelope);
}

/** The strategy's settings when polling is adaptive; undefined when fixed. */
function adaptive(deps: LifecycleDeps): PollSettings | undefined {
  const settings = deps.polling?.settings;
  return settings?.strategy === 'adaptive' ? settings : undefined;
}

/**
 * The next poll of a task in flight (poll-schedule.ts) and, when adaptive, its poll count:
 * `created` for the first poll of a new task, `polled` after a good poll. Search-all tasks poll
 * at the fixed cadence (their end depends on many payers, not one).
 */
async function nextPoll(
  check: ClaimedCheck,
  deps: LifecycleDeps,
  envelope: Envelope | null,
  step: 'created' | 'polled',
): Promise<Pick<CheckPatch, 'nextRunAt' | 'taskPolls' | 'taskStartedAt'>> {
  const now = deps.now();
  const settings = adaptive(deps);
  // Fixed polling writes what it always did: the next poll only.
  if (!settings || !deps.polling) return { nextRunAt: now + deps.pollIntervalMs };
  const counts =
    step === 'created' ? { taskStartedAt: now, taskPolls: 0 } : { taskPolls: check.taskPolls + 1 };
  if (check.isSearchAll) return { ...counts, nextRunAt: now + deps.pollIntervalMs };
  const taskStartedAt = step === 'created' ? now : check.taskStartedAt;
  // When the current status began, on this clock: the upstream's own offsets from the task's
  // creation (its clock), added to when create-task answered here (no clock skew involved).
  const createdAt = parseUpstreamTime(envelope?.created_at);
  const updatedAt = parseUpstreamTime(envelope?.updated_at);
  const phaseSince =
    taskStartedAt !== null && createdAt !== null && updatedAt !== null
      ? taskStartedAt + Math.max(0, updatedAt - createdAt)
      : null;
  let history = null;
  try {
    history = await deps.polling.durations.get(check.payerCode, now);
  } catch (error) {
    deps.logger.warn('payer durations unreadable; polling at the fixed cadence', {
      checkId: check.id,
      error,
    });
  }
  // A new check's timeout starts with its first task (startCheck writes the same deadline).
  const deadlineAt =
    step === 'created' && check.tasksCreated === 0 ? now + timeoutOf(check, deps) : check.deadlineAt;
  const nextRunAt = nextPollAt(
    {
      now,
      taskStartedAt,
      polls: counts.taskPolls,
      phase: envelope?.status ?? null,
      phaseSince,
      history,
      deadlineAt,
    },
    settings,
  );
  return { ...counts, nextRunAt };
}

/**
 * The task outcomes whose durations say how long the payer's portal takes: a portal session that
 * ran to an answer. A refused login, a backoff, a failure or a missing configuration ends early
 * (or late) for reasons of its own and would teach the schedule a wrong length.
 */
const LEARNED_OUTCOMES: ReadonlySet<OutcomeKey> = new Set<OutcomeKey>([
  'found_eligible',
  'found_eligible_multi_card',
  'found_not_eligible',
  'found_not_eligible_multi_card',
  'found_no_determination',
  'member_not_found',
]);
/** The shortest task duration learned (ms); shorter ones are clock noise. */
const MIN_LEARNED_MS = 100;

/** An ended task's durations join its payer's history (adaptive polling; single-payer tasks). */
async function learnDurations(check: ClaimedCheck, deps: LifecycleDeps, envelope: Envelope): Promise<void> {
  if (!adaptive(deps) || !deps.polling || check.isSearchAll) return;
  if (!LEARNED_OUTCOMES.has(outcomeKey(envelope, false))) return;
  const last = parsedEnvelope(check) ?? null;
  try {
    const now = deps.now();
    const extract = trusted((await deps.polling.durations.get(check.payerCode, now))?.extract);
    const typicalExtractMs = extract ? quantile(extract, 0.5) : null;
    // A task that ran past the check's timeout, or whose timestamps are absurd, is an outlier:
    // one such sample would widen the payer's fit for a long time.
    const longest = 2 * timeoutOf(check, deps);
    const plausible = (ms: number | null) =>
      ms !== null && ms >= MIN_LEARNED_MS && ms <= longest ? ms : null;
    const durations = taskDurations(last, envelope, typicalExtractMs);
    const learned = {
      preExtractMs: plausible(durations.preExtractMs),
      extractMs: plausible(durations.extractMs),
    };
    if (learned.preExtractMs === null && learned.extractMs === null) return;
    await deps.polling.durations.record(check.payerCode, learned, now);
  } catch (error) {
    deps.logger.warn('payer durations not recorded', { checkId: check.id, error });
  }
}

/** A finished envelope: open guards, retry once where the table says so, or store the final CER. */
async function finish(
  check: Check,
  deps: StepDeps,
  envelope: Envelope,
  mapped: Envelope,
  cutOff = false,
): Promise<void> {
  const ctx = contextOf(check, deps);
  const now = deps.now();
  const rule = outcomeRuleFor(mapped);
  if (rule.guard) await openGuard(check, deps, rule.guard, envelope);
  if (check.isSearchAll) await openSearchAllGuards(check, deps, envelope);
  if (rule.retry === 'once' && check.tasksCreated < MAX_TASKS) {
    deps.logger.info('upstream outcome allows one retry; starting a second task', {
      checkId: check.id,
      outcome: rule.upstream,
    });
    // The first task's envelope and CER go: its messages and document links are not the second
    // task's (document URLs resolve against the current task id), and it decides nothing now.
    await write(
      check,
      deps,
      {
        state: 'starting',
        envelope: null,
        upstreamStatus: null,
        pollFailures: 0,
        nextRunAt: now,
        cer: queuedCer(ctx),
      },
      'outcome allows one retry: second task',
    );
    return;
  }
  // Cut off: the outcome of a complete search, the envelope as the upstream sent it.
  const cer = cutOff ? searchAllCutOffCer(envelope, ctx) : mapEnvelope(mapped, ctx);
  await write(
    check,
    deps,
    {
      state: 'done',
      envelope,
      upstreamStatus: envelope.status,
      cer,
      outcome: cer.outcome,
    },
    `finished: ${rule.upstream}`,
  );
  deps.onEvent?.({ type: 'done', tenantId: check.tenantId, outcome: rule.upstream });
}
