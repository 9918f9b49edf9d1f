/**
 * The appointment store (docs/previsit.md) on SQLite and PostgreSQL: a booking writes the
 * appointment with its booking check (or alone, when the booking answer is reused), once per
 * identifier; due re-checks are claimed with a lease, by one claimer at a time; starting the
 * re-check writes its check and the appointment's state together, once; a cancel wins over a
 * claim that has not started it; the `serviced` search and `request=` find what they should.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CheckInput } from '../../src/mapping/types.js';
import { newCheckOf } from '../../src/checks/service.js';
import type { NewAppointment } from '../../src/checks/store/appointment-store.js';
import type { NewCheck } from '../../src/checks/store/check-store.js';
import type { Store } from '../../src/checks/store/appointment-store.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import { checkInput } from '../support/requests.js';

const T0 = Date.UTC(2026, 10, 26, 6, 0);
const HOUR = 3_600_000;
const LEASE = 30_000;

const input = (key: string | null = null): CheckInput =>
  checkInput({ startedAt: T0, key, servicedPeriod: { start: new Date(T0 + 24 * HOUR).toISOString() } });

function checkOf(given: CheckInput, id = randomUUID(), requestId?: string): NewCheck {
  return newCheckOf(given, {
    id,
    tenantId: 'tenant-a',
    now: T0,
    timeoutMs: 60_000,
    baseUrl: 'http://localhost',
    ...(requestId ? { requestId } : {}),
  });
}

function appointmentOf(
  id: string,
  given: CheckInput,
  startAt = T0 + 24 * HOUR,
  bookingCheckId = id,
): NewAppointment {
  return {
    id,
    tenantId: 'tenant-a',
    idempotencyKey: given.idempotencyKey,
    input: { ...given, request: { ...given.request, id } },
    bookingCheckId,
    startAt,
    dueAt: startAt - 2 * HOUR,
    now: T0,
  };
}

/** Books an appointment with its booking check; returns its id. */
async function book(store: Store, key: string | null = null, startAt?: number): Promise<string> {
  const id = randomUUID();
  const given = input(key);
  const { appointment } = await store.appointments.book(
    appointmentOf(id, given, startAt),
    checkOf(given, id),
  );
  if (!appointment) throw new Error('not booked');
  return id;
}

