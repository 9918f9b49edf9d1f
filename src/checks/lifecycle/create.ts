/**
 * The step `starting`: create-task, sent at most once per attempt. It is written `creating` before
 * it goes out, re-sent only when nothing reached the upstream, and an ambiguous failure is
 * answered at once while the tenant's slot stays held (docs/upstream.md, docs/lifecycle.md). The
 * task id it answers is never lost to a store outage (recordCreatedTask).
 */
import { adapterError } from '../../mapping/response/adapter-errors.js';
import { adapterErrorCer, queuedCer } from '../../mapping/response/index.js';
import { describeFailure } from '../../upstream/port.js';
import type { UpstreamFailure, UpstreamPort } from '../../upstream/port.js';
import { guardRefusal } from '../guards.js';
import type { Check, CheckPatch } from '../store/check-store.js';
import { isStoreUnavailable, sleep } from '../store/outage.js';
import { finishWithAdapterError } from './finish.js';
import { nextPoll } from './schedule.js';
import { contextOf, timeoutOf } from './shared.js';
import type { StepDeps } from './shared.js';
import { write } from './write.js';

/** Upper bound of the wait before create-task is tried again after it was refused (nothing ran). */
const MAX_CREATE_BACKOFF_MS = 5 * 60_000;

export async function startCheck(check: Check, deps: StepDeps): Promise<void> {
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
  let sentAt = 0;
  try {
    // Written before create-task goes out: a crash from here on is treated as ambiguous.
    creating = await write(check, deps, { state: 'creating' }, 'create-task going out');
    if (!creating) return;
    sentAt = deps.now();
    result = await deps.upstream.createTask(tenant.upstream, check.upstreamRequest);
  } finally {
    deps.createSlots?.release();
  }
  deps.onEvent?.({
    type: 'create',
    tenantId: check.tenantId,
    result: result.ok ? 'ok' : describeFailure(result.error),
    queueClass: check.queueClass,
    // From accepted to sent, for its first task (a retry's wait is not the line's).
    ...(check.tasksCreated === 0 && check.pollFailures === 0 ? { waitedMs: sentAt - check.createdAt } : {}),
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
export async function holdAmbiguous(check: Check, deps: StepDeps): Promise<void> {
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
