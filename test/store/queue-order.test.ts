/**
 * The desk first (docs/queue.md), in the one claim query, on SQLite and PostgreSQL: a tenant's
 * waiting checks start desk first (stat before normal, then arrival), then background by deadline,
 * then arrival; background work never holds the tenant's desk slots, never starves when no desk
 * work waits, and two store instances claiming at once keep both rules and maxInFlight.
 */
import { describe, expect, it } from 'vitest';
import type { CheckStore, ClaimOptions, ClaimedCheck, NewCheck } from '../../src/checks/store/check-store.js';
import type { QueuePlace } from '../../src/mapping/request/queue-place.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import { newCheck as storedCheck } from '../support/new-check.js';

const T0 = Date.UTC(2025, 0, 1, 8, 0, 0);
const HOUR = 3_600_000;

interface Spec {
  at: number;
  place?: Partial<QueuePlace>;
  tenantId?: string;
}

/** A waiting check (the store tests' row) at its place in the line. */
function newCheck({ at, place = {}, tenantId = 'tenant-a' }: Spec): NewCheck {
  const queueClass = place.queueClass ?? 'desk';
  return {
    ...storedCheck({ tenantId, now: at, patientKey: null }),
    queueClass,
    priority: place.priority ?? 'normal',
    queueDeadlineAt: place.queueDeadlineAt ?? (queueClass === 'desk' ? at : at + HOUR),
  };
}

const desk = (at: number, priority: QueuePlace['priority'] = 'normal'): Spec => ({
  at,
  place: { queueClass: 'desk', priority },
});
const background = (at: number, deadline = at + HOUR): Spec => ({
  at,
  place: { queueClass: 'background', queueDeadlineAt: deadline },
});

async function insertAll(store: CheckStore, specs: Spec[]): Promise<string[]> {
  const ids: string[] = [];
  for (const spec of specs) ids.push((await store.insert(newCheck(spec))).check.id);
  return ids;
}

function options(owner: string, now: number, overrides: Partial<ClaimOptions> = {}): ClaimOptions {
  return { owner, now, leaseMs: 60_000, limit: 100, maxInFlight: () => 5, ...overrides };
}

/** Ends a claimed check as the lifecycle does (done, lease dropped): its slot is free. */
async function finish(store: CheckStore, check: ClaimedCheck, now: number): Promise<void> {
  const done = await store.update(
    check.id,
    check.leaseOwner!,
    { state: 'done', outcome: 'complete' },
    now,
    check,
    {
      release: true,
    },
  );
  expect(done?.state).toBe('done');
}

/** The tenant's checks holding a slot, per class, as the store counts them. */
async function running(
  store: CheckStore,
  tenantId = 'tenant-a',
): Promise<{ desk: number; background: number }> {
  const counts = await store.countQueueByClass(tenantId);
  return { desk: counts.desk.running, background: counts.background.running };
}