describe.each([sqliteBackend(), postgresBackend()])('AppointmentStore on $name', (backend) => {
  const opener = storesOn(backend);
  const open = async () => {
    const location = backend.create();
    return { store: await opener.open(location), reopen: () => opener.open(location, false) };
  };

  it('stores an appointment with its booking check in one write', async () => {
    const { store } = await open();
    const id = await book(store, 'visit-1');
    const appointment = await store.appointments.get('tenant-a', id);
    expect(appointment).toMatchObject({ id, bookingCheckId: id, state: 'scheduled', recheckId: null });
    expect(appointment?.input.request.id).toBe(id);
    expect((await store.get('tenant-a', id))?.state).toBe('waiting');
    expect(await store.appointments.get('tenant-b', id)).toBeNull();
  });

  it('books once per identifier: the same identifier again writes nothing and returns the first', async () => {
    const { store } = await open();
    const first = await book(store, 'visit-2');
    const again = input('visit-2');
    const second = randomUUID();
    const result = await store.appointments.book(appointmentOf(second, again), checkOf(again, second));
    expect(result.check?.created).toBe(false);
    expect(result.appointment?.id).toBe(first);
    expect(await store.get('tenant-a', second)).toBeNull();
    expect(await store.appointments.get('tenant-a', second)).toBeNull();
  });

  it('stores an appointment whose booking answer is reused, once per identifier', async () => {
    const { store } = await open();
    const answered = (await store.insert(checkOf(input()))).check;
    const id = randomUUID();
    const result = await store.appointments.book(
      appointmentOf(id, input('visit-3'), undefined, answered.id),
      null,
    );
    expect(result.appointment).toMatchObject({ id, bookingCheckId: answered.id });
    const repeated = await store.appointments.book(
      appointmentOf(randomUUID(), input('visit-3'), undefined, answered.id),
      null,
    );
    expect(repeated.appointment?.id).toBe(id);
    expect((await store.appointments.findByKey('tenant-a', 'urn:ehr|visit-3'))?.id).toBe(id);
  });

  it('claims a re-check only once it is due and while no live lease holds it', async () => {
    const { store } = await open();
    const id = await book(store);
    const due = T0 + 22 * HOUR;
    expect(
      await store.appointments.claimDue({ owner: 'a:1', now: due - 1, leaseMs: LEASE, limit: 10 }),
    ).toEqual([]);
    const [claimed] = await store.appointments.claimDue({
      owner: 'a:1',
      now: due,
      leaseMs: LEASE,
      limit: 10,
    });
    expect(claimed?.id).toBe(id);
    expect(
      await store.appointments.claimDue({ owner: 'b:1', now: due + 1, leaseMs: LEASE, limit: 10 }),
    ).toEqual([]);
    // The lease runs out (a killed replica): another claims it.
    const [taken] = await store.appointments.claimDue({
      owner: 'b:1',
      now: due + LEASE,
      leaseMs: LEASE,
      limit: 10,
    });
    expect(taken?.id).toBe(id);
  });

  it('two claimers at once never both get an appointment', async () => {
    const { store, reopen } = await open();
    const other = await reopen();
    for (let i = 0; i < 20; i += 1) await book(store);
    const now = T0 + 22 * HOUR;
    const [a, b] = await Promise.all([
      store.appointments.claimDue({ owner: 'a:1', now, leaseMs: LEASE, limit: 15 }),
      other.appointments.claimDue({ owner: 'b:1', now, leaseMs: LEASE, limit: 15 }),
    ]);
    const ids = [...a, ...b].map((x) => x.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(20);
  });

  it('starts the re-check once: its check and the appointment state in one write', async () => {
    const { store } = await open();
    const id = await book(store);
    const now = T0 + 22 * HOUR;
    await store.appointments.claimDue({ owner: 'a:1', now, leaseMs: LEASE, limit: 10 });
    const recheck = checkOf(input(), randomUUID(), id);
    expect(await store.appointments.startRecheck(id, 'a:1', recheck, now)).toBe(true);
    expect(await store.appointments.startRecheck(id, 'a:1', checkOf(input(), randomUUID(), id), now)).toBe(
      false,
    );
    expect(await store.appointments.get('tenant-a', id)).toMatchObject({
      state: 'rechecked',
      recheckId: recheck.id,
    });
    const stored = await store.get('tenant-a', recheck.id);
    expect(stored?.request.id).toBe(id);
    expect(stored?.cer.request?.reference).toBe(`CoverageEligibilityRequest/${id}`);
    // request= finds the booking check and the re-check.
    const { checks } = await store.search('tenant-a', { requests: [[id]] }, { count: 10, offset: 0 });
    expect(checks.map((c) => c.id).sort()).toEqual([id, recheck.id].sort());
  });

  it('a claimer whose lease was taken over cannot start the re-check', async () => {
    const { store } = await open();
    const id = await book(store);
    const now = T0 + 22 * HOUR;
    await store.appointments.claimDue({ owner: 'a:1', now, leaseMs: LEASE, limit: 10 });
    await store.appointments.claimDue({ owner: 'b:1', now: now + LEASE, leaseMs: LEASE, limit: 10 });
    expect(await store.appointments.startRecheck(id, 'a:1', checkOf(input(), randomUUID(), id), now)).toBe(
      false,
    );
    expect(await store.appointments.startRecheck(id, 'b:1', checkOf(input(), randomUUID(), id), now)).toBe(
      true,
    );
  });

  it('a cancel wins over a claim that has not started the re-check', async () => {
    const { store } = await open();
    const id = await book(store);
    const now = T0 + 22 * HOUR;
    await store.appointments.claimDue({ owner: 'a:1', now, leaseMs: LEASE, limit: 10 });
    const cancelledRequest = { ...input().request, id, status: 'cancelled' as const };
    const cancelled = await store.appointments.cancel('tenant-a', id, cancelledRequest, now);
    expect(cancelled?.previous).toBe('scheduled');
    const recheck = checkOf(input(), randomUUID(), id);
    expect(await store.appointments.startRecheck(id, 'a:1', recheck, now)).toBe(false);
    expect(await store.get('tenant-a', recheck.id)).toBeNull();
    expect((await store.appointments.get('tenant-a', id))?.input.request.status).toBe('cancelled');
    expect(
      await store.appointments.claimDue({ owner: 'b:1', now: now + LEASE, leaseMs: LEASE, limit: 10 }),
    ).toEqual([]);
    expect(await store.appointments.cancel('tenant-b', id, cancelledRequest, now)).toBeNull();
  });

  it('a cancel drops a re-check still waiting for a slot, never one a claim took', async () => {
    const { store } = await open();
    const now = T0 + 22 * HOUR;
    const waiting = await book(store);
    const started = await book(store);
    await store.appointments.claimDue({ owner: 'a:1', now, leaseMs: LEASE, limit: 10 });
    const taken = checkOf(input(), randomUUID(), started);
    await store.appointments.startRecheck(started, 'a:1', taken, now);
    // The scheduler claims every waiting check, this re-check included: it has started.
    await store.claimDue({ owner: 's:1', now, leaseMs: LEASE, limit: 10, maxInFlight: () => 10 });
    const queued = checkOf(input(), randomUUID(), waiting);
    await store.appointments.startRecheck(waiting, 'a:1', queued, now);
    const request = (id: string) => ({ ...input().request, id, status: 'cancelled' as const });
    await store.appointments.cancel('tenant-a', waiting, request(waiting), now);
    await store.appointments.cancel('tenant-a', started, request(started), now);
    expect((await store.appointments.get('tenant-a', waiting))?.recheckId).toBeNull();
    expect(await store.get('tenant-a', queued.id)).toBeNull();
    expect((await store.appointments.get('tenant-a', started))?.recheckId).toBe(taken.id);
    expect((await store.get('tenant-a', taken.id))?.state).toBe('starting');
  });

  it('postpones and skips only under the caller claim', async () => {
    const { store } = await open();
    const id = await book(store);
    const now = T0 + 22 * HOUR;
    await store.appointments.claimDue({ owner: 'a:1', now, leaseMs: LEASE, limit: 10 });
    expect(await store.appointments.postpone(id, 'x:1', now + 5000, now)).toBe(false);
    expect(await store.appointments.postpone(id, 'a:1', now + 5000, now)).toBe(true);
    expect(
      await store.appointments.claimDue({ owner: 'a:2', now: now + 4999, leaseMs: LEASE, limit: 10 }),
    ).toEqual([]);
    await store.appointments.claimDue({ owner: 'a:2', now: now + 5000, leaseMs: LEASE, limit: 10 });
    expect(await store.appointments.skip(id, 'a:2', now + 5000)).toBe(true);
    expect((await store.appointments.get('tenant-a', id))?.state).toBe('skipped');
  });

  it('keeps a scheduled re-check across a restart', async () => {
    const { store, reopen } = await open();
    const id = await book(store);
    await store.appointments.claimDue({ owner: 'a:1', now: T0 + 22 * HOUR, leaseMs: LEASE, limit: 10 });
    // A new process on the same database (the first one's lease is left behind, as a kill leaves it).
    const again = await reopen();
    const [claimed] = await again.appointments.claimDue({
      owner: 'b:1',
      now: T0 + 22 * HOUR + LEASE,
      leaseMs: LEASE,
      limit: 10,
    });
    expect(claimed?.id).toBe(id);
  });

  it('searches a tenant appointments by start', async () => {
    const { store } = await open();
    const early = await book(store, null, T0 + 20 * HOUR);
    const late = await book(store, null, T0 + 30 * HOUR);
    const found = await store.appointments.search(
      'tenant-a',
      [{ from: T0 + 19 * HOUR, before: T0 + 21 * HOUR }],
      10,
    );
    expect(found.map((a) => a.id)).toEqual([early]);
    const all = await store.appointments.search('tenant-a', [{ from: T0 }], 10);
    expect(all.map((a) => a.id)).toEqual([early, late]);
    expect(await store.appointments.search('tenant-b', [], 10)).toEqual([]);
  });

  it('tells the time by one clock', async () => {
    const { store } = await open();
    const before = Date.now();
    const now = await store.appointments.clock();
    expect(Math.abs(now - before)).toBeLessThan(60_000);
  });
});
