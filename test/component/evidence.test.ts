/**
 * Proof that lasts (docs/evidence.md), end to end against the sandbox over HTTP: a final answer's
 * screenshot and letters are kept after the answer; GET /fhir/Binary serves the bytes served at the
 * time (hash checked) after the upstream forgot the task and every link expired; the kept
 * documents are listed as DocumentReferences (valid R4, hash and size of the bytes, tenant-scoped,
 * scope system/DocumentReference.rs, audited); a document over EVIDENCE_MAX_BYTES, or whose link
 * expired for good, is not kept, never listed, its Binary a 404 saying so, and the CER's narrative
 * says it. On SQLite and on PostgreSQL.
 */
import { createHash } from 'node:crypto';
import type { Bundle, CoverageEligibilityResponse, DocumentReference, OperationOutcome } from 'fhir/r4.js';
import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import { startHarness, UPSTREAM_KEY, type Harness, type HarnessOptions } from '../support/harness.js';
import { parseBinaryId, resolveBinary } from '../../src/mapping/response/binary.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import { testDatabaseUrl } from '../support/postgres.js';
import { StoreUnavailableError } from '../../src/checks/store/outage.js';
import { eligibilityRequest } from '../support/requests.js';
import { accessToken, clientKey, serviceKey, type ClientKey } from '../support/smart.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const EID_SYSTEM = 'http://uae.gov/fhir/identifier/emirates-id';
const ELIGIBLE = '784-1990-0000001-0';

async function submit(h: Harness, emiratesId = ELIGIBLE): Promise<CoverageEligibilityResponse> {
  const res = await request(h.url)
    .post(SUBMIT)
    .set(h.auth)
    .set('Content-Type', 'application/fhir+json')
    .send(eligibilityRequest({ emiratesId }));
  expect(res.status).toBe(200);
  return res.body as CoverageEligibilityResponse;
}

/** The Binary ids the CER links to (its contained DocumentReferences). */
function binaryIds(cer: CoverageEligibilityResponse): string[] {
  return (cer.contained ?? []).flatMap((r) => {
    const url =
      r.resourceType === 'DocumentReference' ? (r as DocumentReference).content[0]?.attachment.url : '';
    const id = /\/fhir\/Binary\/([^/]+)$/.exec(url ?? '')?.[1];
    return id ? [id] : [];
  });
}

async function documents(h: Harness, query: string, auth = h.auth): Promise<Bundle> {
  const res = await request(h.url).get(`/fhir/DocumentReference?${query}`).set(auth);
  expect(res.status).toBe(200);
  expectValidFhir(res.body);
  return res.body as Bundle;
}

