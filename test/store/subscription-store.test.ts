/**
 * The subscription store and the notification outbox, on both databases: SQLite (a temp file)
 * and PostgreSQL (a schema per run). Events are written with the CER's first final version, only
 * for matching live subscriptions of the tenant, numbered 1, 2, 3... per subscription with no gap
 * even when two stores finish checks at once; claims of due subscriptions never overlap.
 */
import { randomUUID } from 'node:crypto';
import type { CoverageEligibilityResponse, Subscription } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import type { Check, CheckStore, NewCheck } from '../../src/checks/store/check-store.js';
import type { EventFilter } from '../../src/checks/store/subscription-store.js';
import { ELIGIBILITY_FINAL_TOPIC } from '../../src/checks/store/subscription-store.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import { upstreamTaskRequest } from '../support/requests.js';

const T0 = Date.UTC(2026, 0, 1, 8, 0, 0);
const PATIENT = 'urn:eid|784-1990-1234567-6';

function newCheck(tenantId: string, patientKey = PATIENT): NewCheck {
  const id = randomUUID();
  const cer: CoverageEligibilityResponse = {
    resourceType: 'CoverageEligibilityResponse',
    id,
    status: 'active',
    purpose: ['benefits'],
    patient: { reference: 'Patient/p1' },
    created: new Date(T0).toISOString(),
    request: { reference: `CoverageEligibilityRequest/${id}` },
    outcome: 'queued',
    insurer: { display: 'DAMAN' },
  };
  return {
    id,
    tenantId,
    idempotencyKey: null,
    payerCode: 'DAMAN',
    isSearchAll: false,
    patientKey,
    request: {
      resourceType: 'CoverageEligibilityRequest',
      id,
      status: 'active',
      purpose: ['benefits'],
      patient: { reference: 'Patient/p1' },
      created: '2026-01-01',
      insurer: { display: 'DAMAN' },
    },
    upstreamRequest: upstreamTaskRequest('784-1990-1234567-6', T0),
    state: 'waiting',
    upstreamTaskId: null,
    upstreamStatus: null,
    tasksCreated: 0,
    pollFailures: 0,
    nextRunAt: T0,
    deadlineAt: T0 + 60_000,
    envelope: null,
    cer,
    outcome: 'queued',
    answer: null,
    now: T0,
  };
}

/** A claimed check turned final the way the lifecycle writes it (`final`: the outbox). */
async function finishCheck(
  store: CheckStore,
  tenantId: string,
  outcome: 'complete' | 'error',
  patientKey = PATIENT,
): Promise<Check> {
  const { check } = await store.insert(newCheck(tenantId, patientKey));
  const owner = `owner-${randomUUID()}`;
  const [claimed] = await store.claimDue({
    owner,
    now: T0,
    leaseMs: 30_000,
    limit: 1,
    maxInFlight: () => 1000,
  });
  expect(claimed?.id).toBe(check.id);
  const full: Check = { ...claimed!, ...(await store.documents(check.id))! };
  const done = await store.update(
    check.id,
    owner,
    { state: 'done', cer: { ...full.cer, outcome }, outcome, answer: { status: 200 } },
    T0 + 1000,
    full,
    { release: true, final: true },
  );
  expect(done).not.toBeNull();
  return done!;
}

function resource(): Subscription {
  return {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'test',
    criteria: ELIGIBILITY_FINAL_TOPIC,
    channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook', payload: 'application/fhir+json' },
  };
}

async function subscribe(store: CheckStore, tenantId: string, filter: EventFilter = {}) {
  return store.subscriptions.create({
    id: randomUUID(),
    tenantId,
    topic: ELIGIBILITY_FINAL_TOPIC,
    resource: resource(),
    filter,
    heartbeatAt: null,
    endAt: null,
    now: T0,
  });
}

