/**
 * Batch (POST /fhir with a Bundle of type batch, docs/batch-and-reuse.md), against the sandbox
 * over real HTTP: a 40-entry batch with bad entries mixed in is answered at once, in order, each
 * entry as a single $submit would answer it; every good check then finishes within maxInFlight,
 * with one create-task each; progress and search by batch; 501 entries are refused and nothing is
 * stored.
 */
import type {
  Bundle,
  CoverageEligibilityRequest,
  CoverageEligibilityResponse,
  OperationOutcome,
} from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness, trackInFlight } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';
import { emiratesId } from '../support/emirates-id.js';

const MAX_IN_FLIGHT = 2;
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ maxInFlight: MAX_IN_FLIGHT, reuseWindowMinutes: 240 });
});
afterAll(async () => {
  await h.stop();
});

/** An Emirates ID the sandbox answers eligible (no scenario uses these serials). */
const eligibleId = (n: number) => emiratesId(1985, 5550000 + n);

const submitEntry = (resource: unknown, method = 'POST', url = 'CoverageEligibilityRequest/$submit') => ({
  resource,
  request: { method, url },
});

function postBatch(bundle: unknown, headers: Record<string, string> = {}) {
  return request(h.url)
    .post('/fhir')
    .set(h.auth)
    .set(headers)
    .set('Content-Type', 'application/fhir+json')
    .send(JSON.stringify(bundle));
}

async function storedCount(): Promise<number> {
  const res = await request(h.url).get('/fhir/CoverageEligibilityResponse?_summary=count').set(h.auth);
  return (res.body as Bundle).total ?? -1;
}

