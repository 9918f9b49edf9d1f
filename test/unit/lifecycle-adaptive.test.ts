/**
 * Adaptive polling wired into the lifecycle, step by step on a real SQLite store with a scripted
 * upstream port and a controlled clock: the first poll from the payer's history, every poll
 * counted (failed ones too), EXTRACTING_DATA timed from the upstream's timestamps, and the ended
 * task added to the payer's history. (The schedule itself: poll-schedule.test.ts.)
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LifecycleDeps } from '../../src/checks/lifecycle.js';
import { advanceCheck } from '../../src/checks/lifecycle.js';
import { PayerDurationBook } from '../../src/checks/payer-durations.js';
import { MAX_GAP_INTERVALS, conditionalQuantile, quantile } from '../../src/checks/poll-schedule.js';
import { newCheckOf } from '../../src/checks/service.js';
import { openStore } from '../../src/checks/store/open.js';
import type { Check, CheckStore } from '../../src/checks/store/check-store.js';
import type { UpstreamPort, UpstreamResult } from '../../src/upstream/port.js';
import { createLogger } from '../../src/log.js';
import { parseSubmit } from '../../src/mapping/request/parse-submit.js';
import type { Envelope } from '../../src/upstream/contract.js';
import { eligibilityRequest } from '../support/requests.js';
import { LIFECYCLE_TENANT } from '../support/tenants.js';

const TENANT = LIFECYCLE_TENANT;
const POLL = 5000;
const MIN_GAP = 1000;
const T0 = Date.parse('2026-11-23T08:00:00Z');

let store: CheckStore;
let clock: number;
let polls: Array<UpstreamResult<Envelope>>;
let pollsSent: number;

function deps(strategy: 'adaptive' | 'fixed'): LifecycleDeps {
  const upstream: UpstreamPort = {
    createTask: () => Promise.resolve({ ok: true, value: { task_id: 'task-1' } }),
    getResult: () => {
      pollsSent += 1;
      return Promise.resolve(polls.shift() ?? { ok: false, error: { kind: 'timeout' } });
    },
    health: () => Promise.resolve({ ok: true, value: {} }),
  };
  return {
    store,
    upstream,
    tenant: (id) => (id === TENANT.id ? TENANT : undefined),
    logger: createLogger('error'),
    owner: 'test',
    now: () => clock,
    baseUrl: 'http://localhost',
    pollIntervalMs: POLL,
    timeoutMs: () => 300_000,
    slowPollIntervalMs: 30_000,
    backoffGuardMs: 900_000,
    polling: {
      settings: { strategy, intervalMs: POLL, minGapMs: MIN_GAP },
      durations: new PayerDurationBook(store),
    },
  };
}

/** An envelope of task-1, created at T0 on the upstream's clock (zone-less UTC). */
function envelope(status: string, updatedSeconds: number, extra: Partial<Envelope> = {}): Envelope {
  const at = (s: number) => new Date(T0 + s * 1000).toISOString().slice(0, 23) + '000';
  return { task_id: 'task-1', status, created_at: at(0), updated_at: at(updatedSeconds), ...extra };
}

async function newCheck(): Promise<Check> {
  const input = await parseSubmit(eligibilityRequest({ payer: 'DAMAN' }), {
    practiceId: 'P-1',
    now: new Date(clock),
  });
  const { check } = await store.insert(
    newCheckOf(input, {
      id: 'chk-1',
      tenantId: TENANT.id,
      now: clock,
      timeoutMs: 300_000,
      baseUrl: 'http://localhost',
    }),
  );
  return check;
}

/** Moves the clock to the check's next run and runs that step. */
async function nextStep(d: LifecycleDeps): Promise<Check> {
  const before = (await store.get(TENANT.id, 'chk-1'))!;
  clock = Math.max(clock, before.nextRunAt);
  const claimed = await store.claimDue({
    owner: `t:${clock}`,
    now: clock,
    leaseMs: 60_000,
    limit: 10,
    maxInFlight: () => 3,
  });
  for (const check of claimed) await advanceCheck(check, d);
  return (await store.get(TENANT.id, 'chk-1'))!;
}

beforeEach(async () => {
  store = await openStore('sqlite::memory:');
  await store.migrate();
  clock = T0;
  polls = [];
  pollsSent = 0;
});
afterEach(async () => {
  await store.close();
});

