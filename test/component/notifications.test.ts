/**
 * Subscriptions end to end (docs/notifications.md): the real service, the sandbox upstream, and a
 * real HTTP receiver on a local port. Every Subscription, Bundle and Parameters the service emits
 * or POSTs is run through the FHIR validator.
 */
import type {
  Bundle,
  CapabilityStatement,
  CoverageEligibilityResponse,
  OperationOutcome,
  Subscription,
} from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';
import { eventsOf, param, startReceiver, statusOf, typeOf } from '../support/receiver.js';
import type { Receiver } from '../support/receiver.js';
import { until } from '../support/until.js';

const TOPIC = 'http://fhir-eligibility-adapter.org/fhir/SubscriptionTopic/eligibility-final';
const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const FHIR_JSON = 'application/fhir+json';
const ELIGIBLE = '784-1990-0000001-0';
const NOT_FOUND = '784-1990-0000003-6';

let h: Harness;
let receiver: Receiver;
/** Not on the tenants' allow-list. */
let stranger: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  stranger = await startReceiver();
  h = await startHarness({ subscriptionEndpoints: [`${receiver.url}/hooks/`] });
});
afterAll(async () => {
  await h.stop();
  await receiver.close();
  await stranger.close();
});

interface SubscriptionOptions {
  path: string;
  content?: 'empty' | 'id-only' | 'full-resource';
  filters?: string[];
  headers?: string[];
  heartbeat?: number;
  endpoint?: string;
}

function subscription(options: SubscriptionOptions): Subscription {
  return {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'integration engine',
    criteria: TOPIC,
    ...(options.filters
      ? {
          _criteria: {
            extension: options.filters.map((f) => ({
              url: `${BACKPORT}/backport-filter-criteria`,
              valueString: f,
            })),
          },
        }
      : {}),
    channel: {
      type: 'rest-hook',
      endpoint: options.endpoint ?? `${receiver.url}/hooks/${options.path}`,
      payload: FHIR_JSON,
      _payload: {
        extension: [{ url: `${BACKPORT}/backport-payload-content`, valueCode: options.content ?? 'id-only' }],
      },
      ...(options.headers ? { header: options.headers } : {}),
      ...(options.heartbeat
        ? {
            extension: [
              { url: `${BACKPORT}/backport-heartbeat-period`, valueUnsignedInt: options.heartbeat },
            ],
          }
        : {}),
    },
  };
}

async function subscribe(options: SubscriptionOptions, auth = h.auth) {
  const res = await request(h.url)
    .post('/fhir/Subscription')
    .set(auth)
    .set('Content-Type', FHIR_JSON)
    .send(subscription(options));
  return res;
}

/** Creates a subscription and waits for it to be active (its handshake answered 2xx). */
async function activeSubscription(options: SubscriptionOptions): Promise<string> {
  const res = await subscribe(options);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const id = (res.body as Subscription).id!;
  await until(
    async () => {
      const read = await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth);
      return (read.body as Subscription).status === 'active' ? true : undefined;
    },
    10_000,
    'subscription active',
  );
  return id;
}

const at = (path: string) => receiver.received.filter((r) => r.path === `/hooks/${path}`);
const eventsAt = (path: string) => at(path).filter((r) => typeOf(r) === 'event-notification');

