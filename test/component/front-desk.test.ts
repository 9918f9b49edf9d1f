/**
 * The front-desk page's server side (src/http/app-page.ts, src/operations/front-desk.ts): the
 * static page with its own Content-Security-Policy, and /app/api/ authenticated with the tenant's
 * key and scoped to that tenant: payers, visit types, the operator view (guards, stuck checks,
 * queues) and a guard reset. Against the running service and the sandbox over real HTTP.
 */
import type { CoverageEligibilityResponse, OperationOutcome, Patient } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import { SERVICE_CATEGORY_SYSTEM } from '../../src/mapping/response/codes.js';
import { serviceCategories } from '../../src/mapping/response/vocabulary.js';
import type { OperatorView, VisitTypeOption } from '../../src/operations/front-desk.js';
import { PAYERS as SANDBOX_PAYERS } from '../../src/sandbox/scenarios.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';

let h: Harness;

beforeAll(async () => {
  // A short check timeout, so the slow scenario is a stuck check within the test.
  h = await startHarness({ checkTimeoutMs: 300 });
});
afterAll(async () => {
  await h.stop();
});

async function submit(auth: Record<string, string>, emiratesId: string, payer: string) {
  return postSubmit(h.url, auth, { emiratesId, payer }, { Prefer: 'wait=20' });
}

async function operator(auth: Record<string, string>): Promise<OperatorView> {
  const res = await request(h.url).get('/app/api/operator').set(auth);
  expect(res.status).toBe(200);
  return res.body as OperatorView;
}

