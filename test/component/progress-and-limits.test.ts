/**
 * What a client sees while a check runs (interim documents on the queued CER, X-Progress), and
 * the limits that protect the upstream and the clinic (429 per tenant, security headers).
 */
import type { Bundle, CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { captureLogger, startHarness, TENANT_A_KEY, testConfig, UPSTREAM_KEY } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';

let h: Harness;
beforeAll(async () => {
  // Real-time sandbox (a check takes about 3 s) so the in-flight states can be observed.
  h = await startHarness({ timeScale: 1, pollIntervalMs: 100 });
});
afterAll(async () => {
  await h.stop();
});

describe('while a check runs', () => {
  it('the queued CER shows interim documents during EXTRACTING_DATA, then the final answer', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Prefer', 'wait=0')
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    expect((res.body as CoverageEligibilityResponse).outcome).toBe('queued');
    const path = new URL(String(res.headers.location)).pathname;
    let sawInterim = false;
    let final: CoverageEligibilityResponse | undefined;
    for (let i = 0; i < 100 && !final; i += 1) {
      const read = await request(h.url).get(path).set(h.auth);
      const cer = read.body as CoverageEligibilityResponse;
      if (cer.outcome === 'queued' && /\/fhir\/Binary\//.test(JSON.stringify(cer))) {
        expectValidFhir(cer);
        sawInterim = true;
      }
      if (cer.outcome !== 'queued') final = cer;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(sawInterim).toBe(true);
    expect(final?.outcome).toBe('complete');
  });

  it('the async status URL reports the upstream status in X-Progress', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Prefer', 'respond-async')
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    const status = new URL(String(res.headers['content-location'])).pathname;
    const seen = new Set<string>();
    let answer = await request(h.url).get(status).set(h.auth);
    for (let i = 0; i < 100 && answer.status === 202; i += 1) {
      seen.add(String(answer.headers['x-progress']));
      expect(Number(answer.headers['retry-after'])).toBeGreaterThan(0);
      await new Promise((r) => setTimeout(r, 100));
      answer = await request(h.url).get(status).set(h.auth);
    }
    expect(answer.status).toBe(200);
    expect([...seen].some((s) => /NAVIGATING_WEBSITE|EXTRACTING_DATA|IN_QUEUE/.test(s))).toBe(true);
  });
});

describe('limits and headers', () => {
  it('security headers on every answer, no x-powered-by, request id echoed', async () => {
    const res = await request(h.url).get('/fhir/metadata').set('X-Request-Id', 'req-123');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBeTruthy();
    expect(res.headers['x-powered-by']).toBeUndefined();
    expect(res.headers['x-request-id']).toBe('req-123');
    expect(String(res.headers['content-type'])).toContain('application/fhir+json');
  });

  it('a tenant over its $submit rate gets 429 with Retry-After; another tenant is unaffected', async () => {
    const sandbox = await startSandbox({ port: 0, timeScale: 0.02, apiKeys: [UPSTREAM_KEY] });
    const config = { ...testConfig(sandbox.url), submitRatePerMinute: 3 };
    const server = await startServer(config, captureLogger().logger);
    try {
      const statuses: number[] = [];
      let retryAfter = '';
      for (let i = 0; i < 5; i += 1) {
        const res = await request(server.url)
          .post(SUBMIT)
          .set('Authorization', `Bearer ${TENANT_A_KEY}`)
          .set('Prefer', 'wait=0')
          .set('Content-Type', FHIR_JSON)
          .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
        statuses.push(res.status);
        if (res.status === 429) {
          expectValidFhir(res.body);
          expect((res.body as { issue: { code: string }[] }).issue[0]?.code).toBe('throttled');
          retryAfter = String(res.headers['retry-after']);
        }
      }
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses.slice(3)).toEqual([429, 429]);
      expect(Number(retryAfter)).toBeGreaterThan(0);
      const other = await request(server.url)
        .post(SUBMIT)
        .set('Authorization', 'Bearer tenant-b-inbound-key-7c2f0a')
        .set('Prefer', 'wait=0')
        .set('Content-Type', FHIR_JSON)
        .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
      expect(other.status).toBe(200);
    } finally {
      await server.stop();
      await sandbox.close();
    }
  });
});

describe('Prefer: wait cap and _lastUpdated search', () => {
  let fast: Harness;
  beforeAll(async () => {
    // A fast sandbox: the check ends well inside the capped wait, so the test does not wait 60 s.
    fast = await startHarness({ timeScale: 0.02 });
  });
  afterAll(async () => {
    await fast.stop();
  });

  it('Prefer: wait=999 is capped at 60 s, and Preference-Applied says so', async () => {
    const started = Date.now();
    const res = await request(fast.url)
      .post(SUBMIT)
      .set(fast.auth)
      .set('Prefer', 'wait=999')
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    expect(res.headers['preference-applied']).toBe('wait=60');
    expect((res.body as CoverageEligibilityResponse).outcome).toBe('complete');
    expect(Date.now() - started).toBeLessThan(15_000);
    // A wait under the cap is applied as asked.
    const asked = await request(fast.url)
      .post(SUBMIT)
      .set(fast.auth)
      .set('Prefer', 'wait=7')
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    expectValidFhir(asked.body);
    expect(asked.headers['preference-applied']).toBe('wait=7');
  });

  it('_lastUpdated=ge<today> finds a check made now; _lastUpdated=lt2000-01-01 finds nothing', async () => {
    const today = new Date().toISOString().slice(0, 10);
    const res = await request(fast.url)
      .post(SUBMIT)
      .set(fast.auth)
      .set('Prefer', 'wait=20')
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000002-8' }));
    expectValidFhir(res.body);
    const id = (res.body as CoverageEligibilityResponse).id;
    expect(id).toBeTruthy();

    const recent = await request(fast.url)
      .get(`/fhir/CoverageEligibilityResponse?_lastUpdated=ge${today}&_count=100`)
      .set(fast.auth);
    expect(recent.status).toBe(200);
    expectValidFhir(recent.body);
    const found = recent.body as Bundle<CoverageEligibilityResponse>;
    expect(found.type).toBe('searchset');
    expect(found.total).toBeGreaterThanOrEqual(1);
    expect((found.entry ?? []).map((e) => e.resource?.id)).toContain(id);
    for (const entry of found.entry ?? []) {
      expect(Date.parse(String(entry.resource?.meta?.lastUpdated))).toBeGreaterThanOrEqual(Date.parse(today));
    }

    const old = await request(fast.url)
      .get('/fhir/CoverageEligibilityResponse?_lastUpdated=lt2000-01-01')
      .set(fast.auth);
    expect(old.status).toBe(200);
    expectValidFhir(old.body);
    const none = old.body as Bundle<CoverageEligibilityResponse>;
    expect(none.resourceType).toBe('Bundle');
    expect(none.type).toBe('searchset');
    expect(none.total).toBe(0);
    expect(none.entry ?? []).toHaveLength(0);
  });
});
