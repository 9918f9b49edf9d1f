/**
 * No patient data and no secret in any log line, at debug level, across good checks, error
 * outcomes and rejected input. Reads the real log output of the running service.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamFailure, UpstreamPort } from '../../src/upstream/port.js';
import { PAYERS, SCENARIOS } from '../../src/sandbox/scenarios.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness, TENANT_A_KEY, TENANT_B_KEY, UPSTREAM_KEY } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';
import { until } from '../support/until.js';
import { startReceiver } from '../support/receiver.js';
import { assertion, clientKey, postToken, serviceKey, tokenForm } from '../support/smart.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';

/** The demographics every request of test/support/requests.ts carries. */
const NAME = ['Aisha', 'Testpatient'];
const PHONE = ['+971501112233', '971501112233'];
const BIRTH_DATE = '1988-04-12';
/** The card number the sandbox returns for its multi-card member (patient data from the upstream). */
const UPSTREAM_CARD_NUMBER = '4410-2222-0000009';
/** Scenarios left out of the run: `slow` stays in flight for 12 s at the harness's time scale. */
const SKIPPED = new Set(['slow']);

let h: Harness;

beforeAll(async () => {
  // Adaptive polling, so its paths (payer histories learnt and read, failed polls counted) log
  // through every scenario below too; a short minimum gap keeps the run as fast as before.
  h = await startHarness({ faults: { pollErrorRate: 0.3 }, pollStrategy: 'adaptive', minPollGapMs: 20 });
});
afterAll(async () => {
  await h.stop();
});

/** The values that must never be in a log line: identifiers (as sent and digits only), demographics, keys. */
function forbiddenValues(identifiers: string[]): string[] {
  return [
    ...identifiers,
    ...identifiers.map((id) => id.replace(/\D/g, '')),
    ...NAME,
    ...PHONE,
    BIRTH_DATE,
    UPSTREAM_KEY,
    TENANT_A_KEY,
    TENANT_B_KEY,
  ];
}

function expectNoneLogged(logs: string[], forbidden: string[]): void {
  const text = logs.join('\n');
  for (const value of forbidden) expect(text, `log output contains ${value}`).not.toContain(value);
}

/** The request log lines (src/http/middleware.ts requestLog). */
function requestLines(logs: string[]): Record<string, unknown>[] {
  return logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.message === 'request');
}

/**
 * Submits a check and waits for it to end (its answer is no longer a queued CER), validating
 * every resource received.
 */
async function runToEnd(harness: Harness, options: RequestOptions): Promise<void> {
  const res = await request(harness.url)
    .post(SUBMIT)
    .set(harness.auth)
    .set('Prefer', 'wait=30')
    .set('Content-Type', FHIR_JSON)
    .send(eligibilityRequest(options));
  expectValidFhir(res.body);
  expect(res.headers.location, `no Location for ${JSON.stringify(options)}`).toBeTruthy();
  const path = new URL(String(res.headers.location)).pathname;
  const ended = await until(
    async () => {
      const read = await request(harness.url).get(path).set(harness.auth);
      expect(read.status).toBe(200);
      expectValidFhir(read.body);
      const cer = read.body as CoverageEligibilityResponse;
      return cer.outcome === 'queued' ? undefined : cer;
    },
    20_000,
    `the check of ${JSON.stringify(options)} to end`,
  );
  expect(ended.resourceType).toBe('CoverageEligibilityResponse');
}

