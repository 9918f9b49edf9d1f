/**
 * SQLite check store (the embedded default, one replica). better-sqlite3 is synchronous, so
 * every method runs to completion without interleaving inside this process; transactions are
 * IMMEDIATE so that a second process on the same file (an admin command, a second store
 * instance) waits on busy_timeout instead of claiming the same rows.
 */
import Database from 'better-sqlite3';
import type {
  CheckPatch,
  CheckStore,
  Check,
  ClaimOptions,
  UpdateOptions,
  Guard,
  NewCheck,
  SearchFilters,
  StoredCer,
} from './check-store.js';
import {
  OVERDUE_LIMIT,
  Params,
  SEARCH_ORDER,
  SLOT_STATES_SQL,
  dueCondition,
  insertSql,
  int,
  patchAssignments,
  CHECK_INDEXES_DDL,
  patched,
  planClaim,
  rowToStoredCer,
  rowToCheck,
  rowToCount,
  rowToGuard,
  searchWhere,
  stampCer,
  text,
} from './rows.js';
import type { ClaimCandidate, Dialect, Row } from './rows.js';

const dialect: Dialect = {
  placeholder: () => '?',
  jsonParam: (value) => JSON.stringify(value),
  jsonSql: (placeholder) => placeholder,
  readJson: (value) => (typeof value === 'string' ? (JSON.parse(value) as unknown) : value),
  boolParam: (value) => (value ? 1 : 0),
};