describe('the page', () => {
  it('is served at /app/ without a key, with a policy that allows this origin only', async () => {
    const res = await request(h.url).get('/app/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.text).toContain('<label for="api-key">API key</label>');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/https?:/);
    for (const file of ['main.js', 'api.js', 'narrative.js', 'style.css']) {
      const asset = await request(h.url).get(`/app/${file}`);
      expect(asset.status, file).toBe(200);
      // No third-party asset: nothing is loaded from another origin.
      expect(asset.text, file).not.toMatch(
        /(src|href)=["']https?:|import[^;]+from\s+["']https?:|url\(["']?https?:/,
      );
    }
    expect((await request(h.url).get('/app')).status).toBe(301);
    // The API keeps its own policy.
    const api = String((await request(h.url).get('/fhir/metadata')).headers['content-security-policy']);
    expect(api).toMatch(/^default-src 'none';/);
    expect(api).not.toContain("connect-src 'self'");
  });
});

describe('/app/api/', () => {
  it('needs the tenant key: 401 OperationOutcome without it or with a wrong one', async () => {
    for (const path of [
      '/app/api/payers',
      '/app/api/visit-types',
      '/app/api/settings',
      '/app/api/operator',
    ]) {
      for (const auth of [{}, { Authorization: 'Bearer wrong' }]) {
        const res = await request(h.url).get(path).set(auth);
        expect(res.status, path).toBe(401);
        expectValidFhir(res.body);
      }
    }
    expect((await request(h.url).post('/app/api/guards/DAMAN/reset')).status).toBe(401);
  });

  it('lists the payers (known and recent) and the visit types the form offers, and the tenant time zone', async () => {
    const payers = await request(h.url).get('/app/api/payers').set(h.auth);
    expect(payers.status).toBe(200);
    expect(payers.body.payers).toEqual(
      expect.arrayContaining([{ code: 'DAMAN', display: 'Daman - National Health Insurance Company' }]),
    );
    // Every payer the sandbox knows is named.
    const codes = (payers.body.payers as { code: string }[]).map((p) => p.code);
    for (const code of Object.keys(SANDBOX_PAYERS)) expect(codes, code).toContain(code);
    // Recent: the tenant's newest checks' payer codes, newest first, any code, never another tenant's.
    await submit(h.auth, '784-1990-0000001-0', 'zzrecent');
    await submit(h.authB, '784-1990-0000001-0', 'OTHERTENANT');
    const after = await request(h.url).get('/app/api/payers').set(h.auth);
    expect(after.body.recent[0]).toBe('ZZRECENT');
    expect(after.body.recent).not.toContain('OTHERTENANT');

    const visitTypes = await request(h.url).get('/app/api/visit-types').set(h.auth);
    const list = visitTypes.body.visitTypes as VisitTypeOption[];
    expect(list[0]).toEqual({
      system: `${CANONICAL_BASE}/CodeSystem/visit-type`,
      code: 'consultation',
      display: 'Consultation',
      category: { system: SERVICE_CATEGORY_SYSTEM, code: 'consultation' },
    });
    expect(list.length).toBeLessThanOrEqual(12);
    expect(new Set(list.map((v) => v.display)).size).toBe(list.length);
    // Each estimate category is a code of the service-category CodeSystem.
    const categories = new Set(serviceCategories().map((c) => c.code));
    for (const v of list) expect(categories.has(v.category.code), v.code).toBe(true);

    const settings = await request(h.url).get('/app/api/settings').set(h.auth);
    expect(settings.body).toEqual({ tenant: 'clinic-a', timeZone: 'Asia/Dubai', evidenceRetentionDays: 730 });
  });

  it("shows a tenant its own guards, stuck checks and queue, never another tenant's; resets only its own guard", async () => {
    const refused = await submit(h.auth, '784-1990-0000004-4', 'METLIFE');
    expect(refused.status).toBe(422);
    const slow = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Prefer', 'wait=0')
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000012-7', payer: 'NAS' }));
    const slowId = new URL(String(slow.headers.location)).pathname.split('/').pop();

    const mine = await until(
      async () => {
        const view = await operator(h.auth);
        return view.stuck.some((c) => c.id === slowId) ? view : undefined;
      },
      10_000,
      'the slow check to be stuck',
    );
    expect(mine.tenant).toBe('clinic-a');
    expect(mine.guards).toEqual([
      expect.objectContaining({ payer: 'METLIFE', kind: 'credentials', until: null }),
    ]);
    expect(mine.stuck.find((c) => c.id === slowId)).toMatchObject({ payer: 'NAS', state: 'polling' });
    expect(mine.queues).toEqual([
      {
        clinic: 'clinic-a',
        waiting: 0,
        running: expect.any(Number),
        desk: { waiting: 0, running: expect.any(Number) },
        background: { waiting: 0, running: 0 },
        maxInFlight: 3,
        deskSlots: 1,
      },
    ]);
    expect(mine.queues[0]!.running).toBeGreaterThanOrEqual(1);
    // No patient data in the operator view.
    expect(JSON.stringify(mine)).not.toMatch(/784-1990|Aisha|Testpatient/);

    const theirs = await operator(h.authB);
    expect(theirs).toEqual({
      tenant: 'clinic-b',
      guards: [],
      stuck: [],
      queues: [
        {
          clinic: 'clinic-b',
          waiting: 0,
          running: 0,
          desk: { waiting: 0, running: 0 },
          background: { waiting: 0, running: 0 },
          maxInFlight: 3,
          deskSlots: 1,
        },
      ],
      // Clinic B does not read its schedule from an EHR (docs/ehr-schedule.md).
      ehrSchedule: null,
    });
    // Tenant B cannot reset tenant A's guard: 404, and the guard stays.
    const other = await request(h.url).post('/app/api/guards/METLIFE/reset').set(h.authB);
    expect(other.status).toBe(404);
    expectValidFhir(other.body);
    expect((other.body as OperationOutcome).issue[0]?.expression).toEqual(['payer']);
    expect(await h.server.store.getGuard('clinic-a', 'METLIFE')).not.toBeNull();

    const reset = await request(h.url).post('/app/api/guards/metlife/reset').set(h.auth);
    expect(reset.status).toBe(204);
    expect(await h.server.store.getGuard('clinic-a', 'METLIFE')).toBeNull();
    expect((await request(h.url).post('/app/api/guards/METLIFE/reset').set(h.auth)).status).toBe(404);
    // Checks reach the payer again.
    expect((await submit(h.auth, '784-1990-0000001-0', 'METLIFE')).status).toBe(200);
  });

  it('a payer that is not a payer code is a 400 naming it', async () => {
    for (const payer of ['%3Cscript%3E', 'a'.repeat(65), '-x']) {
      const res = await request(h.url).post(`/app/api/guards/${payer}/reset`).set(h.auth);
      expect(res.status, payer).toBe(400);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]?.expression).toEqual(['payer']);
    }
  });
});