describe('log privacy', () => {
  it('keeps Emirates IDs, card numbers, names, phones, dates of birth and keys out of every line', async () => {
    const emiratesIds = ['784-1990-1234567-6', '784-1985-7654321-3'];
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
    await request(h.url).get('/fhir/CoverageEligibilityResponse?patient=784-1990-1234567-6').set(h.auth);

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

  it('a batch (good, bad and reused entries), its progress and search, and $validate leave no patient data in the log', async () => {
    // A service of its own, with reuse on (the shared one has it off).
    const h = await startHarness({ reuseWindowMinutes: 240 });
    try {
      const ids = ['784-1983-5550101-0', '784-1983-5550102-8'];
      const cardNumber = '9876543210555666';
      const entry = (resource: unknown, method = 'POST') => ({
        resource,
        request: { method, url: 'CoverageEligibilityRequest/$submit' },
      });
      const bad = { ...eligibilityRequest({ emiratesId: ids[0] }), status: 'not-a-status' };
      const bundle = {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          entry(eligibilityRequest({ emiratesId: ids[0] })),
          entry(eligibilityRequest({ cardNumber })),
          entry(bad),
          entry(eligibilityRequest({ emiratesId: ids[1] }), 'PUT'),
        ],
      };
      const send = () =>
        request(h.url).post('/fhir').set(h.auth).set('Content-Type', FHIR_JSON).send(JSON.stringify(bundle));
      const res = await send();
      expect(res.status).toBe(200);
      const status = `/fhir/_async/${String((res.body as { id: string }).id)}`;
      await until(async () =>
        (await request(h.url).get(status).set(h.auth)).status === 200 ? true : undefined,
      );
      // Again: the good entries are now reused answers.
      expect((await send().set('Cache-Control', 'max-age=600')).status).toBe(200);
      await request(h.url)
        .get(`/fhir/CoverageEligibilityResponse?batch=${String(res.body.id)}`)
        .set(h.auth);
      for (const body of [eligibilityRequest({ emiratesId: ids[1] }), bad])
        await request(h.url)
          .post('/fhir/CoverageEligibilityRequest/$validate')
          .set(h.auth)
          .set('Content-Type', FHIR_JSON)
          .send(body);
      expectNoneLogged(h.logs, forbiddenValues([...ids, cardNumber]));
    } finally {
      await h.stop();
    }
  });

  it('every sandbox scenario and two search-alls, run to their end, leave no patient data in the log', async () => {
    // Each scenario on its own payer: invalid_credentials and backoff open payer guards, which
    // would otherwise turn the later checks into guard answers without reaching the upstream.
    const payers = Object.keys(PAYERS).filter((p) => p !== 'DAMAN');
    const singles = SCENARIOS.filter((s) => !s.searchAll && !SKIPPED.has(s.name));
    expect(singles.length).toBeLessThanOrEqual(payers.length);
    const identifiers: string[] = [];
    const runs: RequestOptions[] = singles.map((scenario, i) => {
      if (scenario.payer !== null) {
        // A payer-only row (NOCREDS): any identifier.
        const emiratesId = '784-1990-7000001-5';
        identifiers.push(emiratesId);
        return { emiratesId, payer: scenario.payer };
      }
      identifiers.push(scenario.example);
      return scenario.idKind === 'card'
        ? { cardNumber: scenario.example, payer: payers[i] }
        : { emiratesId: scenario.example, payer: payers[i] };
    });
    for (const emiratesId of ['784-1990-0000031-7', '784-1990-0000033-3']) {
      identifiers.push(emiratesId);
      runs.push({ emiratesId, discovery: true });
    }
    // The scenario table names these outcomes; each one must have been run.
    const names = singles.map((s) => s.name);
    for (const name of [
      'not-eligible',
      'member-not-found',
      'invalid-credentials',
      'failed',
      'error',
      'backoff',
      'multi-card',
      'task-failed',
      'task-cancelled',
      'tpa-not-configured',
      'card-only-by-card-number',
    ])
      expect(names).toContain(name);

    for (const options of runs) await runToEnd(h, options);

    expect(h.logs.some((l) => l.includes('payer guard opened'))).toBe(true);
    expectNoneLogged(h.logs, forbiddenValues([...identifiers, UPSTREAM_CARD_NUMBER]));
  });

  it("an upstream 5xx whose body echoes the patient's data never reaches the log", async () => {
    const pollEcho = '784-1990-5550001-3';
    const createEcho = '784-1990-5550002-1';
    const echo = (emiratesId: string): UpstreamFailure => ({
      kind: 'http',
      status: 500,
      body: JSON.stringify({
        detail: `Internal Server Error while checking ${emiratesId} (${NAME.join(' ')}, born ${BIRTH_DATE})`,
        request: { emirates_id: emiratesId, name: NAME.join(' '), dob: BIRTH_DATE, phone: PHONE[0] },
      }),
    });
    const counts = { echoedPolls: 0, echoedCreates: 0 };
    const echoing = (inner: UpstreamPort): UpstreamPort => {
      let polls = 0;
      return {
        createTask: (creds, body) => {
          if (body.emirates_id === createEcho) {
            counts.echoedCreates += 1;
            return Promise.resolve({ ok: false, error: echo(createEcho) });
          }
          return inner.createTask(creds, body);
        },
        getResult: (creds, taskId) => {
          polls += 1;
          // Every other poll fails with the echoing body; the check still ends through the rest.
          if (polls % 2 === 1) {
            counts.echoedPolls += 1;
            return Promise.resolve({ ok: false, error: echo(pollEcho) });
          }
          return inner.getResult(creds, taskId);
        },
        health: () => inner.health(),
      };
    };
    const echoed = await startHarness({ overrides: { upstream: echoing } });
    try {
      await runToEnd(echoed, { emiratesId: pollEcho });
      // create-task answered 500: ambiguous, answered at once with an OperationOutcome.
      const ambiguous = await request(echoed.url)
        .post(SUBMIT)
        .set(echoed.auth)
        .set('Prefer', 'wait=10')
        .set('Content-Type', FHIR_JSON)
        .send(eligibilityRequest({ emiratesId: createEcho, payer: 'NAS' }));
      expect(ambiguous.status).toBe(502);
      expectValidFhir(ambiguous.body);
      expect(JSON.stringify(ambiguous.body)).toContain('ambiguous-create');

      expect(counts.echoedPolls).toBeGreaterThan(0);
      expect(counts.echoedCreates).toBe(1);
      expect(echoed.logs.some((l) => l.includes('create-task failed'))).toBe(true);
      expectNoneLogged(echoed.logs, forbiddenValues([pollEcho, createEcho]));
    } finally {
      await echoed.stop();
    }
  });

  it('every request line has method, route, status, durationMs and requestId; a missing X-Request-Id is generated', async () => {
    const sent = performance.now();
    const generated = await request(h.url).get('/fhir/metadata');
    const roundTripMs = performance.now() - sent;
    expect(generated.status).toBe(200);
    const id = String(generated.headers['x-request-id']);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const given = await request(h.url).get('/fhir/metadata').set('X-Request-Id', 'privacy-req-42');
    expect(given.headers['x-request-id']).toBe('privacy-req-42');
    // An id that is not sane (too long, odd characters) is replaced, not logged.
    const insane = await request(h.url)
      .get('/fhir/metadata')
      .set('X-Request-Id', `${'x'.repeat(200)}<script>`);
    const replaced = String(insane.headers['x-request-id']);
    expect(replaced).not.toContain('<script>');
    expect(replaced).toMatch(/^[0-9a-f-]{36}$/);
    // Text that is not an opaque token (a name, a phone number with a suffix) is replaced too.
    for (const text of ['ali-hassan', '0501234567:visit', 'ali.hassan.1980']) {
      const res = await request(h.url).get('/fhir/metadata').set('X-Request-Id', text);
      expect(String(res.headers['x-request-id'])).toMatch(/^[0-9a-f-]{36}$/);
    }

    const line = await until(
      () => requestLines(h.logs).find((l) => l.requestId === id),
      5000,
      'the request line of the generated id',
    );
    expect(line).toMatchObject({ method: 'GET', route: '/fhir/metadata', status: 200 });
    // In milliseconds, and within the round trip the client saw (seconds would round to 0; micro- or
    // nanoseconds would exceed it).
    expect(line.durationMs).toBeGreaterThan(0);
    expect(line.durationMs).toBeLessThanOrEqual(roundTripMs);
    await until(() => requestLines(h.logs).find((l) => l.requestId === 'privacy-req-42'), 5000, 'given id');
    await until(() => requestLines(h.logs).find((l) => l.requestId === replaced), 5000, 'replaced id');
    expect(h.logs.join('\n')).not.toContain('<script>');
    expect(h.logs.join('\n')).not.toMatch(/ali-hassan|0501234567|ali\.hassan/);

    const lines = requestLines(h.logs);
    expect(lines.length).toBeGreaterThan(10);
    for (const entry of lines) {
      expect(entry, JSON.stringify(entry)).toMatchObject({
        method: expect.any(String),
        route: expect.any(String),
        status: expect.any(Number),
        durationMs: expect.any(Number),
        requestId: expect.any(String),
      });
      expect(String(entry.requestId).length).toBeGreaterThan(0);
      // Never negative (a monotonic clock); 0 would be a duration not measured, or not in ms.
      expect(entry.durationMs as number).toBeGreaterThan(0);
      // The route is the pattern, never the raw URL with its query (which may carry patient data).
      expect(String(entry.route)).not.toContain('?');
    }
  });
});

describe('SMART Backend Services in the log', () => {
  it('no access token, client assertion or key in any line, whatever the outcome', async () => {
    const key = await clientKey('ES384');
    const signing = await serviceKey();
    const smart = await startHarness({
      tokenSigningKeys: [signing.jwk],
      smartClients: {
        a: [{ clientId: 'engine', jwks: { keys: [key.publicJwk] }, scopes: ['system/*.read'] }],
      },
    });
    try {
      const config = await request(smart.url).get('/fhir/.well-known/smart-configuration');
      const tokenUrl = String((config.body as { token_endpoint: string }).token_endpoint);
      const good = await assertion('engine', key, { aud: tokenUrl });
      const wrongAud = await assertion('engine', key, { aud: 'https://elsewhere.example/token' });
      const token = await (async () => {
        const res = await postToken(smart.url, tokenForm(good, 'system/*.read'));
        expect(res.status).toBe(200);
        return String((res.body as { access_token: string }).access_token);
      })();
      expect((await postToken(smart.url, tokenForm(good, 'system/*.read'))).status).toBe(401);
      expect((await postToken(smart.url, tokenForm(wrongAud, 'system/*.read'))).status).toBe(401);
      const bearer = { Authorization: `Bearer ${token}` };
      expect((await request(smart.url).get('/fhir/CoverageEligibilityResponse').set(bearer)).status).toBe(
        200,
      );
      expect((await request(smart.url).post(SUBMIT).set(bearer).send({})).status).toBe(403);
      const tampered = `${token.slice(0, -4)}AAAA`;
      const refused = await request(smart.url)
        .get('/fhir/AuditEvent')
        .set('Authorization', `Bearer ${tampered}`);
      expect(refused.status).toBe(401);
      await smart.stop();

      expect(smart.logs.some((l) => l.includes('authentication refused'))).toBe(true);
      const signature = (jwt: string) => jwt.split('.')[2] ?? jwt;
      expectNoneLogged(smart.logs, [
        token,
        signature(token),
        tampered,
        good,
        signature(good),
        signature(wrongAud),
        String(signing.jwk.d),
        String(key.publicJwk.x),
        TENANT_A_KEY,
      ]);
    } finally {
      await smart.stop().catch(() => undefined);
    }
  });
});

describe('the scheduler at debug level', () => {
  it('leaves one PHI-free line per decision: claimed, task going out, created, finished', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set('Authorization', `Bearer ${TENANT_A_KEY}`)
      .set('Prefer', 'wait=10')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    expect(res.status).toBe(200);
    const checkId = String(res.headers.location).split('/').pop() ?? '';
    const trail = await until(() => {
      const lines = h.logs
        .map(
          (line) => JSON.parse(line) as { message: string; checkId?: string; why?: string; state?: string },
        )
        .filter((line) => line.checkId === checkId);
      return lines.some((line) => line.why?.startsWith('finished')) ? lines : undefined;
    });
    const messages = trail.map((line) => (line.why ? `${line.message}: ${line.why}` : line.message));
    expect(messages[0]).toBe('check claimed');
    expect(messages).toEqual(
      expect.arrayContaining([
        'check step: create-task going out',
        'check step: task created: first poll',
        'check step: finished: found_eligible',
      ]),
    );
    expect(trail.filter((line) => line.message === 'check claimed').length).toBeGreaterThanOrEqual(2);
    // Nothing in the trail names the patient.
    const text = trail.map((line) => JSON.stringify(line)).join('\n');
    for (const value of ['784-1990-0000001-0', '784199000000010', ...NAME, ...PHONE, BIRTH_DATE])
      expect(text).not.toContain(value);
  });
  it("the front-desk page's API (sign-in probe, operator view, a guard reset) logs no key and no patient data", async () => {
    const emiratesId = '784-1990-0000004-4';
    await runToEnd(h, { emiratesId, payer: 'ADNIC' });
    await request(h.url).get('/app/api/payers').set('Authorization', 'Bearer wrong-key-typed-at-the-desk');
    for (const path of ['/app/api/payers', '/app/api/visit-types', '/app/api/operator'])
      expect((await request(h.url).get(path).set(h.auth)).status).toBe(200);
    expect((await request(h.url).post('/app/api/guards/ADNIC/reset').set(h.auth)).status).toBe(204);
    const audit = await until(
      () => h.logs.find((l) => l.includes('audit: payer guard reset') && l.includes('ADNIC')),
      5000,
      'the audit line of the reset',
    );
    expect(JSON.parse(audit)).toMatchObject({ tenantId: 'clinic-a', payerCode: 'ADNIC', removed: true });
    expect(requestLines(h.logs).some((l) => l.route === '/app/api/guards/:payer/reset')).toBe(true);
    expectNoneLogged(h.logs, [...forbiddenValues([emiratesId]), 'wrong-key-typed-at-the-desk']);
  });
});

