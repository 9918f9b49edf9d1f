/**
 * CDS Hooks 2.0 (docs/cds-hooks.md) over real HTTP: real JWTs signed by the EHR's keys (one
 * client's JWKS served by a real local server), a real local FHIR server for missing prefetch,
 * and a server on an unregistered port that must never be called. Every card is held against the
 * CDS Hooks 2.0 card schema (test/support/cds.ts); every FHIR resource against the validator.
 */
import { createServer, type Server } from 'node:http';
import type { AuditEvent, Bundle, Coverage, CoverageEligibilityRequest, OperationOutcome } from 'fhir/r4.js';
import { SignJWT } from 'jose';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreUnavailableError } from '../../src/checks/store/outage.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { clientKey, type ClientKey } from '../support/smart.js';
import {
  appointment,
  cardsOf,
  cdsJwt,
  hookRequest,
  listen,
  PATIENT_BIRTH_DATE,
  PATIENT_PHONE,
  payerOrganization,
  startFhirStub,
  type FhirStub,
  type JwtOptions,
} from '../support/cds.js';
import { until } from '../support/until.js';

const ISS = 'https://ehr.example.org';
const ISS_URL_KEYS = 'https://other-ehr.example.org';
const BOOK = 'eligibility-appointment-book';
const VIEW = 'eligibility-patient-view';

let h: Harness;
let esKey: ClientKey;
let rsKey: ClientKey;
let strangerKey: ClientKey;
let jwksServer: Server;
let fhir: FhirStub;
let trap: Server;
let trapRequests = 0;
let trapUrl: string;
let base: string;

beforeAll(async () => {
  [esKey, rsKey, strangerKey] = await Promise.all([
    clientKey('ES384'),
    clientKey('RS384'),
    clientKey('ES384'),
  ]);
  jwksServer = createServer((_req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ keys: [rsKey.publicJwk] }));
  });
  const jwksUrl = `${await listen(jwksServer)}/jwks.json`;
  fhir = await startFhirStub({ emiratesId: '784-1990-5555555-3' });
  // Nothing registered points here: any request it receives is an SSRF.
  trap = createServer((_req, res) => {
    trapRequests += 1;
    res.end('{}');
  });
  trapUrl = await listen(trap);
  h = await startHarness({
    reuseWindowMinutes: 240,
    cdsClients: {
      a: [
        { iss: ISS, jwks: { keys: [esKey.publicJwk] }, fhirServers: [`${fhir.url}/fhir`] },
        { iss: ISS_URL_KEYS, jwksUrl, fhirServers: [] },
      ],
    },
  });
  base = `http://localhost:${new URL(h.url).port}`;
});

afterAll(async () => {
  await h.stop();
  await fhir.close();
  await new Promise<void>((resolve) => jwksServer.close(() => resolve()));
  await new Promise<void>((resolve) => trap.close(() => resolve()));
});

function call(service: string, body: unknown, jwt?: Partial<JwtOptions> & { key?: ClientKey }) {
  return cdsJwt(jwt?.key ?? esKey, { aud: `${base}/cds-services/${service}`, iss: ISS, ...jwt }).then(
    (token) =>
      request(h.url)
        .post(`/cds-services/${service}`)
        .set('Authorization', `Bearer ${token}`)
        .send(body as object),
  );
}

async function storedChecks(): Promise<number> {
  const { checks } = await h.server.store.search('clinic-a', {}, { count: 1000, offset: 0, total: false });
  return checks.length;
}

function expectOperationOutcome(res: request.Response, status: number, expression?: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  const outcome = res.body as OperationOutcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expectValidFhir(outcome);
  if (expression) expect(outcome.issue[0]?.expression).toEqual([expression]);
}

describe('discovery', () => {
  it('lists both services with their prefetch templates, without auth', async () => {
    const res = await request(h.url).get('/cds-services');
    expect(res.status).toBe(200);
    const services = (res.body as { services: Record<string, unknown>[] }).services;
    expect(services.map((s) => [s.id, s.hook])).toEqual([
      [BOOK, 'appointment-book'],
      [VIEW, 'patient-view'],
    ]);
    for (const service of services) {
      expect(service).toMatchObject({
        title: expect.any(String),
        description: expect.any(String),
        prefetch: {
          patient: 'Patient/{{context.patientId}}',
          coverage: 'Coverage?patient={{context.patientId}}&status=active',
        },
      });
    }
  });
});

