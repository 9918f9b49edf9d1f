/**
 * The features of one round seen together: SMART scopes and the audit trail on the routes that
 * came with notifications (Subscription), batches and $validate, and on the front-desk page's
 * guard reset. Against the running service, the sandbox and a real HTTP receiver.
 */
import type { AuditEvent, Bundle, OperationOutcome, Subscription } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import type { Receiver } from '../support/receiver.js';
import { startReceiver } from '../support/receiver.js';
import { eligibilityRequest } from '../support/requests.js';
import type { ClientKey } from '../support/smart.js';
import { accessToken, clientKey, serviceKey } from '../support/smart.js';
import { until } from '../support/until.js';

const FHIR_JSON = 'application/fhir+json';
const TOPIC = 'http://fhir-eligibility-adapter.org/fhir/SubscriptionTopic/eligibility-final';

let h: Harness;
let receiver: Receiver;
let tokenUrl: string;
let writer: ClientKey;
let reader: ClientKey;

beforeAll(async () => {
  receiver = await startReceiver();
  const svc = await serviceKey();
  [writer, reader] = await Promise.all([clientKey('ES384'), clientKey('RS384')]);
  h = await startHarness({
    tokenSigningKeys: [svc.jwk],
    subscriptionEndpoints: [`${receiver.url}/hooks/`],
    smartClients: {
      a: [
        { clientId: 'engine', jwks: { keys: [writer.publicJwk] }, scopes: ['system/*.*'] },
        {
          clientId: 'reader',
          jwks: { keys: [reader.publicJwk] },
          scopes: ['system/CoverageEligibilityResponse.rs', 'system/AuditEvent.rs'],
        },
      ],
    },
  });
  const config = await request(h.url).get('/fhir/.well-known/smart-configuration');
  tokenUrl = String((config.body as { token_endpoint: string }).token_endpoint);
});

afterAll(async () => {
  await h.stop();
  await receiver.close();
});

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

function subscription(path: string): Subscription {
  return {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'integration engine',
    criteria: TOPIC,
    channel: { type: 'rest-hook', endpoint: `${receiver.url}/hooks/${path}`, payload: FHIR_JSON },
  };
}

const batchOf = (...ids: string[]) => ({
  resourceType: 'Bundle',
  type: 'batch',
  entry: ids.map((emiratesId) => ({
    resource: eligibilityRequest({ emiratesId }),
    request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
  })),
});

/** The tenant's AuditEvents matching a query, once the trail (written off the answer's path) has them. */
async function auditEvents(query: string, atLeast = 1): Promise<AuditEvent[]> {
  return until(
    async () => {
      const res = await request(h.url).get(`/fhir/AuditEvent?${query}`).set(h.auth);
      expect(res.status).toBe(200);
      const events = ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      return events.length >= atLeast ? events : undefined;
    },
    10_000,
    `AuditEvents for ${query}`,
  );
}

