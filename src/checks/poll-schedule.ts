/**
 * When to poll an upstream task next (docs/polling.md). Pure: the same inputs give the same time.
 *
 * - `fixed`: every POLL_INTERVAL_MS, as the upstream recommends.
 * - `adaptive`: from the task's phase and the durations seen for its payer. Before the task
 *   leaves its first phases (IN_QUEUE, NAVIGATING_WEBSITE, or any in-flight status this service
 *   does not know), the next poll comes where the payer's history says the task is likely to
 *   have moved on: one sparse poll to where the fastest tasks move, then polls that each have a
 *   fixed chance of seeing the change, never further apart than a typical EXTRACTING_DATA phase
 *   (so that phase is seen while it lasts). In EXTRACTING_DATA (the end is near) the same rule
 *   on the history of that phase, with close polls.
 *
 * Two bounds hold whatever the history says:
 * - the minimum gap: never two polls of one task closer than MIN_POLL_GAP_MS;
 * - the budget: the (k+1)-th poll of a task is not sent before k POLL_INTERVAL_MS after the task
 *   was created, so by any time at most one poll more than fixed polling has sent by then (its
 *   k-th poll goes at k intervals). The schedule above spends polls where the end is likely and
 *   saves them where it is not, so over the same work it sends fewer polls on average than fixed
 *   polling (test/unit/poll-schedule.test.ts simulates it; bench/polling.ts measures it); the one
 *   poll of credit lets a task that ends where its payer's history did not expect it still be
 *   caught soon.
 * Faults (a failed poll's backoff) and checks past their timeout are not scheduled here.
 */

/** POLL_STRATEGY. */
export const POLL_STRATEGIES = ['adaptive', 'fixed'] as const;
export type PollStrategy = (typeof POLL_STRATEGIES)[number];

/** The upstream phase that says the end is near. */
export const EXTRACTING = 'EXTRACTING_DATA';

/**
 * A duration as this service has seen it for a payer: a log-normal fit (the mean and variance of
 * the natural log of milliseconds), weighted towards recent tasks.
 */
export interface DurationStats {
  /** Tasks seen. */
  n: number;
  meanLog: number;
  varLog: number;
}

/** What a payer's tasks took: before the end is near, and the EXTRACTING_DATA phase. */
export interface PayerDurations {
  /** From task creation to EXTRACTING_DATA, or to the end when the task skipped it. */
  preExtract: DurationStats | null;
  /** EXTRACTING_DATA: from its start to the end. */
  extract: DurationStats | null;
}

export interface PollSettings {
  strategy: PollStrategy;
  /** POLL_INTERVAL_MS: the fixed cadence and the budget's unit. */
  intervalMs: number;
  /** MIN_POLL_GAP_MS (adaptive only). */
  minGapMs: number;
}

/** Where a task stands when its next poll is decided. */
export interface PollSituation {
  /** Now, epoch ms. */
  now: number;
  /** When create-task answered (epoch ms, this service's clock); null: unknown (falls back to fixed). */
  taskStartedAt: number | null;
  /** Polls of this task sent so far, failed ones included. */
  polls: number;
  /** The task's last in-flight status; null before its first good poll. */
  phase: string | null;
  /** When that status began, on this service's clock; null when unknown. */
  phaseSince: number | null;
  /** The payer's history; null when none. */
  history: PayerDurations | null;
  /** When the check reaches its timeout (epoch ms); the next poll is never after it. */
  deadlineAt?: number | null;
}

/** Tasks of a payer seen before its history is trusted; until then adaptive polls at the fixed cadence. */
export const MIN_SAMPLES = 3;
/**
 * The chance that the change a poll waits for happens before it: the next poll is at the time by
 * which this share of the tasks still running would have moved on (lower: closer polls).
 */
