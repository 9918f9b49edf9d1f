/**
 * The outcome table of DESIGN.md section 2, end to end: $submit over HTTP -> scheduler -> sandbox
 * upstream over real HTTP -> CER / OperationOutcome. Every resource the service answers with is
 * run through the FHIR validator. Upstream calls are counted to prove the retry rules.
 */
import type { Bundle, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';

const counts = { create: 0, poll: 0 };
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ overrides: { upstream: countingUpstream(counts) } });
});
afterAll(async () => {
  await h.stop();
});

async function submit(options: RequestOptions, headers: Record<string, string> = {}) {
  const before = counts.create;
  const res = await request(h.url)
    .post(SUBMIT)
    .set(h.auth)
    .set(headers)
    .set('Content-Type', FHIR_JSON)
    .send(eligibilityRequest(options));
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(500 + 100);
  if (res.body && typeof res.body === 'object' && 'resourceType' in res.body) expectValidFhir(res.body);
  return { res, created: () => counts.create - before };
}

async function read(location: string) {
  const res = await request(h.url).get(new URL(location).pathname).set(h.auth);
  expect(res.status).toBe(200);
  expectValidFhir(res.body);
  return res.body as CoverageEligibilityResponse;
}

function issueCodes(body: unknown): string[] {
  return (body as OperationOutcome).issue.map((i) => i.code);
}