describe.each([sqliteBackend(), postgresBackend()])('SubscriptionStore on $name', (backend) => {
  const opener = storesOn(backend);
  async function stores(): Promise<{ store: CheckStore; reopen: () => Promise<CheckStore> }> {
    const location = backend.create();
    const store = await opener.open(location);
    return { store, reopen: () => opener.open(location, false) };
  }

  it('writes one event per final check for each matching live subscription of the tenant, numbered 1, 2, 3', async () => {
    const { store } = await stores();
    const all = await subscribe(store, 'a');
    const errors = await subscribe(store, 'a', { outcome: [['error']] });
    const patient = await subscribe(store, 'a', { patient: [['784-1990-1234567-6']] });
    const otherTenant = await subscribe(store, 'b');
    const c1 = await finishCheck(store, 'a', 'complete');
    const c2 = await finishCheck(store, 'a', 'error', 'urn:eid|784-1990-7654321-6');
    const c3 = await finishCheck(store, 'a', 'error');
    const events = async (id: string) =>
      (await store.subscriptions.events(id, 1, 100)).map((e) => [e.number, e.checkId]);
    expect(await events(all.id)).toEqual([
      [1, c1.id],
      [2, c2.id],
      [3, c3.id],
    ]);
    expect(await events(errors.id)).toEqual([
      [1, c2.id],
      [2, c3.id],
    ]);
    expect(await events(patient.id)).toEqual([
      [1, c1.id],
      [2, c3.id],
    ]);
    expect(await events(otherTenant.id)).toEqual([]);
    expect((await store.subscriptions.get('a', all.id))?.eventsCount).toBe(3);
    expect((await store.subscriptions.events(all.id, 2, 100)).map((e) => e.number)).toEqual([2, 3]);
    expect((await store.subscriptions.events(all.id, 1, 100))[0]?.cerVersion).toBe(c1.version);
  });

  it('writes nothing when the final write is fenced off, or is not the first final version', async () => {
    const { store } = await stores();
    const sub = await subscribe(store, 'a');
    const { check } = await store.insert(newCheck('a'));
    const [claimed] = await store.claimDue({
      owner: 'x:1',
      now: T0,
      leaseMs: 30_000,
      limit: 1,
      maxInFlight: () => 10,
    });
    // Another owner's write: refused, and its events with it.
    const refused = await store.update(check.id, 'y:1', { state: 'done', outcome: 'complete' }, T0, claimed, {
      final: true,
    });
    expect(refused).toBeNull();
    // Not final (an interim write).
    await store.update(check.id, 'x:1', { upstreamStatus: 'NAVIGATING_WEBSITE' }, T0, claimed);
    expect(await store.subscriptions.events(sub.id, 1, 10)).toEqual([]);
    expect((await store.subscriptions.get('a', sub.id))?.eventsCount).toBe(0);
  });

  it('writes the events of a check inserted already final (a payer guard refusal), once', async () => {
    const { store } = await stores();
    const sub = await subscribe(store, 'a');
    const refused = newCheck('a');
    const cer = { ...refused.cer, outcome: 'error' as const };
    const answered = {
      ...refused,
      state: 'done' as const,
      cer,
      outcome: 'error' as const,
      answer: { status: 503 },
    };
    const { check } = await store.insert({ ...answered, idempotencyKey: 'urn:x|1' });
    // A repeated identifier stores nothing and writes no event.
    await store.insert({ ...answered, id: randomUUID(), idempotencyKey: 'urn:x|1' });
    await store.insert(newCheck('a'));
    const events = await store.subscriptions.events(sub.id, 1, 10);
    expect(events.map((e) => [e.number, e.checkId])).toEqual([[1, check.id]]);
    expect((await store.subscriptions.get('a', sub.id))?.eventsCount).toBe(1);
  });

  it('numbers events with no gap when two stores finish checks at once', async () => {
    const { store, reopen } = await stores();
    const other = await reopen();
    const sub = await subscribe(store, 'a');
    for (let i = 0; i < 20; i += 1) await store.insert(newCheck('a'));
    const claimed = await store.claimDue({
      owner: 'o:1',
      now: T0,
      leaseMs: 30_000,
      limit: 20,
      maxInFlight: () => 100,
    });
    expect(claimed).toHaveLength(20);
    const cers = new Map<string, CoverageEligibilityResponse>();
    for (const check of claimed) cers.set(check.id, (await store.documents(check.id))!.cer);
    const results = await Promise.all(
      claimed.map((check, i) =>
        (i % 2 === 0 ? store : other).update(
          check.id,
          'o:1',
          { state: 'done', cer: { ...cers.get(check.id)!, outcome: 'complete' }, outcome: 'complete' },
          T0 + i,
          check,
          { release: true, final: true },
        ),
      ),
    );
    expect(results.every((r) => r !== null)).toBe(true);
    const numbers = (await store.subscriptions.events(sub.id, 1, 100)).map((e) => e.number);
    expect(numbers).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
  });

  it('claims due subscriptions with a lease: never the same one twice at once; writes are fenced', async () => {
    const { store, reopen } = await stores();
    const other = await reopen();
    const subs = await Promise.all(Array.from({ length: 10 }, () => subscribe(store, 'a')));
    const claim = (s: CheckStore, owner: string) =>
      s.subscriptions.claimDue({ owner, now: T0, leaseMs: 30_000, limit: 10 });
    const [first, second] = await Promise.all([claim(store, 'r1:1'), claim(other, 'r2:1')]);
    const ids = [...first, ...second].map((s) => s.id).sort();
    expect(ids).toEqual(subs.map((s) => s.id).sort());
    // Leased: nothing more to claim until the lease ends.
    expect(await claim(store, 'r3:1')).toEqual([]);
    const taken = first[0] ?? second[0]!;
    const holder = first.length > 0 ? 'r1:1' : 'r2:1';
    expect(await store.subscriptions.settle(taken.id, 'someone-else', { handshakeDue: false }, T0)).toBe(
      false,
    );
    expect(
      await store.subscriptions.settle(
        taken.id,
        holder,
        { status: 'active', handshakeDue: false, leaseUntil: T0 + 5000 },
        T0,
        true,
      ),
    ).toBe(true);
    // Active, released, nothing due: not claimed again.
    expect((await claim(store, 'r4:1')).map((s) => s.id)).not.toContain(taken.id);
    // A lease that ran out is claimed again (a replica died).
    const later = await store.subscriptions.claimDue({
      owner: 'r5:1',
      now: T0 + 31_000,
      leaseMs: 30_000,
      limit: 20,
    });
    expect(later.map((s) => s.id)).toHaveLength(9);
    await store.subscriptions.releaseAll('r5');
    expect(await claim(store, 'r6:1')).toHaveLength(9);
  });

  it('purges delivered events older than the cut-off; numbering goes on', async () => {
    const { store } = await stores();
    const sub = await subscribe(store, 'a');
    for (let i = 0; i < 3; i++) await finishCheck(store, 'a', 'complete');
    const [claimed] = await store.subscriptions.claimDue({
      owner: 'r:1',
      now: T0,
      leaseMs: 30_000,
      limit: 1,
    });
    expect(claimed?.id).toBe(sub.id);
    expect(
      await store.subscriptions.settle(sub.id, 'r:1', { handshakeDue: false, deliveredThrough: 2 }, T0, true),
    ).toBe(true);
    const numbers = async () => (await store.subscriptions.events(sub.id, 1, 10)).map((e) => e.number);
    // Events occurred at T0 + 1000: a cut-off before that keeps them all.
    await store.purgeBefore(T0 + 500);
    expect(await numbers()).toEqual([1, 2, 3]);
    // Delivered ones (1, 2) go; 3, not yet delivered, stays.
    await store.purgeBefore(T0 + 2000);
    expect(await numbers()).toEqual([3]);
    expect((await store.subscriptions.get('a', sub.id))?.eventsCount).toBe(3);
    await finishCheck(store, 'a', 'complete');
    expect(await numbers()).toEqual([3, 4]);
  });

  it('reads, lists by status and deletes per tenant', async () => {
    const { store } = await stores();
    const a = await subscribe(store, 'a');
    await subscribe(store, 'b');
    expect(await store.subscriptions.get('b', a.id)).toBeNull();
    expect((await store.subscriptions.list('a', undefined, 10)).map((s) => s.id)).toEqual([a.id]);
    expect(await store.subscriptions.list('a', ['active'], 10)).toEqual([]);
    expect(await store.subscriptions.list('a', ['requested'], 10)).toHaveLength(1);
    await finishCheck(store, 'a', 'complete');
    expect(await store.subscriptions.delete('b', a.id)).toBe(false);
    expect(await store.subscriptions.delete('a', a.id)).toBe(true);
    expect(await store.subscriptions.get('a', a.id)).toBeNull();
    expect(await store.subscriptions.events(a.id, 1, 10)).toEqual([]);
  });
});