/** Schema versions, applied in order once each (recorded in store_migrations). */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE checks (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    idempotency_key TEXT,
    payer_code TEXT NOT NULL,
    is_search_all INTEGER NOT NULL,
    patient_key TEXT,
    patient_value TEXT,
    request TEXT NOT NULL,
    upstream_request TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('waiting', 'starting', 'creating', 'polling', 'done')),
    upstream_task_id TEXT,
    upstream_status TEXT,
    tasks_created INTEGER NOT NULL,
    poll_failures INTEGER NOT NULL,
    next_run_at INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    envelope TEXT,
    cer TEXT NOT NULL,
    version INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    async_stopped INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  ${CHECK_INDEXES_DDL}
  CREATE TABLE payer_guards (
    tenant_id TEXT NOT NULL,
    payer_code TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('credentials', 'backoff')),
    until_at INTEGER,
    reason TEXT NOT NULL,
    opened_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, payer_code)
  );
  `,
  // 2: the retention purge (done checks by age) without a full scan.
  `CREATE INDEX checks_purge_idx ON checks (state, updated_at);`,
  // 3: the claim query answered from the index alone (13 ms -> 0.25 ms on 10,000 rows, bench/README.md).
  `CREATE INDEX checks_claim_cover_idx ON checks (state, next_run_at, lease_until, created_at, id);`,
  // 4: the read path's version probe (getCerVersion) from the index alone. version and updated_at
  // come after the JSON columns, so reading them from the table walks a 40-55 KB row's overflow
  // pages on every GET of a CER.
  `CREATE INDEX checks_version_idx ON checks (tenant_id, id, version, updated_at);`,
  // 5: fewer indexes to keep up on every claim, release and poll write: checks_claim_idx is a
  // prefix of checks_claim_cover_idx, and no query can use checks_lease_owner_idx (releaseAll
  // matches claim tokens by prefix; update finds the row by its primary key).
  `DROP INDEX IF EXISTS checks_claim_idx; DROP INDEX IF EXISTS checks_lease_owner_idx;`,
];

export interface SqliteStoreOptions {
  /** How long a statement waits for another connection's write lock before failing. */
  busyTimeoutMs?: number;
}

export class SqliteStore implements CheckStore {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;

  /** `path` is a file path or `:memory:`; the parent directory must exist. */
  constructor(path: string, options: SqliteStoreOptions = {}) {
    this.db = new Database(path);
    // WAL: readers (GET, search) never block the scheduler's writes, and the reverse.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
    this.db.pragma('foreign_keys = ON');
    // NORMAL is durable across application crashes in WAL mode; only an OS crash may lose the last commits.
    this.db.pragma('synchronous = NORMAL');
  }

  migrate(): Promise<void> {
    return run(() => {
      this.db
        .transaction(() => {
          this.db.exec(
            'CREATE TABLE IF NOT EXISTS store_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)',
          );
          const row = this.row('SELECT COALESCE(MAX(version), 0) AS version FROM store_migrations', []);
          const applied = row ? int(row, 'version') : 0;
          MIGRATIONS.forEach((sql, index) => {
            const version = index + 1;
            if (version <= applied) return;
            this.db.exec(sql);
            this.statement('INSERT INTO store_migrations (version, applied_at) VALUES (?, ?)').run(
              version,
              Date.now(),
            );
          });
        })
        .immediate();
    });
  }

  ping(): Promise<void> {
    return run(() => {
      this.statement('SELECT 1').get();
    });
  }

  close(): Promise<void> {
    return run(() => {
      this.flush(); // writes already accepted are committed, not dropped
      if (this.db.open) this.db.close();
    });
  }

  insert(check: NewCheck): Promise<{ check: Check; created: boolean }> {
    return this.write(() =>
      this.db
        .transaction(() => {
          const { sql, params } = insertSql(check, dialect);
          const inserted = this.row(sql, params);
          if (inserted) return { check: rowToCheck(inserted, dialect), created: true };
          const existing = this.row('SELECT * FROM checks WHERE tenant_id = ? AND idempotency_key = ?', [
            check.tenantId,
            check.idempotencyKey,
          ]);
          if (!existing) throw new Error(`check ${check.id} was neither inserted nor found`);
          return { check: rowToCheck(existing, dialect), created: false };
        })
        .immediate(),
    );
  }

  get(tenantId: string, id: string): Promise<Check | null> {
    return run(() => {
      const row = this.row('SELECT * FROM checks WHERE tenant_id = ? AND id = ?', [tenantId, id]);
      return row ? rowToCheck(row, dialect) : null;
    });
  }

  getCerJson(tenantId: string, id: string): Promise<StoredCer | null> {
    return run(() => {
      const row = this.row('SELECT cer, version, updated_at FROM checks WHERE tenant_id = ? AND id = ?', [
        tenantId,
        id,
      ]);
      return row ? rowToStoredCer(row) : null;
    });
  }

  getCerVersion(tenantId: string, id: string): Promise<Omit<StoredCer, 'json'> | null> {
    return run(() => {
      // INDEXED BY: the planner would take the primary key and then read the row (migration 4).
      const row = this.row(
        'SELECT version, updated_at FROM checks INDEXED BY checks_version_idx WHERE tenant_id = ? AND id = ?',
        [tenantId, id],
      );
      return row ? { version: Number(row.version), updatedAt: Number(row.updated_at) } : null;
    });
  }

  claimDue(options: ClaimOptions): Promise<Check[]> {
    return run(() =>
      this.db
        .transaction(() => {
          const { owner, now, leaseMs, limit } = options;
          if (limit <= 0) return [];
          const due = dueCondition('@now');
          const candidates: ClaimCandidate[] = this.rows(
            `SELECT id, next_run_at, created_at FROM checks
             WHERE state IN ${SLOT_STATES_SQL} AND ${due}
             ORDER BY next_run_at, created_at, id LIMIT @limit`,
            { now, limit },
          ).map((row) => candidate(row, false));
          const tenants = this.rows(
            `SELECT DISTINCT tenant_id FROM checks WHERE state = 'waiting' AND ${due} ORDER BY tenant_id`,
            { now },
          ).map((row) => text(row, 'tenant_id'));
          for (const tenantId of tenants) {
            const busy = this.row(
              `SELECT COUNT(*) AS count FROM checks WHERE tenant_id = ? AND state IN ${SLOT_STATES_SQL}`,
              [tenantId],
            );
            const free = Math.min(options.maxInFlight(tenantId) - (busy ? int(busy, 'count') : 0), limit);
            if (free <= 0) continue;
            // INDEXED BY: in arrival order within the tenant, so LIMIT stops early; the planner
            // would otherwise walk every due waiting row of every tenant (no ANALYZE statistics).
            const waiting = this.rows(
              `SELECT id, next_run_at, created_at FROM checks INDEXED BY checks_tenant_state_idx
               WHERE tenant_id = @tenantId AND state = 'waiting' AND ${due}
               ORDER BY created_at, id LIMIT @free`,
              { tenantId, now, free },
            );
            candidates.push(...waiting.map((row) => candidate(row, true)));
          }
          const claim = this.statement(
            `UPDATE checks SET lease_owner = @owner, lease_until = @until,
               state = CASE WHEN @promote = 1 THEN 'starting' ELSE state END
             WHERE id = @id RETURNING *`,
          );
          return planClaim(candidates, limit).map((c) => {
            const row = claim.get({ owner, until: now + leaseMs, promote: c.promote ? 1 : 0, id: c.id });
            if (!isRow(row)) throw new Error(`claimed check ${c.id} vanished`);
            return rowToCheck(row, dialect);
          });
        })
        .immediate(),
    );
  }

  update(
    id: string,
    owner: string,
    patch: CheckPatch,
    now: number,
    base?: Check,
    options: UpdateOptions = {},
  ): Promise<Check | null> {
    return this.write(() =>
      this.db
        .transaction(() => {
          const params = new Params(dialect);
          const sets = patchAssignments(patch, params, dialect);
          if (options.release) sets.push('lease_owner = NULL', 'lease_until = NULL');
          /** The version after this write; a new CER is stamped with it. */
          const versionAfter = (stored: number): number => {
            if (!patch.cer) return stored;
            sets.push(
              `cer = ${params.json(stampCer(patch.cer, stored + 1, now))}`,
              `version = ${params.add(stored + 1)}`,
              `updated_at = ${params.add(now)}`,
            );
            return stored + 1;
          };
          if (base) {
            // The hot path: one statement. The holder of the latest claim may write even after
            // its lease ran out, as long as nobody claimed the check since (a claim replaces
            // lease_owner with its own token); the version guard makes `base` the row as stored.
            const version = versionAfter(base.version);
            if (sets.length === 0) sets.push('id = id');
            const changed = this.statement(
              `UPDATE checks SET ${sets.join(', ')}
               WHERE id = ${params.add(id)} AND lease_owner = ${params.add(owner)}
                 AND version = ${params.add(base.version)}`,
            ).run(params.values).changes;
            return changed === 1 ? patched(base, patch, version, now, options.release) : null;
          }
          const current = this.row('SELECT version FROM checks WHERE id = ? AND lease_owner = ?', [
            id,
            owner,
          ]);
          if (!current) return null;
          versionAfter(int(current, 'version'));
          const updated = this.row(
            sets.length > 0
              ? `UPDATE checks SET ${sets.join(', ')} WHERE id = ${params.add(id)} RETURNING *`
              : `SELECT * FROM checks WHERE id = ${params.add(id)}`,
            params.values,
          );
          return updated ? rowToCheck(updated, dialect) : null;
        })
        .immediate(),
    );
  }

  release(id: string, owner: string): Promise<void> {
    return this.write(() => {
      this.statement(
        'UPDATE checks SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?',
      ).run(id, owner);
    });
  }

  releaseAll(owner: string): Promise<void> {
    return run(() => {
      // The owner's leases carry claim tokens `owner:round`.
      this.statement(
        `UPDATE checks SET lease_owner = NULL, lease_until = NULL
         WHERE lease_owner = @owner OR substr(lease_owner, 1, length(@owner) + 1) = @owner || ':'`,
      ).run({ owner });
    });
  }

  stopAsyncTracking(tenantId: string, id: string): Promise<void> {
    return run(() => {
      this.statement('UPDATE checks SET async_stopped = 1 WHERE tenant_id = ? AND id = ?').run(tenantId, id);
    });
  }

  search(
    tenantId: string,
    filters: SearchFilters,
    page: { count: number; offset: number },
  ): Promise<{ total: number; checks: Check[] }> {
    return run(() =>
      this.db.transaction(() => {
        // One read transaction, so the total and the page come from the same snapshot.
        const params = new Params(dialect);
        const where = searchWhere(tenantId, filters, params);
        const totalRow = this.row(`SELECT COUNT(*) AS count FROM checks WHERE ${where}`, params.values);
        const rows = this.rows(`SELECT * FROM checks WHERE ${where} ${SEARCH_ORDER} LIMIT ? OFFSET ?`, [
          ...params.values,
          Math.max(0, page.count),
          Math.max(0, page.offset),
        ]);
        return {
          total: totalRow ? int(totalRow, 'count') : 0,
          checks: rows.map((row) => rowToCheck(row, dialect)),
        };
      })(),
    );
  }

  getGuard(tenantId: string, payerCode: string): Promise<Guard | null> {
    return run(() => {
      // Compared as guardPayer() writes them, so rows stored before it (as the client spelled the
      // code) still count; a credentials guard first.
      const row = this.row(
        `SELECT * FROM payer_guards WHERE tenant_id = ? AND UPPER(TRIM(payer_code)) = UPPER(TRIM(?))
         ORDER BY (kind = 'credentials') DESC LIMIT 1`,
        [tenantId, payerCode],
      );
      return row ? rowToGuard(row) : null;
    });
  }

  putGuard(guard: Guard): Promise<void> {
    return run(() => {
      this.statement(
        `INSERT INTO payer_guards (tenant_id, payer_code, kind, until_at, reason, opened_at)
           VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (tenant_id, payer_code) DO UPDATE SET
             kind = excluded.kind, until_at = excluded.until_at,
             reason = excluded.reason, opened_at = excluded.opened_at
           -- A credentials guard (open until an operator resets it) is never turned into a timed one.
           WHERE payer_guards.kind <> 'credentials' OR excluded.kind = 'credentials'`,
      ).run(guard.tenantId, guard.payerCode, guard.kind, guard.until, guard.reason, guard.openedAt);
    });
  }

  deleteGuard(tenantId: string, payerCode: string): Promise<boolean> {
    return run(
      () =>
        this.statement(
          'DELETE FROM payer_guards WHERE tenant_id = ? AND UPPER(TRIM(payer_code)) = UPPER(TRIM(?))',
        ).run(tenantId, payerCode).changes > 0,
    );
  }

  listGuards(): Promise<Guard[]> {
    return run(() =>
      this.rows('SELECT * FROM payer_guards ORDER BY tenant_id, payer_code', []).map(rowToGuard),
    );
  }

  listOverdue(now: number): Promise<Check[]> {
    return run(() =>
      this.rows(
        `SELECT * FROM checks WHERE state <> 'done' AND deadline_at < ? ORDER BY deadline_at, id LIMIT ?`,
        [now, OVERDUE_LIMIT],
      ).map((row) => rowToCheck(row, dialect)),
    );
  }

  countByState(): Promise<
    Array<{ tenantId: string; state: Check['state']; outcome: Check['outcome']; count: number }>
  > {
    return run(() =>
      this.rows(
        `SELECT tenant_id, state, outcome, COUNT(*) AS count FROM checks
         GROUP BY tenant_id, state, outcome ORDER BY tenant_id, state, outcome`,
        [],
      ).map(rowToCount),
    );
  }

  purgeBefore(updatedBefore: number): Promise<number> {
    // Only finished checks: purging an unfinished one would lose a check a client is still waiting for.
    return run(
      () =>
        this.statement(`DELETE FROM checks WHERE state = 'done' AND updated_at < ?`).run(updatedBefore)
          .changes,
    );
  }

  /**
   * Group commit. The scheduler's steps end in small writes (a poll's next time, a lease dropped)
   * and each write transaction of its own pays SQLite's commit: the WAL frames of every page it
   * touched, the claim index's pages again and again (bench/README.md, figure 3). Writes made in
   * the same turn of the event loop are therefore queued and committed in one IMMEDIATE
   * transaction at the end of it (setImmediate). Each write keeps its own atomicity (its
   * transaction becomes a savepoint inside the batch, and a failing one is rolled back alone) and
   * its own answer; a caller's promise settles only after the batch is committed, so nothing is
   * acknowledged before it is durable, and a failed commit fails every write of the batch.
   */
  private queued: QueuedWrite[] = [];
  private flushScheduled = false;

  private write<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queued.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const batch = this.queued;
    this.queued = [];
    if (batch.length === 0) return;
    if (!this.db.open) {
      for (const item of batch) item.reject(new Error('the SQLite store is closed'));
      return;
    }
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: Error }> = [];
    /** The error after which SQLite rolled the whole batch back itself (I/O, full disk). */
    let batchLostTo: Error | undefined;
    try {
      this.db
        .transaction(() => {
          for (const item of batch) {
            if (batchLostTo) {
              // Nothing more runs outside the batch; the commit below fails, and every write with it.
              outcomes.push({ ok: false, error: batchLostTo });
              continue;
            }
            try {
              outcomes.push({ ok: true, value: item.work() });
            } catch (error) {
              outcomes.push({ ok: false, error: asError(error) });
              if (!this.db.inTransaction) batchLostTo = asError(error);
            }
          }
        })
        .immediate();
    } catch (error) {
      // Every write of the batch fails with the cause (SQLITE_FULL, ...), not the failed COMMIT.
      for (const item of batch) item.reject(batchLostTo ?? asError(error));
      return;
    }
    batch.forEach((item, index) => {
      const outcome = outcomes[index];
      if (outcome?.ok) item.resolve(outcome.value);
      else item.reject(outcome?.error ?? new Error('write not run'));
    });
  }

  /** Prepared statements, compiled once per SQL text (better-sqlite3 compiles on every prepare). */
  private readonly statements = new Map<string, Database.Statement>();

  private statement(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  private row(sql: string, params: unknown[] | Record<string, unknown>): Row | undefined {
    const row: unknown = this.statement(sql).get(params);
    if (row === undefined) return undefined;
    if (!isRow(row)) throw new Error('sqlite returned a non-object row');
    return row;
  }

  private rows(sql: string, params: unknown[] | Record<string, unknown>): Row[] {
    const rows: unknown[] = this.statement(sql).all(params);
    return rows.filter(isRow);
  }
}

interface QueuedWrite {
  work: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function isRow(value: unknown): value is Row {
  return typeof value === 'object' && value !== null;
}

function candidate(row: Row, promote: boolean): ClaimCandidate {
  return {
    id: text(row, 'id'),
    nextRunAt: int(row, 'next_run_at'),
    createdAt: int(row, 'created_at'),
    promote,
  };
}

/**
 * Runs synchronous database work as a promise, so a thrown error becomes a rejection
 * (callers `await` the interface and never see a synchronous throw).
 */
function run<T>(work: () => T): Promise<T> {
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(asError(error));
  }
}