describe('scopes on the routes of notifications, batches, $validate and _async', () => {
  it('refuses a token without the scope (403 OperationOutcome) and records the refusal', async () => {
    const token = await accessToken(
      h.url,
      tokenUrl,
      'reader',
      reader,
      'system/CoverageEligibilityResponse.rs system/AuditEvent.rs',
    );
    const attempts = [
      // Stopping the async tracking of a check is the submitter's act, not a reader's.
      request(h.url).delete('/fhir/_async/any-check').set(bearer(token)),
      request(h.url)
        .post('/fhir/Subscription')
        .set(bearer(token))
        .set('Content-Type', FHIR_JSON)
        .send(subscription('r')),
      request(h.url).get('/fhir/Subscription').set(bearer(token)),
      request(h.url)
        .post('/fhir')
        .set(bearer(token))
        .set('Content-Type', FHIR_JSON)
        .send(batchOf('784-1985-6660001-5')),
      request(h.url)
        .post('/fhir/CoverageEligibilityRequest/$validate')
        .set(bearer(token))
        .set('Content-Type', FHIR_JSON)
        .send(eligibilityRequest({ emiratesId: '784-1985-6660002-3' })),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(403);
      const outcome = res.body as OperationOutcome;
      expect(outcome.issue[0]?.code).toBe('forbidden');
      expectValidFhir(outcome);
    }
    expect(receiver.received).toHaveLength(0);
    const refused = await auditEvents('agent=reader&action=C', 1);
    expect(refused.every((e) => e.outcome === '4')).toBe(true);
  });

  it('a token with the scopes subscribes, batches and validates; each change is in the audit trail', async () => {
    const token = await accessToken(
      h.url,
      tokenUrl,
      'engine',
      writer,
      'system/Subscription.cruds system/CoverageEligibilityRequest.c system/CoverageEligibilityResponse.rs',
    );
    const created = await request(h.url)
      .post('/fhir/Subscription')
      .set(bearer(token))
      .set('Content-Type', FHIR_JSON)
      .send(subscription('engine'));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const subscriptionId = (created.body as Subscription).id!;

    const dry = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$validate')
      .set(bearer(token))
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1985-6660003-1' }));
    expect(dry.status).toBe(200);

    const ids = ['784-1985-6660004-9', '784-1985-6660005-6'];
    const batch = await request(h.url)
      .post('/fhir')
      .set(bearer(token))
      .set('Content-Type', FHIR_JSON)
      .send(batchOf(...ids));
    expect(batch.status).toBe(200);
    const locations = ((batch.body as Bundle).entry ?? []).map((e) => String(e.response?.location));
    const checks = locations.map((l) => /(CoverageEligibilityResponse\/[^/]+)/.exec(l)?.[1]);
    expect(checks.every(Boolean)).toBe(true);

    // The subscription hears of both checks of the batch.
    await until(
      () => {
        const events = receiver.received.filter(
          (r) => r.path === '/hooks/engine' && JSON.stringify(r.body).includes('event-notification'),
        );
        const foci = new Set(
          events.flatMap(
            (r) => JSON.stringify(r.body).match(/CoverageEligibilityResponse\/[A-Za-z0-9\-.]+/g) ?? [],
          ),
        );
        return checks.every((c) => foci.has(c!)) ? true : undefined;
      },
      20_000,
      'notifications of the batch',
    );

    const deleted = await request(h.url).delete(`/fhir/Subscription/${subscriptionId}`).set(bearer(token));
    expect(deleted.status).toBeLessThan(300);

    const subscriptionTrail = await auditEvents(`entity=Subscription/${subscriptionId}`, 2);
    expect(new Set(subscriptionTrail.map((e) => e.action))).toEqual(new Set(['C', 'D']));
    for (const check of checks) {
      const [event] = await auditEvents(`entity=${check}`, 1);
      expect(event?.subtype?.some((c) => c.code === 'batch')).toBe(true);
      expect(JSON.stringify(event)).not.toContain('784-1985');
    }
    for (const event of [...subscriptionTrail, ...(await auditEvents('agent=engine', 4))]) {
      expectValidFhir(event);
    }
  });
});

describe('the front-desk page', () => {
  it("records an operator's guard reset in the tenant's audit trail", async () => {
    // A credentials failure opens the payer's guard (the sandbox's locked-account scenario).
    const refused = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ emiratesId: '784-1990-0000004-4', payer: 'METLIFE' }));
    expect(refused.status).toBe(422);
    const reset = await request(h.url).post('/app/api/guards/METLIFE/reset').set(h.auth);
    expect(reset.status).toBe(204);
    const event = await until(
      async () =>
        (await auditEvents('action=E')).find((e) => e.subtype?.some((c) => c.code === 'guard-reset')),
      10_000,
      'the AuditEvent of the reset',
    );
    expect(event).toBeDefined();
    expect(event?.outcome).toBe('0');
    expectValidFhir(event);
  });
});
