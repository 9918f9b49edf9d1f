/**
 * The outcome table of the README, end to end: $submit over HTTP -> scheduler -> sandbox
 * upstream over real HTTP -> CER / OperationOutcome. Every resource the service answers with is
 * run through the FHIR validator. Upstream calls are counted to prove the retry rules.
 */
import type { Bundle, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import type { RequestOptions } from '../support/requests.js';

/**
 * What openapi/openapi.yaml lets $submit answer to a well-formed request of a known tenant: the
 * CER (200), accepted (202, Prefer respond-async), or no determination (409, 422, 502, 503, 504).
 * 400, 401, 406, 413, 415 and 429 answer bad or throttled requests, which this file never sends.
 */
const SUBMIT_STATUSES = [200, 202, 409, 422, 502, 503, 504];
const CER_PATH = /\/fhir\/CoverageEligibilityResponse\/[A-Za-z0-9-.]+$/;

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
  const res = await postSubmit(h.url, h.auth, options, headers);
  expect(SUBMIT_STATUSES, `$submit answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(
    res.status,
  );
  expectValidFhir(res.body);
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

/** One upstream outcome (sandbox scenario, picked by the identifier) and the answer it must get. */
interface OutcomeRow {
  name: string;
  request: RequestOptions;
  /** HTTP status of $submit. */
  status: number;
  /** CoverageEligibilityResponse.outcome of the check (the answer, or the CER read at Location). */
  outcome: CoverageEligibilityResponse['outcome'];
  /** insurance[].inforce in order; [] is no insurance entry at all (no determination). */
  inforce: boolean[];
  /** The service outcome code in CER.error (and, when not 200, in the OperationOutcome); null: no error. */
  error: string | null;
  /** OperationOutcome.issue[0].code of a non-200 answer; null for a 200 (the body is the CER). */
  issue: string | null;
  /** What the disposition must say (at least one pattern). */
  disposition: [RegExp, ...RegExp[]];
  /** create-task calls the check made: 2 is one retry by the adapter. */
  createTasks: number;
  /** Retry-After in seconds, or null when the answer must not invite a retry. */
  retryAfter: number | null;
  /** Further steps for outcomes with lasting effects (payer guards) or more to show. */
  then?: (answer: {
    res: request.Response;
    cer: CoverageEligibilityResponse;
    location: string;
  }) => Promise<void>;
}

const ELIGIBLE = /reports the member as eligible/;

/**
 * The sandbox picks each outcome from the identifier's serial (docs/sandbox.md, "Scenarios"). Rows
 * run in order: the guard rows use payers (AXA, METLIFE) no other row of this file relies on.
 */
const OUTCOMES: OutcomeRow[] = [
  {
    name: 'found, eligible',
    request: { emiratesId: '784-1990-0000001-0' },
    status: 200,
    outcome: 'complete',
    inforce: [true],
    error: null,
    issue: null,
    disposition: [ELIGIBLE],
    createTasks: 1,
    retryAfter: null,
    // Benefits; the Location read with its ETag and a 304; the stored request; no upstream signed link.
    then: async ({ cer, location }) => {
      expect(cer.insurance?.[0]?.item?.length).toBeGreaterThan(3);
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
      expect(JSON.stringify(cer)).not.toMatch(/sig=|sandbox-files|X-Amz/);
    },
  },
  {
    name: 'found, not eligible (reason in the disposition, no retry)',
    request: { emiratesId: '784-1990-0000002-8' },
    status: 200,
    outcome: 'complete',
    inforce: [false],
    error: null,
    issue: null,
    disposition: [/Policy lapsed/],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'member_not_found (guidance names the card number)',
    request: { emiratesId: '784-1990-0000003-6' },
    status: 200,
    outcome: 'error',
    inforce: [],
    error: 'member-not-found',
    issue: null,
    disposition: [/no member matching/, /card/i],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'invalid_credentials, then the payer is guarded',
    request: { emiratesId: '784-1990-0000004-4', payer: 'AXA' },
    status: 422,
    outcome: 'error',
    inforce: [],
    error: 'invalid-credentials',
    issue: 'security',
    disposition: [/INVALID_CREDENTIALS/],
    createTasks: 1,
    retryAfter: null,
    // 20 more submits for that payer: each a 422 at once, none reaches the upstream; another payer
    // of the same clinic is not affected.
    then: async () => {
      const before = counts.create + counts.poll;
      for (let i = 0; i < 20; i += 1) {
        const next = await submit({ emiratesId: '784-1990-0000001-0', payer: 'AXA' });
        expect(next.res.status).toBe(422);
        expect(JSON.stringify(next.res.body)).toMatch(/credential|login/i);
      }
      expect(counts.create + counts.poll).toBe(before);
      const other = await submit({ emiratesId: '784-1990-0000001-0', payer: 'NAS' });
      expect(other.res.status).toBe(200);
    },
  },
  {
    name: 'tpa_not_configured (never retried)',
    request: { emiratesId: '784-1990-0000008-5' },
    status: 422,
    outcome: 'error',
    inforce: [],
    error: 'payer-not-configured',
    issue: 'not-supported',
    disposition: [/no login configured/],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'backoff, then the payer pauses',
    request: { emiratesId: '784-1990-0000007-7', payer: 'METLIFE' },
    status: 503,
    outcome: 'error',
    inforce: [],
    error: 'payer-backoff',
    issue: 'throttled',
    disposition: [/CREDENTIAL_BACKOFF/],
    createTasks: 1,
    retryAfter: 900,
    then: async () => {
      const next = await submit({ emiratesId: '784-1990-0000001-0', payer: 'METLIFE' });
      expect(next.res.status).toBe(503);
      expect(next.created()).toBe(0);
    },
  },
  {
    name: 'failed (retried once by the adapter)',
    request: { emiratesId: '784-1990-0000005-1' },
    status: 502,
    outcome: 'error',
    inforce: [],
    error: 'check-failed',
    issue: 'transient',
    disposition: [/PORTAL_TIMEOUT/],
    createTasks: 2,
    retryAfter: null,
  },
  {
    name: 'error (retried once by the adapter)',
    request: { emiratesId: '784-1990-0000006-9' },
    status: 502,
    outcome: 'error',
    inforce: [],
    error: 'check-error',
    issue: 'exception',
    disposition: [/UNEXPECTED_ERROR/],
    createTasks: 2,
    retryAfter: null,
  },
  {
    name: 'failed, then found on the retry',
    request: { emiratesId: '784-1990-0000014-3' },
    status: 200,
    outcome: 'complete',
    inforce: [true],
    error: null,
    issue: null,
    disposition: [ELIGIBLE],
    createTasks: 2,
    retryAfter: null,
  },
  {
    // A FAILED task gets no second portal session.
    name: 'task FAILED',
    request: { emiratesId: '784-1990-0000010-1' },
    status: 502,
    outcome: 'error',
    inforce: [],
    error: 'task-failed',
    issue: 'exception',
    disposition: [/TASK_FAILED/],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'task CANCELLED',
    request: { emiratesId: '784-1990-0000011-9' },
    status: 409,
    outcome: 'error',
    inforce: [],
    error: 'task-cancelled',
    issue: 'conflict',
    disposition: [/cancelled/],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'a status never seen before is in flight, not terminal',
    request: { emiratesId: '784-1990-0000013-5' },
    status: 200,
    outcome: 'complete',
    inforce: [true],
    error: null,
    issue: null,
    disposition: [ELIGIBLE],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'multi-card: says plainly which card of how many',
    request: { emiratesId: '784-1990-0000009-3' },
    status: 200,
    outcome: 'partial',
    inforce: [true],
    error: null,
    issue: null,
    disposition: [/3 cards/, /card 2/],
    createTasks: 1,
    retryAfter: null,
  },
  {
    // The card number path, step 1: the member's Emirates ID is not linked at the payer...
    name: 'card-only member, by Emirates ID: not found',
    request: { emiratesId: '784-1990-0000020-0' },
    status: 200,
    outcome: 'error',
    inforce: [],
    error: 'member-not-found',
    issue: null,
    disposition: [/card number/],
    createTasks: 1,
    retryAfter: null,
  },
  {
    // ...step 2: the same member, by the card number the guidance asks for, is found.
    name: 'card-only member, by card number: found',
    request: { cardNumber: '4410-0000-0000020' },
    status: 200,
    outcome: 'complete',
    inforce: [true],
    error: null,
    issue: null,
    disposition: [ELIGIBLE],
    createTasks: 1,
    retryAfter: null,
  },
  {
    name: 'search-all: one CER with every eligible payer',
    request: { emiratesId: '784-1990-0000031-7', discovery: true },
    status: 200,
    outcome: 'complete',
    inforce: [true, true],
    error: null,
    issue: null,
    disposition: [/eligible at 2 payers/],
    createTasks: 1,
    retryAfter: null,
  },
];

describe('outcome table', () => {
  const titled = OUTCOMES.map(
    (row) =>
      [`${row.name}: HTTP ${row.status}, ${row.outcome}, ${row.createTasks} create-task`, row] as const,
  );
  it.each(titled)('%s', async (_title, row) => {
    const { res, created } = await submit(row.request);
    expect(res.status, JSON.stringify(res.body)).toBe(row.status);
    expect(created()).toBe(row.createTasks);
    if (row.retryAfter === null) expect(res.headers['retry-after']).toBeUndefined();
    else expect(Number(res.headers['retry-after'])).toBe(row.retryAfter);

    // Whatever the status, the check's CER is readable at Location; a 200 answers with it.
    const location = String(res.headers.location);
    expect(location).toMatch(CER_PATH);
    const cer = await read(location);
    if (row.status === 200) {
      expect(res.body).toEqual(cer);
      expect(row.issue).toBeNull();
    } else {
      // No determination: an OperationOutcome with the table's issue code and the service outcome code.
      const outcome = res.body as OperationOutcome;
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(issueCodes(outcome)[0]).toBe(row.issue);
      expect(outcome.issue[0]?.details?.coding?.[0]?.code).toBe(row.error);
    }

    expect(cer.outcome).toBe(row.outcome);
    expect((cer.insurance ?? []).map((i) => i.inforce)).toEqual(row.inforce);
    expect(cer.error?.[0]?.code.coding?.[0]?.code ?? null).toBe(row.error);
    for (const text of row.disposition) expect(cer.disposition).toMatch(text);
    await row.then?.({ res, cer, location });
  });
});

describe('waiting, queued and async', () => {
  it('a slow check answers queued after the wait, keeps its id, and is still polled', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000012-7' }, { Prefer: 'wait=1' });
    expect(res.status).toBe(200);
    expect(res.headers['preference-applied']).toBe('wait=1');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('queued');
    const later = await read(String(res.headers.location));
    expect(later.id).toBe(cer.id);
    expect(later.outcome).toBe('queued');
  });

  it('Prefer: respond-async -> 202, status URL 202 then 200 batch-response', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000001-0' }, { Prefer: 'respond-async' });
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
    const first = await submit({ emiratesId: '784-1990-0000001-0', identifier });
    const second = await submit({ emiratesId: '784-1990-0000001-0', identifier });
    expect([first.res.status, second.res.status]).toEqual([200, 200]);
    const id = (first.res.body as CoverageEligibilityResponse).id;
    expect(id).toEqual(expect.any(String));
    expect((second.res.body as CoverageEligibilityResponse).id).toBe(id);
    expect(first.created() + second.created()).toBe(1);
  });

  it("the same identifier for another patient is a 409, never the other patient's answer", async () => {
    const identifier = `reuse-${Date.now()}`;
    expect((await submit({ emiratesId: '784-1990-0000001-0', identifier })).res.status).toBe(200);
    const other = await submit({ emiratesId: '784-1985-7654321-3', identifier });
    expect(other.res.status).toBe(409);
    expect(JSON.stringify(other.res.body)).toContain('CoverageEligibilityRequest.identifier[0]');
    expect(other.created()).toBe(0);
  });
});

describe('documents and screenshot', () => {
  it('the CER links to stable adapter URLs that stream a freshly signed file, for the owner only', async () => {
    const { res } = await submit({ emiratesId: '784-1990-0000001-0' });
    expect(res.status).toBe(200);
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
      const { res } = await submit({ emiratesId: '784-1990-0000001-0' });
      expect(res.status).toBe(200);
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
    const { res } = await submit({ emiratesId: '784-1990-0000001-0' });
    expect(res.status).toBe(200);
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
    const { res } = await submit({ emiratesId: '784-1990-0000001-0' }, { Prefer: 'respond-async' });
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
      expect(JSON.stringify(none.body).replaceAll(unknownId, id)).toBe(JSON.stringify(theirs.body));
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
    const { res } = await submit({ emiratesId: '784-1990-0000002-8' });
    expect(res.status).toBe(200);
    const id = (res.body as CoverageEligibilityResponse).id ?? '';
    expect(id).not.toBe('');
    const byRequest = await request(h.url).get(`/fhir/CoverageEligibilityResponse?request=${id}`).set(h.auth);
    expect((byRequest.body as Bundle).entry?.map((e) => e.resource?.id)).toEqual([id]);
    const byPatient = await request(h.url)
      .get('/fhir/CoverageEligibilityResponse?patient=784-1990-0000002-8&outcome=complete')
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