async function finalCheck(options: RequestOptions): Promise<CoverageEligibilityResponse> {
  const res = await request(h.url)
    .post('/fhir/CoverageEligibilityRequest/$submit')
    .set(h.auth)
    .set('Content-Type', FHIR_JSON)
    .send(eligibilityRequest(options));
  expect([200, 409, 422, 502, 503, 504]).toContain(res.status);
  const location = String(res.headers['content-location'] ?? res.headers.location ?? '');
  const id =
    /CoverageEligibilityResponse\/([^/]+)/.exec(location)?.[1] ??
    (res.body as CoverageEligibilityResponse).id;
  return until(
    async () => {
      const read = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${id}`).set(h.auth);
      const cer = read.body as CoverageEligibilityResponse;
      return cer.outcome !== 'queued' ? cer : undefined;
    },
    15_000,
    'final CER',
  );
}

describe('Subscription create and handshake', () => {
  it('answers 201 requested, POSTs a valid handshake with the headers as given, and turns active', async () => {
    const res = await subscribe({
      path: 'handshake',
      headers: ['Authorization: Bearer engine-token-5150', 'X-Route: eligibility'],
    });
    expect(res.status).toBe(201);
    expectValidFhir(res.body);
    const created = res.body as Subscription;
    expect(created.status).toBe('requested');
    expect(res.headers.location).toBe(
      `${new URL(h.url).origin.replace('127.0.0.1', 'localhost')}/fhir/Subscription/${created.id}`,
    );
    // Masked on read: the name stays, the value never comes back.
    expect(created.channel.header).toEqual(['Authorization: ****', 'X-Route: ****']);
    const handshake = await until(() => at('handshake')[0], 10_000, 'handshake');
    expect(typeOf(handshake)).toBe('handshake');
    expect(handshake.headers.authorization).toBe('Bearer engine-token-5150');
    expect(handshake.headers['x-route']).toBe('eligibility');
    expect(handshake.headers['content-type']).toBe(FHIR_JSON);
    expectValidFhir(handshake.body);
    expectValidFhir(statusOf(handshake.body));
    expect(handshake.body.type).toBe('history');
    expect(param(statusOf(handshake.body), 'subscription')).toMatch(
      new RegExp(`/fhir/Subscription/${created.id}$`),
    );
    expect(param(statusOf(handshake.body), 'topic')).toBe(TOPIC);
    await until(
      async () => {
        const read = await request(h.url).get(`/fhir/Subscription/${created.id}`).set(h.auth);
        expectValidFhir(read.body);
        return (read.body as Subscription).status === 'active' ? true : undefined;
      },
      10_000,
      'active',
    );
  });

  it('reads back the payload content it applies when the client left it to the default (the profile makes it 1..1)', async () => {
    const { _payload: _omitted, ...channel } = subscription({ path: 'default-content' }).channel;
    const res = await request(h.url)
      .post('/fhir/Subscription')
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send({ ...subscription({ path: 'default-content' }), channel });
    expect(res.status).toBe(201);
    expectValidFhir(res.body);
    const created = res.body as Subscription;
    expect(created.meta?.profile).toEqual([`${BACKPORT}/backport-subscription`]);
    expect(created.channel._payload?.extension).toEqual([
      { url: `${BACKPORT}/backport-payload-content`, valueCode: 'id-only' },
    ]);
  });

  it('turns error when the handshake is not answered 2xx', async () => {
    receiver.answer = (r) => (r.path === '/hooks/refused' ? 403 : 200);
    const res = await subscribe({ path: 'refused' });
    const id = (res.body as Subscription).id!;
    const read = await until(
      async () => {
        const r = await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth);
        return (r.body as Subscription).status === 'error' ? (r.body as Subscription) : undefined;
      },
      10_000,
      'error',
    );
    expectValidFhir(read);
    expect(read.error).toContain('403');
    const status = await request(h.url).get(`/fhir/Subscription/${id}/$status`).set(h.auth);
    expectValidFhir(status.body);
    expectValidFhir((status.body as Bundle).entry?.[0]?.resource);
    expect(param((status.body as Bundle).entry?.[0]?.resource as never, 'status')).toBe('error');

    // Its events are still recorded while in error, and readable with $events.
    const missed = await finalCheck({ emiratesId: ELIGIBLE });
    const events = await request(h.url).get(`/fhir/Subscription/${id}/$events`).set(h.auth);
    expectValidFhir(events.body);
    expect(eventsOf(events.body as Bundle).map((e) => e.focus?.split('/').pop())).toEqual([missed.id]);
    expect(eventsAt('refused')).toEqual([]);

    // PUT reactivates it: a new handshake, then the event it missed.
    receiver.answer = () => 200;
    const wrongId = await request(h.url)
      .put(`/fhir/Subscription/${id}`)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send({ ...subscription({ path: 'refused' }), id: 'another-id' });
    expect(wrongId.status).toBe(400);
    expect((wrongId.body as OperationOutcome).issue[0]?.expression).toEqual(['Subscription.id']);
    const otherTenant = await request(h.url)
      .put(`/fhir/Subscription/${id}`)
      .set(h.authB)
      .set('Content-Type', FHIR_JSON)
      .send(subscription({ path: 'refused' }));
    expect(otherTenant.status).toBe(404);
    const put = await request(h.url)
      .put(`/fhir/Subscription/${id}`)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send({ ...subscription({ path: 'refused' }), id });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expectValidFhir(put.body);
    expect((put.body as Subscription).status).toBe('requested');
    const delivered = await until(
      () => eventsAt('refused')[0],
      10_000,
      'the missed event after reactivation',
    );
    expect(eventsOf(delivered.body).map((e) => e.number)).toEqual([1]);
    expect(at('refused').filter((r) => typeOf(r) === 'handshake').length).toBe(2);
    const active = await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth);
    expect((active.body as Subscription).status).toBe('active');
  });

  it('a PUT of the subscription as read keeps the masked header values; a masked header with none stored is 422', async () => {
    const id = await activeSubscription({
      path: 'masked',
      headers: ['Authorization: Bearer engine-token-5150', 'X-Route: eligibility'],
    });
    const read = await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth);
    const shown = read.body as Subscription;
    expect(shown.channel.header).toEqual(['Authorization: ****', 'X-Route: ****']);
    const put = await request(h.url)
      .put(`/fhir/Subscription/${id}`)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send({ ...shown, channel: { ...shown.channel, header: ['Authorization: ****', 'X-Route: other'] } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const handshakes = await until(
      () => {
        const all = at('masked').filter((r) => typeOf(r) === 'handshake');
        return all.length >= 2 ? all : undefined;
      },
      10_000,
      'the second handshake',
    );
    expect(handshakes[1]!.headers.authorization).toBe('Bearer engine-token-5150');
    expect(handshakes[1]!.headers['x-route']).toBe('other');
    const unknown = await request(h.url)
      .put(`/fhir/Subscription/${id}`)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send({ ...shown, channel: { ...shown.channel, header: ['X-Route: b', 'X-Other: ****'] } });
    expect(unknown.status).toBe(422);
    expect((unknown.body as OperationOutcome).issue[0]?.expression).toEqual([
      'Subscription.channel.header[1]',
    ]);
  });

  it('a PUT during a delivery wins: the new endpoint gets a handshake and the subscription ends active', async () => {
    // The old endpoint answers 500, slowly: its delivery is still under way when the PUT lands.
    receiver.answer = (r) => (r.path === '/hooks/slow-old' ? 500 : 200);
    receiver.delayOf = (r) => (r.path === '/hooks/slow-old' ? 1500 : 0);
    try {
      const res = await subscribe({ path: 'slow-old' });
      expect(res.status).toBe(201);
      const id = (res.body as Subscription).id!;
      await until(() => at('slow-old')[0], 10_000, 'the slow handshake');
      const put = await request(h.url)
        .put(`/fhir/Subscription/${id}`)
        .set(h.auth)
        .set('Content-Type', FHIR_JSON)
        .send({ ...subscription({ path: 'fast-new' }), id });
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      const handshake = await until(() => at('fast-new')[0], 10_000, 'the new handshake');
      expect(typeOf(handshake)).toBe('handshake');
      // Past the old delivery's answer (and its write, were it still allowed).
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const read = await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth);
      const stored = read.body as Subscription;
      expect(stored.status, JSON.stringify(stored)).toBe('active');
      expect(stored.channel.endpoint).toBe(`${receiver.url}/hooks/fast-new`);
      expect(stored.error).toBeUndefined();
    } finally {
      receiver.answer = () => 200;
      delete receiver.delayOf;
    }
  });

  it('refuses an endpoint off the allow-list with 422 and sends it nothing', async () => {
    for (const endpoint of [
      `${stranger.url}/hooks/x`,
      `${receiver.url}/elsewhere`,
      `http://localhost.evil.test:${new URL(receiver.url).port}/hooks/`,
      `http://127.0.0.1:${new URL(receiver.url).port}@evil.test/hooks/`,
      `${receiver.url}/hooks/%2e%2e%2fadmin`,
      `${receiver.url}/hooks/a%5c..%5cadmin`,
    ]) {
      const res = await subscribe({ path: 'x', endpoint });
      expect(res.status).toBe(422);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]?.expression).toEqual(['Subscription.channel.endpoint']);
    }
    await new Promise((r) => setTimeout(r, 700));
    expect(stranger.received).toEqual([]);
    expect(receiver.received.filter((r) => !r.path.startsWith('/hooks/'))).toEqual([]);
  });

  it('answers bad input with a 4xx OperationOutcome naming the element', async () => {
    const cases: Array<[unknown, number, string]> = [
      [{ resourceType: 'Patient' }, 400, 'resourceType'],
      [
        { ...subscription({ path: 'bad' }), criteria: 'http://example.org/other-topic' },
        422,
        'Subscription.criteria',
      ],
      [
        {
          ...subscription({ path: 'bad' }),
          channel: { ...subscription({ path: 'bad' }).channel, type: 'email' },
        },
        422,
        'Subscription.channel.type',
      ],
      [
        subscription({ path: 'bad', filters: ['CoverageEligibilityResponse?insurer=DAMAN'] }),
        422,
        'Subscription.criteria.extension[0]',
      ],
      [
        subscription({ path: 'bad', filters: ['CoverageEligibilityResponse?outcome=queued'] }),
        422,
        'Subscription.criteria.extension[0]',
      ],
      [subscription({ path: 'bad', headers: ['no colon here'] }), 400, 'Subscription.channel.header[0]'],
      [subscription({ path: 'bad', headers: ['Host: evil.test'] }), 422, 'Subscription.channel.header[0]'],
      [
        {
          ...subscription({ path: 'bad' }),
          channel: {
            ...subscription({ path: 'bad' }).channel,
            extension: [{ url: `${BACKPORT}/backport-max-count`, valuePositiveInt: 500 }],
          },
        },
        422,
        'Subscription.channel.extension[0]',
      ],
    ];
    for (const [body, status, expression] of cases) {
      const res = await request(h.url)
        .post('/fhir/Subscription')
        .set(h.auth)
        .set('Content-Type', FHIR_JSON)
        .send(body as object);
      expect(res.status, JSON.stringify(res.body)).toBe(status);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]?.expression).toEqual([expression]);
    }
    const missingReason = { ...subscription({ path: 'bad' }), reason: undefined };
    const res = await request(h.url)
      .post('/fhir/Subscription')
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(missingReason);
    expect(res.status).toBe(400);
    expect((res.body as OperationOutcome).issue[0]?.expression?.length).toBeGreaterThan(0);
  });
});

