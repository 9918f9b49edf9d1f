/**
 * No patient data and no secret in any log line, at debug level, across good checks, error
 * outcomes and rejected input. Reads the real log output of the running service.
 */
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness, TENANT_A_KEY, TENANT_B_KEY, UPSTREAM_KEY } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ faults: { pollErrorRate: 0.3 } });
});
afterAll(async () => {
  await h.stop();
});

describe('log privacy', () => {
  it('keeps Emirates IDs, card numbers, names, phones, dates of birth and keys out of every line', async () => {
    const emiratesIds = ['784-1990-1234567-1', '784-1985-7654321-2'];
    const cardNumber = '9876543210123456';
    for (const emiratesId of emiratesIds) {
      const res = await request(h.url)
        .post(SUBMIT)
        .set(h.auth)
        .set('Content-Type', FHIR_JSON)
        .send(eligibilityRequest({ emiratesId }));
      expect(res.status).toBeLessThan(500);
    }
    await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ cardNumber }));
    // Rejected input that carries patient data.
    const bad = { ...eligibilityRequest({ emiratesId: emiratesIds[0] }), status: 'not-a-status' };
    await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(bad);
    await request(h.url)
      .post(SUBMIT)
      .set(h.authB)
      .set('Content-Type', FHIR_JSON)
      .send('{"name":"Aisha Testpatient"');
    await request(h.url).get('/fhir/CoverageEligibilityResponse?patient=784-1990-1234567-1').set(h.auth);

    expect(h.logs.length).toBeGreaterThan(5);
    const text = h.logs.join('\n');
    const forbidden = [
      ...emiratesIds,
      ...emiratesIds.map((id) => id.replace(/-/g, '')),
      cardNumber,
      'Aisha',
      'Testpatient',
      '+971501112233',
      '971501112233',
      '1988-04-12',
      UPSTREAM_KEY,
      TENANT_A_KEY,
      TENANT_B_KEY,
    ];
    for (const value of forbidden) expect(text, `log output contains ${value}`).not.toContain(value);
    // The request log is there, with method, route, status and request id.
    const requestLines = h.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.status);
    expect(requestLines.length).toBeGreaterThan(3);
    expect(requestLines[0]).toMatchObject({ method: expect.any(String), requestId: expect.any(String) });
  });
});
