/**
 * The CheckStore contract, run against both implementations: SQLite (a temp file) and
 * PostgreSQL (a unique schema per run). PostgreSQL must be reachable: an unreachable server
 * fails these tests loudly instead of skipping them, so a green run always means both stores.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/checks/store/open.js';
import type {
  CerOutcome,
  Check,
  CheckState,
  CheckStore,
  ClaimOptions,
  ClaimedCheck,
  NewCheck,
  SearchPage,
} from '../../src/checks/store/check-store.js';
import { SLOT_STATES } from '../../src/checks/store/check-store.js';
import { reuseKeyOf } from '../../src/checks/store/rows.js';
import { auditRow } from '../../src/checks/store/audit-store.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import { newCheck, type CheckSpec } from '../support/new-check.js';

const T0 = Date.UTC(2025, 0, 1, 8, 0, 0);
const LEASE_MS = 30_000;

// ---- factory -------------------------------------------------------------------------------

function cerWith(check: Check, outcome: CerOutcome): CoverageEligibilityResponse {
  return { ...check.cer, outcome, disposition: `now ${outcome}` };
}

function claimOptions(owner: string, now: number, overrides: Partial<ClaimOptions> = {}): ClaimOptions {
  return { owner, now, leaseMs: LEASE_MS, limit: 100, maxInFlight: () => 10, ...overrides };
}

async function insertAll(store: CheckStore, specs: CheckSpec[]): Promise<Check[]> {
  const checks: Check[] = [];
  // One at a time: arrival order is part of what the claim tests check.
  for (const spec of specs) checks.push((await store.insert(newCheck(spec))).check);
  return checks;
}

/** A claimed check with its documents, read as the lifecycle reads them when a step needs them. */
async function withDocuments(store: CheckStore, claimed: ClaimedCheck | undefined): Promise<Check> {
  if (!claimed) throw new Error('nothing claimed');
  const documents = await store.documents(claimed.id);
  if (!documents) throw new Error(`no documents for ${claimed.id}`);
  return { ...claimed, ...documents };
}

/** Finishes a claimed check the way the lifecycle does: final CER, then drop the lease. */
async function finish(store: CheckStore, claimed: ClaimedCheck, owner: string, now: number): Promise<void> {
  const check = await withDocuments(store, claimed);
  const done = await store.update(
    check.id,
    owner,
    { state: 'done', cer: cerWith(check, 'complete'), outcome: 'complete' },
    now,
  );
  expect(done?.state).toBe('done');
  await store.release(check.id, owner);
}

async function slotCounts(store: CheckStore): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const row of await store.countByState()) {
    if (SLOT_STATES.includes(row.state))
      counts.set(row.tenantId, (counts.get(row.tenantId) ?? 0) + row.count);
  }
  return counts;
}

// ---- backends ------------------------------------------------------------------------------

// ---- the contract --------------------------------------------------------------------------

