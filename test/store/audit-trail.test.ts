/**
 * The audit trail's writer (src/checks/audit.ts) on both stores: records wait in a queue and are
 * written in batches off the answer's path, yet a search finds every record made before it, and
 * ids stay unique and in recording order.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AuditTrail } from '../../src/checks/audit.js';
import type { CheckStore } from '../../src/checks/store/check-store.js';
import type { AuditRecord } from '../../src/fhir/audit-event.js';
import { createLogger } from '../../src/log.js';
import { postgresBackend, sharedStoreOn, sqliteBackend } from '../support/store-backends.js';

const T0 = Date.parse('2026-11-24T05:00:00Z');
/** The trail's log, kept out of the test output. */
const quiet = () =>
  createLogger(
    'error',
    new Writable({
      write: (_chunk, _encoding, done) => done(),
    }),
  );

function read(tenantId: string, entity: string): AuditRecord {
  return {
    tenantId,
    agentId: 'engine',
    agentKind: 'client',
    action: 'R',
    interaction: 'read',
    entities: [entity],
    outcome: '0',
  };
}

describe.each([sqliteBackend(), postgresBackend()])('AuditTrail on $name', (backend) => {
  let store: CheckStore;
  sharedStoreOn(backend, (opened) => (store = opened));

  it('a search finds what was recorded just before it, though the queue would wait a minute', async () => {
    const trail = new AuditTrail(
      store,
      { enabled: true, flushMs: 60_000, batchSize: 1000, maxQueued: 1000, now: () => T0 },
      quiet(),
    );
    trail.record(read('tenant-a', 'CoverageEligibilityResponse/c1'));
    trail.record(read('tenant-b', 'CoverageEligibilityResponse/c1'));
    // The store alone has nothing yet: the records are still queued.
    expect(await store.searchAuditEvents('tenant-a', {}, 10)).toEqual([]);
    const found = await trail.searchAuditEvents(
      'tenant-a',
      { entity: ['CoverageEligibilityResponse/c1'] },
      10,
    );
    expect(found.map((row) => row.record)).toEqual([read('tenant-a', 'CoverageEligibilityResponse/c1')]);
    // The other tenant's record was written by the same flush and stays that tenant's.
    expect(await store.searchAuditEvents('tenant-b', {}, 10)).toHaveLength(1);
    await trail.stop();
  });

  it('a batch the store refuses is kept and written by a later flush, ahead of newer records', async () => {
    let failures = 1;
    const flaky = {
      insertAuditEvents: (rows: Parameters<CheckStore['insertAuditEvents']>[0]) =>
        failures-- > 0 ? Promise.reject(new Error('database is locked')) : store.insertAuditEvents(rows),
      searchAuditEvents: store.searchAuditEvents.bind(store),
    };
    const trail = new AuditTrail(
      flaky,
      { enabled: true, flushMs: 60_000, batchSize: 2, maxQueued: 10, now: () => T0 + 10 },
      quiet(),
    );
    for (const n of [1, 2, 3]) trail.record(read('tenant-d', `CoverageEligibilityResponse/r${n}`));
    await trail.flush();
    expect(await store.searchAuditEvents('tenant-d', {}, 10)).toEqual([]);
    trail.record(read('tenant-d', 'CoverageEligibilityResponse/r4'));
    const found = await trail.searchAuditEvents('tenant-d', {}, 10);
    expect(found.map((row) => row.record.entities?.[0]).sort()).toEqual(
      [1, 2, 3, 4].map((n) => `CoverageEligibilityResponse/r${n}`),
    );
    await trail.stop();
  });

  it('pages by the last id seen: every row once, newest first, across equal times and two writers', async () => {
    // 3,000 rows over three milliseconds, from two processes (each its own random part), written
    // out of order: pages of 100 by `before` must give each exactly once in (time, id) order.
    const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
    const rows = Array.from({ length: 3000 }, (_v, i) => {
      const at = T0 + 100 + (i % 3);
      const id = `${hex(at, 12)}${i % 2 === 0 ? 'a1' : '7f'}${hex(i * 7919, 18)}`;
      return { id, recordedAt: at, record: read('tenant-e', `CoverageEligibilityResponse/p${i}`) };
    });
    await store.insertAuditEvents(rows);
    const expected = [...rows].sort((a, b) =>
      a.recordedAt === b.recordedAt ? (a.id < b.id ? 1 : -1) : b.recordedAt - a.recordedAt,
    );
    const page = async (filters: Parameters<CheckStore['searchAuditEvents']>[1]) => {
      const seen: string[] = [];
      let before: string | undefined;
      for (;;) {
        const found = await store.searchAuditEvents('tenant-e', { ...filters, before }, 100);
        seen.push(...found.map((row) => row.id));
        if (found.length < 100) return seen;
        before = found.at(-1)?.id;
      }
    };
    expect(await page({})).toEqual(expected.map((row) => row.id));
    // With a date range: the middle millisecond only, still each once and in order.
    const middle = expected.filter((row) => row.recordedAt === T0 + 101).map((row) => row.id);
    expect(await page({ date: [{ from: T0 + 101, before: T0 + 102 }] })).toEqual(middle);
  });
});
