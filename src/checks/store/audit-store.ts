/**
 * The store's statements for SMART Backend Services and the audit trail (issue 18, docs/auth.md):
 * the `jti` of client assertions (replay protection shared by every replica) and AuditEvent rows.
 * Run by SqlStore on either database, like the rest of the store.
 */
import { randomUUID } from 'node:crypto';
import type { AuditEvent } from 'fhir/r4.js';
import type { AuditRecord } from '../../fhir/audit-event.js';
import { auditSubtype, buildAuditEvent } from '../../fhir/audit-event.js';
import type { AuditFilters, AuditRow } from './check-store.js';

export type { AuditFilters, AuditRow } from './check-store.js';
import type { Dialect, Result, Work } from './driver.js';
import { int, nullableText, text } from './rows.js';
import type { Row } from './rows.js';

export const SERVER_NAME = 'fhir-eligibility-adapter';

/** The row of a record: the AuditEvent and the columns it is searched by. */
export function auditRow(record: AuditRecord, recordedAt: number, id: string = randomUUID()): AuditRow {
  return {
    id,
    tenantId: record.tenantId,
    recordedAt,
    action: record.action,
    subtype: auditSubtype(record),
    agent: record.agentId,
    entity: record.entities?.[0] ?? null,
    outcome: record.outcome,
    resource: buildAuditEvent(record, id, recordedAt, SERVER_NAME),
  };
}

function* one(sql: string, params: readonly unknown[] = []): Work<Result> {
  return yield { sql, params };
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

/** Inserts a batch of audit rows in one write. */
export function* insertingAudit(dialect: Dialect, rows: readonly AuditRow[]): Work<void> {
  for (const row of rows) {
    yield {
      sql: `INSERT INTO audit_events (id, tenant_id, recorded_at, action, subtype, agent, entity, outcome, resource)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, ${dialect.json('$9')}) ON CONFLICT (id) DO NOTHING`,
      params: [
        row.id,
        row.tenantId,
        row.recordedAt,
        row.action,
        row.subtype,
        row.agent,
        row.entity,
        row.outcome,
        JSON.stringify(row.resource),
      ],
    };
  }
}

/** A tenant's audit rows matching every filter, newest first, at most `count`. */
export function* searchingAudit(
  dialect: Dialect,
  tenantId: string,
  filters: AuditFilters,
  count: number,
): Work<AuditRow[]> {
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
  const { rows } = yield* one(
    `SELECT id, tenant_id, recorded_at, action, subtype, agent, entity, outcome,
            ${dialect.jsonText('resource')} AS resource
     FROM audit_events WHERE ${where.join(' AND ')}
     ORDER BY recorded_at DESC, id DESC LIMIT ${bind(count)}`,
    params,
  );
  return rows.map(rowToAudit);
}

function rowToAudit(row: Row): AuditRow {
  return {
    id: text(row, 'id'),
    tenantId: text(row, 'tenant_id'),
    recordedAt: int(row, 'recorded_at'),
    action: text(row, 'action'),
    subtype: text(row, 'subtype'),
    agent: text(row, 'agent'),
    entity: nullableText(row, 'entity'),
    outcome: text(row, 'outcome'),
    resource: JSON.parse(text(row, 'resource')) as AuditEvent,
  };
}

/** Deletes audit rows recorded before the given time (retention); returns how many. */
export function* purgingAudit(recordedBefore: number): Work<number> {
  return (yield* one('DELETE FROM audit_events WHERE recorded_at < $1', [recordedBefore])).changed;
}