describe('adaptive polling in the lifecycle', () => {
  it('times polls from the payer history and the phase, counts every poll, and learns from the ended task', async () => {
    for (let i = 0; i < 5; i += 1)
      await store.recordPayerDurations(
        'DAMAN',
        { preExtractMs: 20_000 + i * 2000, extractMs: 4000 + i * 500 },
        T0,
      );
    const history = (await store.getPayerDurations('DAMAN'))!;
    const d = deps('adaptive');
    await newCheck();
    const created = await nextStep(d);
    expect(created).toMatchObject({ state: 'polling', taskStartedAt: T0, taskPolls: 0 });
    // Sparse early: the first poll where a tenth of this payer's tasks have moved on, at most
    // MAX_GAP_INTERVALS intervals away.
    expect(created.nextRunAt - T0).toBe(
      Math.min(Math.round(quantile(history.preExtract!, 0.1)), MAX_GAP_INTERVALS * POLL),
    );

    // A failed poll counts, and backs off as before (never under the interval or the minimum gap).
    polls = [{ ok: false, error: { kind: 'http', status: 502 } }];
    const failed = await nextStep(d);
    expect(failed.taskPolls).toBe(1);
    expect(failed.nextRunAt - clock).toBe(POLL);

    polls = [{ ok: true, value: envelope('NAVIGATING_WEBSITE', 1) }];
    const navigating = await nextStep(d);
    expect(navigating.taskPolls).toBe(2);
    expect(navigating.nextRunAt - clock).toBeGreaterThanOrEqual(MIN_GAP);

    // EXTRACTING_DATA since 21 s on the upstream's clock: the next poll from that phase's history.
    clock = T0 + 23_000;
    polls = [{ ok: true, value: envelope('EXTRACTING_DATA', 21, { interim_results: null }) }];
    const extracting = await nextStep(d);
    expect(extracting.taskPolls).toBe(3);
    const expected = T0 + 21_000 + conditionalQuantile(history.extract!, 2000, 0.4);
    expect(Math.abs(extracting.nextRunAt - Math.max(expected, clock + MIN_GAP))).toBeLessThan(2);

    polls = [
      {
        ok: true,
        value: envelope('PROCESS_COMPLETE', 26, {
          eligibility_result: {
            status: 'found',
            data_dump: { status: 'found', data: { is_eligible: true } },
          },
        }),
      },
    ];
    const done = await nextStep(d);
    expect(done.state).toBe('done');
    expect(pollsSent).toBe(4);
    // The task's own durations joined the history: 21 s before extraction, 5 s of it.
    const learnt = (await store.getPayerDurations('DAMAN'))!;
    expect(learnt.preExtract!.n).toBe(6);
    expect(learnt.extract!.n).toBe(6);
    const w = 1 / 6;
    expect(learnt.preExtract!.meanLog).toBeCloseTo(
      history.preExtract!.meanLog + w * (Math.log(21_000) - history.preExtract!.meanLog),
      9,
    );
    expect(learnt.extract!.meanLog).toBeCloseTo(
      history.extract!.meanLog + w * (Math.log(5000) - history.extract!.meanLog),
      9,
    );
  });

  it('learns only from a portal session that ran to an answer: a refused login teaches nothing', async () => {
    for (let i = 0; i < 5; i += 1)
      await store.recordPayerDurations('DAMAN', { preExtractMs: 20_000, extractMs: 4000 }, T0);
    const d = deps('adaptive');
    await newCheck();
    await nextStep(d);
    polls = [
      {
        ok: true,
        value: envelope('PROCESS_COMPLETE', 2, {
          eligibility_result: { status: 'invalid_credentials', data_dump: { status: 'invalid_credentials' } },
        }),
      },
    ];
    expect((await nextStep(d)).state).toBe('done');
    const history = (await store.getPayerDurations('DAMAN'))!;
    expect(history.preExtract!.n).toBe(5);
  });

  it('fixed: every interval, no poll count or task start written, nothing learnt', async () => {
    for (let i = 0; i < 5; i += 1)
      await store.recordPayerDurations('DAMAN', { preExtractMs: 20_000, extractMs: 4000 }, T0);
    const d = deps('fixed');
    await newCheck();
    const created = await nextStep(d);
    expect(created).toMatchObject({ nextRunAt: T0 + POLL, taskStartedAt: null, taskPolls: 0 });
    polls = [{ ok: true, value: envelope('EXTRACTING_DATA', 3) }];
    const extracting = await nextStep(d);
    expect(extracting).toMatchObject({ nextRunAt: clock + POLL, taskPolls: 0 });
    polls = [
      {
        ok: true,
        value: envelope('PROCESS_COMPLETE', 8, {
          eligibility_result: {
            status: 'found',
            data_dump: { status: 'found', data: { is_eligible: true } },
          },
        }),
      },
    ];
    expect((await nextStep(d)).state).toBe('done');
    expect((await store.getPayerDurations('DAMAN'))!.preExtract!.n).toBe(5);
  });
});
