/**
 * The store's statements for SMART Backend Services and the audit trail (issue 18, docs/auth.md):
 * the `jti` of client assertions (replay protection shared by every replica) and AuditEvent rows.
 * Run by SqlStore on either database, like the rest of the store.
 */
import { randomFillSync } from 'node:crypto';
import { AUDIT_OPERATIONS } from '../../fhir/audit-event.js';
import type { AuditAction, AuditOutcome, AuditPerson, AuditRecord } from '../../fhir/audit-event.js';
import type { AuditFilters, AuditRow } from './check-store.js';

export type { AuditFilters, AuditRow } from './check-store.js';
import type { Work } from './driver.js';
import { one } from './driver.js';
import { int, nullableText, oneOf, text } from './rows.js';
import type { Row } from './rows.js';

/** The id prefix of a time: 12 hex digits of epoch ms, so ids sort by the time they were recorded. */
function timePrefix(epochMs: number): string {
  return Math.max(0, Math.floor(epochMs)).toString(16).padStart(12, '0');
}

/** Random bytes drawn in bulk: 10 per id, refilled when used up (one draw per 512 ids). */
const RANDOM_BYTES = 10;
const pool = Buffer.alloc(RANDOM_BYTES * 512);
let poolAt = pool.length;

/**
 * A record as it is stored: its id and time (the AuditEvent is built from it when read). The id is
 * 32 hex digits, the recording time (12) then 80 random bits (20): new rows go to the end of the
 * primary key and the retention purge is a range of it. Random, not a counter: a counter would
 * show a tenant, between two of its own ids, how many requests the other tenants made.
 */