describe('outcome table', () => {
  it('found, eligible: 200 complete, inforce true, benefits; Location, ETag, 304 and the stored request', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000001-1' });
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance?.[0]?.inforce).toBe(true);
    expect(cer.insurance?.[0]?.item?.length).toBeGreaterThan(3);
    expect(created()).toBe(1);
    const location = String(res.headers.location);
    expect(location).toMatch(/\/fhir\/CoverageEligibilityResponse\/[A-Za-z0-9-.]+$/);
    const again = await request(h.url).get(new URL(location).pathname).set(h.auth);
    expect(again.status).toBe(200);
    expect(again.headers.etag).toBe(`W/"${cer.meta?.versionId}"`);
    const notModified = await request(h.url)
      .get(new URL(location).pathname)
      .set(h.auth)
      .set('If-None-Match', String(again.headers.etag));
    expect(notModified.status).toBe(304);
    const stored = await request(h.url).get(`/fhir/CoverageEligibilityRequest/${cer.id}`).set(h.auth);
    expect(stored.status).toBe(200);
    expectValidFhir(stored.body);
    // Nothing in the CER is an upstream signed link.
    expect(JSON.stringify(cer)).not.toMatch(/sig=|sandbox-files|X-Amz/);
  });

  it('found, not eligible: 200 complete, inforce false, reason in disposition, no retry', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000002-2' });
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance?.[0]?.inforce).toBe(false);
    expect(cer.disposition).toBeTruthy();
    expect(created()).toBe(1);
  });

  it('member_not_found: 200, outcome error with member-not-found and guidance', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000003-3' });
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('error');
    expect(JSON.stringify(cer.error)).toContain('member-not-found');
    expect(cer.disposition).toMatch(/card/i);
  });

  it('invalid_credentials: 422, then the payer is guarded: no further upstream call', async () => {
    const first = await submit({ emiratesId: '784-1990-0000004-4', payer: 'AXA' });
    expect(first.res.status).toBe(422);
    expect(first.created()).toBe(1);
    const location = String(first.res.headers.location);
    const cer = await read(location);
    expect(cer.outcome).toBe('error');
    expect(cer.insurance ?? []).toEqual([]);
    // 20 more submits for that payer: each a 422 at once, none reaches the upstream.
    const before = counts.create + counts.poll;
    for (let i = 0; i < 20; i += 1) {
      const next = await submit({ emiratesId: '784-1990-0000001-1', payer: 'AXA' });
      expect(next.res.status).toBe(422);
      expect(JSON.stringify(next.res.body)).toMatch(/credential|login/i);
    }
    expect(counts.create + counts.poll).toBe(before);
    // Another payer of the same clinic is not affected.
    const other = await submit({ emiratesId: '784-1990-0000001-1', payer: 'NAS' });
    expect(other.res.status).toBe(200);
  });

  it('tpa_not_configured: 422, no inforce, never retried', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000008-8' });
    expect(res.status).toBe(422);
    expect(created()).toBe(1);
    const cer = await read(String(res.headers.location));
    expect(cer.insurance?.some((i) => i.inforce !== undefined) ?? false).toBe(false);
  });

  it('backoff: 503 with Retry-After, and the payer pauses', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000007-7', payer: 'METLIFE' });
    expect(res.status).toBe(503);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    const next = await submit({ emiratesId: '784-1990-0000001-1', payer: 'METLIFE' });
    expect(next.res.status).toBe(503);
    expect(next.created()).toBe(0);
  });

  it('failed: retried once by the adapter, then 502', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000005-5' });
    expect(res.status).toBe(502);
    expect(issueCodes(res.body).length).toBeGreaterThan(0);
    expect(created()).toBe(2);
  });

  it('error: retried once, then 502', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000006-6' });
    expect(res.status).toBe(502);
    expect(created()).toBe(2);
  });

  it('failed then found on the retry: 200 complete', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000014-4' });
    expect(res.status).toBe(200);
    expect((res.body as CoverageEligibilityResponse).outcome).toBe('complete');
    expect(created()).toBe(2);
  });

  it('task FAILED: 502; task CANCELLED: 409', async () => {
    const failed = await submit({ emiratesId: '784-1990-0000010-0' });
    expect(failed.res.status).toBe(502);
    expect(failed.created()).toBe(1); // a FAILED task gets no second portal session
    const cancelled = await submit({ emiratesId: '784-1990-0000011-1' });
    expect(cancelled.res.status).toBe(409);
    expect(cancelled.created()).toBe(1);
  });

  it('a status never seen before is in flight, not terminal', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000013-3' });
    expect(res.status).toBe(200);
    expect((res.body as CoverageEligibilityResponse).outcome).toBe('complete');
    expect(created()).toBe(1);
  });

  it('multi-card: says plainly which card of how many', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000009-9' });
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.disposition).toMatch(/3 cards/);
    expect(cer.disposition).toMatch(/card 2/);
  });

  it('card number path: not found by Emirates ID, found by card number', async () => {
    const byId = await submit({ emiratesId: '784-1990-0000020-0' });
    expect((byId.res.body as CoverageEligibilityResponse).outcome).toBe('error');
    const byCard = await submit({ cardNumber: '4410-0000-0000020' });
    expect(byCard.res.status).toBe(200);
    expect((byCard.res.body as CoverageEligibilityResponse).insurance?.[0]?.inforce).toBe(true);
  });

  it('search-all: one CER with every eligible payer', async () => {
    const { res, created } = await submit({ emiratesId: '784-1990-0000031-1', discovery: true });
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance?.filter((i) => i.inforce === true).length).toBe(2);
    expect(created()).toBe(1);
  });
});

