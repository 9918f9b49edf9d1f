/**
 * Notifications across crashes and replicas, with the service as real child processes and a real
 * HTTP receiver (docs/notifications.md):
 * - the receiver is down while the service is SIGKILLed and restarted: every event is delivered
 *   after the restart, in order, no number skipped;
 * - two replicas on one PostgreSQL database: each event delivered once, never two at once.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Subscription } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/config.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { expectValidFhir } from '../support/fhir.js';
import { UPSTREAM_KEY } from '../support/harness.js';
import { spawnService } from '../support/process.js';
import { eventsOf, startReceiver, typeOf } from '../support/receiver.js';
import type { Receiver } from '../support/receiver.js';
import { eligibilityRequest } from '../support/requests.js';
import { createTestSchema } from '../support/postgres.js';
import { until } from '../support/until.js';

const FHIR_JSON = 'application/fhir+json';
const AUTH = { Authorization: 'Bearer notify-key-0123456789' };
const TOPIC = 'http://fhir-eligibility-adapter.org/fhir/SubscriptionTopic/eligibility-final';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

/** One tenant whose subscriptions may notify the receiver. */
function tenantsFile(dir: string, receiverUrl: string): string {
  const path = join(dir, 'tenants.json');
  writeFileSync(
    path,
    JSON.stringify({
      tenants: [
        {
          id: 'notify',
          apiKeys: [`sha256:${hashApiKey('notify-key-0123456789')}`],
          upstream: { apiKey: UPSTREAM_KEY, clinicId: 'clinic-notify', clientId: 'EHR-1' },
          practiceId: 'P-notify',
          maxInFlight: 20,
          subscriptionEndpoints: [`${receiverUrl}/`],
        },
      ],
    }),
  );
  return path;
}

async function subscribe(url: string, endpoint: string): Promise<string> {
  const body: Subscription = {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'drill',
    criteria: TOPIC,
    channel: { type: 'rest-hook', endpoint, payload: FHIR_JSON },
  };
  const res = await request(url)
    .post('/fhir/Subscription')
    .set(AUTH)
    .set('Content-Type', FHIR_JSON)
    .send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return (res.body as Subscription).id!;
}

async function submit(url: string, count: number, tag: string): Promise<string[]> {
  const paths: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const res = await request(url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(AUTH)
      .set('Content-Type', FHIR_JSON)
      // One patient throughout: every check is meant as a real one, not a reused answer.
      .set('Cache-Control', 'no-cache')
      .send(
        eligibilityRequest({ emiratesId: '784-1990-0000001-0', identifier: `${tag}-${Date.now()}-${i}` }),
      );
    expect([200, 202]).toContain(res.status);
    paths.push(new URL(String(res.headers.location ?? res.headers['content-location'])).pathname);
  }
  return paths;
}

function eventNumbers(receiver: Receiver): number[] {
  return receiver.received
    .filter((r) => typeOf(r) === 'event-notification')
    .flatMap((r) => eventsOf(r.body))
    .map((e) => e.number);
}

describe('notifications across processes', () => {
  it('receiver down while the service is SIGKILLed and restarted: every event delivered after, in order, none skipped', async () => {
    const sandbox = await startSandbox({ port: 0, timeScale: 0.02, apiKeys: [UPSTREAM_KEY] });
    cleanups.push(() => sandbox.close());
    let receiver = await startReceiver();
    const port = Number(new URL(receiver.url).port);
    const dir = mkdtempSync(join(tmpdir(), 'fea-notify-kill-'));
    const env = {
      UPSTREAM_BASE_URL: sandbox.url,
      TENANTS_FILE: tenantsFile(dir, receiver.url),
      DATABASE_URL: `sqlite:${join(dir, 'adapter.db')}`,
      POLL_INTERVAL_MS: '50',
      SUBMIT_WAIT_MS: '0',
      LEASE_MS: '2000',
    };
    const first = await spawnService(env);
    cleanups.push(() => first.kill());
    const id = await subscribe(first.url, `${receiver.url}/engine`);
    await until(
      () => (receiver.received.some((r) => typeOf(r) === 'handshake') ? true : undefined),
      10_000,
      'handshake',
    );
    await receiver.close();
    const checks = await submit(first.url, 10, 'kill');
    // Every check final (so its event is stored) while nobody can receive it.
    await until(
      async () => {
        for (const path of checks) {
          const res = await request(first.url).get(path).set(AUTH);
          if ((res.body as { outcome?: string }).outcome === 'queued') return undefined;
        }
        return true;
      },
      20_000,
      'all final',
    );
    await first.kill();

    receiver = await startReceiver(port);
    cleanups.push(() => receiver.close());
    const second = await spawnService(env);
    cleanups.push(() => second.stop());
    await until(
      () => (new Set(eventNumbers(receiver)).size >= 10 ? true : undefined),
      60_000,
      'all 10 events',
    );
    const numbers = eventNumbers(receiver);
    // In order: each number only after every number before it was acknowledged.
    expect([...new Set(numbers)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    for (const r of receiver.received) expectValidFhir(r.body);
    const events = await request(second.url).get(`/fhir/Subscription/${id}/$events`).set(AUTH);
    expect(eventsOf(events.body as never).map((e) => e.number)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  }, 120_000);

  it('two replicas on PostgreSQL: each event delivered once, in order, never two at once', async () => {
    const sandbox = await startSandbox({ port: 0, timeScale: 0.02, apiKeys: [UPSTREAM_KEY] });
    cleanups.push(() => sandbox.close());
    const receiver = await startReceiver();
    receiver.delayMs = 20;
    cleanups.push(() => receiver.close());
    const schema = await createTestSchema('notify');
    cleanups.push(() => schema.drop());
    const env = {
      UPSTREAM_BASE_URL: sandbox.url,
      TENANTS_FILE: tenantsFile(mkdtempSync(join(tmpdir(), 'fea-notify-pg-')), receiver.url),
      DATABASE_URL: schema.url,
      POLL_INTERVAL_MS: '50',
      SUBMIT_WAIT_MS: '0',
      LEASE_MS: '2000',
    };
    const a = await spawnService(env);
    cleanups.push(() => a.stop());
    const b = await spawnService(env);
    cleanups.push(() => b.stop());
    await subscribe(a.url, `${receiver.url}/engine`);
    await until(
      () => (receiver.received.some((r) => typeOf(r) === 'handshake') ? true : undefined),
      10_000,
      'handshake',
    );
    await Promise.all([submit(a.url, 20, 'a'), submit(b.url, 20, 'b')]);
    await until(
      () => (new Set(eventNumbers(receiver)).size >= 40 ? true : undefined),
      60_000,
      'all 40 events',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const numbers = eventNumbers(receiver);
    expect(numbers).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(receiver.maxConcurrent).toBe(1);
  }, 120_000);
});
