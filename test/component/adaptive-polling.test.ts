/**
 * POLL_STRATEGY on the sandbox, over real HTTP: the same seeded work (the sandbox's spread of
 * durations per payer, one seed, the same identifiers) polled `fixed` and `adaptive`, with every
 * poll of every task recorded at the upstream port.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import type { UpstreamPort } from '../../src/upstream/port.js';
import type { Harness, HarnessOptions } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { expectValidFhir } from '../support/fhir.js';
import { until } from '../support/until.js';
import { emiratesId } from '../support/emirates-id.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const INTERVAL = 200;
const MIN_GAP = 100;

/** Per upstream task: when create-task answered, then when each poll went out. */
type Timeline = Map<string, number[]>;

function recording(timeline: Timeline): (inner: UpstreamPort) => UpstreamPort {
  return (inner) => ({
    createTask: async (creds, body) => {
      const result = await inner.createTask(creds, body);
      if (result.ok) timeline.set(result.value.task_id, [Date.now()]);
      return result;
    },
    getResult: (creds, id) => {
      timeline.get(id)?.push(Date.now());
      return inner.getResult(creds, id);
    },
    health: () => inner.health(),
  });
}

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

async function start(strategy: 'fixed' | 'adaptive', timeline: Timeline): Promise<Harness> {
  const options: HarnessOptions = {
    pollStrategy: strategy,
    pollIntervalMs: INTERVAL,
    minPollGapMs: MIN_GAP,
    // Navigation 1-3 s, extraction 150-450 ms per task (the seeded profiles at timeScale 0.05).
    durationSeed: 7,
    timeScale: 0.05,
    maxInFlight: 10,
    overrides: { upstream: recording(timeline) },
  };
  return startHarness(options);
}

/** Runs checks for these identifiers at once, to their final CER; returns the CERs. */
async function runChecks(harness: Harness, ids: string[]): Promise<CoverageEligibilityResponse[]> {
  const locations = await Promise.all(
    ids.map(async (emiratesId) => {
      const res = await request(harness.url)
        .post(SUBMIT)
        .set(harness.auth)
        .set('Prefer', 'wait=0')
        .set('Content-Type', 'application/fhir+json')
        .send(eligibilityRequest({ emiratesId, payer: 'DAMAN' }));
      expect(res.status).toBeLessThan(300);
      return new URL(String(res.headers.location)).pathname;
    }),
  );
  return Promise.all(
    locations.map((path) =>
      until(
        async () => {
          const cer = (await request(harness.url).get(path).set(harness.auth))
            .body as CoverageEligibilityResponse;
          return cer.outcome === 'queued' ? undefined : cer;
        },
        30_000,
        'a final CER',
      ),
    ),
  );
}

/** The gaps of each task: create-task answer -> first poll, then poll -> poll. */
function gapsOf(timeline: Timeline): number[][] {
  return [...timeline.values()].map((times) => times.slice(1).map((t, i) => t - times[i]!));
}

const WARM_UP = ['784-1990-5550001-3', '784-1990-5550002-1', '784-1990-5550003-9'];
const MEASURED = ['784-1990-5550011-2', '784-1990-5550012-0', '784-1990-5550013-8', '784-1990-5550014-6'];

describe('POLL_STRATEGY', () => {
  it('fixed polls every POLL_INTERVAL_MS and learns nothing; adaptive polls sparse early, never closer than MIN_POLL_GAP_MS, fewer times on the same work', async () => {
    const fixed: Timeline = new Map();
    h = await start('fixed', fixed);
    for (const cer of await runChecks(h, [...WARM_UP, ...MEASURED])) {
      expect(cer.outcome).toBe('complete');
      expectValidFhir(cer);
    }
    for (const gaps of gapsOf(fixed)) {
      expect(gaps.length).toBeGreaterThan(2);
      // Every poll one interval after the last (the scheduler's rounds add a little lateness).
      for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(INTERVAL - 5);
    }
    expect(await h.server.store.getPayerDurations('DAMAN')).toBeNull();
    const fixedMeasured = [...fixed.values()].slice(WARM_UP.length).map((t) => t.length - 1);
    await h.stop();

    const adaptive: Timeline = new Map();
    h = await start('adaptive', adaptive);
    // The payer's first tasks teach its durations (polled at the fixed cadence meanwhile). A task
    // whose EXTRACTING_DATA fell between two polls teaches its extraction nothing, so more
    // rounds of the same work until three were seen.
    for (let round = 0; round < 6; round += 1) {
      const learnt = await h.server.store.getPayerDurations('DAMAN');
      if ((learnt?.preExtract?.n ?? 0) >= 3 && (learnt?.extract?.n ?? 0) >= 3) break;
      await runChecks(
        h,
        WARM_UP.map((_, i) => emiratesId(1990, `55501${round}${i}`)),
      );
    }
    const learnt = await h.server.store.getPayerDurations('DAMAN');
    expect(learnt?.preExtract?.n).toBeGreaterThanOrEqual(3);
    expect(learnt?.extract?.n).toBeGreaterThanOrEqual(3);
    adaptive.clear();
    for (const cer of await runChecks(h, MEASURED)) {
      expect(cer.outcome).toBe('complete');
      expectValidFhir(cer);
    }
    const gaps = gapsOf(adaptive);
    expect(gaps).toHaveLength(MEASURED.length);
    for (const task of gaps) {
      // Sparse early: the first poll waits for where this payer's fastest tasks move on (over a second here).
      expect(task[0]).toBeGreaterThan(2 * INTERVAL);
      for (const gap of task) expect(gap).toBeGreaterThanOrEqual(MIN_GAP - 5);
    }
    // The same tasks (same seed, same identifiers, so the same durations) cost fewer polls.
    const adaptivePolls = [...adaptive.values()].map((t) => t.length - 1);
    expect(adaptivePolls.reduce((a, b) => a + b, 0)).toBeLessThan(fixedMeasured.reduce((a, b) => a + b, 0));
  });
});