describe('waiting, queued and async', () => {
  it('a slow check answers queued after the wait, keeps its id, and is still polled', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000012-2' }, { Prefer: 'wait=1' });
    expect(res.status).toBe(200);
    expect(res.headers['preference-applied']).toBe('wait=1');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('queued');
    const later = await read(String(res.headers.location));
    expect(later.id).toBe(cer.id);
    expect(later.outcome).toBe('queued');
  });

  it('Prefer: respond-async -> 202, status URL 202 then 200 batch-response', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000001-1' }, { Prefer: 'respond-async' });
    expect(res.status).toBe(202);
    const status = new URL(String(res.headers['content-location'])).pathname;
    expect(status).toMatch(/^\/fhir\/_async\//);
    let answer = await request(h.url).get(status).set(h.auth);
    for (let i = 0; i < 100 && answer.status === 202; i += 1) {
      await new Promise((r) => setTimeout(r, 50));
      answer = await request(h.url).get(status).set(h.auth);
    }
    expect(answer.status).toBe(200);
    expectValidFhir(answer.body);
    const bundle = answer.body as Bundle;
    expect(bundle.type).toBe('batch-response');
    expect(bundle.entry?.[0]?.response?.status).toMatch(/^200/);
    expect(bundle.entry?.[0]?.resource?.resourceType).toBe('CoverageEligibilityResponse');
    const stop = await request(h.url).delete(status).set(h.auth);
    expect([200, 202, 204]).toContain(stop.status);
    expect((await request(h.url).get(status).set(h.auth)).status).toBe(404);
  });

  it('the same request identifier twice is one check and one real upstream task', async () => {
    const identifier = `idem-${Date.now()}`;
    const first = await submit({ emiratesId: '784-1990-0000001-1', identifier });
    const second = await submit({ emiratesId: '784-1990-0000001-1', identifier });
    expect((second.res.body as CoverageEligibilityResponse).id).toBe(
      (first.res.body as CoverageEligibilityResponse).id,
    );
    expect(first.created() + second.created()).toBe(1);
  });

  it("the same identifier for another patient is a 409, never the other patient's answer", async () => {
    const identifier = `reuse-${Date.now()}`;
    await submit({ emiratesId: '784-1990-0000001-1', identifier });
    const other = await submit({ emiratesId: '784-1985-7654321-2', identifier });
    expect(other.res.status).toBe(409);
    expect(JSON.stringify(other.res.body)).toContain('CoverageEligibilityRequest.identifier[0]');
    expect(other.created()).toBe(0);
  });
});

describe('documents and screenshot', () => {
  it('the CER links to stable adapter URLs that stream a freshly signed file, for the owner only', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000001-1' });
    const text = JSON.stringify(res.body);
    const links = [...new Set(text.match(/\/fhir\/Binary\/[A-Za-z0-9.-]+/g) ?? [])];
    expect(links.length).toBeGreaterThan(1);
    for (const link of links) {
      for (let i = 0; i < 2; i += 1) {
        const file = await request(h.url).get(link).set(h.auth).buffer(true);
        expect(file.status, link).toBe(200);
        expect(Number(file.headers['content-length'] ?? (file.body as Buffer).length)).toBeGreaterThan(0);
      }
      expect((await request(h.url).get(link).set(h.authB)).status).toBe(404);
    }
  });

  it('a document URL still works after the upstream link it was built from has expired', async () => {
    h.sandbox.control.setLinkTtlMs(300);
    try {
      const { res } = await submit({ emiratesId: '784-1990-0000001-1' });
      const cer = res.body as CoverageEligibilityResponse;
      const check = await h.server.store.get('clinic-a', cer.id ?? '');
      const stored = JSON.stringify(check?.envelope ?? {});
      const signed = /"s3_url":"([^"]+)"/.exec(stored)?.[1];
      expect(signed).toBeTruthy();
      await new Promise((r) => setTimeout(r, 600));
      // The link the stored result holds has expired at the document store...
      const direct = await fetch(String(signed));
      expect(direct.status).toBe(403);
      // ...and the adapter URL in the CER still yields the file.
      const link = /\/fhir\/Binary\/[A-Za-z0-9.-]+\.d0/.exec(JSON.stringify(cer))?.[0];
      expect(link).toBeTruthy();
      const file = await request(h.url).get(String(link)).set(h.auth).buffer(true);
      expect(file.status).toBe(200);
    } finally {
      h.sandbox.control.setLinkTtlMs(300_000);
    }
  });
});