export function auditRow(record: AuditRecord, recordedAt: number): AuditRow {
  if (poolAt + RANDOM_BYTES > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const id = `${timePrefix(recordedAt)}${pool.toString('hex', poolAt, poolAt + RANDOM_BYTES)}`;
  poolAt += RANDOM_BYTES;
  return { id, recordedAt, record };
}

/** The recording time at the start of an id (see auditRow). */
export function recordedAtOf(id: string): number {
  return Number.parseInt(id.slice(0, 12), 16);
}

/**
 * Remembers a client assertion's `jti` until the assertion expires: true the first time, false
 * when it is already remembered (a replay). Expired ones are dropped in the same write.
 */
export function* rememberingJti(
  clientKey: string,
  jti: string,
  expiresAt: number,
  now: number,
): Work<boolean> {
  yield { sql: 'DELETE FROM assertion_jtis WHERE expires_at < $1', params: [now] };
  const result = yield* one(
    `INSERT INTO assertion_jtis (client_key, jti, expires_at) VALUES ($1, $2, $3)
     ON CONFLICT (client_key, jti) DO NOTHING`,
    [clientKey, jti, expiresAt],
  );
  return result.changed === 1;
}

const AUDIT_COLUMNS = [
  'id',
  'tenant_id',
  'recorded_at',
  'action',
  'interaction',
  'operation',
  'agent',
  'agent_kind',
  'entity',
  'outcome',
  'outcome_desc',
  'person',
] as const;
/** Rows per INSERT statement: one statement for many rows costs far less than one per row. */
const INSERT_ROWS = 50;

/** The INSERT of `n` rows, made once per row count (the store prepares each text once). */
const insertSql = new Map<number, string>();
function insertOf(n: number): string {
  let sql = insertSql.get(n);
  if (sql === undefined) {
    const width = AUDIT_COLUMNS.length;
    const tuples = Array.from(
      { length: n },
      (_r, row) => `(${AUDIT_COLUMNS.map((_c, i) => `$${row * width + i + 1}`).join(', ')})`,
    );
    sql = `INSERT INTO audit_events (${AUDIT_COLUMNS.join(', ')}) VALUES ${tuples.join(', ')}
            ON CONFLICT (id) DO NOTHING`;
    insertSql.set(n, sql);
  }
  return sql;
}

/** Inserts a batch of audit rows in one write, up to INSERT_ROWS rows per statement. */
export function* insertingAudit(rows: readonly AuditRow[]): Work<void> {
  for (let start = 0; start < rows.length; start += INSERT_ROWS) {
    const end = Math.min(rows.length, start + INSERT_ROWS);
    const params: unknown[] = [];
    for (let i = start; i < end; i += 1) {
      const row = rows[i];
      if (!row) continue;
      const { record } = row;
      params.push(
        row.id,
        record.tenantId,
        row.recordedAt,
        record.action,
        record.interaction,
        record.operation ?? null,
        record.agentId,
        record.agentKind,
        record.entities?.[0] ?? null,
        record.outcome,
        record.outcomeDesc ?? null,
        record.person ? JSON.stringify(record.person) : null,
      );
    }
    yield { sql: insertOf(params.length / AUDIT_COLUMNS.length), params };
  }
}

/** A tenant's audit rows matching every filter, newest first, at most `count`. */
export function* searchingAudit(tenantId: string, filters: AuditFilters, count: number): Work<AuditRow[]> {
  const params: unknown[] = [tenantId];
  const bind = (value: unknown) => {
    params.push(value);
    return `$${params.length}`;
  };
  const where = ['tenant_id = $1'];
  const anyOf = (column: string, values: readonly string[] | undefined) => {
    if (values?.length) where.push(`${column} IN (${values.map(bind).join(', ')})`);
  };
  anyOf('id', filters.ids);
  anyOf('entity', filters.entity);
  anyOf('agent', filters.agent);
  anyOf('action', filters.action);
  for (const range of filters.date ?? []) {
    const parts: string[] = [];
    if (range.from !== undefined) parts.push(`recorded_at >= ${bind(range.from)}`);
    if (range.before !== undefined) parts.push(`recorded_at < ${bind(range.before)}`);
    if (parts.length === 0) continue;
    where.push(range.not ? `NOT (${parts.join(' AND ')})` : `(${parts.join(' AND ')})`);
  }
  if (filters.before !== undefined) {
    // After the cursor in the order (recorded_at, id) descending; the time bound keeps the search
    // on the index's range (the id begins with its recording time, so the cursor gives it).
    const at = bind(recordedAtOf(filters.before));
    where.push(`recorded_at <= ${at} AND (recorded_at < ${at} OR id < ${bind(filters.before)})`);
  }
  const { rows } = yield* one(
    `SELECT ${AUDIT_COLUMNS.join(', ')} FROM audit_events WHERE ${where.join(' AND ')}
     ORDER BY recorded_at DESC, id DESC LIMIT ${bind(count)}`,
    params,
  );
  return rows.map(rowToAudit);
}

function rowToAudit(row: Row): AuditRow {
  const record: AuditRecord = {
    tenantId: text(row, 'tenant_id'),
    agentId: text(row, 'agent'),
    agentKind: text(row, 'agent_kind') as AuditRecord['agentKind'],
    action: text(row, 'action') as AuditAction,
    interaction: text(row, 'interaction'),
    outcome: text(row, 'outcome') as AuditOutcome,
  };
  if (nullableText(row, 'operation') !== null) record.operation = oneOf(row, 'operation', AUDIT_OPERATIONS);
  const entity = nullableText(row, 'entity');
  if (entity !== null) record.entities = [entity];
  const outcomeDesc = nullableText(row, 'outcome_desc');
  if (outcomeDesc !== null) record.outcomeDesc = outcomeDesc;
  // Stored as JSON text on both databases' insert; PostgreSQL hands JSONB back parsed.
  const person = row.person;
  if (person !== null && person !== undefined) {
    record.person = (typeof person === 'string' ? JSON.parse(person) : person) as AuditPerson;
  }
  return { id: text(row, 'id'), recordedAt: int(row, 'recorded_at'), record };
}

/** Deletes audit rows recorded before the given time (retention); returns how many. */
export function* purgingAudit(recordedBefore: number): Work<number> {
  return (yield* one('DELETE FROM audit_events WHERE id < $1', [timePrefix(recordedBefore)])).changed;
}
