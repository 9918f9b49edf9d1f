/**
 * CORS: off by default; with CORS_ORIGINS, only those origins, a preflight that allows the headers
 * a FHIR client sends, and the answer headers it must read exposed.
 */
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

const EHR = 'https://ehr.clinic-a.example';

let h: Harness;
let off: Harness;

beforeAll(async () => {
  [h, off] = await Promise.all([startHarness({ corsOrigins: [EHR] }), startHarness()]);
});
afterAll(async () => {
  await Promise.all([h.stop(), off.stop()]);
});

describe('CORS', () => {
  it('a preflight from an allowed origin allows the methods and headers of a FHIR client', async () => {
    const res = await request(h.url)
      .options('/fhir/CoverageEligibilityRequest/$submit')
      .set('Origin', EHR)
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization, content-type, prefer');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(EHR);
    expect(String(res.headers['access-control-allow-methods']).split(',')).toEqual(
      expect.arrayContaining(['GET', 'POST', 'DELETE']),
    );
    const allowed = String(res.headers['access-control-allow-headers']).toLowerCase().split(',');
    expect(allowed).toEqual(
      expect.arrayContaining(['authorization', 'content-type', 'prefer', 'if-none-match']),
    );
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('an answer to an allowed origin exposes Location, ETag and Content-Location', async () => {
    const res = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Origin', EHR)
      .set('Prefer', 'wait=10')
      .send(eligibilityRequest());
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(EHR);
    const exposed = String(res.headers['access-control-expose-headers']).split(',');
    expect(exposed).toEqual(expect.arrayContaining(['Location', 'ETag', 'Content-Location']));
  });

  it('another origin gets no CORS headers, preflight or not', async () => {
    const preflight = await request(h.url)
      .options('/fhir/metadata')
      .set('Origin', 'https://evil.example')
      .set('Access-Control-Request-Method', 'GET');
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
    const read = await request(h.url).get('/fhir/metadata').set('Origin', 'https://evil.example');
    expect(read.status).toBe(200);
    expect(read.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('the CapabilityStatement says whether CORS is served', async () => {
    const on = await request(h.url).get('/fhir/metadata');
    const without = await request(off.url).get('/fhir/metadata');
    const cors = (body: unknown) =>
      (body as { rest: { security?: { cors?: boolean } }[] }).rest[0]?.security?.cors;
    expect(cors(on.body)).toBe(true);
    expect(cors(without.body)).toBe(false);
  });

  it('without CORS_ORIGINS, no CORS headers at all', async () => {
    const read = await request(off.url).get('/fhir/metadata').set('Origin', EHR);
    expect(read.status).toBe(200);
    expect(read.headers['access-control-allow-origin']).toBeUndefined();
    const preflight = await request(off.url)
      .options('/fhir/metadata')
      .set('Origin', EHR)
      .set('Access-Control-Request-Method', 'GET');
    expect(preflight.headers['access-control-allow-origin']).toBeUndefined();
  });
});