describe('tenants and search', () => {
  it('another tenant gets 404 for a check, and search is tenant-scoped', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000001-1' });
    const path = new URL(String(res.headers.location)).pathname;
    expect((await request(h.url).get(path).set(h.authB)).status).toBe(404);
    const mine = await request(h.url).get('/fhir/CoverageEligibilityResponse?_count=5').set(h.auth);
    expect(mine.status).toBe(200);
    expectValidFhir(mine.body);
    expect((mine.body as Bundle).total).toBeGreaterThan(0);
    const theirs = await request(h.url).get('/fhir/CoverageEligibilityResponse').set(h.authB);
    expect((theirs.body as Bundle).total).toBe(0);
  });

  it("tenant B gets 404 for tenant A's request, response and async status, and cannot stop A's tracking", async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000001-1' }, { Prefer: 'respond-async' });
    expect(res.status).toBe(202);
    const asyncPath = new URL(String(res.headers['content-location'])).pathname;
    const id = asyncPath.split('/').pop() ?? '';
    expect(asyncPath).toBe(`/fhir/_async/${id}`);
    const paths: ['get' | 'delete', string][] = [
      ['get', `/fhir/CoverageEligibilityRequest/${id}`],
      ['get', `/fhir/CoverageEligibilityResponse/${id}`],
      ['get', asyncPath],
      ['delete', asyncPath],
    ];
    const unknownId = `${id.slice(0, -4)}zzzz`;
    for (const [method, path] of paths) {
      const theirs = await request(h.url)[method](path).set(h.authB);
      expect(theirs.status, `${method} ${path}`).toBe(404);
      expectValidFhir(theirs.body);
      expect(issueCodes(theirs.body), `${method} ${path}`).toEqual(['not-found']);
      expect(JSON.stringify(theirs.body)).not.toContain('784-1990');
      // Indistinguishable from an id that does not exist at all.
      const none = await request(h.url)[method](path.replace(id, unknownId)).set(h.authB);
      expect(none.status).toBe(404);
      expect(JSON.stringify(none.body).replace(unknownId, id)).toBe(JSON.stringify(theirs.body));
    }
    // A still reads its request and follows its async status (B's DELETE stopped nothing).
    const mine = await request(h.url).get(`/fhir/CoverageEligibilityRequest/${id}`).set(h.auth);
    expect(mine.status).toBe(200);
    expectValidFhir(mine.body);
    expect((mine.body as { resourceType: string }).resourceType).toBe('CoverageEligibilityRequest');
    let status = await request(h.url).get(asyncPath).set(h.auth);
    for (let i = 0; i < 100 && status.status === 202; i += 1) {
      await new Promise((r) => setTimeout(r, 50));
      status = await request(h.url).get(asyncPath).set(h.auth);
    }
    expect(status.status).toBe(200);
    expectValidFhir(status.body);
    expect((status.body as Bundle).entry?.[0]?.resource?.id).toBe(id);
    const cer = await read(`${h.url}/fhir/CoverageEligibilityResponse/${id}`);
    expect(cer.id).toBe(id);
    // And B still sees nothing once the check is done.
    expect((await request(h.url).get(`/fhir/CoverageEligibilityResponse/${id}`).set(h.authB)).status).toBe(
      404,
    );
  });

  it('search by patient identifier and by request id', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000002-2' });
    const id = (res.body as CoverageEligibilityResponse).id ?? '';
    const byRequest = await request(h.url).get(`/fhir/CoverageEligibilityResponse?request=${id}`).set(h.auth);
    expect((byRequest.body as Bundle).entry?.map((e) => e.resource?.id)).toEqual([id]);
    const byPatient = await request(h.url)
      .get('/fhir/CoverageEligibilityResponse?patient=784-1990-0000002-2&outcome=complete')
      .set(h.auth);
    expect(byPatient.status).toBe(200);
    expectValidFhir(byPatient.body);
    expect((byPatient.body as Bundle).entry?.some((e) => e.resource?.id === id)).toBe(true);
  });

  it('metadata is a valid CapabilityStatement listing $submit', async () => {
    const res = await request(h.url).get('/fhir/metadata');
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    expect(JSON.stringify(res.body)).toContain('submit');
  });
});
