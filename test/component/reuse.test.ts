/**
 * Reuse of recent answers (docs/batch-and-reuse.md), against the sandbox over real HTTP: a final
 * found-member answer for the same tenant, payer, patient identifier and visit type is answered
 * again (same CER, Location, Age, no upstream call); Cache-Control no-cache and max-age miss; no
 * reuse across tenants, of errors, or of member-not-found; a batch entry is reused too; the
 * request identifier keeps precedence; the metric counts reuses.
 */
import type { Bundle, CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';

const counts = { create: 0, poll: 0 };
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ reuseWindowMinutes: 240, overrides: { upstream: countingUpstream(counts) } });
});
afterAll(async () => {
  await h.stop();
});

async function submit(
  options: RequestOptions,
  headers: Record<string, string> = {},
  auth: { Authorization: string } = h.auth,
) {
  const res = await postSubmit(h.url, auth, options, { Prefer: 'wait=10', ...headers });
  expectValidFhir(res.body);
  return res;
}

const PATIENT = '784-1986-5551234-5';

describe('reuse of a recent answer', () => {
  it('answers the same CER again with Age and no upstream call; no-cache and max-age=0 make a new check', async () => {
    const first = await submit({ emiratesId: PATIENT });
    expect(first.status).toBe(200);
    const firstCer = first.body as CoverageEligibilityResponse;
    expect(firstCer.outcome).toBe('complete');
    expect(first.headers.age).toBeUndefined();

    const before = { ...counts };
    const again = await submit({ emiratesId: PATIENT });
    expect(again.status).toBe(200);
    expect(again.headers.location).toBe(first.headers.location);
    expect(Number(again.headers.age)).toBeGreaterThanOrEqual(0);
    expect(again.headers['last-modified']).toBeDefined();
    const cer = again.body as CoverageEligibilityResponse;
    expect(cer.id).toBe(firstCer.id);
    // When the check was made: its created time, as the first answer said it.
    expect(cer.created).toBe(firstCer.created);
    expect(counts).toEqual(before);

    // A narrower window that still holds it: reused; the metric counts it.
    const wide = await submit({ emiratesId: PATIENT }, { 'Cache-Control': 'max-age=3600' });
    expect(wide.headers.location).toBe(first.headers.location);
    const metrics = await request(h.url).get('/metrics');
    expect(metrics.text).toMatch(/checks_reused_total\{tenant="clinic-a"\} 2/);

    const fresh = await submit({ emiratesId: PATIENT }, { 'Cache-Control': 'no-cache' });
    expect(fresh.headers.location).not.toBe(first.headers.location);
    expect(fresh.headers.age).toBeUndefined();
    expect(counts.create).toBe(before.create + 1);

    const narrow = await submit({ emiratesId: PATIENT }, { 'Cache-Control': 'max-age=0' });
    expect(narrow.headers.location).not.toBe(first.headers.location);
    expect(counts.create).toBe(before.create + 2);
  });

  it('never for another service asked about (the visit category), which is another portal question', async () => {
    const patient = '784-1986-5559876-5';
    const consultation = await submit({ emiratesId: patient, category: '3' });
    expect((consultation.body as CoverageEligibilityResponse).outcome).toBe('complete');
    const before = { ...counts };
    // Category 2 (a procedure in the mapping table): another extra_args.title, so a new check.
    const procedure = await submit({ emiratesId: patient, category: '2' });
    expect(procedure.status).toBe(200);
    expect(procedure.headers.location).not.toBe(consultation.headers.location);
    expect(procedure.headers.age).toBeUndefined();
    expect(counts.create).toBe(before.create + 1);
    // The same category again is reused.
    const again = await submit({ emiratesId: patient, category: '2' });
    expect(again.headers.location).toBe(procedure.headers.location);
    expect(counts.create).toBe(before.create + 1);
  });

  it('never across tenants or payers, nor for errors (a failed check) and member-not-found', async () => {
    const id = '784-1986-5554321-7';
    const first = await submit({ emiratesId: id });
    expect((first.body as CoverageEligibilityResponse).outcome).toBe('complete');
    const before = counts.create;
    const otherTenant = await submit({ emiratesId: id }, {}, h.authB);
    expect(otherTenant.headers.location).not.toBe(first.headers.location);
    const otherPayer = await submit({ emiratesId: id, payer: 'NAS' });
    expect(otherPayer.headers.location).not.toBe(first.headers.location);
    expect(counts.create).toBe(before + 2);

    // member not found (200 with an OperationOutcome) and a failed check (an error): never reused.
    for (const errorId of ['784-1990-0000003-6', '784-1990-0000005-1']) {
      const a = await submit({ emiratesId: errorId });
      const b = await submit({ emiratesId: errorId });
      expect(b.headers.location).not.toBe(a.headers.location);
      expect(b.headers.age).toBeUndefined();
    }
    expect(counts.create).toBeGreaterThanOrEqual(before + 6);
  });

  it('the newest answer decides: after a refusal, the older found answer is not reused', async () => {
    const id = '784-1986-5558888-1';
    const first = await submit({ emiratesId: id });
    expect((first.body as CoverageEligibilityResponse).outcome).toBe('complete');
    const { store } = h.server;
    await store.putGuard({
      tenantId: 'clinic-a',
      payerCode: 'DAMAN',
      kind: 'credentials',
      until: null,
      reason: 'test',
      openedAt: Date.now(),
    });
    try {
      // While the guard is open, the found answer is still given again (no upstream call).
      const reused = await submit({ emiratesId: id });
      expect(reused.headers.location).toBe(first.headers.location);
      const refused = await submit({ emiratesId: id }, { 'Cache-Control': 'no-cache' });
      expect(refused.status).toBe(422);
    } finally {
      await store.deleteGuard('clinic-a', 'DAMAN');
    }
    const before = counts.create;
    const again = await submit({ emiratesId: id });
    expect(again.headers.location).not.toBe(first.headers.location);
    expect(again.headers.age).toBeUndefined();
    expect(counts.create).toBe(before + 1);
  });

  it('the request identifier takes precedence; a batch entry is reused too', async () => {
    const id = '784-1986-5557777-7';
    const first = await submit({ emiratesId: id, identifier: 'reuse-precedence-1' });
    // The same identifier: that check (idempotency), not a reuse.
    const same = await submit({ emiratesId: id, identifier: 'reuse-precedence-1' });
    expect(same.headers.location).toBe(first.headers.location);
    expect(same.headers.age).toBeUndefined();

    const before = { ...counts };
    const res = await request(h.url)
      .post('/fhir')
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(
        JSON.stringify({
          resourceType: 'Bundle',
          type: 'batch',
          entry: [
            {
              resource: eligibilityRequest({ emiratesId: id }),
              request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
            },
          ],
        }),
      );
    expect(res.status).toBe(200);
    const bundle = res.body as Bundle;
    expectValidFhir(bundle);
    expect(bundle.entry?.[0]?.response?.location).toBe(first.headers.location);
    expect((bundle.entry?.[0]?.resource as CoverageEligibilityResponse).outcome).toBe('complete');
    expect(counts).toEqual(before);
  });
});