describe('log privacy of pre-visit checks', () => {
  it('a booking, its re-check, a cancel and the day view log no patient data', async () => {
    const emiratesId = '784-1977-0000001-7';
    const start = new Date(Date.now() + 30 * 60_000).toISOString();
    // Booked within one lead of its start (reuse is off here): re-checked once the booking answers.
    await runToEnd(h, { emiratesId, servicedPeriod: { start } });
    const line = await until(
      () => h.logs.find((l) => l.includes('pre-visit re-check started')),
      15_000,
      'the re-check line',
    );
    expect(Object.keys(JSON.parse(line) as object).sort()).toEqual(
      expect.arrayContaining(['appointmentId', 'checkId', 'tenantId']),
    );
    const other = '784-1977-0000002-5';
    const booked = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .set('Prefer', 'wait=10')
      .send(
        eligibilityRequest({
          emiratesId: other,
          servicedPeriod: { start: new Date(Date.now() + 86_400_000).toISOString() },
        }),
      );
    const requestId = String((booked.body as CoverageEligibilityResponse).request?.reference).split('/')[1];
    const patched = await request(h.url)
      .patch(`/fhir/CoverageEligibilityRequest/${requestId}`)
      .set(h.auth)
      .set('Content-Type', 'application/json-patch+json')
      .send(JSON.stringify([{ op: 'replace', path: '/status', value: emiratesId }]));
    expect(patched.status).toBe(422);
    expect((await request(h.url).get('/app/api/appointments').set(h.auth)).status).toBe(200);
    expectNoneLogged(h.logs, forbiddenValues([emiratesId, other]));
  });
});