describe('events', () => {
  it('delivers one event per final check, numbered 1, 2 with the CER as focus; full-resource carries the CER', async () => {
    const idOnly = await activeSubscription({ path: 'events' });
    const full = await activeSubscription({ path: 'full', content: 'full-resource' });
    const empty = await activeSubscription({ path: 'empty', content: 'empty' });
    const first = await finalCheck({ emiratesId: ELIGIBLE });
    const second = await finalCheck({ emiratesId: NOT_FOUND });
    await until(
      () =>
        eventsAt('events').length >= 2 && eventsAt('full').length >= 2 && eventsAt('empty').length >= 2
          ? true
          : undefined,
      10_000,
      'events',
    );
    const numbers = eventsAt('events').flatMap((r) => eventsOf(r.body));
    expect(numbers.map((e) => e.number)).toEqual([1, 2]);
    expect(numbers.map((e) => e.focus)).toEqual([
      expect.stringMatching(new RegExp(`/fhir/CoverageEligibilityResponse/${first.id}$`)),
      expect.stringMatching(new RegExp(`/fhir/CoverageEligibilityResponse/${second.id}$`)),
    ]);
    for (const r of [...eventsAt('events'), ...eventsAt('full'), ...eventsAt('empty')]) {
      expectValidFhir(r.body);
      expectValidFhir(statusOf(r.body));
      expect(param(statusOf(r.body), 'subscription')).toMatch(/\/fhir\/Subscription\//);
    }
    // One CER entry per event, after the status Parameters.
    const fullCers = eventsAt('full').flatMap((r) =>
      (r.body.entry ?? []).slice(1).map((e) => e.resource as CoverageEligibilityResponse),
    );
    expect(fullCers.map((cer) => cer.id)).toEqual([first.id, second.id]);
    expect(fullCers[0]!.outcome).toBe(first.outcome);
    // empty: no resource ids at all.
    expect(
      eventsAt('empty')
        .flatMap((r) => eventsOf(r.body))
        .map((e) => e.focus),
    ).toEqual([undefined, undefined]);
    expect(eventsAt('empty')[0]!.body.entry).toHaveLength(1);

    // $status and $events.
    const status = await request(h.url).get(`/fhir/Subscription/${idOnly}/$status`).set(h.auth);
    expect(status.status).toBe(200);
    expectValidFhir(status.body);
    const parameters = (status.body as Bundle).entry?.[0]?.resource;
    expectValidFhir(parameters);
    expect(param(parameters as never, 'events-since-subscription-start')).toBe('2');
    expect(param(parameters as never, 'status')).toBe('active');
    const events = await request(h.url)
      .get(`/fhir/Subscription/${full}/$events?eventsSinceNumber=2`)
      .set(h.auth);
    expect(events.status).toBe(200);
    expectValidFhir(events.body);
    expect(eventsOf(events.body as Bundle).map((e) => e.number)).toEqual([2]);
    expect(((events.body as Bundle).entry?.[1]?.resource as CoverageEligibilityResponse).id).toBe(second.id);
    const bad = await request(h.url)
      .get(`/fhir/Subscription/${full}/$events?eventsSinceNumber=two`)
      .set(h.auth);
    expect(bad.status).toBe(400);
    expect((bad.body as OperationOutcome).issue[0]?.expression).toEqual(['eventsSinceNumber']);
    void empty;
  });

  it('delivers only the checks a filter matches', async () => {
    const byOutcome = await activeSubscription({
      path: 'only-errors',
      filters: ['CoverageEligibilityResponse?outcome=error'],
    });
    const byPatient = await activeSubscription({
      path: 'only-patient',
      filters: [
        `CoverageEligibilityResponse?patient=${encodeURIComponent(`http://uae.gov/fhir/identifier/emirates-id|${ELIGIBLE}`)}`,
      ],
    });
    const eligible = await finalCheck({ emiratesId: ELIGIBLE });
    const notFound = await finalCheck({ emiratesId: NOT_FOUND });
    const byRequest = await activeSubscription({
      path: 'only-request',
      filters: [`CoverageEligibilityResponse?request=CoverageEligibilityRequest/${eligible.id}`],
    });
    // Written after the check turned final: nothing to deliver (events start at subscription).
    await until(() => (eventsAt('only-patient').length >= 1 ? true : undefined), 10_000, 'patient event');
    const errors = [eligible, notFound].filter((c) => c.outcome === 'error');
    await until(
      () => (eventsAt('only-errors').length >= errors.length ? true : undefined),
      10_000,
      'outcome events',
    );
    await new Promise((r) => setTimeout(r, 700));
    expect(
      eventsAt('only-errors')
        .flatMap((r) => eventsOf(r.body))
        .map((e) => e.focus?.split('/').pop()),
    ).toEqual(errors.map((c) => c.id));
    expect(
      eventsAt('only-patient')
        .flatMap((r) => eventsOf(r.body))
        .map((e) => e.focus?.split('/').pop()),
    ).toEqual([eligible.id]);
    expect(eventsAt('only-request')).toEqual([]);
    void byOutcome;
    void byPatient;
    void byRequest;
  });

  it('honours end: the subscription turns off and gets nothing after it', async () => {
    const body = { ...subscription({ path: 'ending' }), end: new Date(Date.now() + 1500).toISOString() };
    const res = await request(h.url)
      .post('/fhir/Subscription')
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(body);
    expect(res.status).toBe(201);
    const id = (res.body as Subscription).id!;
    const off = await until(
      async () => {
        const read = await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth);
        return (read.body as Subscription).status === 'off' ? (read.body as Subscription) : undefined;
      },
      10_000,
      'off after end',
    );
    expectValidFhir(off);
    await finalCheck({ emiratesId: ELIGIBLE });
    await new Promise((r) => setTimeout(r, 500));
    expect(eventsAt('ending')).toEqual([]);
    const past = { ...subscription({ path: 'ending' }), end: '2020-01-01T00:00:00Z' };
    const refused = await request(h.url)
      .post('/fhir/Subscription')
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(past);
    expect(refused.status).toBe(422);
    expect((refused.body as OperationOutcome).issue[0]?.expression).toEqual(['Subscription.end']);
  });

  it('sends heartbeats at the period when nothing else was sent', async () => {
    await activeSubscription({ path: 'heartbeat', heartbeat: 1 });
    const beats = await until(
      () => {
        const found = at('heartbeat').filter((r) => typeOf(r) === 'heartbeat');
        return found.length >= 2 ? found : undefined;
      },
      10_000,
      'two heartbeats',
    );
    for (const beat of beats) expectValidFhir(beat.body);
    expect(beats[1]!.at - beats[0]!.at).toBeGreaterThanOrEqual(900);
  });

  it('retries a failing endpoint with backoff and delivers every event in order once it recovers', async () => {
    await activeSubscription({ path: 'flaky' });
    let failing = true;
    receiver.answer = (r) => (r.path === '/hooks/flaky' && failing ? 503 : 200);
    await finalCheck({ emiratesId: ELIGIBLE });
    await finalCheck({ emiratesId: ELIGIBLE });
    await finalCheck({ emiratesId: NOT_FOUND });
    await until(() => (eventsAt('flaky').length >= 3 ? true : undefined), 10_000, 'failed attempts');
    failing = false;
    const attempts = () =>
      eventsAt('flaky').map((r) => ({
        ok: r.status === 200,
        numbers: eventsOf(r.body).map((e) => e.number),
      }));
    await until(
      () => (attempts().some((a) => a.ok && a.numbers.includes(3)) ? true : undefined),
      20_000,
      'recovered',
    );
    // In event-number order: every attempt starts right after the last acknowledged number and
    // holds consecutive numbers; nothing is skipped and everything ends acknowledged.
    let acknowledged = 0;
    for (const attempt of attempts()) {
      expect(attempt.numbers).toEqual(attempt.numbers.map((_, i) => acknowledged + 1 + i));
      if (attempt.ok) acknowledged = attempt.numbers[attempt.numbers.length - 1] ?? acknowledged;
    }
    expect(acknowledged).toBe(3);
    expect(attempts().filter((a) => !a.ok).length).toBeGreaterThanOrEqual(3);
    const metrics = await request(h.url).get('/metrics');
    expect(metrics.text).toMatch(/subscription_notifications_retried_total [1-9]/);
    expect(metrics.text).toMatch(
      /subscription_notifications_failed_total\{type="event-notification"\} [1-9]/,
    );
    expect(metrics.text).toMatch(/subscription_notification_lag_seconds_count [1-9]/);
  });
});