describe.each([sqliteBackend(), postgresBackend()])('CheckStore on $name', (backend) => {
  const stores = storesOn(backend);

  /** Opens (and migrates) a store on a database, new unless one is given. */
  const storeOn = (location = backend.create()): Promise<CheckStore> => stores.open(location);

  it('reports its kind and answers ping', async () => {
    const store = await storeOn();
    expect(store.kind).toBe(backend.name);
    await expect(store.ping()).resolves.toBeUndefined();
  });

  it('migrate is idempotent and keeps data', async () => {
    const location = backend.create();
    const store = await storeOn(location);
    const { check } = await store.insert(newCheck());
    await store.migrate();
    await store.migrate();
    const second = await storeOn(location);
    await second.migrate();
    expect(await second.get(check.tenantId, check.id)).toEqual(check);
  });

  it('writes made together keep their own answers: a failing one fails alone, the others are stored', async () => {
    const store = await storeOn();
    const first = newCheck();
    const broken = { ...newCheck(), payerCode: null as unknown as string }; // NOT NULL violated
    const last = newCheck();
    const [a, b, c] = await Promise.allSettled([
      store.insert(first),
      store.insert(broken),
      store.insert(last),
    ]);
    expect(a.status).toBe('fulfilled');
    expect(b.status).toBe('rejected');
    expect(c.status).toBe('fulfilled');
    expect(await store.get(first.tenantId, first.id)).not.toBeNull();
    expect(await store.get(broken.tenantId, broken.id)).toBeNull();
    expect(await store.get(last.tenantId, last.id)).not.toBeNull();
    // Concurrent steps of different checks: each update answers for its own check.
    const [x, y] = await store.claimDue(claimOptions('owner:1', T0 + 1));
    if (!x || !y) throw new Error('two checks expected');
    const [ux, uy, lost] = await Promise.all([
      store.update(x.id, 'owner:1', { state: 'creating' }, T0 + 2, x),
      store.update(y.id, 'owner:1', { nextRunAt: T0 + 9 }, T0 + 2, y, { release: true }),
      store.update(x.id, 'someone-else', { state: 'done' }, T0 + 2, x),
    ]);
    expect(ux?.state).toBe('creating');
    expect(uy?.nextRunAt).toBe(T0 + 9);
    expect(lost).toBeNull();
    expect((await store.get(x.tenantId, x.id))?.state).toBe('creating');
    expect((await store.get(y.tenantId, y.id))?.leaseOwner).toBeNull();
  });

  it('inserts a check and reads it back as written', async () => {
    const store = await storeOn();
    const input = newCheck({ idempotencyKey: 'urn:req|1', now: T0 + 5 });
    const { check, created } = await store.insert(input);
    expect(created).toBe(true);
    const { now: _now, ...fields } = input;
    expect(check).toEqual({
      ...fields,
      cer: { ...input.cer, meta: { versionId: '1', lastUpdated: new Date(T0 + 5).toISOString() } },
      version: 1,
      leaseOwner: null,
      leaseUntil: null,
      asyncStopped: false,
      taskStartedAt: null,
      taskPolls: 0,
      // Absent from a NewCheck: a desk check of normal priority, ordered by its arrival.
      queueClass: 'desk',
      priority: 'normal',
      queueDeadlineAt: T0 + 5,
      createdAt: T0 + 5,
      updatedAt: T0 + 5,
    });
    expect(await store.get(input.tenantId, input.id)).toEqual(check);
    expect(await store.get(input.tenantId, randomUUID())).toBeNull();
    // The read path's raw CER: the same resource as JSON text, tenant-scoped.
    const stored = await store.getCerJson(input.tenantId, input.id);
    expect(stored && { ...stored, json: JSON.parse(stored.json) as unknown }).toEqual({
      json: check.cer,
      version: 1,
      updatedAt: T0 + 5,
    });
    expect(await store.getCerJson('another-tenant', input.id)).toBeNull();
    expect(await store.getCerVersion(input.tenantId, input.id)).toEqual({ version: 1, updatedAt: T0 + 5 });
    expect(await store.getCerVersion('another-tenant', input.id)).toBeNull();
  });

  it('insert is idempotent per tenant and idempotency key', async () => {
    const store = await storeOn();
    const first = await store.insert(newCheck({ idempotencyKey: 'urn:req|42' }));
    const again = await store.insert(newCheck({ idempotencyKey: 'urn:req|42', now: T0 + 1000 }));
    expect(again.created).toBe(false);
    expect(again.check).toEqual(first.check);

    const otherTenant = await store.insert(newCheck({ tenantId: 'tenant-b', idempotencyKey: 'urn:req|42' }));
    expect(otherTenant.created).toBe(true);
    expect(otherTenant.check.id).not.toBe(first.check.id);

    const noKey1 = await store.insert(newCheck({ idempotencyKey: null }));
    const noKey2 = await store.insert(newCheck({ idempotencyKey: null }));
    expect(noKey1.created && noKey2.created).toBe(true);
    expect(noKey1.check.id).not.toBe(noKey2.check.id);
    expect((await store.search('tenant-a', {}, { count: 10, offset: 0 })).total).toBe(3);
  });

  it('keeps tenants apart in get and search', async () => {
    const store = await storeOn();
    const { check } = await store.insert(newCheck({ tenantId: 'tenant-a' }));
    await store.insert(newCheck({ tenantId: 'tenant-b' }));
    expect(await store.get('tenant-b', check.id)).toBeNull();
    expect(await store.get('tenant-a', check.id)).not.toBeNull();
    const b = await store.search('tenant-b', { ids: [[check.id]] }, { count: 10, offset: 0 });
    expect(b).toEqual({ total: 0, checks: [] });
    const all = await store.search('tenant-b', {}, { count: 10, offset: 0 });
    expect(all.total).toBe(1);
    expect(all.checks.every((c) => c.tenantId === 'tenant-b')).toBe(true);
  });

  it('update needs the latest claim and bumps the version only with a CER', async () => {
    const store = await storeOn();
    const { check } = await store.insert(newCheck());
    // Without any lease nobody may write.
    expect(await store.update(check.id, 'owner-a', { pollFailures: 1 }, T0)).toBeNull();

    const [claimed] = await store.claimDue(claimOptions('owner-a', T0));
    expect(claimed?.id).toBe(check.id);
    expect(await store.update(check.id, 'owner-b', { pollFailures: 1 }, T0 + 1)).toBeNull();
    // The claim reads the row without its documents; with them it is the row as stored.
    expect(claimed).not.toHaveProperty('cer');
    expect(claimed).not.toHaveProperty('request');
    expect(await store.get(check.tenantId, check.id)).toEqual(await withDocuments(store, claimed));
    // After the lease ran out the holder may still write while nobody claimed the check since...
    const late = await store.update(check.id, 'owner-a', { pollFailures: 0 }, T0 + LEASE_MS);
    expect(late?.pollFailures).toBe(0);
    // ...and not once another claim took it.
    await store.claimDue(claimOptions('owner-c', T0 + LEASE_MS + 1));
    expect(await store.update(check.id, 'owner-a', { pollFailures: 1 }, T0 + LEASE_MS + 2)).toBeNull();
    await store.release(check.id, 'owner-c');
    await store.claimDue(claimOptions('owner-a', T0 + LEASE_MS + 3));

    const envelope = { task_id: 't-1', status: 'NAVIGATING_WEBSITE', nested: { list: [1, 'two'] } };
    const quiet = await store.update(
      check.id,
      'owner-a',
      {
        state: 'polling',
        upstreamTaskId: 't-1',
        upstreamStatus: 'NAVIGATING_WEBSITE',
        envelope,
        nextRunAt: T0 + 500,
      },
      T0 + 10,
    );
    expect(quiet).toMatchObject({
      state: 'polling',
      upstreamTaskId: 't-1',
      upstreamStatus: 'NAVIGATING_WEBSITE',
      envelope,
      nextRunAt: T0 + 500,
      version: 1,
      updatedAt: T0,
      leaseOwner: 'owner-a',
    });
    expect(quiet?.cer.meta?.versionId).toBe('1');

    const cer = cerWith(check, 'complete');
    const changed = await store.update(check.id, 'owner-a', { cer, outcome: 'complete' }, T0 + 20);
    expect(changed).toMatchObject({ version: 2, updatedAt: T0 + 20, outcome: 'complete', state: 'polling' });
    expect(changed?.cer).toEqual({
      ...cer,
      meta: { versionId: '2', lastUpdated: new Date(T0 + 20).toISOString() },
    });
    expect(await store.get(check.tenantId, check.id)).toEqual(changed);

    const again = await store.update(check.id, 'owner-a', { cer: cerWith(check, 'error') }, T0 + 30);
    expect(again?.version).toBe(3);
    expect(again?.cer.meta?.versionId).toBe('3');
    // An empty patch changes nothing but still reports whether the lease is held.
    expect(await store.update(check.id, 'owner-a', {}, T0 + 40)).toEqual(again);
    expect(await store.update(check.id, 'owner-b', {}, T0 + 40)).toBeNull();
  });

  it('claimDue starts waiting checks only within maxInFlight, in arrival order', async () => {
    const store = await storeOn();
    const waiting = await insertAll(
      store,
      [0, 1, 2, 3, 4].map((i) => ({ tenantId: 'tenant-a', now: T0 + i })),
    );
    const other = await insertAll(store, [{ tenantId: 'tenant-b', now: T0 }]);
    const options = claimOptions('owner-a', T0 + 10, {
      maxInFlight: (tenantId) => (tenantId === 'tenant-a' ? 2 : 1),
    });

    const first = await store.claimDue(options);
    const a = first.filter((c) => c.tenantId === 'tenant-a');
    expect(a.map((c) => c.id)).toEqual([waiting[0]!.id, waiting[1]!.id]);
    expect(first.map((c) => c.id)).toContain(other[0]!.id);
    for (const c of first) {
      expect(c).toMatchObject({ state: 'starting', leaseOwner: 'owner-a', leaseUntil: T0 + 10 + LEASE_MS });
    }
    expect((await slotCounts(store)).get('tenant-a')).toBe(2);

    // Leased rows are not claimed again, and tenant-a has no free slot.
    expect(await store.claimDue({ ...options, owner: 'owner-b' })).toEqual([]);

    // One finishes: exactly one more may start, the next in arrival order.
    await finish(store, a[0]!, 'owner-a', T0 + 20);
    const next = await store.claimDue({ ...options, now: T0 + 30 });
    expect(next.map((c) => c.id)).toEqual([waiting[2]!.id]);
    expect((await slotCounts(store)).get('tenant-a')).toBe(2);
    const stillWaiting = await Promise.all([3, 4].map((i) => store.get('tenant-a', waiting[i]!.id)));
    expect(stillWaiting.map((c) => c?.state)).toEqual(['waiting', 'waiting']);
  });

  it('claimDue takes expired leases back and leaves live ones, done and future rows alone', async () => {
    const store = await storeOn();
    const [due, done, future] = await insertAll(store, [
      { now: T0 },
      { now: T0 + 1 },
      { now: T0, nextRunAt: T0 + 50_000 },
    ]);
    const [first] = await store.claimDue(claimOptions('owner-a', T0));
    expect(first?.id).toBe(due!.id);
    // `done` becomes due a moment later and is finished.
    const [second] = await store.claimDue(claimOptions('owner-a', T0 + 1));
    expect(second?.id).toBe(done!.id);
    await finish(store, second!, 'owner-a', T0 + 2);

    // `due` is leased by owner-a until T0 + LEASE_MS.
    expect(await store.claimDue(claimOptions('owner-b', T0 + LEASE_MS - 1))).toEqual([]);
    const retaken = await store.claimDue(claimOptions('owner-b', T0 + LEASE_MS));
    expect(retaken.map((c) => c.id)).toEqual([due!.id]);
    expect(retaken[0]).toMatchObject({
      state: 'starting',
      leaseOwner: 'owner-b',
      leaseUntil: T0 + 2 * LEASE_MS,
    });
    // The old owner lost it.
    expect(await store.update(due!.id, 'owner-a', { pollFailures: 3 }, T0 + LEASE_MS + 1)).toBeNull();

    const later = await store.claimDue(claimOptions('owner-c', T0 + 50_000));
    expect(later.map((c) => c.id)).toEqual([future!.id]);
  });

  it('claimDue honours the limit and the order of due work', async () => {
    const store = await storeOn();
    const checks = await insertAll(
      store,
      [5, 1, 3, 2, 4].map((i) => ({ now: T0 + i })),
    );
    const byArrival = [...checks].sort((x, y) => x.createdAt - y.createdAt).map((c) => c.id);
    const first = await store.claimDue(claimOptions('o', T0 + 10, { limit: 2 }));
    expect(first.map((c) => c.id)).toEqual(byArrival.slice(0, 2));
    const rest = await store.claimDue(claimOptions('o', T0 + 10, { limit: 10 }));
    expect(rest.map((c) => c.id)).toEqual(byArrival.slice(2));
    expect(await store.claimDue(claimOptions('o', T0 + 10, { limit: 0 }))).toEqual([]);
  });

  it('two store instances claiming in parallel never share a check or exceed maxInFlight', async () => {
    const location = backend.create();
    const one = await storeOn(location);
    const two = await storeOn(location);
    const maxInFlight = (tenantId: string) => (tenantId === 'tenant-a' ? 3 : 2);
    const specs: CheckSpec[] = [];
    for (let i = 0; i < 30; i += 1)
      specs.push({ tenantId: i % 2 === 0 ? 'tenant-a' : 'tenant-b', now: T0 + i });
    const all = await insertAll(one, specs);

    const started = new Map<string, string>();
    let now = T0 + 100;
    for (let round = 0; round < 60 && started.size < all.length; round += 1) {
      now += 10;
      const claimers = [one, two, one, two].map((store, i) => ({ store, owner: `owner-${round}-${i}` }));
      const results = await Promise.all(
        claimers.map(({ store, owner }) =>
          store.claimDue(claimOptions(owner, now, { limit: 4, maxInFlight })),
        ),
      );
      const ids = results.flat().map((c) => c.id);
      expect(new Set(ids).size, `round ${round}: a check was claimed twice`).toBe(ids.length);
      const counts = await slotCounts(one);
      expect(counts.get('tenant-a') ?? 0).toBeLessThanOrEqual(3);
      expect(counts.get('tenant-b') ?? 0).toBeLessThanOrEqual(2);
      // Finish what was claimed, half on each instance, so more can start next round.
      await Promise.all(
        results.flatMap((checks, i) =>
          checks.map(async (check) => {
            const { store, owner } = claimers[i]!;
            expect(check.state).toBe('starting');
            expect(started.has(check.id), `${check.id} started twice`).toBe(false);
            started.set(check.id, owner);
            await finish(store, check, owner, now + 1);
          }),
        ),
      );
    }
    expect(started.size).toBe(all.length);
    const final = await one.countByState();
    expect(final.filter((r) => r.state !== 'done')).toEqual([]);
  });

  it('release and releaseAll drop only that owner’s leases', async () => {
    const store = await storeOn();
    await insertAll(store, [{}, {}, {}]);
    const mine = await store.claimDue(claimOptions('owner-a', T0, { limit: 2 }));
    const theirs = await store.claimDue(claimOptions('owner-b', T0));
    expect(mine).toHaveLength(2);
    expect(theirs).toHaveLength(1);

    await store.release(mine[0]!.id, 'owner-b'); // not the holder: no effect
    expect(await store.claimDue(claimOptions('owner-c', T0 + 1))).toEqual([]);
    await store.release(mine[0]!.id, 'owner-a');
    const released = await store.get('tenant-a', mine[0]!.id);
    expect(released).toMatchObject({ leaseOwner: null, leaseUntil: null, state: 'starting' });
    expect((await store.claimDue(claimOptions('owner-c', T0 + 1))).map((c) => c.id)).toEqual([mine[0]!.id]);

    await store.releaseAll('owner-a');
    expect((await store.claimDue(claimOptions('owner-c', T0 + 2))).map((c) => c.id)).toEqual([mine[1]!.id]);
    expect((await store.get('tenant-a', theirs[0]!.id))?.leaseOwner).toBe('owner-b');
  });

  it("update with the caller's copy returns exactly what a read gives, without reading it back", async () => {
    const store = await storeOn();
    await insertAll(store, [{}]);
    const claimed = await withDocuments(store, (await store.claimDue(claimOptions('owner-a', T0)))[0]);
    const withCer = await store.update(
      claimed.id,
      'owner-a',
      { state: 'polling', upstreamTaskId: 'task-9', cer: { ...claimed.cer, disposition: 'changed' } },
      T0 + 7,
      claimed,
    );
    expect(withCer).toEqual(await store.get(claimed.tenantId, claimed.id));
    const withoutCer = await store.update(claimed.id, 'owner-a', { pollFailures: 2 }, T0 + 8, withCer!);
    expect(withoutCer).toEqual(await store.get(claimed.tenantId, claimed.id));
    expect(await store.update(claimed.id, 'owner-b', { pollFailures: 3 }, T0 + 9, withoutCer!)).toBeNull();
  });

  it('the last write of a step drops the lease in the same statement (release option)', async () => {
    const store = await storeOn();
    await insertAll(store, [{}]);
    const [claimed] = await store.claimDue(claimOptions('owner-a', T0));
    const polling = await store.update(
      claimed!.id,
      'owner-a',
      { state: 'polling', upstreamTaskId: 'task-1', nextRunAt: T0 + 5_000 },
      T0 + 1,
      claimed,
      { release: true },
    );
    const stored = await store.get(claimed!.tenantId, claimed!.id);
    expect(stored).toMatchObject({ state: 'polling', leaseOwner: null, leaseUntil: null });
    // A claimed check written without a CER stays one without documents; with them it is the row.
    expect(polling).not.toHaveProperty('cer');
    expect(await withDocuments(store, polling!)).toEqual(stored);
    // Released: the old holder cannot write again, and the check is claimable when due.
    expect(await store.update(claimed!.id, 'owner-a', { pollFailures: 1 }, T0 + 2, polling!)).toBeNull();
    expect((await store.claimDue(claimOptions('owner-b', T0 + 5_000))).map((c) => c.id)).toEqual([
      claimed!.id,
    ]);
  });

  it('a write from a stale copy of the check never reuses a versionId', async () => {
    const store = await storeOn();
    await insertAll(store, [{}]);
    const claimed = await withDocuments(store, (await store.claimDue(claimOptions('owner-a', T0)))[0]);
    const changed = await store.update(
      claimed.id,
      'owner-a',
      { cer: { ...claimed.cer, disposition: 'changed' } },
      T0 + 1,
      claimed,
    );
    expect(changed?.version).toBe(2);
    // `claimed` still says version 1: writing from it would stamp a wrong versionId.
    const stale = await store.update(
      claimed.id,
      'owner-a',
      { cer: { ...claimed.cer, disposition: 'again' } },
      T0 + 2,
      claimed,
    );
    const stored = await store.get(claimed.tenantId, claimed.id);
    // Refused (the write names the version it was built on): never two CERs under one versionId.
    expect(stale).toBeNull();
    expect(stored?.version).toBe(2);
    expect(stored?.cer.meta?.versionId).toBe('2');
    expect(stored?.cer.disposition).toBe('changed');
  });

  it('releaseAll(owner) drops the claim tokens owner:round, not another owner with a longer name', async () => {
    const store = await storeOn();
    await insertAll(store, [{}, {}, {}]);
    const [a1] = await store.claimDue(claimOptions('replica-a:1', T0, { limit: 1 }));
    const [a2] = await store.claimDue(claimOptions('replica-a:2', T0, { limit: 1 }));
    const [other] = await store.claimDue(claimOptions('replica-ab:1', T0, { limit: 1 }));
    await store.releaseAll('replica-a');
    expect((await store.get('tenant-a', a1!.id))?.leaseOwner).toBeNull();
    expect((await store.get('tenant-a', a2!.id))?.leaseOwner).toBeNull();
    expect((await store.get('tenant-a', other!.id))?.leaseOwner).toBe('replica-ab:1');
  });

  it('a step holding an older claim token of a re-claimed check cannot write', async () => {
    const store = await storeOn();
    await insertAll(store, [{}]);
    const [first] = await store.claimDue(claimOptions('replica-a:1', T0, { leaseMs: 10 }));
    // The lease runs out; the same replica claims the check again in a later round.
    const [again] = await store.claimDue(claimOptions('replica-a:2', T0 + 100));
    expect(again?.id).toBe(first?.id);
    expect(await store.update(first!.id, 'replica-a:1', { state: 'creating' }, T0 + 101)).toBeNull();
    expect(await store.update(again!.id, 'replica-a:2', { state: 'creating' }, T0 + 101)).not.toBeNull();
  });

  it('stopAsyncTracking marks the tenant’s check without a lease', async () => {
    const store = await storeOn();
    const { check } = await store.insert(newCheck());
    await store.stopAsyncTracking('tenant-b', check.id);
    expect((await store.get('tenant-a', check.id))?.asyncStopped).toBe(false);
    await store.stopAsyncTracking('tenant-a', check.id);
    const stopped = await store.get('tenant-a', check.id);
    expect(stopped?.asyncStopped).toBe(true);
    expect(stopped?.version).toBe(1);
  });

  it('search tokens: a | inside the system or the value never matches the other split', async () => {
    const store = await storeOn();
    // Both keys read urn:x|b|c: system urn:x|b with value c, and system urn:x with value b|c.
    const [x, y, z] = await insertAll(store, [
      {
        now: T0 + 1000,
        patientKey: 'urn:x|b|c',
        patientValue: 'c',
        idempotencyKey: 'urn:x|b|c',
        requestIdentifierValue: 'c',
      },
      {
        now: T0 + 2000,
        patientKey: 'urn:x|b|c',
        patientValue: 'b|c',
        idempotencyKey: 'urn:y|b|c',
        requestIdentifierValue: 'b|c',
      },
      { now: T0 + 3000, patientKey: '\u{1D54F}|1', patientValue: '1' },
    ]);
    const ids = async (filters: Parameters<CheckStore['search']>[1]) =>
      (await store.search('tenant-a', filters, { count: 10, offset: 0 })).checks.map((c) => c.id);
    expect(await ids({ patient: [[{ system: 'urn:x|b', value: 'c' }]] })).toEqual([x!.id]);
    expect(await ids({ patient: [[{ system: 'urn:x', value: 'b|c' }]] })).toEqual([y!.id]);
    expect(await ids({ patient: [[{ system: 'urn:x|b' }]] })).toEqual([x!.id]);
    expect(await ids({ patient: [[{ system: 'urn:x' }]] })).toEqual([y!.id]);
    expect(await ids({ patient: [[{ value: 'c' }]] })).toEqual([x!.id]);
    expect(await ids({ patient: [[{ value: 'b|c' }]] })).toEqual([y!.id]);
    // A system outside the BMP: its prefix counted in characters, as SQL counts them.
    expect(await ids({ patient: [[{ system: '\u{1D54F}' }]] })).toEqual([z!.id]);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:x|b', value: 'c' }]] })).toEqual([x!.id]);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:x', value: 'b|c' }]] })).toEqual([]);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:x|b' }]] })).toEqual([x!.id]);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:x' }]] })).toEqual([]);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:y' }]] })).toEqual([y!.id]);
    expect(await ids({ requestIdentifier: [[{ value: 'c' }]] })).toEqual([x!.id]);
  });

  it('search filters, orders newest first and pages', async () => {
    const store = await storeOn();
    const [c1, c2, c3, c4, c5] = await insertAll(store, [
      { now: T0 + 1000, patientKey: 'urn:eid|111', outcome: 'queued' },
      { now: T0 + 2000, patientKey: 'urn:other|111', outcome: 'complete' },
      { now: T0 + 3000, patientKey: 'urn:eid|222', outcome: 'complete' },
      { now: T0 + 4000, patientKey: null, outcome: 'error' },
      { now: T0 + 5000, patientKey: 'urn:eid|111', outcome: 'complete' },
    ]);
    await store.insert(newCheck({ tenantId: 'tenant-b', patientKey: 'urn:eid|111', now: T0 + 6000 }));
    const page: SearchPage = { count: 10, offset: 0 };
    const ids = async (filters: Parameters<CheckStore['search']>[1], p = page) =>
      (await store.search('tenant-a', filters, p)).checks.map((c) => c.id);

    expect(await ids({})).toEqual([c5!.id, c4!.id, c3!.id, c2!.id, c1!.id]);
    expect(await ids({ ids: [[c3!.id]] })).toEqual([c3!.id]);
    expect(await ids({ ids: [[c3!.id, c1!.id]] })).toEqual([c3!.id, c1!.id]);
    expect(await ids({ ids: [[c3!.id, c1!.id], [c1!.id]] })).toEqual([c1!.id]);
    expect(await ids({ patient: [[{ system: 'urn:eid', value: '111' }]] })).toEqual([c5!.id, c1!.id]);
    expect(await ids({ patient: [[{ value: '111' }]] })).toEqual([c5!.id, c2!.id, c1!.id]);
    expect(await ids({ patient: [[{ system: 'urn:eid' }]] })).toEqual([c5!.id, c3!.id, c1!.id]);
    expect(await ids({ patient: [[{ system: 'urn:eid', value: '999' }]] })).toEqual([]);
    expect(await ids({ patient: [[{ value: '222' }, { system: 'urn:other', value: '111' }]] })).toEqual([
      c3!.id,
      c2!.id,
    ]);
    expect(await ids({ outcome: [['complete']] })).toEqual([c5!.id, c3!.id, c2!.id]);
    expect(await ids({ outcome: [['complete', 'error']] })).toEqual([c5!.id, c4!.id, c3!.id, c2!.id]);
    expect(
      await ids({
        outcome: [
          ['complete', 'error'],
          ['error', 'queued'],
        ],
      }),
    ).toEqual([c4!.id]);
    expect(await ids({ lastUpdated: [{ from: T0 + 2000 }] })).toEqual([c5!.id, c4!.id, c3!.id, c2!.id]);
    expect(await ids({ lastUpdated: [{ before: T0 + 2000 }] })).toEqual([c1!.id]);
    expect(await ids({ lastUpdated: [{ from: T0 + 2000 }, { before: T0 + 4000 }] })).toEqual([
      c3!.id,
      c2!.id,
    ]);
    expect(await ids({ lastUpdated: [{ from: T0 + 2000, before: T0 + 4000, not: true }] })).toEqual([
      c5!.id,
      c4!.id,
      c1!.id,
    ]);
    expect(await ids({ created: [{ from: T0 + 4000 }] })).toEqual([c5!.id, c4!.id]);
    expect(
      await ids({
        outcome: [['complete']],
        patient: [[{ value: '111' }]],
        lastUpdated: [{ before: T0 + 5000 }],
      }),
    ).toEqual([c2!.id]);
    // Sorting: created ascending and descending, the id breaking ties.
    expect(await ids({}, { ...page, sort: [{ field: 'created', descending: false }] })).toEqual([
      c1!.id,
      c2!.id,
      c3!.id,
      c4!.id,
      c5!.id,
    ]);
    // No total counted when none is asked for.
    expect((await store.search('tenant-a', {}, { ...page, total: false })).total).toBeUndefined();

    // Paging: total is the whole match, the page is a window of the newest-first order.
    const first = await store.search('tenant-a', {}, { count: 2, offset: 0 });
    const second = await store.search('tenant-a', {}, { count: 2, offset: 2 });
    const last = await store.search('tenant-a', {}, { count: 2, offset: 4 });
    const beyond = await store.search('tenant-a', {}, { count: 2, offset: 10 });
    expect([first.total, second.total, last.total, beyond.total]).toEqual([5, 5, 5, 5]);
    expect([...first.checks, ...second.checks, ...last.checks].map((c) => c.id)).toEqual(await ids({}));
    expect(beyond.checks).toEqual([]);
    const filtered = await store.search('tenant-a', { outcome: [['complete']] }, { count: 1, offset: 1 });
    expect(filtered.total).toBe(3);
    expect(filtered.checks.map((c) => c.id)).toEqual([c3!.id]);
    expect((await store.search('tenant-a', {}, { count: 0, offset: 0 })).total).toBe(5);
  });

  it('search sees updatedAt move when the CER changes', async () => {
    const store = await storeOn();
    const [old, recent] = await insertAll(store, [{ now: T0 }, { now: T0 + 10 }]);
    const [claimed] = await store.claimDue(claimOptions('o', T0 + 20, { limit: 1 }));
    expect(claimed?.id).toBe(old!.id);
    await store.update(old!.id, 'o', { cer: cerWith(old!, 'complete'), outcome: 'complete' }, T0 + 30);
    const found = await store.search('tenant-a', {}, { count: 10, offset: 0 });
    expect(found.checks.map((c) => c.id)).toEqual([old!.id, recent!.id]);
    expect(found.checks[0]?.updatedAt).toBe(T0 + 30);
  });

  it('search finds a check by its request identifier and its payer, case-insensitively', async () => {
    const store = await storeOn();
    const [a, b, c] = await insertAll(store, [
      { now: T0 + 1, idempotencyKey: 'urn:req|A-1', payerCode: 'DAMAN' },
      { now: T0 + 2, idempotencyKey: '|A-1', payerCode: 'NAS' },
      { now: T0 + 3, idempotencyKey: null, payerCode: 'Daman' },
    ]);
    await store.insert(newCheck({ tenantId: 'tenant-b', idempotencyKey: 'urn:req|A-1', now: T0 + 4 }));
    const ids = async (filters: Parameters<CheckStore['search']>[1]) =>
      (await store.search('tenant-a', filters, { count: 10, offset: 0 })).checks.map((check) => check.id);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:req', value: 'A-1' }]] })).toEqual([a!.id]);
    expect(await ids({ requestIdentifier: [[{ system: '', value: 'A-1' }]] })).toEqual([b!.id]);
    expect(await ids({ requestIdentifier: [[{ value: 'A-1' }]] })).toEqual([b!.id, a!.id]);
    expect(await ids({ requestIdentifier: [[{ system: 'urn:req' }]] })).toEqual([a!.id]);
    expect(await ids({ requestIdentifier: [[{ value: 'A-2' }]] })).toEqual([]);
    expect(await ids({ insurer: [['daman']] })).toEqual([c!.id, a!.id]);
    expect(await ids({ insurer: [['nas', 'DAMAN']] })).toEqual([c!.id, b!.id, a!.id]);
  });

  it('stores, replaces, lists and deletes payer guards', async () => {
    const store = await storeOn();
    expect(await store.getGuard('tenant-a', 'DAMAN')).toBeNull();
    const credentials = {
      tenantId: 'tenant-a',
      payerCode: 'DAMAN',
      kind: 'credentials' as const,
      until: null,
      reason: 'invalid_credentials on check x',
      openedAt: T0,
    };
    const backoff = { ...credentials, tenantId: 'tenant-b', kind: 'backoff' as const, until: T0 + 900_000 };
    await store.putGuard(credentials);
    await store.putGuard(backoff);
    expect(await store.getGuard('tenant-a', 'DAMAN')).toEqual(credentials);
    expect(await store.getGuard('tenant-a', 'NAS')).toBeNull();
    expect(await store.listGuards()).toEqual([credentials, backoff]);

    // A credentials guard is never turned into a timed backoff (it would end, and the next check
    // would log in with the bad credentials again); a backoff guard is replaced, by either kind.
    const downgrade = {
      ...credentials,
      kind: 'backoff' as const,
      until: T0 + 5,
      reason: 'again',
      openedAt: T0 + 1,
    };
    await store.putGuard(downgrade);
    expect(await store.getGuard('tenant-a', 'DAMAN')).toEqual(credentials);
    const renewed = { ...backoff, until: T0 + 1_800_000, reason: 'backoff again', openedAt: T0 + 2 };
    await store.putGuard(renewed);
    expect(await store.getGuard('tenant-b', 'DAMAN')).toEqual(renewed);
    const upgraded = { ...credentials, tenantId: 'tenant-b', openedAt: T0 + 3 };
    await store.putGuard(upgraded);
    expect(await store.getGuard('tenant-b', 'DAMAN')).toEqual(upgraded);
    await store.putGuard(backoff);
    expect(await store.listGuards()).toHaveLength(2);

    // A row stored as the client spelled the code (before codes were upper-cased) still counts.
    const legacy = { ...credentials, payerCode: 'Nas ' };
    await store.putGuard(legacy);
    expect(await store.getGuard('tenant-a', 'NAS')).toEqual(legacy);
    expect(await store.deleteGuard('tenant-a', 'NAS')).toBe(true);
    expect(await store.getGuard('tenant-a', 'NAS')).toBeNull();

    expect(await store.deleteGuard('tenant-a', 'DAMAN')).toBe(true);
    expect(await store.deleteGuard('tenant-a', 'DAMAN')).toBe(false);
    expect(await store.getGuard('tenant-a', 'DAMAN')).toBeNull();
    expect(await store.listGuards()).toEqual([upgraded]);
  });

  it('listOverdue returns unfinished checks past their deadline, oldest first', async () => {
    const store = await storeOn();
    const [late2, late1, onTime, finished] = await insertAll(store, [
      { deadlineAt: T0 + 200 },
      { deadlineAt: T0 + 100, tenantId: 'tenant-b' },
      { deadlineAt: T0 + 10_000 },
      { deadlineAt: T0 + 50 },
    ]);
    const claimed = await store.claimDue(claimOptions('o', T0));
    const toFinish = claimed.find((c) => c.id === finished!.id);
    await finish(store, toFinish!, 'o', T0 + 1);
    const overdue = await store.listOverdue(T0 + 1000);
    expect(overdue.map((c) => c.id)).toEqual([late1!.id, late2!.id]);
    expect(overdue.map((c) => c.id)).not.toContain(onTime!.id);
    expect(await store.listOverdue(T0 + 200)).toHaveLength(1); // deadline strictly before now
  });

  it('countByState counts per tenant, state and outcome', async () => {
    const store = await storeOn();
    await insertAll(store, [{}, {}, { tenantId: 'tenant-b' }, { tenantId: 'tenant-b', outcome: 'error' }]);
    const [claimed] = await store.claimDue(claimOptions('o', T0, { limit: 1 }));
    expect(claimed?.tenantId).toBeDefined();
    const counts = await store.countByState();
    const total = counts.reduce((sum, row) => sum + row.count, 0);
    expect(total).toBe(4);
    expect(counts.every((row) => typeof row.count === 'number')).toBe(true);
    const find = (tenantId: string, state: CheckState, outcome: CerOutcome) =>
      counts.find((r) => r.tenantId === tenantId && r.state === state && r.outcome === outcome)?.count ?? 0;
    expect(find('tenant-b', 'waiting', 'error') + find('tenant-b', 'starting', 'error')).toBe(1);
    expect(find(claimed!.tenantId, 'starting', claimed!.outcome)).toBe(1);
    const waiting = counts.filter((r) => r.state === 'waiting').reduce((sum, r) => sum + r.count, 0);
    expect(waiting).toBe(3);
    expect(find('tenant-a', 'waiting', 'queued') + find('tenant-a', 'starting', 'queued')).toBe(2);
  });

  it('purgeBefore deletes only finished checks older than the cutoff', async () => {
    const store = await storeOn();
    const [oldDone, newDone, oldOpen] = await insertAll(store, [{ now: T0 }, { now: T0 }, { now: T0 }]);
    const claimed = await store.claimDue(claimOptions('o', T0));
    const byId = new Map(claimed.map((c) => [c.id, c]));
    await finish(store, byId.get(oldDone!.id)!, 'o', T0 + 100);
    await finish(store, byId.get(newDone!.id)!, 'o', T0 + 5000);
    await store.putGuard({
      tenantId: 'tenant-a',
      payerCode: 'DAMAN',
      kind: 'credentials',
      until: null,
      reason: 'r',
      openedAt: T0,
    });

    expect(await store.purgeBefore(T0 + 1000)).toBe(1);
    expect(await store.get('tenant-a', oldDone!.id)).toBeNull();
    expect(await store.get('tenant-a', newDone!.id)).not.toBeNull();
    expect(await store.get('tenant-a', oldOpen!.id)).not.toBeNull();
    expect(await store.listGuards()).toHaveLength(1);
    expect(await store.purgeBefore(T0 + 1000)).toBe(0);
  });

  // Issue 17 (docs/batch-and-reuse.md): the reuse lookup, the queue count and batches.
  it('findReusable: the newest done check of the tenant and key, answered since the time given', async () => {
    const store = await storeOn();
    const key = reuseKeyOf(newCheck());
    expect(key).toMatch(/^DAMAN\|[A-Za-z0-9_-]{22}\|urn:eid\|784-1990-1234567-6$/);
    const [older, newer, errored, otherTenant, open] = await insertAll(store, [
      {},
      {},
      {},
      { tenantId: 'tenant-b' },
      {},
    ]);
    const claimed = new Map((await store.claimDue(claimOptions('o', T0))).map((c) => [c.id, c]));
    await finish(store, claimed.get(older!.id)!, 'o', T0 + 100);
    await finish(store, claimed.get(newer!.id)!, 'o', T0 + 200);
    await finish(store, claimed.get(otherTenant!.id)!, 'o', T0 + 300);
    const failed = await withDocuments(store, claimed.get(errored!.id));
    await store.update(
      failed.id,
      'o',
      { state: 'done', cer: cerWith(failed, 'error'), outcome: 'error' },
      T0 + 400,
    );
    // The tenant's own rows only.
    expect((await store.findReusable('tenant-b', key!, T0))?.id).toBe(otherTenant!.id);
    // The newest answer, whatever its outcome (the caller reuses only a found member).
    expect((await store.findReusable('tenant-a', key!, T0))?.id).toBe(errored!.id);
    expect((await store.findReusable('tenant-a', key!, T0 + 400))?.outcome).toBe('error');
    expect(await store.findReusable('tenant-a', key!, T0 + 401)).toBeNull();
    expect(await store.findReusable('tenant-a', 'NAS|OUTPATIENT|urn:eid|784-1990-1234567-6', T0)).toBeNull();
    expect(open!.state).toBe('waiting');
    // No patient identifier: no key.
    expect(reuseKeyOf(newCheck({ patientKey: null }))).toBeNull();
  });

  it("countQueue counts a tenant's waiting and slot-holding checks", async () => {
    const store = await storeOn();
    await insertAll(store, [{}, {}, {}, { tenantId: 'tenant-b' }]);
    await store.claimDue(claimOptions('o', T0, { maxInFlight: () => 1 }));
    expect(await store.countQueue('tenant-a')).toEqual({ waiting: 2, inFlight: 1 });
    expect(await store.countQueue('tenant-b')).toEqual({ waiting: 0, inFlight: 1 });
    expect(await store.countQueue('tenant-c')).toEqual({ waiting: 0, inFlight: 0 });
  });

  it('a search-all whose upstream task is terminal holds no slot (claims and countQueue)', async () => {
    const store = await storeOn();
    const search = (await store.insert({ ...newCheck(), isSearchAll: true })).check;
    const single = (await store.insert(newCheck({ now: T0 + 1 }))).check;
    const at = (now: number, owner: string) => claimOptions(owner, now, { maxInFlight: () => 1 });
    expect((await store.claimDue(at(T0 + 2, 'o1'))).map((c) => c.id)).toEqual([search.id]);
    // In flight at the portal: the slot is held, the single check waits.
    const polling = { state: 'polling' as const, upstreamStatus: 'NAVIGATING_WEBSITE', nextRunAt: T0 + 10 };
    await store.update(search.id, 'o1', polling, T0 + 3, undefined, { release: true });
    expect(await store.claimDue(at(T0 + 4, 'o2'))).toEqual([]);
    expect(await store.countQueue('tenant-a')).toEqual({ waiting: 1, inFlight: 1 });
    // Task terminal, search still processing: the slot is free.
    expect((await store.claimDue(at(T0 + 10, 'o3'))).map((c) => c.id)).toEqual([search.id]);
    const terminal = { upstreamStatus: 'PROCESS_COMPLETE', nextRunAt: T0 + 1e9 };
    await store.update(search.id, 'o3', terminal, T0 + 11, undefined, { release: true });
    expect(await store.countQueue('tenant-a')).toEqual({ waiting: 1, inFlight: 0 });
    expect((await store.claimDue(at(T0 + 12, 'o4'))).map((c) => c.id)).toEqual([single.id]);
  });

  it('stores a batch, reads it back for its tenant only, and purges it with retention', async () => {
    const store = await storeOn();
    const entries = [
      { checkId: 'c1' },
      {
        status: 422,
        outcome: {
          resourceType: 'OperationOutcome' as const,
          issue: [{ severity: 'error' as const, code: 'required' as const }],
        },
      },
    ];
    await store.insertBatch({ id: 'b1', tenantId: 'tenant-a', entries, createdAt: T0 });
    expect(await store.getBatch('tenant-a', 'b1')).toEqual({
      id: 'b1',
      tenantId: 'tenant-a',
      entries,
      createdAt: T0,
    });
    expect(await store.getBatch('tenant-b', 'b1')).toBeNull();
    await store.purgeBefore(T0 + 1);
    expect(await store.getBatch('tenant-a', 'b1')).toBeNull();
  });

  it('rememberJti: once per client and jti until it expires, then forgotten', async () => {
    const store = await storeOn();
    expect(await store.rememberJti('tenant-a/engine', 'j1', T0 + 60_000, T0)).toBe(true);
    expect(await store.rememberJti('tenant-a/engine', 'j1', T0 + 60_000, T0 + 1000)).toBe(false);
    // Another client may use the same jti.
    expect(await store.rememberJti('tenant-a/other', 'j1', T0 + 60_000, T0)).toBe(true);
    // Past its expiry the assertion itself is refused; the jti is dropped.
    expect(await store.rememberJti('tenant-a/engine', 'j1', T0 + 200_000, T0 + 120_000)).toBe(true);
  });

  it('audit events: inserted in a batch, searched per tenant by entity, agent, action and date, purged', async () => {
    const store = await storeOn();
    const record = (tenantId: string, agentId: string, action: 'R' | 'E', entity?: string) => ({
      tenantId,
      agentId,
      agentKind: 'client' as const,
      action,
      interaction: action === 'R' ? 'read' : 'search-type',
      outcome: '0' as const,
      ...(entity ? { entities: [entity] } : {}),
    });
    await store.insertAuditEvents([
      auditRow(record('tenant-a', 'engine', 'R', 'CoverageEligibilityResponse/c1'), T0),
      auditRow(record('tenant-a', 'engine', 'E'), T0 + 1000),
      auditRow(record('tenant-a', 'key-abc', 'R', 'CoverageEligibilityResponse/c2'), T0 + 2000),
      auditRow(record('tenant-b', 'engine-b', 'R', 'CoverageEligibilityResponse/c1'), T0 + 3000),
    ]);
    const all = await store.searchAuditEvents('tenant-a', {}, 10);
    expect(all.map((r) => r.recordedAt)).toEqual([T0 + 2000, T0 + 1000, T0]);
    expect(all[0]?.record).toMatchObject({
      tenantId: 'tenant-a',
      agentId: 'key-abc',
      action: 'R',
      interaction: 'read',
    });
    const byEntity = await store.searchAuditEvents(
      'tenant-a',
      { entity: ['CoverageEligibilityResponse/c1'] },
      10,
    );
    expect(byEntity.map((r) => r.record.agentId)).toEqual(['engine']);
    expect(await store.searchAuditEvents('tenant-a', { agent: ['engine'], action: ['E'] }, 10)).toHaveLength(
      1,
    );
    expect(
      await store.searchAuditEvents('tenant-a', { date: [{ from: T0 + 500, before: T0 + 1500 }] }, 10),
    ).toHaveLength(1);
    expect(
      await store.searchAuditEvents('tenant-a', { date: [{ from: T0 + 500, not: true }] }, 10),
    ).toHaveLength(1);
    expect(await store.searchAuditEvents('tenant-a', {}, 2)).toHaveLength(2);
    expect(await store.searchAuditEvents('tenant-a', { ids: [all[0]!.id] }, 10)).toHaveLength(1);
    expect(await store.searchAuditEvents('tenant-b', { ids: [all[0]!.id] }, 10)).toHaveLength(0);
    expect(await store.purgeAuditBefore(T0 + 1500)).toBe(2);
    expect(await store.searchAuditEvents('tenant-a', {}, 10)).toHaveLength(1);
  });
});