describe.each([sqliteBackend(), postgresBackend()])('the desk first on $name', (backend) => {
  const stores = storesOn(backend);
  const storeOn = (location = backend.create()): Promise<CheckStore> => stores.open(location);

  it('starts desk first (stat, then arrival), then background by deadline, then arrival', async () => {
    const store = await storeOn();
    const [bgLate, bgSoon, deskA, bgSoonToo, stat, deskB, deferredLast] = await insertAll(store, [
      background(T0 + 1, T0 + 5 * HOUR),
      background(T0 + 2, T0 + HOUR),
      desk(T0 + 3),
      background(T0 + 4, T0 + HOUR),
      desk(T0 + 5, 'stat'),
      desk(T0 + 6),
      {
        at: T0 + 7,
        place: { queueClass: 'background', priority: 'deferred', queueDeadlineAt: T0 + 9 * HOUR },
      },
    ]);
    // One at a time (limit 1): the line's order, whatever the arrival order; all slots may serve
    // background here (deskSlots 0), so only the order is tested.
    const order: string[] = [];
    for (let i = 0; i < 7; i += 1) {
      const claimed = await store.claimDue(
        options(`o:${i}`, T0 + 100, { limit: 1, maxInFlight: () => 10, deskSlots: () => 0 }),
      );
      order.push(...claimed.map((c) => c.id));
    }
    expect(order).toEqual([stat, deskA, deskB, bgSoon, bgSoonToo, bgLate, deferredLast]);
  });

  it('keeps deskSlots from background work: a desk check starts at once behind any backlog', async () => {
    const store = await storeOn();
    await insertAll(
      store,
      Array.from({ length: 20 }, (_, i) => background(T0 + i)),
    );
    // maxInFlight 5, deskSlots absent: 1 kept for the desk.
    const first = await store.claimDue(options('o:1', T0 + 100));
    expect(first).toHaveLength(4);
    expect(await running(store)).toEqual({ desk: 0, background: 4 });
    expect(await store.claimDue(options('o:2', T0 + 101))).toEqual([]);
    const [walkIn] = await insertAll(store, [desk(T0 + 200)]);
    const claimed = await store.claimDue(options('o:3', T0 + 201));
    expect(claimed.map((c) => c.id)).toEqual([walkIn]);
    expect(await running(store)).toEqual({ desk: 1, background: 4 });
    // A second walk-in waits for any slot (never more than maxInFlight), and is first when one frees.
    const [second] = await insertAll(store, [desk(T0 + 300)]);
    expect(await store.claimDue(options('o:4', T0 + 301))).toEqual([]);
    await finish(store, first[0]!, T0 + 400);
    expect((await store.claimDue(options('o:5', T0 + 401))).map((c) => c.id)).toEqual([second]);
    expect(await running(store)).toEqual({ desk: 2, background: 3 });
    // An explicit deskSlots: 2 of 5 kept, so background work stays at 3 when the desk is done.
    await finish(store, claimed[0]!, T0 + 500);
    expect(await store.claimDue(options('o:6', T0 + 501, { deskSlots: () => 2 }))).toEqual([]);
    expect(await store.claimDue(options('o:7', T0 + 502, { deskSlots: () => 0 }))).toHaveLength(1);
  });

  it('with maxInFlight 1 keeps no desk slot: background work uses the one slot', async () => {
    const store = await storeOn();
    const [bg] = await insertAll(store, [background(T0)]);
    const claimed = await store.claimDue(options('o:1', T0 + 1, { maxInFlight: () => 1 }));
    expect(claimed.map((c) => c.id)).toEqual([bg]);
    const [walkIn] = await insertAll(store, [desk(T0 + 2)]);
    expect(await store.claimDue(options('o:2', T0 + 3, { maxInFlight: () => 1 }))).toEqual([]);
    await finish(store, claimed[0]!, T0 + 4);
    expect((await store.claimDue(options('o:3', T0 + 5, { maxInFlight: () => 1 }))).map((c) => c.id)).toEqual(
      [walkIn],
    );
  });

  it('drains a backlog at its bound while desk checks come and go, never starving it', async () => {
    const store = await storeOn();
    await insertAll(
      store,
      Array.from({ length: 40 }, (_, i) => background(T0 + i)),
    );
    let now = T0 + 1000;
    const held: ClaimedCheck[] = [];
    let drained = 0;
    for (let round = 0; round < 40 && drained < 40; round += 1) {
      now += 100;
      // A walk-in every third round.
      if (round % 3 === 0) await insertAll(store, [desk(now)]);
      const claimed = await store.claimDue(options(`o:${round}`, now));
      held.push(...claimed);
      const counts = await store.countQueueByClass('tenant-a');
      // Never more than maxInFlight; background never above maxInFlight - deskSlots (4); a desk
      // check never waits while a slot is free.
      expect(counts.desk.running + counts.background.running).toBeLessThanOrEqual(5);
      expect(counts.background.running).toBeLessThanOrEqual(4);
      if (counts.desk.waiting > 0) expect(counts.desk.running + counts.background.running).toBe(5);
      // Not starved: with no desk work waiting, background work holds all of its 4 slots.
      if (counts.background.waiting > 0) expect(counts.background.running).toBe(4);
      // Every check held ends within the round (a task's duration).
      for (const check of held.splice(0)) {
        await finish(store, check, now + 50);
        const row = await store.get('tenant-a', check.id);
        if (row?.queueClass === 'background') drained += 1;
      }
    }
    expect(drained).toBe(40);
  });

  it('two store instances claiming at once keep maxInFlight, the desk slot and the desk order', async () => {
    const location = backend.create();
    const one = await storeOn(location);
    const two = await storeOn(location);
    const specs: Spec[] = [];
    for (let i = 0; i < 30; i += 1) specs.push(i % 3 === 0 ? desk(T0 + i) : background(T0 + i));
    const ids = await insertAll(one, specs);
    const deskIds = ids.filter((_, i) => i % 3 === 0);
    const startedDesk: string[] = [];
    const started = new Set<string>();
    let now = T0 + 100;
    for (let round = 0; round < 80 && started.size < ids.length; round += 1) {
      now += 10;
      const claimers = [one, two, one, two];
      const results = await Promise.all(
        claimers.map((store, i) => store.claimDue(options(`owner-${round}-${i}`, now, { limit: 3 }))),
      );
      const claimed = results.flat();
      expect(new Set(claimed.map((c) => c.id)).size).toBe(claimed.length);
      const counts = await one.countQueueByClass('tenant-a');
      expect(counts.desk.running + counts.background.running).toBeLessThanOrEqual(5);
      expect(counts.background.running).toBeLessThanOrEqual(4);
      // The desk first: no background check starts while a desk check waits with a slot free.
      if (counts.desk.waiting > 0) expect(counts.desk.running + counts.background.running).toBe(5);
      for (const check of claimed) {
        expect(started.has(check.id)).toBe(false);
        started.add(check.id);
        if (deskIds.includes(check.id)) startedDesk.push(check.id);
      }
      // Desk checks start in arrival order: those started by the end of a round are the first ones
      // (within a round, claimers at once may take them in either order).
      expect(new Set(startedDesk)).toEqual(new Set(deskIds.slice(0, startedDesk.length)));
      // Half of what runs ends each round.
      await Promise.all(claimed.filter((_, i) => i % 2 === 0).map((check) => finish(one, check, now + 1)));
      if (claimed.length === 0) {
        const left = await one.search('tenant-a', {}, { count: 100, offset: 0, total: false });
        await Promise.all(
          left.checks.filter((c) => c.state === 'starting').map((c) => finish(one, c, now + 2)),
        );
      }
    }
    expect(started.size).toBe(ids.length);
    expect(startedDesk).toHaveLength(deskIds.length);
  });

  it('counts the line per class and the checks ahead of a new one', async () => {
    const store = await storeOn();
    await insertAll(store, [
      background(T0, T0 + HOUR),
      background(T0 + 1, T0 + 3 * HOUR),
      desk(T0 + 2),
      desk(T0 + 3, 'stat'),
    ]);
    expect(await store.countWaitingByClass()).toEqual({ desk: 2, background: 2 });
    expect(await store.countQueueByClass('tenant-a')).toEqual({
      desk: { waiting: 2, running: 0 },
      background: { waiting: 2, running: 0 },
    });
    // A new normal desk check: behind both desk checks, ahead of all background work.
    expect(
      await store.countAhead(
        'tenant-a',
        { queueClass: 'desk', priority: 'normal', queueDeadlineAt: T0 + 9 },
        T0 + 9,
      ),
    ).toBe(2);
    expect(
      await store.countAhead(
        'tenant-a',
        { queueClass: 'desk', priority: 'stat', queueDeadlineAt: T0 + 9 },
        T0 + 9,
      ),
    ).toBe(1);
    // A background check due in 2 h: behind the desk and the 1 h one.
    expect(
      await store.countAhead(
        'tenant-a',
        { queueClass: 'background', priority: 'normal', queueDeadlineAt: T0 + 2 * HOUR },
        T0 + 9,
      ),
    ).toBe(3);
    expect(
      await store.countAhead('tenant-b', { queueClass: 'desk', priority: 'normal', queueDeadlineAt: T0 }, T0),
    ).toBe(0);
  });

  it('keeps the class, priority and deadline in the store: a new store instance reads them', async () => {
    const location = backend.create();
    const store = await storeOn(location);
    const [id] = await insertAll(store, [
      { at: T0, place: { queueClass: 'background', priority: 'deferred', queueDeadlineAt: T0 + 7 * HOUR } },
    ]);
    const again = await storeOn(location);
    expect(await again.get('tenant-a', id!)).toMatchObject({
      queueClass: 'background',
      priority: 'deferred',
      queueDeadlineAt: T0 + 7 * HOUR,
    });
  });
});
