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
 *
 * This file is the entry (advanceCheck); each step has its own file in lifecycle/: create.ts,
 * poll.ts, finish.ts, with write.ts, schedule.ts and shared.ts beside them.
 */
import type { ClaimedCheck } from './store/check-store.js';
import { holdAmbiguous, startCheck } from './lifecycle/create.js';
import { pollCheck } from './lifecycle/poll.js';
import type { LifecycleDeps, StepDeps } from './lifecycle/shared.js';
import { withDocuments, write } from './lifecycle/write.js';

export { cerContext } from './lifecycle/shared.js';
export type { LifecycleDeps, LifecycleEvent } from './lifecycle/shared.js';

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
