/**
 * The delivery worker on its own, with a real SQLite store and a real HTTP receiver, and a retry
 * window of about a second (SUBSCRIPTION_RETRY_MINUTES is whole minutes): an endpoint that keeps
 * failing is retried with backoff, then its subscription turns `error` with its events kept.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/checks/store/open.js';
import type { CheckStore } from '../../src/checks/store/check-store.js';
import { ELIGIBILITY_FINAL_TOPIC } from '../../src/checks/store/subscription-store.js';
import { backoffMs, DeliveryWorker, MAX_BACKOFF_MS } from '../../src/notifications/worker.js';
import { expectValidFhir } from '../support/fhir.js';
import { captureLogger } from '../support/harness.js';
import { startReceiver } from '../support/receiver.js';
import { upstreamTaskRequest } from '../support/requests.js';
import { until } from '../support/until.js';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

/** A check of the tenant turned final through the store, as the lifecycle writes it. */
async function finalCheck(store: CheckStore, tenantId: string): Promise<void> {
  const id = randomUUID();
  const now = Date.now();
  const cer = {
    resourceType: 'CoverageEligibilityResponse' as const,
    id,
    status: 'active' as const,
    purpose: ['benefits' as const],
    patient: { reference: 'Patient/p1' },
    created: new Date(now).toISOString(),
    request: { reference: `CoverageEligibilityRequest/${id}` },
    outcome: 'queued' as const,
    insurer: { display: 'DAMAN' },
  };
  await store.insert({
    id,
    tenantId,
    idempotencyKey: null,
    payerCode: 'DAMAN',
    isSearchAll: false,
    patientKey: 'urn:eid|784-1990-1234567-6',
    request: { ...cer, resourceType: 'CoverageEligibilityRequest', created: '2026-01-01' } as never,
    upstreamRequest: upstreamTaskRequest('784-1990-1234567-6', now),
    state: 'waiting',
    upstreamTaskId: null,
    upstreamStatus: null,
    tasksCreated: 0,
    pollFailures: 0,
    nextRunAt: now,
    deadlineAt: now + 60_000,
    envelope: null,
    cer,
    outcome: 'queued',
    answer: null,
    now,
  });
  const [claimed] = await store.claimDue({
    owner: 'w:1',
    now,
    leaseMs: 30_000,
    limit: 1,
    maxInFlight: () => 10,
  });
  await store.update(
    id,
    'w:1',
    { state: 'done', cer: { ...cer, outcome: 'complete' }, outcome: 'complete' },
    now,
    claimed,
    {
      release: true,
      final: true,
    },
  );
}

describe('delivery worker', () => {
  it('backs off exponentially with jitter, capped at 60 s', () => {
    expect(backoffMs(1, () => 0)).toBe(250);
    expect(backoffMs(1, () => 1)).toBe(500);
    expect(backoffMs(3, () => 1)).toBe(2000);
    expect(backoffMs(30, () => 1)).toBe(MAX_BACKOFF_MS);
    expect(backoffMs(30, () => 0)).toBe(MAX_BACKOFF_MS / 2);
  });

  it('retries a failing endpoint, then turns the subscription error after the retry window; its events stay', async () => {
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    receiver.answer = (r) => (JSON.stringify(r.body).includes('"handshake"') ? 200 : 503);
    const store = await openStore(`sqlite:${join(mkdtempSync(join(tmpdir(), 'fea-worker-')), 'a.db')}`);
    cleanups.push(() => store.close());
    await store.migrate();
    const { logger, logs } = captureLogger();
    const worker = new DeliveryWorker({
      store,
      logger,
      owner: 'worker-test',
      now: Date.now,
      fhirBase: 'http://localhost:8080/fhir',
      retryMs: 1500,
      idleMs: 50,
      concurrency: 4,
    });
    worker.start();
    cleanups.push(() => worker.stop());
    const sub = await store.subscriptions.create({
      id: randomUUID(),
      tenantId: 't',
      topic: ELIGIBILITY_FINAL_TOPIC,
      resource: {
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'worker test',
        criteria: ELIGIBILITY_FINAL_TOPIC,
        channel: { type: 'rest-hook', endpoint: `${receiver.url}/hook`, payload: 'application/fhir+json' },
      },
      filter: {},
      heartbeatAt: null,
      endAt: null,
      now: Date.now(),
    });
    worker.wake();
    await until(
      async () => ((await store.subscriptions.get('t', sub.id))?.status === 'active' ? true : undefined),
      5000,
      'active',
    );
    const failingFrom = Date.now();
    await finalCheck(store, 't');
    await finalCheck(store, 't');
    worker.wake();
    const ended = await until(
      async () => {
        const s = await store.subscriptions.get('t', sub.id);
        return s?.status === 'error' ? s : undefined;
      },
      10_000,
      'error after the retry window',
    );
    expect(Date.now() - failingFrom).toBeGreaterThanOrEqual(1500);
    expect(ended.deliveredThrough).toBe(0);
    expect(ended.eventsCount).toBe(2);
    expect(ended.lastError).toBe('endpoint answered HTTP 503');
    // Several attempts, each from event 1 (nothing skipped), the later ones spaced by the backoff.
    const attempts = receiver.received.filter((r) => JSON.stringify(r.body).includes('event-notification'));
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    for (const attempt of attempts) expectValidFhir(attempt.body);
    expect((await store.subscriptions.events(sub.id, 1, 10)).map((e) => e.number)).toEqual([1, 2]);
    // Nothing more is sent once in error.
    const sent = receiver.received.length;
    await new Promise((r) => setTimeout(r, 600));
    expect(receiver.received.length).toBe(sent);
    expect(logs.some((l) => l.includes('"status":"error"'))).toBe(true);
  });
});
