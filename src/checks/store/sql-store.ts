/**
 * The check store, once for SQLite and PostgreSQL: every SQL statement of the store is here
 * (the schema's are in schema.ts; the claim and the line's counts in sql-queue.ts), written with PostgreSQL's $1, $2, ... placeholders, which the
 * SQLite driver binds as well. What the two databases do differently is a dialect hook (row and
 * tenant locks of a claim, JSON columns, index hints) or the driver's own business (sqlite.ts:
 * the group commit; postgres.ts: the pool and its transactions); see driver.ts.
 */
import { guardPayer, isAnswered } from './check-store.js';
import type { PayerDurations, TaskDurations } from '../poll-schedule.js';
import type {
  Batch,
  BatchEntry,
  Check,
  CheckDocuments,
  CheckPatch,
  CheckStore,
  ClaimOptions,
  ClaimedCheck,
  Guard,
  NewCheck,
  QueueCounts,
  SearchFilters,
  SearchPage,
  StoredCer,
  TokenValue,
  UpdateOptions,
} from './check-store.js';
import {
  CHECK_COLUMNS,
  CLAIMED_COLUMNS,
  DOCUMENT_COLUMNS,
  JSON_COLUMNS,
  PATCH_COLUMNS,
  insertValues,
  int,
  patched,
  rowToCheck,
  rowToClaimed,
  rowToDocuments,
  rowToCount,
  rowToGuard,
  rowToStoredCer,
  rowsToPayerDurations,
  stampCer,
  text,
} from './rows.js';
import type { CheckColumn, Row } from './rows.js';
import type { Dialect, SqlDriver, Work } from './driver.js';
import { Params, one, query, rangeCondition } from './driver.js';
import { migration } from './schema.js';
import type { QueueClass, QueuePlace } from '../../mapping/request/queue-place.js';
import {
  claiming,
  countingAhead,
  countingQueue,
  countingQueueByClass,
  countingWaitingByClass,
} from './sql-queue.js';
import { recordEvents, SqlSubscriptionStore } from './sql-subscriptions.js';
import { SqlAppointmentStore } from './sql-appointments.js';
import { SqlEhrScheduleStore } from './sql-ehr-schedule.js';
import { SqlSessionStore } from './sql-sessions.js';
import { purging, schedulingEvidence, SqlEvidenceStore } from './sql-evidence.js';
import { ELIGIBILITY_FINAL_TOPIC } from './subscription-store.js';
import { insertingAudit, purgingAudit, rememberingJti, searchingAudit } from './audit-store.js';
import type { AuditFilters, AuditRow } from './audit-store.js';
import type { StoreKind } from './driver.js';
import { StoreHealthDriver } from './outage.js';
import type { StoreHealthReport } from './check-store.js';

/** listOverdue returns at most this many (operator view). */
const OVERDUE_LIMIT = 500;
/** Tasks over which a payer's durations are averaged (then weighted 1/DURATION_WINDOW each). */
const DURATION_WINDOW = 50;

export class SqlStore implements CheckStore {
  readonly kind: StoreKind;
  readonly subscriptions: SqlSubscriptionStore;
  readonly appointments: SqlAppointmentStore;
  readonly sessions: SqlSessionStore;
  readonly evidence: SqlEvidenceStore;
  readonly ehrSchedule: SqlEhrScheduleStore;
  private readonly dialect: Dialect;
  /** A `checks` row as a Check, its JSON columns read as this driver returns them. */
  private readonly toCheck: (row: Row) => Check;
  /** A claimed row (CLAIMED_COLUMNS) as a ClaimedCheck. */
  private readonly toClaimed: (row: Row) => ClaimedCheck;

  constructor(private readonly driver: SqlDriver) {
    this.dialect = driver.dialect;
    this.kind = this.dialect.types.kind;
    const { readJson } = this.dialect;
    this.toCheck = (row) => rowToCheck(row, readJson);
    this.toClaimed = (row) => rowToClaimed(row, readJson);
    this.subscriptions = new SqlSubscriptionStore(driver);
    this.appointments = new SqlAppointmentStore(driver, (check) => this.inserting(check));
    this.sessions = new SqlSessionStore(driver);
    this.evidence = new SqlEvidenceStore(driver);
    this.ehrSchedule = new SqlEhrScheduleStore(driver);
  }

  migrate(): Promise<void> {
    return this.driver.run('transaction', migration(this.dialect));
  }

