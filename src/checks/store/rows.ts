/**
 * The rows of the check store as the application sees them: column lists, row <-> Check
 * conversion, the claim plan. No SQL here (sql-store.ts has all of it); what a driver returns
 * differently (JSON parsed or not, integers as strings, booleans as 0/1) is read here.
 */
import { createHash } from 'node:crypto';
import type { CheckAnswer } from '../../mapping/response/answer.js';
import type { CoverageEligibilityRequest, CoverageEligibilityResponse } from 'fhir/r4.js';
import type { UpstreamTaskRequest } from '../../upstream/contract.js';
import { CHECK_STATES, guardPayer } from './check-store.js';
import { QUEUE_CLASSES, QUEUE_PRIORITIES } from '../../mapping/request/queue-place.js';
import type { QueueClass } from '../../mapping/request/queue-place.js';
import type { DurationStats, PayerDurations } from '../poll-schedule.js';
import type {
  CerOutcome,
  Check,
  CheckDocuments,
  CheckPatch,
  CheckState,
  ClaimedCheck,
  Guard,
  GuardKind,
  NewCheck,
  StoredCer,
} from './check-store.js';

/** Columns of the `checks` table, in the order `insertValues` returns them. */
export const CHECK_COLUMNS = [
  'id',
  'tenant_id',
  'idempotency_key',
  'payer_code',
  'is_search_all',
  'patient_key',
  'patient_value',
  'request',
  'upstream_request',
  'state',
  'upstream_task_id',
  'upstream_status',
  'tasks_created',
  'poll_failures',
  'next_run_at',
  'deadline_at',
  'lease_owner',
  'lease_until',
  'envelope',
  'cer',
  'version',
  'outcome',
  'answer',
  'async_stopped',
  'created_at',
  'updated_at',
  'request_identifier_value',
  'reuse_key',
  'task_started_at',
  'task_polls',
  'queue_class',
  'priority',
  'queue_deadline_at',
] as const;
export type CheckColumn = (typeof CHECK_COLUMNS)[number];

/** Columns holding JSON (TEXT on SQLite, JSONB on PostgreSQL). */
export const JSON_COLUMNS: ReadonlySet<CheckColumn> = new Set([
  'request',
  'upstream_request',
  'envelope',
  'cer',
  'answer',
]);

const OUTCOMES: readonly CerOutcome[] = ['queued', 'complete', 'error', 'partial'];
const GUARD_KINDS: readonly GuardKind[] = ['credentials', 'backoff'];

/**
 * The value part of a `system|value` key (the patient's, or the request identifier's). Stored in its own column so a search with a
 * bare value (FHIR token without system) is an indexed equality, not a LIKE on user input.
 */
export function patientValueOf(patientKey: string | null): string | null {
  if (patientKey === null) return null;
  const bar = patientKey.indexOf('|');
  return bar < 0 ? patientKey : patientKey.slice(bar + 1);
}

/**
 * What makes two checks of a tenant ask the same question, for the reuse of a recent answer
 * (docs/batch-and-reuse.md): the payer (as guards compare it), the patient identifier, and
 * everything of the task that can change the portal's answer: the identifier's type, the visit
 * type and the service asked about (`extra_args`: title, value and the maternity, POD and
 * follow-up flags), the practice and the doctor (a portal warns when the doctor is not listed).
 * Those are hashed, so the key stays short. A search-all's payer is ALL, so it only meets other
 * search-alls. Null without a patient identifier (never reused).
 */
export function reuseKeyOf(
  check: Pick<NewCheck, 'payerCode' | 'patientKey'> & {
    upstreamRequest: Pick<
      UpstreamTaskRequest,
      'id_type' | 'visit_type' | 'practice_id' | 'doctorName' | 'doctorId' | 'extra_args'
    >;
  },
): string | null {
  if (check.patientKey === null) return null;
  const task = check.upstreamRequest;
  const extra = task.extra_args;
  const question = JSON.stringify([
    task.id_type,
    task.visit_type,
    task.practice_id,
    task.doctorId ?? null,
    task.doctorName,
    extra.title,
    extra.value,
    extra.is_pod ?? null,
    extra.is_maternity ?? null,
    extra.not_related_to_chief_complaint ?? null,
    extra.free_followup_or_extended_followup ?? null,
  ]);
  const digest = createHash('sha256').update(question, 'utf8').digest('base64url').slice(0, 22);
  return `${guardPayer(check.payerCode)}|${digest}|${check.patientKey}`;
}