/** Waits until every document of the check is decided (kept or not), as the store says. */
async function settled(h: Harness, checkId: string, expected: number): Promise<void> {
  await until(
    async () => {
      const rows = await h.server.store.evidence.ofCheck('clinic-a', checkId);
      return rows.length === expected && rows.every((r) => r.state !== 'pending') ? true : undefined;
    },
    15_000,
    'documents decided',
  );
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** The SHA-256 of each document as the upstream serves it now (a new read, fresh links). */
async function upstreamBytes(
  h: Harness,
  taskId: string,
  ids: readonly string[],
): Promise<Map<string, string>> {
  const res = await fetch(`${h.sandbox.url}/eligibility-result/${taskId}`, {
    headers: { 'x-api-key': UPSTREAM_KEY, 'X-Clinic-ID': 'clinic-clinic-a', 'X-Client-ID': 'EHR-1' },
  });
  const envelope = envelopeSchema.parse(await res.json());
  const found = new Map<string, string>();
  for (const id of ids) {
    const link = resolveBinary(envelope, parseBinaryId(id)!);
    const file = await fetch(String(link?.url));
    expect(file.status).toBe(200);
    found.set(id, sha256(Buffer.from(await file.arrayBuffer())));
  }
  return found;
}

function binary(h: Harness, id: string) {
  return request(h.url)
    .get(`/fhir/Binary/${id}`)
    .set(h.auth)
    .buffer(true)
    .parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
}

function proofSuite(name: string, options: () => Promise<HarnessOptions>, cleanup = async () => {}): void {
  describe(`evidence kept (${name})`, () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness(await options());
    });
    afterAll(async () => {
      await h.stop();
      await cleanup();
    });

    it('serves the bytes of the day after the upstream forgot the task and every link expired', async () => {
      // Links that expire a second after they are signed, as the upstream's short-lived S3 links.
      h.sandbox.control.setLinkTtlMs(1_000);
      const cer = await submit(h);
      const ids = binaryIds(cer);
      expect(ids.length).toBeGreaterThanOrEqual(3);
      // What the upstream served at the time, read straight from it through fresh links.
      const task = String((await h.server.store.get('clinic-a', String(cer.id)))?.upstreamTaskId);
      const served = await upstreamBytes(h, task, ids);
      await settled(h, String(cer.id), ids.length);
      const bundle = await documents(h, `related=CoverageEligibilityResponse/${cer.id}`);
      expect(bundle.entry?.map((e) => e.resource?.id).sort()).toEqual([...ids].sort());
      const atTheTime = new Map<string, string>();
      for (const entry of bundle.entry ?? []) {
        const doc = entry.resource as DocumentReference;
        expect(doc).toMatchObject({
          status: 'current',
          context: { related: [{ reference: `CoverageEligibilityResponse/${cer.id}` }] },
        });
        expect(doc.type?.text).toBeTruthy();
        expect(doc.date).toBeTruthy();
        const attachment = doc.content[0]!.attachment;
        expect(attachment.url).toBe(`Binary/${doc.id}`);
        expect(attachment.creation).toBeTruthy();
        const file = await binary(h, String(doc.id));
        expect(file.status).toBe(200);
        const bytes = file.body as Buffer;
        expect(attachment.size).toBe(bytes.length);
        expect(attachment.hash).toBe(createHash('sha1').update(bytes).digest('base64'));
        expect(String(file.headers['content-type'])).toBe(attachment.contentType);
        expect(sha256(bytes)).toBe(served.get(String(doc.id)));
        atTheTime.set(String(doc.id), sha256(bytes));
      }
      // The upstream forgets the task, and every link it signed runs out.
      const check = await h.server.store.get('clinic-a', String(cer.id));
      expect(h.sandbox.control.forget(String(check?.upstreamTaskId))).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      for (const [id, hash] of atTheTime) {
        const file = await binary(h, id);
        expect(file.status).toBe(200);
        expect(sha256(file.body as Buffer)).toBe(hash);
      }
      // Listed by the patient the check was made for, and by the day it was kept.
      const today = new Date().toISOString().slice(0, 10);
      const byPatient = await documents(
        h,
        `patient=${encodeURIComponent(`${EID_SYSTEM}|${ELIGIBLE}`)}&date=${today}`,
      );
      expect(byPatient.entry?.map((e) => e.resource?.id)).toEqual(expect.arrayContaining(ids));
      expect(
        (await documents(h, `patient=${encodeURIComponent(`${EID_SYSTEM}|${ELIGIBLE}`)}&date=lt2000-01-01`))
          .entry,
      ).toBeUndefined();
      h.sandbox.control.setLinkTtlMs(300_000);
      // The capture's log lines name checks and documents, never the patient or a signed link.
      const logs = h.logs.join('\n');
      expect(logs).toContain('document kept');
      expect(logs).not.toContain(ELIGIBLE);
      expect(logs).not.toContain('sig=');
    });
  });
}

proofSuite('SQLite', () => Promise.resolve({}));

