/**
 * The rules that protect a clinic: a restart resumes every check without a second real check,
 * failed polls are retried without a new task, and a tenant never has more than maxInFlight
 * upstream tasks running.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { expectValidFhir } from '../support/fhir.js';
import {
  captureLogger,
  countingUpstream,
  startHarness,
  TENANT_A_KEY,
  testConfig,
  trackInFlight,
  UPSTREAM_KEY,
} from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';
const auth = { Authorization: `Bearer ${TENANT_A_KEY}` };

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('resilience', () => {
  it('a restart mid-check resumes polling the same task: one create-task, a final CER', async () => {
    const sandbox = await startSandbox({ port: 0, timeScale: 0.2, apiKeys: [UPSTREAM_KEY] });
    cleanups.push(() => sandbox.close());
    const config = testConfig(sandbox.url, { submitWaitMs: 0 });
    const counts = { create: 0, poll: 0 };
    const first = await startServer(config, captureLogger().logger, { upstream: countingUpstream(counts) });
    const res = await request(first.url)
      .post(SUBMIT)
      .set(auth)
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    expect(res.status).toBe(200);
    expect((res.body as CoverageEligibilityResponse).outcome).toBe('queued');
    const path = new URL(String(res.headers.location)).pathname;
    // Wait until the task exists upstream, then stop the replica while the task is in flight.
    await until(() => Promise.resolve(counts.create === 1 ? true : undefined));
    await first.stop();

    const second = await startServer(config, captureLogger().logger, { upstream: countingUpstream(counts) });
    cleanups.push(() => second.stop());
    const cer = await until(async () => {
      const read = await request(second.url).get(path).set(auth);
      const body = read.body as CoverageEligibilityResponse;
      return body.outcome === 'complete' ? body : undefined;
    });
    expectValidFhir(cer);
    expect(cer.insurance?.[0]?.inforce).toBe(true);
    expect(counts.create).toBe(1);
  });

  it('failing polls (5xx) are retried, never replaced by a second task', async () => {
    const counts = { create: 0, poll: 0 };
    const h = await startHarness({
      faults: { pollErrorRate: 0.5 },
      overrides: { upstream: countingUpstream(counts) },
    });
    cleanups.push(() => h.stop());
    for (let i = 0; i < 3; i += 1) {
      const res = await request(h.url)
        .post(SUBMIT)
        .set(h.auth)
        .set('Content-Type', FHIR_JSON)
        .set('Prefer', 'wait=30')
        .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
      expect(res.status).toBe(200);
      expect((res.body as CoverageEligibilityResponse).outcome).toBe('complete');
    }
    expect(counts.create).toBe(3);
    expect(counts.poll).toBeGreaterThan(3);
  });

  it('a tenant never has more than maxInFlight upstream tasks running; the rest wait as queued', async () => {
    const h = await startHarness({ maxInFlight: 2, timeScale: 0.05, submitWaitMs: 0 });
    cleanups.push(() => h.stop());
    const locations: string[] = [];
    for (let i = 0; i < 6; i += 1) {
      const res = await request(h.url)
        .post(SUBMIT)
        .set(h.auth)
        .set('Content-Type', FHIR_JSON)
        .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
      expect((res.body as CoverageEligibilityResponse).outcome).toBe('queued');
      locations.push(new URL(String(res.headers.location)).pathname);
    }
    const inFlight = trackInFlight(h.sandbox);
    await until(async () => {
      const reads = await Promise.all(locations.map((l) => request(h.url).get(l).set(h.auth)));
      return reads.every((r) => (r.body as CoverageEligibilityResponse).outcome === 'complete')
        ? true
        : undefined;
    }, 30_000);
    inFlight.stop();
    const maxRunning = Math.max(...inFlight.maxByClinic.values());
    expect(maxRunning).toBeGreaterThan(0);
    expect(maxRunning).toBeLessThanOrEqual(2);
  });
});