/** The CER with meta.versionId and meta.lastUpdated matching the row (FHIR read and vread rely on them). */
export function stampCer(
  cer: CoverageEligibilityResponse,
  version: number,
  now: number,
): CoverageEligibilityResponse {
  return {
    ...cer,
    meta: { ...cer.meta, versionId: String(version), lastUpdated: new Date(now).toISOString() },
  };
}

/** The values of a new row, by column (JSON columns as values, encoded when bound). */
export function insertValues(check: NewCheck): Record<CheckColumn, unknown> {
  return {
    id: check.id,
    tenant_id: check.tenantId,
    idempotency_key: check.idempotencyKey,
    payer_code: check.payerCode,
    is_search_all: check.isSearchAll,
    patient_key: check.patientKey,
    patient_value: check.patientValue !== undefined ? check.patientValue : patientValueOf(check.patientKey),
    request: check.request,
    upstream_request: check.upstreamRequest,
    state: check.state,
    upstream_task_id: check.upstreamTaskId,
    upstream_status: check.upstreamStatus,
    tasks_created: check.tasksCreated,
    poll_failures: check.pollFailures,
    next_run_at: check.nextRunAt,
    deadline_at: check.deadlineAt,
    lease_owner: null,
    lease_until: null,
    envelope: check.envelope ?? null,
    cer: stampCer(check.cer, 1, check.now),
    version: 1,
    outcome: check.outcome,
    answer: check.answer,
    async_stopped: false,
    created_at: check.now,
    updated_at: check.now,
    request_identifier_value:
      check.requestIdentifierValue !== undefined
        ? check.requestIdentifierValue
        : patientValueOf(check.idempotencyKey),
    reuse_key: reuseKeyOf(check),
    task_started_at: null,
    task_polls: 0,
    queue_class: check.queueClass ?? 'desk',
    priority: check.priority ?? 'normal',
    queue_deadline_at: check.queueDeadlineAt ?? check.now,
  };
}

/** The column of each field a patch may set, except `cer` (its version stamp needs the row's version). */
export const PATCH_COLUMNS: Record<Exclude<keyof CheckPatch, 'cer'>, CheckColumn> = {
  state: 'state',
  upstreamTaskId: 'upstream_task_id',
  upstreamStatus: 'upstream_status',
  tasksCreated: 'tasks_created',
  pollFailures: 'poll_failures',
  nextRunAt: 'next_run_at',
  deadlineAt: 'deadline_at',
  envelope: 'envelope',
  outcome: 'outcome',
  answer: 'answer',
  taskStartedAt: 'task_started_at',
  taskPolls: 'task_polls',
};

/** What a claim pass found, before the batch limit is applied. */
export interface ClaimCandidate {
  id: string;
  nextRunAt: number;
  createdAt: number;
  /** True for a waiting row that the claim moves to `starting`. */
  promote: boolean;
  /** A promoted row's tenant and class (the line's order is kept within a tenant: planClaim). */
  tenantId?: string;
  queueClass?: QueueClass;
}

/**
 * Picks the batch: slot-state rows and promotable waiting rows together, most overdue first,
 * so neither kind can starve the other when more is due than one batch holds; desk rows to
 * promote come before all (a person waits on them). A tenant's waiting rows are given in the
 * order of its line (the claim query's): when the batch cuts some of them off, the ones promoted
 * are the first of the line, so the limit never reorders it.
 */
export function planClaim(candidates: ClaimCandidate[], limit: number): ClaimCandidate[] {
  const desk = (c: ClaimCandidate): number => (c.promote && c.queueClass === 'desk' ? 0 : 1);
  const kept = [...candidates]
    .sort(
      (a, b) =>
        desk(a) - desk(b) || a.nextRunAt - b.nextRunAt || a.createdAt - b.createdAt || compare(a.id, b.id),
    )
    .slice(0, Math.max(0, limit));
  const promoted = new Map<string, number>();
  for (const c of kept)
    if (c.promote) promoted.set(c.tenantId ?? '', (promoted.get(c.tenantId ?? '') ?? 0) + 1);
  const lines = new Map<string, ClaimCandidate[]>();
  for (const c of candidates) {
    if (!c.promote) continue;
    const line = lines.get(c.tenantId ?? '') ?? [];
    line.push(c);
    lines.set(c.tenantId ?? '', line);
  }
  const firsts = [...promoted].flatMap(([tenant, count]) => (lines.get(tenant) ?? []).slice(0, count));
  return [...firsts, ...kept.filter((c) => !c.promote)];
}