const schema = `evidence_${process.pid}_${Date.now()}`;
proofSuite(
  'PostgreSQL',
  async () => {
    const admin = new pg.Client({ connectionString: testDatabaseUrl() });
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${schema}`);
    await admin.end();
    const url = new URL(testDatabaseUrl());
    url.searchParams.set('options', `-c search_path=${schema}`);
    return { databaseUrl: url.toString() };
  },
  async () => {
    const admin = new pg.Client({ connectionString: testDatabaseUrl() });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  },
);

describe('documents not kept, tenancy, scope, audit, bad input', () => {
  let h: Harness;
  let reader: ClientKey;
  let tokenUrl: string;
  beforeAll(async () => {
    const svc = await serviceKey();
    reader = await clientKey('ES384');
    // The 1x1 PNG screenshots fit; the PDF letters (about 250 bytes) do not.
    h = await startHarness({
      evidenceMaxBytes: 150,
      tokenSigningKeys: [svc.jwk],
      smartClients: {
        a: [
          {
            clientId: 'no-docs',
            jwks: { keys: [reader.publicJwk] },
            scopes: ['system/CoverageEligibilityResponse.rs'],
          },
          { clientId: 'docs', jwks: { keys: [reader.publicJwk] }, scopes: ['system/DocumentReference.rs'] },
        ],
      },
    });
    const config = await request(h.url).get('/fhir/.well-known/smart-configuration');
    tokenUrl = String((config.body as { token_endpoint: string }).token_endpoint);
  });
  afterAll(() => h.stop());

  it('a document over EVIDENCE_MAX_BYTES is not kept, not listed, a 404 saying so, and the narrative says it', async () => {
    const cer = await submit(h);
    const ids = binaryIds(cer);
    await settled(h, String(cer.id), ids.length);
    const letters = ids.filter((id) => /\.d\d+$/.test(id));
    expect(letters.length).toBeGreaterThan(0);
    const listed = (await documents(h, `related=CoverageEligibilityResponse/${cer.id}`)).entry?.map(
      (e) => e.resource?.id,
    );
    expect(listed?.sort()).toEqual(ids.filter((id) => !letters.includes(id)).sort());
    for (const id of letters) {
      const res = await request(h.url).get(`/fhir/Binary/${id}`).set(h.auth);
      expect(res.status).toBe(404);
      expectValidFhir(res.body);
      expect(JSON.stringify(res.body)).toContain('larger than the size this service keeps');
    }
    const read = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${cer.id}`).set(h.auth);
    const noted = read.body as CoverageEligibilityResponse;
    expectValidFhir(noted);
    expect(Number(noted.meta?.versionId)).toBeGreaterThan(Number(cer.meta?.versionId));
    expect(noted.text?.div).toContain('Documents not kept');
    expect(noted.text?.div).toContain('larger than the size this service keeps');
    // The CER no longer links a letter the adapter has no copy of.
    expect(binaryIds(noted).sort()).toEqual(listed?.sort());
  });

  it('a link expired for good (the upstream forgot the task) is not shown as kept', async () => {
    // Every link is signed already expired; the upstream then forgets the task, so none can be renewed.
    h.sandbox.control.setLinkTtlMs(-60_000);
    const cer = await submit(h);
    const check = await h.server.store.get('clinic-a', String(cer.id));
    h.sandbox.control.forget(String(check?.upstreamTaskId));
    const ids = binaryIds(cer);
    await settled(h, String(cer.id), ids.length);
    h.sandbox.control.setLinkTtlMs(300_000);
    const rows = await h.server.store.evidence.ofCheck('clinic-a', String(cer.id));
    expect(rows.every((r) => r.state === 'failed' && r.reason === 'expired')).toBe(true);
    expect((await documents(h, `related=CoverageEligibilityResponse/${cer.id}`)).entry).toBeUndefined();
    const res = await request(h.url).get(`/fhir/Binary/${ids[0]}`).set(h.auth);
    expect(res.status).toBe(404);
    expect(JSON.stringify(res.body)).toContain('was not kept');
    const noted = (await request(h.url).get(`/fhir/CoverageEligibilityResponse/${cer.id}`).set(h.auth))
      .body as CoverageEligibilityResponse;
    expectValidFhir(noted);
    expect(noted.text?.div).toContain('its link had expired');
  });

  it("another tenant's documents are neither listed nor served; the scope is needed; each search is audited", async () => {
    const cer = await submit(h);
    await settled(h, String(cer.id), binaryIds(cer).length);
    const [kept] = (await documents(h, `related=CoverageEligibilityResponse/${cer.id}`)).entry ?? [];
    expect(kept).toBeDefined();
    expect(
      (await documents(h, `related=CoverageEligibilityResponse/${cer.id}`, h.authB)).entry,
    ).toBeUndefined();
    expect((await request(h.url).get(`/fhir/Binary/${kept?.resource?.id}`).set(h.authB)).status).toBe(404);
    const without = await accessToken(
      h.url,
      tokenUrl,
      'no-docs',
      reader,
      'system/CoverageEligibilityResponse.rs',
    );
    const refused = await request(h.url)
      .get(`/fhir/DocumentReference?related=CoverageEligibilityResponse/${cer.id}`)
      .set({ Authorization: `Bearer ${without}` });
    expect(refused.status).toBe(403);
    expectValidFhir(refused.body);
    const withScope = await accessToken(h.url, tokenUrl, 'docs', reader, 'system/DocumentReference.rs');
    const allowed = await documents(h, `related=CoverageEligibilityResponse/${cer.id}`, {
      Authorization: `Bearer ${withScope}`,
    });
    expect(allowed.entry?.length).toBeGreaterThan(0);
    await h.server.audit.flush();
    const events = await h.server.store.searchAuditEvents(
      'clinic-a',
      { entity: [`CoverageEligibilityResponse/${cer.id}`] },
      50,
    );
    const searches = events.filter((e) => JSON.stringify(e.record).includes('search-type'));
    expect(searches.length).toBeGreaterThanOrEqual(2);
  });

  it('the CapabilityStatement declares the search and its parameters', async () => {
    const res = await request(h.url).get('/fhir/metadata');
    expectValidFhir(res.body);
    const rest = (res.body as { rest: { resource: { type: string; searchParam?: { name: string }[] }[] }[] })
      .rest;
    const docs = rest[0]?.resource.find((r) => r.type === 'DocumentReference');
    expect(docs?.searchParam?.map((p) => p.name)).toEqual(
      expect.arrayContaining(['patient', 'date', 'related']),
    );
  });

  it('bad input: a 400 OperationOutcome naming the parameter', async () => {
    for (const [query, expression] of [
      ['patient=a|b|c', 'patient'],
      ['patient=urn:x|', 'patient'],
      ['date=yesterday', 'date'],
      ['related=Patient/1', 'related'],
      ['related=CoverageEligibilityResponse/bad id', 'related'],
      ['_count=many', '_count'],
      ['patient:missing=true', 'patient:missing'],
    ] as const) {
      const res = await request(h.url)
        .get(`/fhir/DocumentReference?${encodeURI(query)}`)
        .set(h.auth);
      expect(res.status, query).toBe(400);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]?.expression).toEqual([expression]);
    }
  });
});