describe('tenancy, search, delete, conformance', () => {
  it('answers 404 to another tenant for read, $status, $events and delete', async () => {
    const id = await activeSubscription({ path: 'tenancy' });
    for (const path of [
      `/fhir/Subscription/${id}`,
      `/fhir/Subscription/${id}/$status`,
      `/fhir/Subscription/${id}/$events`,
    ]) {
      const res = await request(h.url).get(path).set(h.authB);
      expect(res.status).toBe(404);
      expectValidFhir(res.body);
    }
    expect((await request(h.url).delete(`/fhir/Subscription/${id}`).set(h.authB)).status).toBe(404);
    const search = await request(h.url).get('/fhir/Subscription').set(h.authB);
    expect((search.body as Bundle).entry ?? []).toEqual([]);
  });

  it('searches by status, and deletes', async () => {
    const id = await activeSubscription({ path: 'search' });
    const active = await request(h.url).get('/fhir/Subscription?status=active').set(h.auth);
    expect(active.status).toBe(200);
    expectValidFhir(active.body);
    const entries = (active.body as Bundle).entry ?? [];
    expect(entries.map((e) => e.resource?.id)).toContain(id);
    expect(entries.every((e) => (e.resource as Subscription).status === 'active')).toBe(true);
    const bad = await request(h.url).get('/fhir/Subscription?status=sleeping').set(h.auth);
    expect(bad.status).toBe(400);
    expect((bad.body as OperationOutcome).issue[0]?.expression).toEqual(['status']);
    expect((await request(h.url).delete(`/fhir/Subscription/${id}`).set(h.auth)).status).toBe(204);
    expect((await request(h.url).get(`/fhir/Subscription/${id}`).set(h.auth)).status).toBe(404);
  });

  it('declares subscriptions in the CapabilityStatement and publishes the topic as Basic', async () => {
    const cs = (await request(h.url).get('/fhir/metadata')).body as CapabilityStatement;
    expectValidFhir(cs);
    expect(cs.instantiates).toContain(
      'http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4',
    );
    const sub = cs.rest?.[0]?.resource?.find((r) => r.type === 'Subscription');
    expect(sub?.supportedProfile).toContain(`${BACKPORT}/backport-subscription`);
    expect(sub?.extension?.[0]).toEqual({
      url: `${BACKPORT}/capabilitystatement-subscriptiontopic-canonical`,
      valueCanonical: TOPIC,
    });
    expect(sub?.operation?.map((o) => o.name).sort()).toEqual(['events', 'status']);
    const topic = await request(h.url).get('/fhir/Basic/eligibility-final');
    expect(topic.status).toBe(200);
    expectValidFhir(topic.body);
    expect(JSON.stringify(topic.body)).toContain(TOPIC);
  });

  it('never logs a header value or patient data', () => {
    const text = h.logs.join('\n');
    expect(text).not.toContain('engine-token-5150');
    expect(text).not.toContain(ELIGIBLE);
    expect(text).toContain('notification delivered');
  });
});