describe('/app/api/recent-names (issue 35)', () => {
  /** The CER id of a check made without a patient name. */
  async function unnamed(auth: Record<string, string>, emiratesId: string): Promise<string> {
    const body = eligibilityRequest({ emiratesId, payer: 'DAMAN' });
    for (const resource of body.contained ?? [])
      if (resource.resourceType === 'Patient') delete (resource as Patient).name;
    const res = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(auth)
      .set('Prefer', 'wait=20')
      .set('Content-Type', 'application/fhir+json')
      .send(body);
    expect(res.status).toBe(200);
    return String((res.body as CoverageEligibilityResponse).id);
  }

  it.each<[string, string, RegExp, 'identifier']>([
    // The sandbox echoes the name sent as the policy holder's: none sent, none returned (the
    // portal's name is shown on the page from a recorded answer: test/browser/collect.test.ts).
    [
      'a found member the portal gives no holder name for: the masked identifier',
      '784-1990-0000001-0',
      /^ID ending 0010$/,
      'identifier',
    ],
    [
      'member not found: the identifier masked to its last 4 digits',
      '784-1990-0000003-6',
      /^ID ending 0036$/,
      'identifier',
    ],
  ])('names %s, never the whole identifier', async (_name, emiratesId, text, source) => {
    const id = await unnamed(h.auth, emiratesId);
    const res = await request(h.url).get(`/app/api/recent-names?id=${id}`).set(h.auth);
    expect(res.status).toBe(200);
    const names = (res.body as { names: { id: string; text: string; source: string }[] }).names;
    expect(names).toEqual([{ id, text: expect.stringMatching(text), source }]);
    expect(JSON.stringify(res.body)).not.toContain(emiratesId.replace(/-/g, '').slice(3));
    // Another tenant's check is not answered.
    const other = await request(h.url).get(`/app/api/recent-names?id=${id}`).set(h.authB);
    expect((other.body as { names: unknown[] }).names).toEqual([]);
  });

  it.each([['%3Cx%3E'], ['a'.repeat(65)], [Array.from({ length: 21 }, (_v, i) => `c${i}`).join('&id=')]])(
    'an id that is not a check id, or too many, is a 400 naming id (%#)',
    async (ids) => {
      const res = await request(h.url).get(`/app/api/recent-names?id=${ids}`).set(h.auth);
      expect(res.status).toBe(400);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]?.expression).toEqual(['id']);
    },
  );
});

describe('the narrative over HTTP', () => {
  /** The CER at a $submit answer's Location, read with the key. */
  async function cerAt(location: unknown): Promise<CoverageEligibilityResponse> {
    const read = await request(h.url)
      .get(new URL(String(location)).pathname)
      .set(h.auth);
    expect(read.status).toBe(200);
    expectValidFhir(read.body);
    return read.body as CoverageEligibilityResponse;
  }

  const headline = (cer: CoverageEligibilityResponse) =>
    /<p><b>([^<]+)<\/b><\/p>/.exec(cer.text?.div ?? '')?.[1];

  it('every CER the service answers or stores carries it: final, error, queued, search-all', async () => {
    const eligible = await submit(h.auth, '784-1990-0000001-0', 'DAMAN');
    expect(eligible.status).toBe(200);
    expectValidFhir(eligible.body);
    expect(eligible.body.text).toMatchObject({ status: 'generated' });
    expect(headline(eligible.body as CoverageEligibilityResponse)).toBe('Eligible');
    expect((await cerAt(eligible.headers.location)).text).toEqual(eligible.body.text);

    const notFound = await submit(h.auth, '784-1990-0000003-6', 'DAMAN');
    expect(headline(await cerAt(notFound.headers.location))).toBe('No determination');

    const queued = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Prefer', 'wait=0')
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000012-7', payer: 'THIQA' }));
    expect(queued.body.outcome).toBe('queued');
    expectValidFhir(queued.body);
    expect(headline(queued.body as CoverageEligibilityResponse)).toMatch(
      /^Still checking since \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/,
    );

    const all = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Prefer', 'wait=20')
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000031-7', discovery: true }));
    const searchAll = await until(
      async () => {
        const cer = await cerAt(all.headers.location);
        return cer.outcome === 'queued' ? undefined : cer;
      },
      20_000,
      'the search-all to finish',
    );
    expect(headline(searchAll)).toBe('Eligible at 2 payers');

    // _summary=text: the narrative with the mandatory elements.
    const texts = await request(h.url)
      .get('/fhir/CoverageEligibilityResponse?_summary=text&_count=100')
      .set(h.auth);
    const entries = (texts.body.entry ?? []) as { resource: CoverageEligibilityResponse }[];
    expect(entries.length).toBeGreaterThanOrEqual(4);
    for (const { resource } of entries) {
      expectValidFhir(resource);
      expect(resource.text?.status).toBe('generated');
      expect(resource.insurance).toBeUndefined();
    }
  });
});