const CATCH_SHARE = 0.5;
const EXTRACT_CATCH_SHARE = 0.4;
/** The share of a payer's tasks that move on before the first poll (sparse polls early). */
const FIRST_POLL_SHARE = 0.1;
/** A fit never narrower than this (log scale): a payer's spread is never taken as nil. */
const MIN_SIGMA = 0.08;
/**
 * The longest wait between two polls of a task, in POLL_INTERVAL_MS: a task that ends far sooner
 * than its payer's history says (a refused login, a missing credential) is still seen soon, and a
 * history spoilt by slow days never leaves a task unpolled for long.
 */
export const MAX_GAP_INTERVALS = 3;

/** The time of the next poll of a task still in flight (epoch ms). */
export function nextPollAt(situation: PollSituation, settings: PollSettings): number {
  const { now, taskStartedAt, polls } = situation;
  if (settings.strategy === 'fixed' || taskStartedAt === null) return now + settings.intervalMs;
  const earliest = Math.max(
    now + Math.max(1, settings.minGapMs),
    budgetAt(taskStartedAt, polls, settings.intervalMs),
  );
  // Never later than MAX_GAP_INTERVALS from now, nor than the check's timeout (a poll past the
  // deadline is what turns the answer into "still checking"); the two bounds above still win.
  const latest = Math.min(now + MAX_GAP_INTERVALS * settings.intervalMs, situation.deadlineAt ?? Infinity);
  const wanted = wantedAt(situation, settings);
  return Math.max(earliest, Math.round(Math.min(Number.isFinite(wanted) ? wanted : latest, latest)));
}

/** The earliest time the budget allows the next poll of a task that has had `polls` polls. */
export function budgetAt(taskStartedAt: number, polls: number, intervalMs: number): number {
  return taskStartedAt + polls * intervalMs;
}

/** When the history would poll, before the two bounds. */
function wantedAt(situation: PollSituation, settings: PollSettings): number {
  const { now, phase, phaseSince, history } = situation;
  const taskStartedAt = situation.taskStartedAt ?? now;
  const pre = trusted(history?.preExtract);
  const extract = trusted(history?.extract);
  if (phase === EXTRACTING && phaseSince !== null && extract) {
    const since = Math.min(phaseSince, now);
    return since + conditionalQuantile(extract, now - since, EXTRACT_CATCH_SHARE);
  }
  if (!pre) return now + settings.intervalMs;
  const elapsed = now - taskStartedAt;
  const first = quantile(pre, FIRST_POLL_SHARE);
  if (elapsed < first) return taskStartedAt + first;
  // Never further apart than a typical EXTRACTING_DATA phase (or, unknown, one interval), so
  // the end-is-near phase is seen while it lasts.
  const cap = extract ? Math.max(settings.minGapMs, quantile(extract, 0.5)) : settings.intervalMs;
  const gap = conditionalQuantile(pre, elapsed, CATCH_SHARE) - elapsed;
  return now + Math.min(gap, cap);
}

export function trusted(stats: DurationStats | null | undefined): DurationStats | null {
  return stats && stats.n >= MIN_SAMPLES && Number.isFinite(stats.meanLog) && Number.isFinite(stats.varLog)
    ? stats
    : null;
}

function sigma(stats: DurationStats): number {
  return Math.max(MIN_SIGMA, Math.sqrt(Math.max(0, stats.varLog)));
}

/** The p-quantile of a fitted duration, ms. */
export function quantile(stats: DurationStats, p: number): number {
  return Math.exp(stats.meanLog + sigma(stats) * normalQuantile(p));
}

/**
 * The duration by which a share `p` of the tasks still running after `elapsed` ms have ended:
 * the quantile F^-1(F(elapsed) + p (1 - F(elapsed))).
 */
export function conditionalQuantile(stats: DurationStats, elapsed: number, p: number): number {
  const s = sigma(stats);
  const below = elapsed > 0 ? normalCdf((Math.log(elapsed) - stats.meanLog) / s) : 0;
  const target = Math.min(below + p * (1 - below), 0.999_999);
  return Math.max(elapsed, Math.exp(stats.meanLog + s * normalQuantile(target)));
}