describe('appointment-book', () => {
  it('stores each appointment as a request, starts its check and answers at once with one card each', async () => {
    // Two days ahead (never a fixed date: it would turn into the past), 09:30 in Dubai.
    const day = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
    const start = `${day}T05:30:00Z`;
    const body = hookRequest('appointment-book', {
      appointments: [appointment('a1', start), appointment('a2')],
      patient: { emiratesId: '784-1990-0000001-0' },
    });
    const started = Date.now();
    const res = await call(BOOK, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Date.now() - started).toBeLessThan(2000);
    const cards = cardsOf(res.body);
    expect(cards).toHaveLength(2);
    expect(cards[0]).toMatchObject({
      summary: `Eligibility check started for the appointment of ${day} 09:30; re-checked 2 hours before it`,
      indicator: 'info',
      source: { label: expect.any(String) },
    });
    expect(cards[0]!.detail).toContain('**Next step:**');
    const link = cards[0]!.links![0]!;
    expect(link.type).toBe('absolute');
    const checkId = /#answer=([\w-]+)$/.exec(link.url)?.[1];
    expect(link.url.startsWith(`${base}/app/#answer=`)).toBe(true);

    const stored = await request(h.url).get(`/fhir/CoverageEligibilityRequest/${checkId}`).set(h.auth);
    expect(stored.status).toBe(200);
    const req = stored.body as CoverageEligibilityRequest;
    expectValidFhir(req);
    expect(req.identifier?.[0]).toEqual({
      system: 'http://fhir-eligibility-adapter.org/fhir/cds-appointment',
      value: `${body.hookInstance as string}/a1`,
    });
    expect(req.servicedPeriod?.start).toBe(start);
  });

  it('never books twice when the same call is repeated', async () => {
    const body = hookRequest('appointment-book', { appointments: [appointment('again')] });
    const first = cardsOf((await call(BOOK, body)).body);
    const before = await storedChecks();
    const second = cardsOf((await call(BOOK, body)).body);
    expect(await storedChecks()).toBe(before);
    expect(second[0]!.links![0]!.url).toBe(first[0]!.links![0]!.url);
  });

  it('answers with the booking answer when one is there to reuse', async () => {
    const patient = { emiratesId: '784-1990-2222222-0' };
    const first = cardsOf((await call(BOOK, hookRequest('appointment-book', { patient }))).body);
    const id = /#answer=([\w-]+)$/.exec(first[0]!.links![0]!.url)?.[1];
    await until(async () => {
      const cer = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${id}`).set(h.auth);
      return (cer.body as { outcome?: string }).outcome === 'complete' ? true : undefined;
    }, 20_000);
    const again = cardsOf((await call(BOOK, hookRequest('appointment-book', { patient }))).body);
    expect(again[0]).toMatchObject({ indicator: 'info', summary: expect.stringMatching(/^Eligible: /) });
    expect(again[0]!.summary).toContain('consultation 20% up to AED 50');
  });

  it.each([
    ['a body that is not a CDS Hooks request', [1, 2], undefined],
    [
      'a request without hookInstance',
      { hook: 'appointment-book', context: { patientId: 'p1' } },
      'hookInstance',
    ],
    ['the wrong hook for the service', { ...hookRequest('patient-view') }, 'hook'],
    [
      'more than 50 appointments',
      hookRequest('appointment-book', {
        appointments: Array.from({ length: 51 }, (_, i) => appointment(`m${i}`)),
      }),
      'context.appointments',
    ],
    [
      'an Appointment without start',
      hookRequest('appointment-book', { appointments: [{ ...appointment('x'), start: undefined }] }),
      'context.appointments.entry[0].resource.start',
    ],
  ])('answers 400 naming the element for %s, storing nothing', async (_name, body, expression) => {
    const before = await storedChecks();
    const res = await call(BOOK, body);
    expectOperationOutcome(res, 400, expression);
    expect(await storedChecks()).toBe(before);
  });
});

describe('patient-view', () => {
  it('starts a check when there is no answer and says so; shows the answer with its date once final', async () => {
    const patient = { emiratesId: '784-1990-0000002-8' };
    const first = cardsOf((await call(VIEW, hookRequest('patient-view', { patient }))).body);
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({
      indicator: 'info',
      summary: expect.stringMatching(/^Eligibility check started with /),
    });
    const before = await storedChecks();
    const whileRunning = cardsOf((await call(VIEW, hookRequest('patient-view', { patient }))).body);
    expect(await storedChecks()).toBe(before);
    expect(whileRunning[0]!.links![0]!.url).toBe(first[0]!.links![0]!.url);
    const final = await until(async () => {
      const cards = cardsOf((await call(VIEW, hookRequest('patient-view', { patient }))).body);
      return cards[0]!.summary.startsWith('Not eligible') ? cards : undefined;
    }, 20_000);
    expect(final[0]).toMatchObject({ indicator: 'warning' });
    expect(final[0]!.summary).toMatch(/\(checked \d{4}-\d{2}-\d{2}\)$/);
    expect(final[0]!.detail).toContain('**Next step:**');
  });

  it('shows a warning card, and no check, for a patient with no active insurance', async () => {
    const body = hookRequest('patient-view', { patient: { emiratesId: '784-1990-3333333-9' } });
    (body.prefetch as { coverage: unknown }).coverage = {
      resourceType: 'Bundle',
      type: 'searchset',
      entry: [],
    };
    const before = await storedChecks();
    const cards = cardsOf((await call(VIEW, body)).body);
    expect(cards[0]).toMatchObject({ indicator: 'warning' });
    expect(await storedChecks()).toBe(before);
  });

  it('answers a mistyped Emirates ID with a warning card that says so, and starts nothing', async () => {
    const before = await storedChecks();
    const creates = h.sandbox.control.stats().tasksCreated;
    // 784-1987-4521001-7 with two neighbouring digits swapped.
    const body = hookRequest('patient-view', { patient: { emiratesId: '784-1987-4521010-7' } });
    const cards = cardsOf((await call(VIEW, body)).body);
    expect(cards).toHaveLength(1);
    expect(cards[0]).toMatchObject({ indicator: 'warning' });
    expect(cards[0]!.detail).toMatch(/Re-type it from the patient's Emirates ID card/);
    expect(JSON.stringify(cards)).not.toContain('4521010');
    expect(await storedChecks()).toBe(before);
    expect(h.sandbox.control.stats().tasksCreated).toBe(creates);
  });

  it('puts no Emirates ID, card number, phone or birth date in any card', async () => {
    const patient = { emiratesId: '784-1990-0000003-6', cardNumber: '4410-9999-0000777' };
    await call(VIEW, hookRequest('patient-view', { patient }));
    const cards = await until(async () => {
      const answer = cardsOf((await call(VIEW, hookRequest('patient-view', { patient }))).body);
      return answer[0]!.summary.startsWith('Member not found') ? answer : undefined;
    }, 20_000);
    const text = JSON.stringify(cards);
    for (const secret of [
      '784-1990-0000003-6',
      '784199000000036',
      '4410-9999-0000777',
      PATIENT_PHONE,
      payerOrganization,
      PATIENT_BIRTH_DATE,
    ])
      expect(text).not.toContain(secret);
  });
});

describe('prefetch from the fhirServer', () => {
  it('reads missing prefetch from a registered fhirServer with the access token', async () => {
    fhir.requests.length = 0;
    const body = hookRequest('patient-view', {
      prefetch: false,
      fhirServer: `${fhir.url}/fhir`,
      patient: { emiratesId: '784-1990-5555555-3' },
    });
    const res = await call(VIEW, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(cardsOf(res.body)[0]!.summary).toMatch(/^Eligibility check started with Daman/);
    expect(fhir.requests.map((r) => r.path)).toEqual([
      '/fhir/Patient/p1',
      '/fhir/Coverage?patient=p1&status=active',
    ]);
    expect(fhir.requests[0]!.headers.authorization).toBe('Bearer ehr-access-token-5b7e');
  });

  it('looks a payor reference up on the registered fhirServer when the Organization did not come with the Coverage', async () => {
    fhir.requests.length = 0;
    const body = hookRequest('patient-view', {
      fhirServer: `${fhir.url}/fhir`,
      patient: { emiratesId: '784-1990-6666666-2' },
    });
    const prefetch = body.prefetch as { coverage: Bundle };
    prefetch.coverage.entry = prefetch.coverage.entry!.slice(0, 1);
    const res = await call(VIEW, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(cardsOf(res.body)[0]!.summary).toMatch(/^Eligibility check started with Daman/);
    expect(fhir.requests.map((r) => r.path)).toEqual(['/fhir/Organization/org-daman']);
  });

  it('reads a Coverage that holds its payer contained, as $submit would', async () => {
    const body = hookRequest('patient-view', { patient: { emiratesId: '784-1990-7777777-1' } });
    const coverage = (body.prefetch as { coverage: Bundle }).coverage.entry![0]!.resource as Coverage;
    coverage.contained = [{ ...payerOrganization(), id: 'payer' }];
    coverage.payor = [{ reference: '#payer' }];
    const res = await call(VIEW, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(cardsOf(res.body)[0]!.summary).toMatch(/^Eligibility check started with Daman/);
  });

  it.each([
    ['a fhirServer on an unregistered port', () => `${trapUrl}/fhir`],
    ['a path that only shares a prefix of the registered one', () => `${fhir.url}/fhir-evil`],
    ['no fhirServer at all', () => undefined],
  ])('answers 412 and calls nothing for %s', async (_name, server) => {
    fhir.requests.length = 0;
    const fhirServer = server();
    const body = hookRequest('patient-view', { prefetch: false, ...(fhirServer ? { fhirServer } : {}) });
    const res = await call(VIEW, body);
    expectOperationOutcome(res, 412, 'prefetch.patient');
    expect(trapRequests).toBe(0);
    expect(fhir.requests).toEqual([]);
  });

  it('never follows a redirect to another origin (412)', async () => {
    const route = fhir.route;
    fhir.route = () => ({ status: 302, headers: { Location: `${trapUrl}/fhir/Patient/p1` } });
    try {
      const body = hookRequest('patient-view', { prefetch: false, fhirServer: `${fhir.url}/fhir` });
      expectOperationOutcome(await call(VIEW, body), 412, 'prefetch.patient');
      expect(trapRequests).toBe(0);
    } finally {
      fhir.route = route;
    }
  });

  it('answers 412 when the FHIR server answers too much', async () => {
    const route = fhir.route;
    fhir.route = () => ({
      status: 200,
      body: { resourceType: 'Patient', id: 'p1', text: 'x'.repeat(3_000_000) },
    });
    try {
      const body = hookRequest('patient-view', { prefetch: false, fhirServer: `${fhir.url}/fhir` });
      expectOperationOutcome(await call(VIEW, body), 412, 'prefetch.patient');
    } finally {
      fhir.route = route;
    }
  });
});

describe('the JWT', () => {
  it('accepts an RS384 JWT whose key set is fetched from the client jwksUrl', async () => {
    const res = await call(VIEW, hookRequest('patient-view'), { key: rsKey, iss: ISS_URL_KEYS });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    cardsOf(res.body);
  });

  const hs256 = () =>
    new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(ISS)
      .setAudience(`${base}/cds-services/${VIEW}`)
      .setExpirationTime('2m')
      .setIssuedAt()
      .setJti(crypto.randomUUID())
      .sign(new TextEncoder().encode('a-shared-secret-nobody-registered-123456'));

  it.each<[string, () => Promise<string | undefined>]>([
    ['no Authorization header', () => Promise.resolve(undefined)],
    ['a bearer value that is no JWT', () => Promise.resolve('not-a-jwt')],
    ['an HS256 JWT', hs256],
    [
      'an unknown iss',
      () => cdsJwt(esKey, { aud: `${base}/cds-services/${VIEW}`, iss: 'https://evil.example' }),
    ],
    [
      'a key the iss did not register',
      () => cdsJwt(strangerKey, { aud: `${base}/cds-services/${VIEW}`, iss: ISS }),
    ],
    ['the aud of another service', () => cdsJwt(esKey, { aud: `${base}/cds-services/${BOOK}`, iss: ISS })],
    ['an expired JWT', () => cdsJwt(esKey, { aud: `${base}/cds-services/${VIEW}`, iss: ISS, expIn: -120 })],
    [
      'exp more than 5 minutes ahead',
      () => cdsJwt(esKey, { aud: `${base}/cds-services/${VIEW}`, iss: ISS, expIn: 900 }),
    ],
    ['no jti', () => cdsJwt(esKey, { aud: `${base}/cds-services/${VIEW}`, iss: ISS, omit: ['jti'] })],
  ])('answers 401, no card and no check, for %s', async (_name, token) => {
    const before = await storedChecks();
    const bearer = await token();
    const res = await request(h.url)
      .post(`/cds-services/${VIEW}`)
      .set(bearer ? { Authorization: `Bearer ${bearer}` } : {})
      .send(hookRequest('patient-view', { patient: { emiratesId: '784-1990-4444444-8' } }));
    expectOperationOutcome(res, 401);
    expect(res.body).not.toHaveProperty('cards');
    expect(await storedChecks()).toBe(before);
    if (bearer) expect(h.logs.join('\n')).not.toContain(bearer);
  });

  it('answers 401 to a JWT used a second time (jti)', async () => {
    const token = await cdsJwt(esKey, { aud: `${base}/cds-services/${VIEW}`, iss: ISS });
    const send = () =>
      request(h.url)
        .post(`/cds-services/${VIEW}`)
        .set('Authorization', `Bearer ${token}`)
        .send(hookRequest('patient-view'));
    expect((await send()).status).toBe(200);
    expectOperationOutcome(await send(), 401);
  });
});

describe('feedback, audit and metrics', () => {
  it('takes feedback (200, counted), refuses it without a valid JWT', async () => {
    const feedback = {
      feedback: [
        { card: crypto.randomUUID(), outcome: 'accepted', outcomeTimestamp: new Date().toISOString() },
      ],
    };
    const res = await call(`${VIEW}/feedback`, feedback, { aud: `${base}/cds-services/${VIEW}` });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const refused = await request(h.url).post(`/cds-services/${VIEW}/feedback`).send(feedback);
    expectOperationOutcome(refused, 401);
    const metrics = await request(h.url).get('/metrics');
    expect(metrics.text).toMatch(
      /cds_feedback_total\{service="eligibility-patient-view",outcome="accepted"\} 1/,
    );
    expect(metrics.text).toMatch(
      /cds_hook_calls_total\{service="eligibility-appointment-book",outcome="answered"\} \d+/,
    );
    expect(metrics.text).toMatch(
      /cds_hook_calls_total\{service="eligibility-patient-view",outcome="refused"\} \d+/,
    );
  });

  it('records each hook call as an AuditEvent naming the client and the checks', async () => {
    const res = await call(BOOK, hookRequest('appointment-book', { appointments: [appointment('audit-1')] }));
    const id = /#answer=([\w-]+)$/.exec(cardsOf(res.body)[0]!.links![0]!.url)?.[1];
    await h.server.audit.flush();
    const search = await request(h.url)
      .get(`/fhir/AuditEvent?entity=CoverageEligibilityResponse/${id}`)
      .set(h.auth);
    const events = ((search.body as Bundle).entry ?? [])
      .map((e) => e.resource as AuditEvent)
      .filter((e) => e.subtype?.some((s) => s.code === `cds:${BOOK}`));
    expect(events.length).toBeGreaterThanOrEqual(1);
    expectValidFhir(events[0]);
    expect(events[0]!.agent[0]?.who?.identifier?.value).toBe(ISS);
  });

  it('writes no JWT, access token or patient data to the log', () => {
    const text = h.logs.join('\n');
    for (const value of [
      'ehr-access-token-5b7e',
      '784-1990-0000001-0',
      PATIENT_PHONE,
      payerOrganization,
      PATIENT_BIRTH_DATE,
      'Cardtest',
    ])
      expect(text).not.toContain(value);
  });
});

describe('a store outage', () => {
  // docs/operations.md, "When the store fails": the one 503 of the error handler, never a card.
  it.each([
    ['patient-view, reading the answers', VIEW, 'patient-view', () => vi.spyOn(h.server.store, 'search')],
    [
      'appointment-book, booking the appointment',
      BOOK,
      'appointment-book',
      () => vi.spyOn(h.server.store.appointments, 'findByKey'),
    ],
  ] as const)('%s: 503 with Retry-After, no card', async (_name, service, hook, spy) => {
    const failing = spy().mockRejectedValue(
      new StoreUnavailableError('connection', new Error('ECONNREFUSED')),
    );
    try {
      const res = await call(service, hookRequest(hook, { patient: { emiratesId: '784-1990-6666666-2' } }));
      expectOperationOutcome(res, 503);
      expect(res.headers['retry-after']).toBe('5');
      expect((res.body as OperationOutcome).issue[0]?.code).toBe('transient');
    } finally {
      failing.mockRestore();
    }
  });
});
