/**
 * The step `polling`: get-result until the envelope is finished. Polling stops on the terminal set
 * only; a failed poll is retried with backoff, never replaced by a second task; a check still not
 * finished long after its timeout is abandoned (docs/upstream.md, docs/lifecycle.md).
 */
import { isDeepStrictEqual } from 'node:util';
import { safeLabel } from '../../log.js';
import { mapEnvelope, stillCheckingCer } from '../../mapping/response/index.js';
import type { Envelope } from '../../upstream/contract.js';
import { isFinished, isTerminalStatus } from '../../upstream/contract.js';
import { describeFailure } from '../../upstream/port.js';
import type { UpstreamFailure } from '../../upstream/port.js';
import type { ClaimedCheck } from '../store/check-store.js';
import { finish, finishWithAdapterError } from './finish.js';
import { adaptive, learnDurations, nextPoll } from './schedule.js';
import { contextOf, parsedEnvelope, timeoutOf } from './shared.js';
import type { LifecycleDeps, StepDeps } from './shared.js';
import { withDocuments, write } from './write.js';
import type { SchedulePatch } from './write.js';

/**
 * Upper bound of the backoff after repeated failed polls. A poll only reads a task (no portal
 * session), and the answer may already be there: a front desk should not wait minutes for one
 * more poll. 30 s is six recommended intervals (docs/upstream.md, "Recommended poll interval"):
 * during an outage each task costs a sixth of the polls (bench drill b: a check unlucky with
 * 30 % 5xx and 10 % stalls waited 3.5 minutes more with a 5-minute cap).
 */
const MAX_POLL_BACKOFF_MS = 30_000;
/** Consecutive unreadable answers (schema violations) before a check ends as unreadable-result. */
const MAX_UNREADABLE_POLLS = 3;
/** A check still not finished this many timeouts after its task started is abandoned (frees the slot). */
const ABANDON_AFTER_TIMEOUTS = 6;

export async function pollCheck(check: ClaimedCheck, deps: StepDeps): Promise<void> {
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