describe('openStore', () => {
  it('rejects an unknown scheme, naming DATABASE_URL and not the rest of the URL', async () => {
    const message = await openStore('mysql://user:secret@host/db').then(
      () => 'opened',
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    expect(message).toMatch(/DATABASE_URL/);
    expect(message).toMatch(/mysql/);
    expect(message).not.toMatch(/secret/);
    await expect(openStore('not a url')).rejects.toThrow(/DATABASE_URL/);
  });

  it('creates the parent directory of a SQLite file, and accepts sqlite::memory:', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'open-store-'));
    try {
      const file = join(dir, 'nested', 'deeper', 'adapter.db');
      const store = await openStore(`sqlite:${file}`);
      await store.migrate();
      expect(store.kind).toBe('sqlite');
      expect(existsSync(file)).toBe(true);
      await store.close();

      const memory = await openStore('sqlite::memory:');
      await memory.migrate();
      const { created } = await memory.insert(newCheck());
      expect(created).toBe(true);
      await memory.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('opens PostgreSQL for postgres:// and postgresql:// without connecting', async () => {
    for (const url of ['postgres://nobody@127.0.0.1:1/none', 'postgresql://nobody@127.0.0.1:1/none']) {
      const store = await openStore(url);
      expect(store.kind).toBe('postgres');
      await store.close();
    }
  });
});

describe('SqliteStore group commit', () => {
  // SQLite queues a turn's writes for one commit: close() commits them first. (The service
  // closes a store only after its steps ended, on either backend.)
  it('writes that do not fit on a full disk fail with SQLITE_FULL and store nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'group-full-'));
    try {
      const store = await openStore(`sqlite:${join(dir, 'adapter.db')}`);
      await store.migrate();
      await store.insert(newCheck());
      // A full disk, as SQLite sees it: no page may be added to the file.
      // (The SQLite driver inside the StoreHealthDriver that open() wraps it in.)
      const { db } = (store as unknown as { driver: { inner: { db: Database.Database } } }).driver.inner;
      db.pragma(`max_page_count = ${Number(db.pragma('page_count', { simple: true }))}`);
      const big = (): NewCheck => {
        const check = newCheck();
        return { ...check, cer: { ...check.cer, disposition: 'x'.repeat(200_000) } };
      };
      const inputs = [big(), big(), big()];
      const results = await Promise.allSettled(inputs.map((input) => store.insert(input)));
      for (const result of results) {
        expect(result.status).toBe('rejected');
        if (result.status === 'rejected') expect(String(result.reason)).toMatch(/full/i);
      }
      db.pragma('max_page_count = 1073741823');
      for (const input of inputs) expect(await store.get(input.tenantId, input.id)).toBeNull();
      await store.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a batch SQLite rolled back itself fails every write with the cause, none acknowledged', async () => {
    const store = await openStore('sqlite::memory:');
    await store.migrate();
    const internals = (
      store as unknown as {
        driver: { inner: { db: Database.Database; write<T>(work: () => T): Promise<T> } };
      }
    ).driver.inner;
    const before = newCheck();
    const after = newCheck();
    const results = await Promise.allSettled([
      store.insert(before),
      // What SQLite does after some I/O errors: the whole transaction is gone.
      internals.write(() => {
        internals.db.exec('ROLLBACK');
        throw new Error('disk I/O error');
      }),
      store.insert(after),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const result of results)
      if (result.status === 'rejected') expect(String(result.reason)).toContain('disk I/O error');
    expect(await store.get(before.tenantId, before.id)).toBeNull();
    expect(await store.get(after.tenantId, after.id)).toBeNull();
    await store.close();
  });

  it('a write queued before close is committed, not dropped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'group-commit-'));
    try {
      const location = `sqlite:${join(dir, 'adapter.db')}`;
      const store = await openStore(location);
      await store.migrate();
      const input = newCheck();
      const inserted = store.insert(input);
      await store.close();
      await inserted;
      const reopened = await openStore(location);
      expect(await reopened.get(input.tenantId, input.id)).not.toBeNull();
      await reopened.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
