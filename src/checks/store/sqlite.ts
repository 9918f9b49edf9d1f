/**
 * The SQLite driver of the check store (the embedded default, one replica). better-sqlite3 is
 * synchronous, so a piece of store work runs to completion without interleaving inside this
 * process; transactions that claim are IMMEDIATE so that a second process on the same file (an
 * admin command, a second store instance) waits on busy_timeout instead of claiming the same rows.
 */
import Database from 'better-sqlite3';
import type { Row } from './rows.js';
import type { Dialect, Mode, Result, SqlDriver, Statement, Work } from './driver.js';
import type { StoreErrorKind } from './check-store.js';

const SQLITE: Dialect = {
  types: { kind: 'sqlite', json: 'TEXT', bool: 'INTEGER', false: '0', bigint: 'INTEGER', bytes: 'BLOB' },
  json: (placeholder) => placeholder,
  readJson: (value) => (typeof value === 'string' ? (JSON.parse(value) as unknown) : value),
  jsonText: (column) => column,
  bool: (value) => (value ? 1 : 0),
  // One writer at a time: the IMMEDIATE transaction of a claim is its lock.
  lockRows: '',
  lockTenant: () => undefined,
  // Without ANALYZE statistics the planner misjudges the claim's and the version probe's indexes.
  indexedBy: (index) => ` INDEXED BY ${index}`,
  // One row a statement: SQLite updates a row found by its key in one pass and returns it from
  // memory, where an UPDATE of many rows with RETURNING first copies every whole row (40-55 KB of
  // JSON) into a temporary table (a claim a fifth slower). A list of one is its one id.
  claimRows: { batch: 1, match: (placeholder) => `= ${placeholder}`, bind: (ids) => ids[0] ?? null },
  // Two statements in one read transaction cost less than a window over every matching row.
  pageTotal: '',
  migrationStart: () => [],
  tableExists: (table) => ({
    sql: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1",
    params: [table],
  }),
};

export interface SqliteDriverOptions {
  /** How long a statement waits for another connection's write lock before failing. */
  busyTimeoutMs?: number;
}

export class SqliteDriver implements SqlDriver {
  readonly dialect = SQLITE;
  private readonly db: Database.Database;
  /**
   * Runs work in a transaction, or in a savepoint inside one. Made once: making a better-sqlite3
   * transaction function costs more (about 3.5 microseconds) than running a short one.
   */
  private readonly transaction: Database.Transaction<(work: Work<unknown>) => unknown>;

  /** `path` is a file path or `:memory:`; the parent directory must exist. */
  constructor(path: string, options: SqliteDriverOptions = {}) {
    this.db = new Database(path);
    // WAL: readers (GET, search) never block the scheduler's writes, and the reverse.
    this.db.pragma('journal_mode = WAL');
    this.db.pragma(`busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
    this.db.pragma('foreign_keys = ON');
    // NORMAL is durable across application crashes in WAL mode; only an OS crash may lose the last commits.
    this.db.pragma('synchronous = NORMAL');
    this.transaction = this.db.transaction((work: Work<unknown>) => this.drive(work));
  }

  run<T>(mode: Mode, work: Work<T>): Promise<T> {
    switch (mode) {
      case 'single':
        return settle(() => this.drive(work));
      case 'write':
        // A savepoint inside the batch: the write is atomic, and fails alone.
        return this.write(() => this.transaction(work) as T);
      case 'snapshot':
        return settle(() => this.transaction(work) as T);
      case 'transaction':
        return settle(() => this.transaction.immediate(work) as T);
    }
  }

  classify(error: unknown): StoreErrorKind | undefined {
    return classifySqliteError(error);
  }

  close(): Promise<void> {
    return settle(() => {
      this.flush(); // writes already accepted are committed, not dropped
      if (this.db.open) this.db.close();
    });
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

  /** Runs work to its end, each statement as it is yielded. */
  private drive<T>(work: Work<T>): T {
    let step = work.next();
    while (!step.done) step = work.next(this.execute(step.value));
    return step.value;
  }

  private execute({ sql, params }: Statement): Result {
    const { statement, named } = this.statement(sql);
    const bound = named ? byNumber(params) : params;
    if (!statement.reader) return { rows: [], changed: statement.run(bound).changes };
    const rows = statement.all(bound).filter(isRow);
    return { rows, changed: rows.length };
  }

  /** Prepared statements, compiled once per SQL text (better-sqlite3 compiles on every prepare). */
  private readonly statements = new Map<string, { statement: Database.Statement; named: boolean }>();

  /**
   * $1, $2, ... in the order of their parameters, each once, become SQLite's `?` (bound by
   * position); in any other order they stay named parameters to SQLite, bound by number.
   */
  private statement(sql: string): { statement: Database.Statement; named: boolean } {
    let prepared = this.statements.get(sql);
    if (!prepared) {
      const numbers = [...sql.matchAll(/\$(\d+)/g)].map((match) => Number(match[1]));
      const named = numbers.some((n, index) => n !== index + 1);
      prepared = { statement: this.db.prepare(named ? sql : sql.replace(/\$\d+/g, '?')), named };
      this.statements.set(sql, prepared);
    }
    return prepared;
  }
}

function byNumber(params: readonly unknown[]): Record<number, unknown> {
  const named: Record<number, unknown> = {};
  params.forEach((value, index) => {
    named[index + 1] = value;
  });
  return named;
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

/**
 * Runs synchronous database work as a promise, so a thrown error becomes a rejection
 * (callers `await` the store and never see a synchronous throw).
 */
function settle<T>(work: () => T): Promise<T> {
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(asError(error));
  }
}

/**
 * Which SQLite errors mean "the store cannot be used now" (https://www.sqlite.org/rescode.html),
 * by better-sqlite3's `code` (the extended result code's name, e.g. SQLITE_IOERR_WRITE).
 */
export function classifySqliteError(error: unknown): StoreErrorKind | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  if (typeof code !== 'string') return undefined;
  if (code === 'SQLITE_FULL') return 'disk-full';
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN')) return 'io';
  if (code.startsWith('SQLITE_READONLY')) return 'read-only';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'busy';
  return undefined;
}
