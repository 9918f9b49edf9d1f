/**
 * The poll schedule (src/checks/poll-schedule.ts) on its own: phases, per-payer history, the
 * minimum gap, the poll budget, and what an ended task teaches.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_GAP_INTERVALS,
  budgetAt,
  conditionalQuantile,
  nextPollAt,
  normalCdf,
  normalQuantile,
  parseUpstreamTime,
  quantile,
  taskDurations,
} from '../../src/checks/poll-schedule.js';
import type {
  DurationStats,
  PayerDurations,
  PollSettings,
  PollSituation,
} from '../../src/checks/poll-schedule.js';

const I = 5000;
const ADAPTIVE: PollSettings = { strategy: 'adaptive', intervalMs: I, minGapMs: 1000 };
const FIXED: PollSettings = { ...ADAPTIVE, strategy: 'fixed' };
const T0 = Date.UTC(2026, 10, 24, 8, 0, 0);

/** A log-normal fit with this median (ms) and sigma, from n tasks. */
function fit(median: number, sigma: number, n = 20): DurationStats {
  return { n, meanLog: Math.log(median), varLog: sigma * sigma };
}
/** A payer whose tasks navigate ~25 s and extract ~5 s. */
const TYPICAL: PayerDurations = { preExtract: fit(25_000, 0.25), extract: fit(5000, 0.25) };

function situation(over: Partial<PollSituation> = {}): PollSituation {
  return {
    now: T0,
    taskStartedAt: T0,
    polls: 0,
    phase: null,
    phaseSince: null,
    history: TYPICAL,
    ...over,
  };
}

/**
 * Polls one task to its end with a strategy: pre-extract ms, then extract ms (null: skipped).
 * Returns the polls sent and how long after the task's end the last one came.
 */
function simulate(
  settings: PollSettings,
  history: PayerDurations | null,
  preMs: number,
  extractMs: number | null,
): { polls: number; lateMs: number; gaps: number[]; times: number[] } {
  const end = T0 + preMs + (extractMs ?? 0);
  let now = T0;
  let polls = 0;
  let phase: string | null = null;
  let phaseSince: number | null = null;
  const times: number[] = [];
  for (;;) {
    const at = nextPollAt({ now, taskStartedAt: T0, polls, phase, phaseSince, history }, settings);
    expect(at).toBeGreaterThan(now);
    now = at;
    polls += 1;
    times.push(at);
    if (at >= end) break;
    if (extractMs !== null && at >= T0 + preMs) {
      phase = 'EXTRACTING_DATA';
      phaseSince = T0 + preMs;
    } else phase = 'NAVIGATING_WEBSITE';
    if (polls > 1000) throw new Error('never ends');
  }
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  return { polls, lateMs: now - end, gaps, times };
}

/** A deterministic stream of standard normal numbers. */
function normals(seed: number): () => number {
  let state = seed;
  const uniform = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return (state + 0.5) / 2147483648;
  };
  return () => normalQuantile(uniform());
}