describe('batch', () => {
  it('answers 40 entries at once in order; bad entries fail alone; every good check finishes within maxInFlight', async () => {
    const createsBefore = h.sandbox.control.stats().tasksCreated;
    const first = eligibilityRequest({ emiratesId: eligibleId(0) });
    const second = eligibilityRequest({ emiratesId: eligibleId(1) });
    const entries: unknown[] = [];
    const expected: string[] = [];
    for (let i = 0; i < 40; i += 1) {
      if (i === 5) {
        entries.push(submitEntry(eligibilityRequest(), 'GET'));
        expected.push('405');
      } else if (i === 2 || i === 3) {
        // request.url also with a leading / or /fhir/ (relative to the server base).
        const url =
          i === 2 ? '/fhir/CoverageEligibilityRequest/$submit' : '/CoverageEligibilityRequest/$submit';
        entries.push(submitEntry(eligibilityRequest({ emiratesId: eligibleId(i) }), 'POST', url));
        expected.push('200');
      } else if (i === 11) {
        entries.push(submitEntry(eligibilityRequest(), 'POST', 'Patient'));
        expected.push('400');
      } else if (i === 17) {
        entries.push(submitEntry({ resourceType: 'CoverageEligibilityRequest', status: 'nonsense' }));
        expected.push('400');
      } else if (i === 23) {
        const noPayer = eligibilityRequest({ emiratesId: eligibleId(i) });
        noPayer.contained = noPayer.contained?.filter((r) => r.resourceType !== 'Organization');
        noPayer.insurer = { display: 'Some payer' };
        entries.push(submitEntry(noPayer));
        expected.push('422');
      } else if (i === 29) {
        // The same identifier and question as entry 0: the same check (idempotency per entry).
        entries.push(submitEntry(first));
        expected.push('200');
      } else if (i === 35) {
        // Entry 1's identifier for another patient: 409, as $submit answers it.
        entries.push(
          submitEntry({
            ...eligibilityRequest({ emiratesId: eligibleId(99) }),
            identifier: second.identifier,
          } satisfies CoverageEligibilityRequest),
        );
        expected.push('409');
      } else {
        entries.push(
          submitEntry(i === 0 ? first : i === 1 ? second : eligibilityRequest({ emiratesId: eligibleId(i) })),
        );
        expected.push('200');
      }
    }
    const inFlight = trackInFlight(h.sandbox);
    try {
      const res = await postBatch({ resourceType: 'Bundle', type: 'batch', entry: entries });
      expect(res.status).toBe(200);
      const bundle = res.body as Bundle;
      expectValidFhir(bundle);
      expect(bundle.type).toBe('batch-response');
      expect(bundle.entry?.map((e) => e.response?.status.slice(0, 3))).toEqual(expected);
      // Good entries: a queued (or already final) CER with its location; bad ones: an OperationOutcome.
      const good = bundle.entry!.filter((e) => e.response?.status.startsWith('200'));
      for (const entry of good) {
        expect(entry.response?.location).toMatch(/\/fhir\/CoverageEligibilityResponse\/[0-9a-f-]+$/);
        expect(entry.resource?.resourceType).toBe('CoverageEligibilityResponse');
      }
      // Bad ones: the OperationOutcome as the entry's resource and as response.outcome.
      for (const entry of bundle.entry!.filter((e) => !e.response?.status.startsWith('200'))) {
        expect(entry.resource?.resourceType).toBe('OperationOutcome');
        expect(entry.resource).toEqual(entry.response?.outcome);
      }
      const issueOf = (i: number) => (bundle.entry![i]!.response!.outcome as OperationOutcome).issue[0];
      expect(bundle.entry![29]!.response!.location).toBe(bundle.entry![0]!.response!.location);
      expect(issueOf(5)?.expression).toEqual(['Bundle.entry[5].request.method']);
      expect(issueOf(11)?.expression).toEqual(['Bundle.entry[11].request.url']);
      expect(issueOf(23)?.expression).toEqual(['CoverageEligibilityRequest.insurer']);
      expect(issueOf(35)?.code).toBe('conflict');
      const uniqueChecks = new Set(good.map((e) => e.response!.location)).size;
      expect(uniqueChecks).toBe(34);

      // Progress: the async status of the batch, until every check is final.
      const status = `/fhir/_async/${bundle.id}`;
      const progress = await request(h.url).get(status).set(h.auth);
      if (progress.status === 202) expect(progress.headers['x-progress']).toMatch(/^\d+ of 35 checks final$/);
      const final = await until(
        async () => {
          const r = await request(h.url).get(status).set(h.auth);
          return r.status === 200 ? (r.body as Bundle) : undefined;
        },
        30_000,
        'every check of the batch final',
      );
      expectValidFhir(final);
      expect(final.entry?.map((e) => e.response?.status.slice(0, 3))).toEqual(expected);
      for (const entry of final.entry!.filter((e) => e.response?.status.startsWith('200')))
        expect((entry.resource as CoverageEligibilityResponse).outcome).toBe('complete');

      // The sandbox saw one task per distinct good check, never more than maxInFlight at once.
      expect(h.sandbox.control.stats().tasksCreated - createsBefore).toBe(34);
      expect(inFlight.maxByClinic.get('clinic-clinic-a')).toBeLessThanOrEqual(MAX_IN_FLIGHT);

      // The CERs of the batch, found by search.
      const found = await request(h.url)
        .get(`/fhir/CoverageEligibilityResponse?batch=${bundle.id}&_count=100`)
        .set(h.auth);
      expectValidFhir(found.body);
      expect((found.body as Bundle).total).toBe(34);
      // Another tenant does not see the batch.
      const other = await request(h.url)
        .get(`/fhir/CoverageEligibilityResponse?batch=${bundle.id}`)
        .set(h.authB);
      expect((other.body as Bundle).total).toBe(0);
      expect((await request(h.url).get(status).set(h.authB)).status).toBe(404);
    } finally {
      inFlight.stop();
    }
  });

  it('refuses 501 entries with 413 and stores nothing', async () => {
    const before = await storedCount();
    const creates = h.sandbox.control.stats().createTask;
    const entry = submitEntry(eligibilityRequest({ emiratesId: eligibleId(500) }));
    const res = await postBatch({
      resourceType: 'Bundle',
      type: 'batch',
      entry: Array.from({ length: 501 }, () => entry),
    });
    expect(res.status).toBe(413);
    expectValidFhir(res.body);
    expect(res.body.issue[0].expression).toEqual(['Bundle.entry']);
    expect(await storedCount()).toBe(before);
    expect(h.sandbox.control.stats().createTask).toBe(creates);
  });

  it('refuses what is no batch with 400, and answers Prefer: respond-async with 202 and a status URL', async () => {
    for (const body of [
      { resourceType: 'Bundle', type: 'transaction', entry: [] },
      { resourceType: 'Patient' },
    ]) {
      const res = await postBatch(body);
      expect(res.status).toBe(400);
      expectValidFhir(res.body);
      expect(res.body.issue[0].expression).toBeDefined();
    }
    const res = await postBatch(
      {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [submitEntry(eligibilityRequest({ emiratesId: eligibleId(200) }))],
      },
      { Prefer: 'respond-async' },
    );
    expect(res.status).toBe(202);
    expectValidFhir(res.body);
    const status = new URL(String(res.headers['content-location'])).pathname;
    const final = await until(async () => {
      const r = await request(h.url).get(status).set(h.auth);
      return r.status === 200 ? (r.body as Bundle) : undefined;
    });
    expectValidFhir(final);
    expect(final.entry?.[0]?.response?.status).toBe('200 OK');
  });
});
