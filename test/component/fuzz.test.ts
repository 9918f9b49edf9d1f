/**
 * Hostile input at the HTTP level: seeded mutations of valid $submit bodies (fields dropped and
 * retyped, huge strings and arrays, deep nesting, hostile unicode, invalid UTF-8, duplicate and
 * prototype keys). Every answer is below 500, a valid OperationOutcome or CER, and small; the
 * process stays healthy and what was stored before is still there, unchanged.
 * `npm run fuzz` runs the same cases 100,000 times (bench/fuzz.ts).
 */
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runFuzz } from '../support/fuzz.js';
import type { Harness } from '../support/harness.js';
import { startHarness, TENANT_A_KEY } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);
const RUNS = Number(process.env.FUZZ_RUNS ?? 3000);

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ submitWaitMs: 0 });
});
afterAll(async () => {
  await h.stop();
});

describe('property: mutated $submit requests', () => {
  it(`${RUNS} seeded cases (seed ${SEED}): no 5xx, every answer valid and small, the service healthy after`, async () => {
    // A finished check stored before the storm.
    const before = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Prefer', 'wait=10')
      .send(eligibilityRequest());
    expect(before.status, JSON.stringify(before.body)).toBe(200);
    const location = new URL(String(before.headers.location)).pathname;
    await until(async () => {
      const read = await request(h.url).get(location).set(h.auth);
      return (read.body as { outcome?: string }).outcome !== 'queued' ? true : undefined;
    });
    const stored = await request(h.url).get(location).set(h.auth);

    const report = await runFuzz({
      url: h.url,
      authorization: `Bearer ${TENANT_A_KEY}`,
      seed: SEED,
      runs: RUNS,
      stopOnFailure: true,
    });
    expect(report.failures).toEqual([]);
    expect(report.sent).toBe(RUNS);
    // The mutations reach every kind of answer, not only the first guard.
    expect(Object.keys(report.byStatus).sort()).toEqual(expect.arrayContaining(['200', '400', '413', '415']));

    const health = await request(h.url).get('/health');
    expect(health.status).toBe(200);
    const after = await request(h.url).get(location).set(h.auth);
    expect(after.status).toBe(200);
    expect(after.body).toEqual(stored.body);
    const fresh = await request(h.url).post(SUBMIT).set(h.auth).send(eligibilityRequest());
    expect(fresh.status).toBe(200);
    expect(h.logs.filter((line) => line.includes('"level":"error"'))).toEqual([]);
  }, 240_000);
});