/** A row of a claim's candidate SELECT (id, next_run_at, created_at; a waiting row's tenant_id and queue_class). */
export function rowToCandidate(row: Row, promote: boolean): ClaimCandidate {
  return {
    id: text(row, 'id'),
    nextRunAt: int(row, 'next_run_at'),
    createdAt: int(row, 'created_at'),
    promote,
    ...(promote
      ? { tenantId: text(row, 'tenant_id'), queueClass: oneOf(row, 'queue_class', QUEUE_CLASSES) }
      : {}),
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---- reading rows back -------------------------------------------------------------------

/** A row as a driver returns it: column name -> value of whatever type the driver chose. */
export type Row = Record<string, unknown>;

/** Thrown when a stored row does not have the expected shape (a bug or a hand-edited database). */
export class CorruptRowError extends Error {
  constructor(column: string, value: unknown) {
    super(`checks store: unexpected value in column ${column}: ${typeof value}`);
    this.name = 'CorruptRowError';
  }
}

export function text(row: Row, column: string): string {
  const value = row[column];
  if (typeof value !== 'string') throw new CorruptRowError(column, value);
  return value;
}

/** A text column that holds one of a fixed set of values (a state, a status, a kind). */
export function oneOf<T extends string>(row: Row, column: string, values: readonly T[]): T {
  const value = text(row, column);
  const found = values.find((v) => v === value);
  if (found === undefined) throw new CorruptRowError(column, value);
  return found;
}

export function nullableText(row: Row, column: string): string | null {
  return row[column] === null || row[column] === undefined ? null : text(row, column);
}

/** Integers: numbers on SQLite, strings for BIGINT / COUNT on PostgreSQL. */
export function int(row: Row, column: string): number {
  const value = row[column];
  const n = typeof value === 'string' ? Number(value) : typeof value === 'bigint' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new CorruptRowError(column, value);
  return n;
}

export function nullableInt(row: Row, column: string): number | null {
  return row[column] === null || row[column] === undefined ? null : int(row, column);
}

/** Booleans: 0/1 on SQLite, true/false on PostgreSQL. */
export function bool(row: Row, column: string): boolean {
  const value = row[column];
  if (typeof value === 'boolean') return value;
  if (value === 0 || value === 1) return value === 1;
  throw new CorruptRowError(column, value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function resource<T extends { resourceType: string }>(
  value: unknown,
  type: T['resourceType'],
  column: string,
): T {
  if (!isObject(value) || value.resourceType !== type) throw new CorruptRowError(column, value);
  return value as T;
}

function state(row: Row): CheckState {
  return oneOf(row, 'state', CHECK_STATES);
}

export function outcome(row: Row): CerOutcome {
  return oneOf(row, 'outcome', OUTCOMES);
}

/** The columns of CheckDocuments (rowToDocuments). */
export const DOCUMENT_COLUMNS: readonly CheckColumn[] = ['request', 'upstream_request', 'cer', 'answer'];

/**
 * The columns a claim reads (rowToClaimed): the row without the documents of CheckDocuments and
 * without the search-only columns (the patient's value, the request identifier, the reuse key).
 */
const SEARCH_ONLY: readonly CheckColumn[] = ['patient_value', 'request_identifier_value', 'reuse_key'];
export const CLAIMED_COLUMNS: readonly CheckColumn[] = CHECK_COLUMNS.filter(
  (column) => !DOCUMENT_COLUMNS.includes(column) && !SEARCH_ONLY.includes(column),
);

/** A JSON column of a row, parsed; null for SQL NULL. */
function jsonOf(row: Row, column: string, readJson: (value: unknown) => unknown): unknown {
  const value = row[column];
  return value === null || value === undefined ? null : readJson(value);
}

/** A `checks` row (at least CLAIMED_COLUMNS) as a claimed check, without its documents. */
export function rowToClaimed(row: Row, readJson: (value: unknown) => unknown): ClaimedCheck {
  return {
    id: text(row, 'id'),
    tenantId: text(row, 'tenant_id'),
    idempotencyKey: nullableText(row, 'idempotency_key'),
    payerCode: text(row, 'payer_code'),
    isSearchAll: bool(row, 'is_search_all'),
    patientKey: nullableText(row, 'patient_key'),
    state: state(row),
    upstreamTaskId: nullableText(row, 'upstream_task_id'),
    upstreamStatus: nullableText(row, 'upstream_status'),
    tasksCreated: int(row, 'tasks_created'),
    pollFailures: int(row, 'poll_failures'),
    nextRunAt: int(row, 'next_run_at'),
    deadlineAt: int(row, 'deadline_at'),
    leaseOwner: nullableText(row, 'lease_owner'),
    leaseUntil: nullableInt(row, 'lease_until'),
    envelope: jsonOf(row, 'envelope', readJson),
    version: int(row, 'version'),
    outcome: outcome(row),
    asyncStopped: bool(row, 'async_stopped'),
    createdAt: int(row, 'created_at'),
    updatedAt: int(row, 'updated_at'),
    taskStartedAt: nullableInt(row, 'task_started_at'),
    taskPolls: nullableInt(row, 'task_polls') ?? 0,
    queueClass: oneOf(row, 'queue_class', QUEUE_CLASSES),
    priority: oneOf(row, 'priority', QUEUE_PRIORITIES),
    // Rows finished before migration 19 have none: their arrival.
    queueDeadlineAt: nullableInt(row, 'queue_deadline_at') ?? int(row, 'created_at'),
  };
}

/** The DOCUMENT_COLUMNS of a `checks` row. */
export function rowToDocuments(row: Row, readJson: (value: unknown) => unknown): CheckDocuments {
  const upstreamRequest = jsonOf(row, 'upstream_request', readJson);
  if (!isObject(upstreamRequest)) throw new CorruptRowError('upstream_request', upstreamRequest);
  return {
    request: resource<CoverageEligibilityRequest>(
      jsonOf(row, 'request', readJson),
      'CoverageEligibilityRequest',
      'request',
    ),
    // Written only by this store from a typed value; checked to be an object, not re-validated.
    upstreamRequest: upstreamRequest as unknown as UpstreamTaskRequest,
    cer: resource<CoverageEligibilityResponse>(
      jsonOf(row, 'cer', readJson),
      'CoverageEligibilityResponse',
      'cer',
    ),
    // Written only by this store from a typed value (src/mapping/response/answer.ts).
    answer: jsonOf(row, 'answer', readJson) as CheckAnswer | null,
  };
}

/** A whole `checks` row as a Check; `readJson` reads a JSON column as the driver returned it. */
export function rowToCheck(row: Row, readJson: (value: unknown) => unknown): Check {
  return { ...rowToClaimed(row, readJson), ...rowToDocuments(row, readJson) };
}

/** A `payer_guards` row as a Guard. */
export function rowToGuard(row: Row): Guard {
  const kind = oneOf(row, 'kind', GUARD_KINDS);
  return {
    tenantId: text(row, 'tenant_id'),
    payerCode: text(row, 'payer_code'),
    kind,
    until: nullableInt(row, 'until_at'),
    reason: text(row, 'reason'),
    openedAt: int(row, 'opened_at'),
  };
}

/** A `countByState` row. */
export function rowToCount(row: Row): {
  tenantId: string;
  state: CheckState;
  outcome: CerOutcome;
  count: number;
} {
  return {
    tenantId: text(row, 'tenant_id'),
    state: state(row),
    outcome: outcome(row),
    count: int(row, 'count'),
  };
}

/** The CER of a row as stored JSON text (the read path sends it without parsing it). */
export function rowToStoredCer(row: Row): StoredCer {
  const cer = row.cer;
  if (typeof cer !== 'string') throw new Error('stored CER is not JSON text');
  return { json: cer, version: Number(row.version), updatedAt: Number(row.updated_at) };
}

/** `base` with a patch applied as the store applied it (CER stamped, version and updatedAt moved, lease dropped when released). */
export function patched<T extends ClaimedCheck>(
  base: T,
  patch: CheckPatch,
  version: number,
  now: number,
  released = false,
): T {
  const merged: T & Partial<Pick<Check, 'cer'>> = { ...base, ...patch };
  if (released) {
    merged.leaseOwner = null;
    merged.leaseUntil = null;
  }
  if (patch.cer) {
    merged.cer = stampCer(patch.cer, version, now);
    merged.version = version;
    merged.updatedAt = now;
  }
  return merged;
}

/** The `payer_durations` rows of one payer; null when there are none. */
export function rowsToPayerDurations(rows: Row[]): PayerDurations | null {
  if (rows.length === 0) return null;
  const durations: PayerDurations = { preExtract: null, extract: null };
  for (const row of rows) {
    const stats: DurationStats = {
      n: int(row, 'samples'),
      meanLog: int(row, 'mean_log'),
      varLog: int(row, 'var_log'),
    };
    const phase = text(row, 'phase');
    if (phase === 'pre_extract') durations.preExtract = stats;
    else if (phase === 'extract') durations.extract = stats;
  }
  return durations;
}