/** The standard normal distribution function (Abramowitz and Stegun 7.1.26, error < 1.5e-7). */
export function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const poly =
    t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const erf = 1 - poly * Math.exp(-x * x);
  return z >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
}

/** The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9). */
export function normalQuantile(p: number): number {
  if (p <= 0) return -Infinity;
  if (p >= 1) return Infinity;
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716,
    2.506628277459239,
  ];
  const b = [
    -54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572,
  ];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const low = 0.02425;
  if (p < low) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (
      (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) /
      ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1)
    );
  }
  if (p > 1 - low) return -normalQuantile(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) /
    (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}

/**
 * Upstream timestamps carry no zone; they are UTC (an assumption named in the README). Epoch ms,
 * or null when unreadable.
 */
export function parseUpstreamTime(value: unknown): number | null {
  if (typeof value !== 'string' || value.length < 19) return null;
  const zoned = /(Z|[+-]\d\d:?\d\d)$/i.test(value) ? value : `${value}Z`;
  // Date.parse takes at most milliseconds reliably: microseconds are cut to three digits.
  const ms = Date.parse(zoned.replace(/(\.\d{3})\d+/, '$1'));
  return Number.isFinite(ms) ? ms : null;
}

/** One task's durations, from its envelopes (the upstream's own clock), for the payer's history. */
export interface TaskDurations {
  preExtractMs: number | null;
  extractMs: number | null;
}

/**
 * What an ended task says about its payer: `last` is the last in-flight envelope seen (or null),
 * `end` the terminal one. The task's start is `end.created_at`; EXTRACTING_DATA began at the
 * `updated_at` of an envelope in that status. A task that reached EXTRACTING_DATA unseen
 * (interim results present, the phase never polled: it was shorter than a gap) began it about
 * `typicalExtractMs` (the payer's median extraction) before its end; with no such median it
 * teaches nothing.
 */
export function taskDurations(
  last: { status?: unknown; updated_at?: unknown } | null,
  end: { created_at?: unknown; updated_at?: unknown; interim_results?: unknown },
  typicalExtractMs: number | null = null,
): TaskDurations {
  const createdAt = parseUpstreamTime(end.created_at);
  const endedAt = parseUpstreamTime(end.updated_at);
  if (createdAt === null || endedAt === null || endedAt < createdAt)
    return { preExtractMs: null, extractMs: null };
  const extractAt = last?.status === EXTRACTING ? parseUpstreamTime(last.updated_at) : null;
  if (extractAt !== null && extractAt >= createdAt && extractAt <= endedAt)
    return { preExtractMs: extractAt - createdAt, extractMs: endedAt - extractAt };
  const skipped = end.interim_results === null || end.interim_results === undefined;
  if (skipped) return { preExtractMs: endedAt - createdAt, extractMs: null };
  const estimated = typicalExtractMs === null ? null : endedAt - createdAt - typicalExtractMs;
  return { preExtractMs: estimated !== null && estimated > 0 ? estimated : null, extractMs: null };
}

/** A task's duration when its payer has no history yet (the portal's checks take 30 to 160 s). */
export const DEFAULT_TASK_MS = 90_000;

/**
 * About how long a task of this payer holds its slot (ms): the mean of its fitted phases (a
 * log-normal's mean, exp(mu + sigma^2 / 2)), DEFAULT_TASK_MS without a trusted history. Used to say
 * when a waiting check will be sent (docs/queue.md).
 */
export function typicalTaskMs(history: PayerDurations | null): number {
  const mean = (stats: DurationStats | null): number =>
    stats ? Math.exp(stats.meanLog + Math.max(0, stats.varLog) / 2) : 0;
  const pre = trusted(history?.preExtract);
  if (!pre) return DEFAULT_TASK_MS;
  return mean(pre) + mean(trusted(history?.extract));
}
