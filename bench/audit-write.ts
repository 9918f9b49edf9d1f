/**
 * The store's cost of the audit trail (issue 18): CPU per AuditEvent, from the record to the
 * committed row, in the batches the audit trail writes (1,000 records, 50 rows per INSERT;
 * BENCH_BATCH to change), into a table already holding the earlier rounds' rows. SQLite by default, PostgreSQL with
 * BENCH_STORE=postgres (CPU of this process only: the server's own is not counted there).
 *
 *   npx tsx bench/audit-write.ts          (BENCH_EVENTS=20000 per round, 3 rounds)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auditRow } from '../src/checks/store/audit-store.js';
import { openStore } from '../src/checks/store/open.js';
import type { AuditRecord } from '../src/fhir/audit-event.js';
import { machine, PG_URL, pgSchema, record } from './lib.js';

const events = Number(process.env.BENCH_EVENTS ?? 20_000);
const batch = Number(process.env.BENCH_BATCH ?? 1000);
const postgres = process.env.BENCH_STORE === 'postgres';
const schema = postgres ? await pgSchema('audit_write') : null;
const store = postgres
  ? await openStore(schema?.url ?? PG_URL)
  : await openStore(`sqlite:${join(mkdtempSync(join(tmpdir(), 'fea-audit-')), 'adapter.db')}`);
await store.migrate();

const read: AuditRecord = {
  tenantId: 'tenant-0',
  agentId: 'key-0123456789ab',
  agentKind: 'api-key',
  action: 'R',
  interaction: 'read',
  entities: ['CoverageEligibilityResponse/2b8f3c1e-1111-2222-3333-444455556666'],
  outcome: '0',
};
const rounds: Array<{ buildUs: number; writeUs: number }> = [];
try {
  for (let round = 0; round < 3; round += 1) {
    let start = process.cpuUsage();
    const rows = Array.from({ length: events }, (_v, i) =>
      auditRow({ ...read, tenantId: `tenant-${i % 10}` }, Date.now()),
    );
    let used = process.cpuUsage(start);
    const buildUs = (used.user + used.system) / events;
    start = process.cpuUsage();
    for (let i = 0; i < events; i += batch) await store.insertAuditEvents(rows.slice(i, i + batch));
    used = process.cpuUsage(start);
    rounds.push({
      buildUs: Number(buildUs.toFixed(2)),
      writeUs: Number(((used.user + used.system) / events).toFixed(2)),
    });
  }
  await record(`audit-write-${postgres ? 'postgres' : 'sqlite'}`, { events, rounds, machine: machine() });
} finally {
  await store.close();
  await schema?.drop();
}
