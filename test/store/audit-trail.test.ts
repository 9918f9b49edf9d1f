/**
 * The audit trail's writer (src/checks/audit.ts) on both stores: records wait in a queue and are
 * written in batches off the answer's path, yet a search finds every record made before it, and
 * ids stay unique and in recording order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditTrail } from '../../src/checks/audit.js';
import { auditRow } from '../../src/checks/store/audit-store.js';
import type { CheckStore } from '../../src/checks/store/check-store.js';
import type { AuditRecord } from '../../src/fhir/audit-event.js';
import { createLogger } from '../../src/log.js';
import { postgresBackend, sqliteBackend } from '../support/store-backends.js';

const T0 = Date.parse('2026-11-24T05:00:00Z');

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
  beforeAll(async () => {
    await backend.setup();
    store = await backend.open(backend.create());
    await store.migrate();
  });
  afterAll(async () => {
    await store.close();
    await backend.teardown();
  });

  it('a search finds what was recorded just before it, though the queue would wait a minute', async () => {
    const trail = new AuditTrail(
      store,
      { enabled: true, flushMs: 60_000, batchSize: 1000, maxQueued: 1000, now: () => T0 },
      createLogger('error'),
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

  it('ids are unique within a millisecond and sort by recording time', async () => {
    const rows = Array.from({ length: 3000 }, (_v, i) =>
      auditRow(read('tenant-c', `CoverageEligibilityResponse/x${i}`), T0 + Math.floor(i / 1000)),
    );
    expect(new Set(rows.map((row) => row.id)).size).toBe(rows.length);
    expect(rows.every((row) => /^[0-9a-f]{32}$/.test(row.id))).toBe(true);
    for (let i = 1000; i < rows.length; i += 1000) {
      expect(String(rows[i]?.id) > String(rows[i - 1]?.id)).toBe(true);
    }
    await store.insertAuditEvents(rows);
    const newest = await store.searchAuditEvents('tenant-c', {}, 5);
    expect(newest).toHaveLength(5);
    expect(newest.every((row) => row.recordedAt === T0 + 2)).toBe(true);
  });
});
