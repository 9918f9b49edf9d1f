/**
 * The CER read is matched by the app ahead of the /fhir router (src/http/app.ts, a direct route):
 * everything the router did before it still happens, in the same order: the security headers, the
 * request id and log line, CORS, content negotiation, authentication and tenant isolation, the
 * conditional read, the audit trail and the error answers.
 */
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { submitFinal } from '../support/submit.js';

const EHR = 'https://ehr.clinic-a.example';

let h: Harness;
let path: string;

beforeAll(async () => {
  h = await startHarness({ corsOrigins: [EHR] });
  path = await submitFinal(h.url, h.auth, { emiratesId: '784-1990-0000001-0' });
});
afterAll(async () => {
  await h.stop();
});

interface Layer {
  route?: { path: string };
  match?: (path: string) => unknown;
  handle?: { stack?: unknown[] };
}

function requestLines(): Record<string, unknown>[] {
  return h.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.message === 'request');
}

describe('the CER read as a direct route', () => {
  it("is not taken by the CER read lane when CORS is configured (the CORS headers are the app's)", () => {
    expect(h.server.readLane).toBeUndefined();
  });

  it('is matched by the app before the /fhir router is entered', () => {
    const stack = (h.server.app as unknown as { router: { stack: Layer[] } }).router.stack;
    const direct = stack.findIndex((l) => l.route?.path === '/fhir/CoverageEligibilityResponse/:id');
    const router = stack.findIndex((l) => !l.route && l.handle?.stack && l.match?.('/fhir/metadata'));
    expect(direct).toBeGreaterThan(-1);
    expect(router).toBeGreaterThan(direct);
  });

  it('answers with the security headers, the request id, CORS, the ETag and the log line of the route', async () => {
    const res = await request(h.url).get(path).set(h.auth).set('Origin', EHR).set('X-Request-Id', 'req-4711');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['x-powered-by']).toBeUndefined();
    expect(res.headers['x-request-id']).toBe('req-4711');
    expect(res.headers['access-control-allow-origin']).toBe(EHR);
    expect(res.headers.etag).toMatch(/^W\/"\d+"$/);
    expect(res.headers['last-modified']).toBeDefined();
    const line = requestLines().find((l) => l.requestId === 'req-4711');
    expect(line).toMatchObject({
      method: 'GET',
      route: '/fhir/CoverageEligibilityResponse/:id',
      status: 200,
      tenant: 'clinic-a',
    });

    const again = await request(h.url).get(path).set(h.auth).set('If-None-Match', String(res.headers.etag));
    expect(again.status).toBe(304);
    expect(again.headers.etag).toBe(res.headers.etag);
  });

  it('negotiates the format before authentication, as every /fhir route', async () => {
    const xml = await request(h.url).get(path).set('Accept', 'application/fhir+xml');
    expect(xml.status).toBe(406);
    const format = await request(h.url).get(`${path}?_format=xml`).set(h.auth);
    expect(format.status).toBe(406);
    expect(format.body).toMatchObject({ resourceType: 'OperationOutcome' });
  });

  it('refuses without a key, with a wrong key, and answers 404 to another tenant', async () => {
    const none = await request(h.url).get(path);
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ resourceType: 'OperationOutcome' });
    const wrong = await request(h.url).get(path).set('Authorization', 'Bearer not-a-key');
    expect(wrong.status).toBe(401);
    const other = await request(h.url).get(path).set(h.authB);
    expect(other.status).toBe(404);
    expect(other.body).toMatchObject({ resourceType: 'OperationOutcome' });
    const unknown = await request(h.url).get('/fhir/CoverageEligibilityResponse/no-such-check').set(h.auth);
    expect(unknown.status).toBe(404);
  });

  it('leaves the other reads of a CER to the router', async () => {
    const etag = String((await request(h.url).get(path).set(h.auth)).headers.etag);
    const version = /"(\d+)"/.exec(etag)?.[1];
    const vread = await request(h.url).get(`${path}/_history/${version}`).set(h.auth);
    expect(vread.status).toBe(200);
    const search = await request(h.url).get('/fhir/CoverageEligibilityResponse?_count=1').set(h.auth);
    expect(search.status).toBe(200);
    expect(search.body).toMatchObject({ resourceType: 'Bundle' });
  });
});