describe('a check refused at insert by an open payer guard', () => {
  it('is an event like any other final check', async () => {
    // Its own service: the credentials guard it opens stays open for the tenant.
    const g = await startHarness({ subscriptionEndpoints: [`${receiver.url}/hooks/`] });
    try {
      const res = await request(g.url)
        .post('/fhir/Subscription')
        .set(g.auth)
        .set('Content-Type', FHIR_JSON)
        .send(subscription({ path: 'guarded' }));
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const submit = async (emiratesId: string) => {
        const sent = await request(g.url)
          .post('/fhir/CoverageEligibilityRequest/$submit')
          .set(g.auth)
          .set({ Prefer: 'wait=10' })
          .set('Content-Type', FHIR_JSON)
          .send(eligibilityRequest({ emiratesId, payer: 'DAMAN' }));
        const location = String(sent.headers['content-location'] ?? sent.headers.location ?? '');
        const id = /CoverageEligibilityResponse\/([^/]+)/.exec(location)?.[1];
        const read = await request(g.url).get(`/fhir/CoverageEligibilityResponse/${id}`).set(g.auth);
        const cer = read.body as CoverageEligibilityResponse;
        expect(cer.outcome, JSON.stringify(sent.body)).not.toBe('queued');
        return cer;
      };
      const first = await submit(ELIGIBLE);
      // Opens the tenant's credentials guard for DAMAN.
      const second = await submit('784-1990-0000004-4');
      // Refused at insert, already final.
      const third = await submit('784-1990-0000002-8');
      expect(JSON.stringify(third)).toContain('credentials-guard');
      const events = await until(
        () => {
          const all = at('guarded')
            .filter((r) => typeOf(r) === 'event-notification')
            .flatMap((r) => eventsOf(r.body));
          return all.length >= 3 ? all : undefined;
        },
        10_000,
        'three events',
      );
      expect(events.map((e) => e.number)).toEqual([1, 2, 3]);
      expect(events.map((e) => e.focus?.split('/').pop())).toEqual([first.id, second.id, third.id]);
    } finally {
      await g.stop();
    }
  });
});
