/**
 * When a task in flight is next polled, and what an ended task teaches about its payer: adaptive
 * polling (docs/polling.md, poll-schedule.ts) or, when fixed, a poll every POLL_INTERVAL_MS.
 */
import type { OutcomeKey } from '../../mapping/response/index.js';
import { OUTCOME_KEYS, outcomeKey } from '../../mapping/response/index.js';
import type { Envelope } from '../../upstream/contract.js';
import { nextPollAt, parseUpstreamTime, quantile, taskDurations, trusted } from '../poll-schedule.js';
import type { PollSettings } from '../poll-schedule.js';
import type { CheckPatch, ClaimedCheck } from '../store/check-store.js';
import { parsedEnvelope, timeoutOf } from './shared.js';
import type { LifecycleDeps } from './shared.js';

/** The strategy's settings when polling is adaptive; undefined when fixed. */
export function adaptive(deps: LifecycleDeps): PollSettings | undefined {
  const settings = deps.polling?.settings;
  return settings?.strategy === 'adaptive' ? settings : undefined;
}

/**
 * The next poll of a task in flight (poll-schedule.ts) and, when adaptive, its poll count:
 * `created` for the first poll of a new task, `polled` after a good poll. Search-all tasks poll
 * at the fixed cadence (their end depends on many payers, not one).
 */
export async function nextPoll(
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
const LEARNED_OUTCOMES: ReadonlySet<OutcomeKey> = new Set<OutcomeKey>(
  OUTCOME_KEYS.filter((key) => key.startsWith('found_') || key === 'member_not_found'),
);
/** The shortest task duration learned (ms); shorter ones are clock noise. */
const MIN_LEARNED_MS = 100;

/** An ended task's durations join its payer's history (adaptive polling; single-payer tasks). */
export async function learnDurations(
  check: ClaimedCheck,
  deps: LifecycleDeps,
  envelope: Envelope,
): Promise<void> {
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
