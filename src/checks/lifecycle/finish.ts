/**
 * The step that ends a check: a finished envelope opens the payer guards its outcome names, starts
 * the one retry the outcome table allows, or stores the final CER (mappings/outcomes.json,
 * docs/upstream.md); an adapter error ends a check the upstream cannot answer
 * (mappings/adapter-errors.json, docs/lifecycle.md).
 */
import { adapterError } from '../../mapping/response/adapter-errors.js';
import type { AdapterErrorCode } from '../../mapping/response/adapter-errors.js';
import {
  adapterErrorCer,
  mapEnvelope,
  outcomeRuleFor,
  queuedCer,
  searchAllCutOffCer,
} from '../../mapping/response/index.js';
import { answerDocuments } from '../../mapping/response/binary.js';
import type { Envelope } from '../../upstream/contract.js';
import { openGuard, openSearchAllGuards } from '../guards.js';
import type { Check, ClaimedCheck } from '../store/check-store.js';
import { contextOf } from './shared.js';
import type { StepDeps } from './shared.js';
import { withDocuments, write } from './write.js';

/** How many tasks one check may create: the first, plus one retry on failed/error. */
const MAX_TASKS = 2;

export async function finishWithAdapterError(
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

/** A finished envelope: open guards, retry once where the table says so, or store the final CER. */
export async function finish(
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
  // Its screenshot and letters are kept by the capture worker, never in the answer's path: their
  // rows are written with the final CER, due at once (docs/evidence.md).
  const evidence = { items: answerDocuments(cer, mapped), dueAt: now };
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
    evidence,
  );
  if (evidence.items.length) deps.onEvidence?.();
  deps.onEvent?.({ type: 'done', tenantId: check.tenantId, outcome: rule.upstream });
}