  async ping(): Promise<void> {
    await this.rows('SELECT 1');
  }

  async probeWrite(now: number): Promise<void> {
    await this.driver.run(
      'write',
      one(
        `INSERT INTO store_probe (id, written_at) VALUES (1, $1)
         ON CONFLICT (id) DO UPDATE SET written_at = excluded.written_at`,
        [now],
      ),
    );
  }

  health(): StoreHealthReport | undefined {
    return this.driver instanceof StoreHealthDriver ? this.driver.health.report() : undefined;
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  insert(check: NewCheck): Promise<{ check: Check; created: boolean }> {
    // A check stored already answered (an open payer guard's refusal) is final at once: its events
    // commit with it, as update's do (PostgreSQL: in a transaction).
    const mode = isAnswered(check) && this.kind === 'postgres' ? 'transaction' : 'write';
    return this.driver.run(mode, this.inserting(check));
  }

  async get(tenantId: string, id: string): Promise<Check | null> {
    const [row] = await this.rows('SELECT * FROM checks WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
    return row ? this.toCheck(row) : null;
  }

  async getCerJson(tenantId: string, id: string): Promise<StoredCer | null> {
    const [row] = await this.rows(
      `SELECT ${this.dialect.jsonText('cer')} AS cer, version, updated_at FROM checks WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id],
    );
    return row ? rowToStoredCer(row) : null;
  }

  async getCerVersion(tenantId: string, id: string): Promise<Omit<StoredCer, 'json'> | null> {
    // SQLite: the planner would take the primary key and then read the row (migration 4).
    const [row] = await this.rows(
      `SELECT version, updated_at FROM checks${this.dialect.indexedBy('checks_version_idx')}
       WHERE tenant_id = $1 AND id = $2`,
      [tenantId, id],
    );
    return row ? { version: Number(row.version), updatedAt: Number(row.updated_at) } : null;
  }

  claimDue(options: ClaimOptions): Promise<ClaimedCheck[]> {
    if (options.limit <= 0) return Promise.resolve([]);
    return this.driver.run('transaction', claiming(this.dialect, this.toClaimed, options));
  }

  async adoptCreating(
    id: string,
    tasksCreated: number,
    owner: string,
    leaseUntil: number,
  ): Promise<ClaimedCheck | null> {
    const [row] = await this.driver.run(
      'write',
      query(
        `UPDATE checks SET lease_owner = $1, lease_until = $2
         WHERE id = $3 AND state = 'creating' AND tasks_created = $4 RETURNING ${CLAIMED_COLUMNS.join(', ')}`,
        [owner, leaseUntil, id, tasksCreated],
      ),
    );
    return row ? this.toClaimed(row) : null;
  }

  async documents(id: string): Promise<CheckDocuments | null> {
    const [row] = await this.rows(`SELECT ${DOCUMENT_COLUMNS.join(', ')} FROM checks WHERE id = $1`, [id]);
    return row ? rowToDocuments(row, this.dialect.readJson) : null;
  }

  update<T extends ClaimedCheck = Check>(
    id: string,
    owner: string,
    patch: CheckPatch,
    now: number,
    base?: T,
    options: UpdateOptions = {},
  ): Promise<T | null> {
    // Without `base` the row is read back whole (RETURNING *), which is a Check.
    const work = this.updating(id, owner, patch, now, base, options.release === true) as Work<T | null>;
    if ((!options.final && !options.evidence) || !base) return this.driver.run('write', work);
    // The outbox: the events of the CER's first final version, and the documents to keep, commit
    // with it, or not at all. On SQLite a write is already atomic (a savepoint of the group
    // commit); PostgreSQL runs its writes statement by statement, so this one takes a transaction.
    const outbox = this.withEvents(work, now, options);
    return this.driver.run(this.kind === 'postgres' ? 'transaction' : 'write', outbox);
  }

  /** The update, then (when it was applied) the subscriptions' events and the documents to keep. */
  private *withEvents<T extends ClaimedCheck>(
    update: Work<T | null>,
    now: number,
    options: UpdateOptions,
  ): Work<T | null> {
    const updated = yield* update;
    if (!updated) return null;
    if (options.final) yield* this.recording(updated, now);
    if (options.evidence) yield* schedulingEvidence(updated, options.evidence, now);
    return updated;
  }

  /** The events of a check's first final version, for the tenant's matching subscriptions. */
  private *recording(updated: ClaimedCheck, now: number): Work<number> {
    return yield* recordEvents(
      this.dialect,
      ELIGIBILITY_FINAL_TOPIC,
      {
        tenantId: updated.tenantId,
        checkId: updated.id,
        patientKey: updated.patientKey,
        outcome: updated.outcome,
        cerVersion: updated.version,
      },
      now,
    );
  }

  async release(id: string, owner: string): Promise<void> {
    const sql = 'UPDATE checks SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2';
    await this.driver.run('write', one(sql, [id, owner]));
  }

  async releaseAll(owner: string): Promise<void> {
    // The owner's leases carry claim tokens `owner:round`.
    await this.rows(
      `UPDATE checks SET lease_owner = NULL, lease_until = NULL
       WHERE lease_owner = $1 OR substr(lease_owner, 1, length($1) + 1) = $1 || ':'`,
      [owner],
    );
  }

  async stopAsyncTracking(tenantId: string, id: string): Promise<void> {
    await this.rows('UPDATE checks SET async_stopped = TRUE WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      id,
    ]);
  }

  search(
    tenantId: string,
    filters: SearchFilters,
    page: SearchPage,
  ): Promise<{ total: number | undefined; checks: Check[] }> {
    return this.driver.run('snapshot', this.searching(tenantId, filters, page));
  }

  async findReusable(tenantId: string, reuseKey: string, answeredSince: number): Promise<Check | null> {
    // checks_reuse_idx (migration 8): the tenant's rows of this key, newest answer first. SQLite
    // is told the index: without statistics it would take checks_purge_idx and walk every done
    // row of the window (a 500-entry batch then slowed with each batch stored before it).
    const [row] = await this.rows(
      `SELECT * FROM checks${this.dialect.indexedBy('checks_reuse_idx')} WHERE tenant_id = $1 AND reuse_key = $2 AND updated_at >= $3
         AND state = 'done'
       ORDER BY updated_at DESC, id DESC LIMIT 1`,
      [tenantId, reuseKey, answeredSince],
    );
    return row ? this.toCheck(row) : null;
  }

  countQueue(tenantId: string): Promise<{ waiting: number; inFlight: number }> {
    return this.driver.run('single', countingQueue(tenantId));
  }

  countQueueByClass(tenantId: string): Promise<QueueCounts> {
    return this.driver.run('single', countingQueueByClass(tenantId));
  }

  countWaitingByClass(): Promise<Record<QueueClass, number>> {
    return this.driver.run('single', countingWaitingByClass());
  }

  countAhead(tenantId: string, place: QueuePlace, createdAt: number): Promise<number> {
    return this.driver.run('single', countingAhead(this.dialect, tenantId, place, createdAt));
  }

  async insertBatch(batch: Batch): Promise<void> {
    await this.driver.run(
      'write',
      one(
        `INSERT INTO batches (id, tenant_id, entries, created_at) VALUES ($1, $2, ${this.dialect.json('$3')}, $4)`,
        [batch.id, batch.tenantId, JSON.stringify(batch.entries), batch.createdAt],
      ),
    );
  }

  async getBatch(tenantId: string, id: string): Promise<Batch | null> {
    const [row] = await this.rows('SELECT * FROM batches WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
    if (!row) return null;
    // Written only by insertBatch from a typed value.
    const entries = this.dialect.readJson(row.entries) as BatchEntry[];
    return {
      id: text(row, 'id'),
      tenantId: text(row, 'tenant_id'),
      entries,
      createdAt: int(row, 'created_at'),
    };
  }

  async getGuard(tenantId: string, payerCode: string): Promise<Guard | null> {
    // Compared as guardPayer() writes them, so rows stored before it (as the client spelled the
    // code) still count; a credentials guard first.
    const [row] = await this.rows(
      `SELECT * FROM payer_guards WHERE tenant_id = $1 AND UPPER(TRIM(payer_code)) = UPPER(TRIM($2))
       ORDER BY (kind = 'credentials') DESC LIMIT 1`,
      [tenantId, payerCode],
    );
    return row ? rowToGuard(row) : null;
  }

  async putGuard(guard: Guard): Promise<void> {
    await this.rows(
      `INSERT INTO payer_guards (tenant_id, payer_code, kind, until_at, reason, opened_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (tenant_id, payer_code) DO UPDATE SET
         kind = excluded.kind, until_at = excluded.until_at,
         reason = excluded.reason, opened_at = excluded.opened_at
       -- A credentials guard (open until an operator resets it) is never turned into a timed one.
       WHERE payer_guards.kind <> 'credentials' OR excluded.kind = 'credentials'`,
      [guard.tenantId, guard.payerCode, guard.kind, guard.until, guard.reason, guard.openedAt],
    );
  }

  async deleteGuard(tenantId: string, payerCode: string): Promise<boolean> {
    const sql = 'DELETE FROM payer_guards WHERE tenant_id = $1 AND UPPER(TRIM(payer_code)) = UPPER(TRIM($2))';
    return (await this.driver.run('single', one(sql, [tenantId, payerCode]))).changed > 0;
  }

  async listGuards(): Promise<Guard[]> {
    return (await this.rows('SELECT * FROM payer_guards ORDER BY tenant_id, payer_code')).map(rowToGuard);
  }

  async getPayerDurations(payerCode: string): Promise<PayerDurations | null> {
    const rows = await this.rows(
      'SELECT phase, samples, mean_log, var_log FROM payer_durations WHERE payer_code = $1',
      [guardPayer(payerCode)],
    );
    return rowsToPayerDurations(rows);
  }

  async recordPayerDurations(payerCode: string, durations: TaskDurations, now: number): Promise<void> {
    const payer = guardPayer(payerCode);
    const samples: Array<[string, number]> = [];
    if (durations.preExtractMs !== null) samples.push(['pre_extract', durations.preExtractMs]);
    if (durations.extractMs !== null) samples.push(['extract', durations.extractMs]);
    if (samples.length === 0) return;
    // An exponentially weighted mean and variance of ln(ms), one statement per phase (the
    // right-hand sides read the stored row, so replicas adding at once lose nothing): a plain
    // mean over a payer's first DURATION_WINDOW tasks, then recent tasks weigh more, so a payer
    // whose portal slows down is followed.
    const w = `(CASE WHEN payer_durations.samples + 1 < ${DURATION_WINDOW}
      THEN 1.0 / (payer_durations.samples + 1) ELSE ${1 / DURATION_WINDOW} END)`;
    const d = '(excluded.mean_log - payer_durations.mean_log)';
    const sql = `INSERT INTO payer_durations (payer_code, phase, samples, mean_log, var_log, updated_at)
       VALUES ($1, $2, 1, $3, 0, $4)
       ON CONFLICT (payer_code, phase) DO UPDATE SET
         samples = payer_durations.samples + 1,
         mean_log = payer_durations.mean_log + ${w} * ${d},
         var_log = (1 - ${w}) * (payer_durations.var_log + ${w} * ${d} * ${d}),
         updated_at = excluded.updated_at`;
    await this.driver.run(
      'write',
      (function* (): Work<void> {
        for (const [phase, ms] of samples) yield* one(sql, [payer, phase, Math.log(Math.max(1, ms)), now]);
      })(),
    );
  }

  async listOverdue(now: number): Promise<Check[]> {
    const rows = await this.rows(
      `SELECT * FROM checks WHERE state <> 'done' AND deadline_at < $1 ORDER BY deadline_at, id LIMIT $2`,
      [now, OVERDUE_LIMIT],
    );
    return rows.map(this.toCheck);
  }

  async countByState(): Promise<
    Array<{ tenantId: string; state: Check['state']; outcome: Check['outcome']; count: number }>
  > {
    const rows = await this.rows(
      `SELECT tenant_id, state, outcome, COUNT(*) AS count FROM checks
       GROUP BY tenant_id, state, outcome ORDER BY tenant_id, state, outcome`,
    );
    return rows.map(rowToCount);
  }

  purgeBefore(updatedBefore: number, evidenceBefore = updatedBefore): Promise<number> {
    return this.driver.run('transaction', purging(updatedBefore, Math.min(updatedBefore, evidenceBefore)));
  }

  rememberJti(clientKey: string, jti: string, expiresAt: number, now: number): Promise<boolean> {
    return this.driver.run('write', rememberingJti(clientKey, jti, expiresAt, now));
  }

  insertAuditEvents(rows: readonly AuditRow[]): Promise<void> {
    return this.driver.run('write', insertingAudit(rows));
  }

  searchAuditEvents(tenantId: string, filters: AuditFilters, count: number): Promise<AuditRow[]> {
    return this.driver.run('single', searchingAudit(tenantId, filters, count));
  }

  purgeAuditBefore(recordedBefore: number): Promise<number> {
    return this.driver.run('single', purgingAudit(recordedBefore));
  }

  // ---- the work of each call --------------------------------------------------------------

  private rows(sql: string, params: readonly unknown[] = []): Promise<Row[]> {
    return this.driver.run('single', query(sql, params));
  }

  private *inserting(check: NewCheck): Work<{ check: Check; created: boolean }> {
    const params = new Params();
    const values = insertValues(check);
    const placeholders = CHECK_COLUMNS.map((column) => this.bind(params, column, values[column]));
    // The conflict target is the partial unique index, so null keys never collide and a
    // repeated key writes nothing.
    const [inserted] = yield* query(
      `INSERT INTO checks (${CHECK_COLUMNS.join(', ')}) VALUES (${placeholders.join(', ')})
       ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING *`,
      params.values,
    );
    if (inserted) {
      const created = this.toCheck(inserted);
      if (isAnswered(created)) yield* this.recording(created, created.createdAt);
      return { check: created, created: true };
    }
    // The conflicting insert has committed (PostgreSQL's ON CONFLICT waited for it), so this sees it.
    const [existing] = yield* query('SELECT * FROM checks WHERE tenant_id = $1 AND idempotency_key = $2', [
      check.tenantId,
      check.idempotencyKey,
    ]);
    if (!existing) throw new Error(`check ${check.id} was neither inserted nor found`);
    return { check: this.toCheck(existing), created: false };
  }

  private *updating<T extends ClaimedCheck>(
    id: string,
    owner: string,
    patch: CheckPatch,
    now: number,
    base: T | undefined,
    release: boolean,
  ): Work<T | Check | null> {
    // The version as stored: a new CER is stamped with the next one.
    let version = base?.version;
    if (patch.cer && version === undefined) {
      const [row] = yield* query('SELECT version FROM checks WHERE id = $1 AND lease_owner = $2', [
        id,
        owner,
      ]);
      if (!row) return null;
      version = int(row, 'version');
    }
    const params = new Params();
    const sets: string[] = [];
    for (const [key, column] of Object.entries(PATCH_COLUMNS) as Array<
      [keyof typeof PATCH_COLUMNS, CheckColumn]
    >) {
      const value: unknown = patch[key];
      if (value !== undefined) sets.push(`${column} = ${this.bind(params, column, value)}`);
    }
    if (release) sets.push('lease_owner = NULL', 'lease_until = NULL');
    if (patch.cer && version !== undefined) {
      sets.push(
        `cer = ${this.bind(params, 'cer', stampCer(patch.cer, version + 1, now))}`,
        `version = ${params.add(version + 1)}`,
        `updated_at = ${params.add(now)}`,
      );
    }
    // An empty patch still answers whether the claim is held. The holder of the latest claim may
    // write even after its lease ran out, as long as nobody claimed the check since (a claim
    // replaces lease_owner with its own token); the version guard makes `base` the row as stored.
    if (sets.length === 0) sets.push('id = id');
    const where = [`id = ${params.add(id)}`, `lease_owner = ${params.add(owner)}`];
    if (version !== undefined) where.push(`version = ${params.add(version)}`);
    const result = yield {
      sql: `UPDATE checks SET ${sets.join(', ')} WHERE ${where.join(' AND ')}${base ? '' : ' RETURNING *'}`,
      params: params.values,
    };
    if (base) return result.changed === 1 ? patched(base, patch, base.version + 1, now, release) : null;
    const [row] = result.rows;
    return row ? this.toCheck(row) : null;
  }

  private *searching(
    tenantId: string,
    filters: SearchFilters,
    page: SearchPage,
  ): Work<{ total: number | undefined; checks: Check[] }> {
    const params = new Params();
    const where = [`tenant_id = ${params.add(tenantId)}`];
    // Each repetition of a parameter is ANDed, its values ORed (search.html#combining).
    const anyOf = <T>(groups: T[][] | undefined, one: (value: T) => string): void => {
      for (const group of groups ?? []) where.push(`(${group.map(one).join(' OR ')})`);
    };
    anyOf(filters.ids, (id) => `id = ${params.add(id)}`);
    anyOf(filters.requests, (id) => {
      const value = params.add(id);
      return `(id = ${value} OR id IN (SELECT recheck_id FROM appointments WHERE id = ${value}))`;
    });
    anyOf(filters.patient, (token) => this.token(params, token, 'patient_key', 'patient_value'));
    anyOf(filters.requestIdentifier, (token) =>
      this.token(params, token, 'idempotency_key', 'request_identifier_value'),
    );
    if (filters.ownRequestsOnly)
      where.push('NOT EXISTS (SELECT 1 FROM appointments a WHERE a.recheck_id = checks.id)');
    anyOf(filters.insurer, (code) => `UPPER(payer_code) = UPPER(${params.add(code)})`);
    anyOf(filters.outcome, (outcome) => `outcome = ${params.add(outcome)}`);
    for (const range of filters.created ?? []) where.push(rangeCondition(params, 'created_at', range));
    for (const range of filters.lastUpdated ?? []) where.push(rangeCondition(params, 'updated_at', range));
    const filtered = `FROM checks WHERE ${where.join(' AND ')}`;
    const whereValues = [...params.values];
    const sort = page.sort?.length ? page.sort : [{ field: 'lastUpdated', descending: true } as const];
    // With an equality on a selective indexed column (ids, patient, request identifier), the
    // sort keys are written as expressions (+column), which no index orders: SQLite, which has no
    // statistics, would otherwise walk all of the tenant's rows in time order through
    // checks_updated_idx rather than find the few matching ones and sort them
    // (test/store/search-plan.test.ts).
    const selective = Boolean(
      filters.ids ?? filters.requests ?? filters.patient ?? filters.requestIdentifier,
    );
    const order = sort.map((key) => {
      const column = key.field === 'created' ? 'created_at' : 'updated_at';
      return `${selective ? '+' : ''}${column} ${key.descending ? 'DESC' : 'ASC'}`;
    });
    // The id as the last key, so the order is total (paging by offset: see CheckStore.search).
    order.push(`id ${sort[0]!.descending ? 'DESC' : 'ASC'}`);
    const counted = page.total !== false;
    // Where the total rides along as a window count (one round trip), a page past the end has no
    // row to carry it: counted then.
    const rows = yield* query(
      `SELECT *${counted ? this.dialect.pageTotal : ''} ${filtered} ORDER BY ${order.join(', ')}
       LIMIT ${params.add(Math.max(0, page.count))} OFFSET ${params.add(Math.max(0, page.offset))}`,
      params.values,
    );
    const checks = rows.map(this.toCheck);
    if (!counted) return { total: undefined, checks };
    if (rows[0]?.total_count !== undefined) return { total: int(rows[0], 'total_count'), checks };
    const [total] = yield* query(`SELECT COUNT(*) AS count ${filtered}`, whereValues);
    return { total: total ? int(total, 'count') : 0, checks };
  }

  /**
   * One token value on an identifier stored as `system|value` (keyColumn, `|` unescaped) and as its
   * bare value (valueColumn) (search.html#token): `value` is an indexed equality on the bare value;
   * `system|value` and `|value` the key, and the bare value too, since a `|` inside the system or
   * the value makes the key ambiguous (system `urn:x|b`, value `c` and system `urn:x`, value `b|c`
   * share `urn:x|b|c`); `system|` the key's prefix (no LIKE on user input) and a key exactly as
   * long as the prefix and the bare value, so the prefix is the whole system. Lengths are counted
   * in code points in JS, as SQL's substr and length count characters.
   */
  private token(params: Params, token: TokenValue, keyColumn: string, valueColumn: string): string {
    if (token.value === undefined) {
      const prefix = `${token.system ?? ''}|`;
      const length = [...prefix].length;
      return (
        `(substr(${keyColumn}, 1, ${length}) = ${params.add(prefix)}` +
        ` AND length(${keyColumn}) = ${length} + length(${valueColumn}))`
      );
    }
    if (token.system === undefined) return `${valueColumn} = ${params.add(token.value)}`;
    return (
      `(${keyColumn} = ${params.add(`${token.system}|${token.value}`)}` +
      ` AND ${valueColumn} = ${params.add(token.value)})`
    );
  }

  /** A value as a parameter of its column: JSON as JSON text, a boolean as the database takes it. */
  private bind(params: Params, column: CheckColumn, value: unknown): string {
    if (JSON_COLUMNS.has(column))
      return value === null ? params.add(null) : this.dialect.json(params.add(JSON.stringify(value)));
    return params.add(typeof value === 'boolean' ? this.dialect.bool(value) : value);
  }
}