describe('poll schedule', () => {
  it('fixed: every POLL_INTERVAL_MS, whatever the phase and history', () => {
    expect(nextPollAt(situation(), FIXED)).toBe(T0 + I);
    expect(nextPollAt(situation({ now: T0 + 7, phase: 'EXTRACTING_DATA', phaseSince: T0 }), FIXED)).toBe(
      T0 + 7 + I,
    );
    // Adaptive without a known task start (a task created before the switch): fixed too.
    expect(nextPollAt(situation({ taskStartedAt: null }), ADAPTIVE)).toBe(T0 + I);
  });

  it('a payer without enough history is polled at the fixed cadence', () => {
    for (const history of [null, { preExtract: fit(25_000, 0.25, 2), extract: null }]) {
      const run = simulate(ADAPTIVE, history, 22_000, 4000);
      expect(run.times).toEqual([5000, 10_000, 15_000, 20_000, 25_000, 30_000].map((ms) => T0 + ms));
    }
  });

  it('phases: a sparse first poll where the payer’s fastest tasks move on, close polls once EXTRACTING_DATA is seen', () => {
    const first = nextPollAt(situation(), ADAPTIVE);
    // Where a tenth of the payer's tasks have moved on, but never later than MAX_GAP_INTERVALS.
    expect(first - T0).toBe(Math.min(Math.round(quantile(TYPICAL.preExtract!, 0.1)), MAX_GAP_INTERVALS * I));
    expect(first - T0).toBeGreaterThan(2 * I);
    // Still navigating mid-way: polls no further apart than a typical extraction (so it is seen).
    const navigating = situation({
      now: T0 + 25_000,
      polls: 3,
      phase: 'NAVIGATING_WEBSITE',
      phaseSince: T0 + 1000,
    });
    const gap = nextPollAt(navigating, ADAPTIVE) - navigating.now;
    expect(gap).toBeGreaterThanOrEqual(1000);
    expect(gap).toBeLessThanOrEqual(quantile(TYPICAL.extract!, 0.5) + 1);
    // Extracting for 4 s of a ~5 s phase: the end is near, the next poll about a second away.
    const extracting = { ...navigating, phase: 'EXTRACTING_DATA', phaseSince: T0 + 21_000 };
    const soon = nextPollAt(extracting, ADAPTIVE) - extracting.now;
    expect(soon).toBeLessThan(2000);
    expect(soon).toBeGreaterThanOrEqual(1000);
    // Just entered it: the next poll waits for the phase's likely end, not the navigation's.
    const entered = { ...extracting, phaseSince: T0 + 24_900 };
    expect(nextPollAt(entered, ADAPTIVE) - T0).toBeCloseTo(
      24_900 + conditionalQuantile(TYPICAL.extract!, 100, 0.4),
      -1,
    );
    // A status this service does not know is treated as the task still under way.
    expect(nextPollAt({ ...navigating, phase: 'VERIFYING_MEMBER' }, ADAPTIVE)).toBe(
      nextPollAt(navigating, ADAPTIVE),
    );
  });

  it('per payer: a slow portal is first polled later than a fast one', () => {
    const fast: PayerDurations = { preExtract: fit(12_000, 0.2), extract: fit(3000, 0.2) };
    const slow: PayerDurations = { preExtract: fit(45_000, 0.2), extract: fit(8000, 0.2) };
    const at = (history: PayerDurations) => nextPollAt(situation({ history }), ADAPTIVE) - T0;
    expect(at(slow)).toBeGreaterThan(at(fast));
    expect(at(fast)).toBeCloseTo(quantile(fast.preExtract!, 0.1), -1);
    // The slow portal's first poll is held to MAX_GAP_INTERVALS: a task of it that ends early
    // (a refused login) is still seen soon.
    expect(at(slow)).toBe(MAX_GAP_INTERVALS * I);
  });

  it("never waits longer than MAX_GAP_INTERVALS, nor past the check's timeout, whatever the history says", () => {
    // A history spoilt by a slow afternoon (tasks of 8-10 minutes): polled within 3 intervals.
    const spoilt: PayerDurations = { preExtract: fit(540_000, 0.1), extract: fit(30_000, 0.1) };
    expect(nextPollAt(situation({ history: spoilt }), ADAPTIVE) - T0).toBe(MAX_GAP_INTERVALS * I);
    const later = situation({ history: spoilt, now: T0 + 60_000, polls: 4, phase: 'NAVIGATING_WEBSITE' });
    expect(nextPollAt(later, ADAPTIVE) - later.now).toBeLessThanOrEqual(MAX_GAP_INTERVALS * I);
    // The timeout comes first: the poll that turns the answer into "still checking" is not late.
    const nearDeadline = situation({ history: spoilt, deadlineAt: T0 + 8000 });
    expect(nextPollAt(nearDeadline, ADAPTIVE)).toBe(T0 + 8000);
    // The minimum gap and the budget still win over the deadline.
    const pastDeadline = situation({ history: spoilt, now: T0 + 2 * I, polls: 4, deadlineAt: T0 });
    expect(nextPollAt(pastDeadline, ADAPTIVE)).toBe(T0 + 4 * I);
    // A corrupt fit (NaN spread) is not trusted: the fixed cadence.
    const corrupt: PayerDurations = {
      preExtract: { n: 10, meanLog: Math.log(20_000), varLog: NaN },
      extract: null,
    };
    expect(nextPollAt(situation({ history: corrupt }), ADAPTIVE)).toBe(T0 + I);
  });

  it('the minimum gap: never two polls of one task closer than MIN_POLL_GAP_MS, and the budget: the (k+1)-th poll no earlier than k intervals', () => {
    const stats = fc.record({
      n: fc.integer({ min: 0, max: 100 }),
      meanLog: fc.double({ min: Math.log(50), max: Math.log(600_000), noNaN: true }),
      varLog: fc.double({ min: 0, max: 2, noNaN: true }),
    });
    fc.assert(
      fc.property(
        fc.record({
          elapsed: fc.integer({ min: 0, max: 600_000 }),
          polls: fc.integer({ min: 0, max: 200 }),
          phase: fc.constantFrom(null, 'IN_QUEUE', 'NAVIGATING_WEBSITE', 'EXTRACTING_DATA', 'SOMETHING_NEW'),
          phaseAgo: fc.integer({ min: -5000, max: 600_000 }),
          pre: fc.option(stats),
          extract: fc.option(stats),
          intervalMs: fc.integer({ min: 10, max: 20_000 }),
          minGapMs: fc.integer({ min: 0, max: 5000 }),
        }),
        (c) => {
          const now = T0 + c.elapsed;
          const settings: PollSettings = {
            strategy: 'adaptive',
            intervalMs: c.intervalMs,
            minGapMs: c.minGapMs,
          };
          const at = nextPollAt(
            {
              now,
              taskStartedAt: T0,
              polls: c.polls,
              phase: c.phase,
              phaseSince: now - c.phaseAgo,
              history: { preExtract: c.pre, extract: c.extract },
            },
            settings,
          );
          expect(Number.isFinite(at)).toBe(true);
          expect(at).toBeGreaterThanOrEqual(now + c.minGapMs);
          expect(at).toBeGreaterThanOrEqual(budgetAt(T0, c.polls, c.intervalMs));
          expect(at).toBeGreaterThan(now);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('the budget on the same work: no more polls than fixed on average, and the answer seen soon after the end', () => {
    const z = normals(19);
    const fixed = { polls: 0 };
    const adaptive = { polls: 0, late: [] as number[] };
    const tasks = 2000;
    for (let i = 0; i < tasks; i += 1) {
      const pre = 25_000 * Math.exp(0.25 * z());
      // One task in ten ends without EXTRACTING_DATA (a rejected login, say).
      const extract = i % 10 === 0 ? null : 5000 * Math.exp(0.25 * z());
      fixed.polls += simulate(FIXED, TYPICAL, pre, extract).polls;
      const run = simulate(ADAPTIVE, TYPICAL, pre, extract);
      adaptive.polls += run.polls;
      adaptive.late.push(run.lateMs);
      expect(Math.min(...run.gaps)).toBeGreaterThanOrEqual(1000);
    }
    expect(adaptive.polls / tasks).toBeLessThanOrEqual(fixed.polls / tasks);
    const late = adaptive.late.sort((a, b) => a - b);
    expect(late[Math.floor(tasks / 2)]).toBeLessThanOrEqual(1000);
    expect(late[Math.floor(tasks * 0.9)]).toBeLessThanOrEqual(3000);
  });

  it('the normal distribution helpers agree with each other', () => {
    for (const p of [0.001, 0.03, 0.3, 0.5, 0.9, 0.999])
      expect(normalCdf(normalQuantile(p))).toBeCloseTo(p, 6);
    expect(normalQuantile(0.5)).toBeCloseTo(0, 9);
    expect(normalCdf(1.959964)).toBeCloseTo(0.975, 6);
  });
});

describe('what an ended task teaches', () => {
  it('reads zone-less upstream timestamps as UTC, microseconds cut to milliseconds', () => {
    expect(parseUpstreamTime('2026-11-24T08:00:01.123456')).toBe(T0 + 1123);
    expect(parseUpstreamTime('2026-11-24T08:00:01')).toBe(T0 + 1000);
    expect(parseUpstreamTime('2026-11-24T10:00:01+02:00')).toBe(T0 + 1000);
    for (const bad of [undefined, null, 42, '', 'yesterday', '2026-13-45T99:00:00'])
      expect(parseUpstreamTime(bad)).toBeNull();
  });

  it('times the phases from the upstream’s own timestamps', () => {
    const end = {
      created_at: '2026-11-24T08:00:00.000000',
      updated_at: '2026-11-24T08:00:30.000000',
      interim_results: {},
    };
    // EXTRACTING_DATA seen, begun at 25 s.
    expect(
      taskDurations({ status: 'EXTRACTING_DATA', updated_at: '2026-11-24T08:00:25.000000' }, end),
    ).toEqual({
      preExtractMs: 25_000,
      extractMs: 5000,
    });
    // Skipped (no interim results): the whole task is the time before the end was near.
    expect(taskDurations({ status: 'NAVIGATING_WEBSITE' }, { ...end, interim_results: null })).toEqual({
      preExtractMs: 30_000,
      extractMs: null,
    });
    // Reached EXTRACTING_DATA unseen: begun a typical extraction before the end, or, with no
    // typical extraction known yet, nothing is learnt.
    expect(taskDurations({ status: 'NAVIGATING_WEBSITE' }, end)).toEqual({
      preExtractMs: null,
      extractMs: null,
    });
    expect(taskDurations({ status: 'NAVIGATING_WEBSITE' }, end, 4000)).toEqual({
      preExtractMs: 26_000,
      extractMs: null,
    });
    // Unreadable or backwards timestamps teach nothing.
    expect(taskDurations(null, { ...end, updated_at: 'soon' })).toEqual({
      preExtractMs: null,
      extractMs: null,
    });
    expect(taskDurations(null, { ...end, updated_at: '2026-11-24T07:00:00' })).toEqual({
      preExtractMs: null,
      extractMs: null,
    });
  });
});