describe('log privacy of subscription notifications', () => {
  it('keeps channel.header values and patient data out of every line: handshake, events, failures, refused input', async () => {
    const receiver = await startReceiver();
    const harness = await startHarness({ subscriptionEndpoints: [`${receiver.url}/`] });
    try {
      const token = 'Bearer engine-secret-token-31337';
      const emiratesId = '784-1990-2460135-5';
      let failEvents = 1;
      // A refused handshake, and the first event attempt failing once.
      receiver.answer = (r) =>
        r.path === '/refused' ||
        (r.path === '/hook' && JSON.stringify(r.body).includes('event-notification') && failEvents-- > 0)
          ? 500
          : 200;
      const subscription = {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'privacy',
        criteria: 'http://fhir-eligibility-adapter.org/fhir/SubscriptionTopic/eligibility-final',
        channel: {
          type: 'rest-hook',
          endpoint: `${receiver.url}/hook`,
          payload: FHIR_JSON,
          _payload: {
            extension: [
              {
                url: 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-payload-content',
                valueCode: 'full-resource',
              },
            ],
          },
          header: [`Authorization: ${token}`],
        },
      };
      // Refused (handshake answered 500: error), then a second one that works.
      await request(harness.url)
        .post('/fhir/Subscription')
        .set(harness.auth)
        .set('Content-Type', FHIR_JSON)
        .send({ ...subscription, channel: { ...subscription.channel, endpoint: `${receiver.url}/refused` } });
      await until(() => (receiver.received.length >= 1 ? true : undefined), 10_000, 'first handshake');
      const res = await request(harness.url)
        .post('/fhir/Subscription')
        .set(harness.auth)
        .set('Content-Type', FHIR_JSON)
        .send(subscription);
      expect(res.status).toBe(201);
      // Malformed and reserved headers carrying secrets are refused without echoing them.
      for (const header of [`Authorization ${token}`, `Host: ${token}`]) {
        const refused = await request(harness.url)
          .post('/fhir/Subscription')
          .set(harness.auth)
          .set('Content-Type', FHIR_JSON)
          .send({ ...subscription, channel: { ...subscription.channel, header: [header] } });
        expect(refused.status).toBeGreaterThanOrEqual(400);
        expect(JSON.stringify(refused.body)).not.toContain('engine-secret-token');
      }
      await runToEnd(harness, { emiratesId });
      await until(
        () =>
          receiver.received.some(
            (r) =>
              r.status === 200 &&
              JSON.stringify(r.body).includes('event-notification') &&
              r.headers.authorization === token,
          )
            ? true
            : undefined,
        15_000,
        'an event delivered',
      );
      // The refused handshake and the failed first attempt, each logged once the worker saw the answer.
      await until(
        () => (harness.logs.filter((l) => l.includes('notification failed')).length >= 2 ? true : undefined),
        10_000,
        'the failures logged',
      );
      expectNoneLogged(harness.logs, [...forbiddenValues([emiratesId]), 'engine-secret-token-31337']);
    } finally {
      await harness.stop();
      await receiver.close();
    }
  });
});