describe('the store fails while a document is written (a full disk)', () => {
  let h: Harness;
  beforeAll(async () => {
    // A short lease: a capture whose write failed is taken up again soon after.
    h = await startHarness({ leaseMs: 1_000 });
  });
  afterAll(() => h.stop());

  it('the answer is not held back or lost, the write is retried, nothing crashes, one log line', async () => {
    const real = h.server.store.evidence;
    let full = true;
    // Every write of a document fails as SQLite's SQLITE_FULL does, while `full`.
    const failing = new Proxy(real, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) =>
          full && property === 'keep'
            ? Promise.reject(new StoreUnavailableError('disk-full', new Error('database or disk is full')))
            : (value as (...a: unknown[]) => unknown).apply(target, args);
      },
    });
    Object.defineProperty(h.server.store, 'evidence', { value: failing, configurable: true });
    try {
      const cer = await submit(h);
      expect(cer.outcome).toBe('complete');
      await until(
        () =>
          h.logs.some((l) => l.includes('evidence capture failed: the store is unavailable'))
            ? true
            : undefined,
        10_000,
        'the failed write logged',
      );
      const read = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${cer.id}`).set(h.auth);
      expect(read.status).toBe(200);
      expect((read.body as CoverageEligibilityResponse).outcome).toBe('complete');
      full = false;
      const ids = binaryIds(cer);
      await settled(h, String(cer.id), ids.length);
      const rows = await real.ofCheck('clinic-a', String(cer.id));
      expect(rows.every((r) => r.state === 'kept')).toBe(true);
      expect(h.logs.filter((l) => l.includes('evidence capture failed')).length).toBe(1);
    } finally {
      Object.defineProperty(h.server.store, 'evidence', { value: real, configurable: true });
    }
  });
});

describe('a document whose every link is refused (the portal letter, expired at issue)', () => {
  let h: Harness;
  /** The service's clock runs `shift` ms ahead of the real one; the test moves it to each next try. */
  let shift = 0;
  const LETTER = '_eligibility-letter.pdf';
  const RETRY_MS = 30 * 60_000;
  beforeAll(async () => {
    // The first back-off as a deployment would have it (half an hour): each next try is reached
    // by moving the service's clock, never by waiting.
    h = await startHarness({ evidenceRetryMs: RETRY_MS, overrides: { now: () => Date.now() + shift } });
    h.sandbox.control.refuseLinks([LETTER]);
  });
  afterAll(async () => {
    h.sandbox.control.refuseLinks([]);
    await h.stop();
  });

  const utc = (ms: number) => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  const readCer = async (id: string) => {
    const res = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${id}`).set(h.auth);
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    return res.body as CoverageEligibilityResponse;
  };

  it('says "not kept yet" with the next try from the first failed try, keeps the others, then "not kept" with why', async () => {
    const before = Date.now();
    const cer = await submit(h);
    const ids = binaryIds(cer);
    const check = await h.server.store.get('clinic-a', String(cer.id));
    const letter = ids.find((id) => {
      const envelope = envelopeSchema.parse(check?.envelope);
      return resolveBinary(envelope, parseBinaryId(id)!)?.url.includes(LETTER);
    });
    expect(letter).toBeDefined();
    const rowOf = async () =>
      (await h.server.store.evidence.ofCheck('clinic-a', String(cer.id))).find((r) => r.id === letter)!;
    // The first try failed (its link refused, a fresh one refused too); the others are kept meanwhile.
    const first = await until(
      async () => {
        const rows = await h.server.store.evidence.ofCheck('clinic-a', String(cer.id));
        const others = rows.filter((r) => r.id !== letter);
        const row = rows.find((r) => r.id === letter);
        return row?.attempts === 1 &&
          others.length === ids.length - 1 &&
          others.every((r) => r.state === 'kept')
          ? row
          : undefined;
      },
      15_000,
      'the letter tried once, the others kept',
    );
    expect(first.state).toBe('pending');
    expect(first.nextRunAt).toBeGreaterThanOrEqual(before + RETRY_MS);
    expect(first.nextRunAt).toBeLessThanOrEqual(Date.now() + RETRY_MS);
    const waiting = await readCer(String(cer.id));
    expect(Number(waiting.meta?.versionId)).toBeGreaterThan(Number(cer.meta?.versionId));
    const div = String(waiting.text?.div);
    expect(div).toContain('Documents not kept yet');
    expect(div).toContain(
      `Not kept yet: the payer portal refused its link; the next try is at ${utc(first.nextRunAt)}.`,
    );
    // Never shown as kept: no link to it in the narrative, not listed, while the others are.
    expect(div).not.toContain(`/fhir/Binary/${letter}"`);
    const otherLetters = ids.filter((id) => id !== letter && /\.d\d+$/.test(id));
    expect(otherLetters.length).toBeGreaterThan(0);
    for (const id of otherLetters) expect(div).toContain(`/fhir/Binary/${id}"`);
    const listed = (await documents(h, `related=CoverageEligibilityResponse/${cer.id}`)).entry?.map(
      (e) => e.resource?.id,
    );
    expect(listed?.sort()).toEqual(ids.filter((id) => id !== letter).sort());

    // Each next try, the service's clock moved to it: refused again, until the last one gives up.
    let row = first;
    for (let tries = 0; row.state === 'pending' && tries < 10; tries++) {
      const attempts = row.attempts;
      shift = row.nextRunAt - Date.now() + 1_000;
      await h.server.evidence.tick();
      row = await until(
        async () => {
          const now = await rowOf();
          return now.attempts > attempts ? now : undefined;
        },
        10_000,
        'the next try',
      );
      if (row.state === 'pending') {
        const noted = String((await readCer(String(cer.id))).text?.div);
        expect(noted).toContain(`the next try is at ${utc(row.nextRunAt)}.`);
      }
    }
    expect(row).toMatchObject({ state: 'failed', reason: 'refused', attempts: 8 });
    // About six hours of tries at this back-off (the first half an hour, then at most an hour).
    expect(shift).toBeGreaterThan(5 * 3_600_000);
    const given = await readCer(String(cer.id));
    const final = String(given.text?.div);
    expect(final).not.toContain('Not kept yet');
    expect(final).toContain('Documents not kept');
    expect(final).toContain('Could not be kept: the payer portal refused its link at every try.');
    expect(binaryIds(given).sort()).toEqual(ids.filter((id) => id !== letter).sort());
    const res = await request(h.url).get(`/fhir/Binary/${letter}`).set(h.auth);
    expect(res.status).toBe(404);
    expectValidFhir(res.body);
    expect(JSON.stringify(res.body)).toContain('refused its link at every try');
    // The other documents stayed kept throughout.
    const rows = await h.server.store.evidence.ofCheck('clinic-a', String(cer.id));
    expect(rows.filter((r) => r.id !== letter).every((r) => r.state === 'kept')).toBe(true);
    // Each try and the giving up are logged by check and document, never the patient or a link.
    const logs = h.logs.join('\n');
    expect(logs).toContain('document not downloaded; will try again');
    expect(logs).toContain('document not kept');
    expect(logs).not.toContain(ELIGIBLE);
    expect(logs).not.toContain('sig=');
  });
});
