/**
 * The PostgreSQL driver of the check store, for several replicas sharing one database.
 * Replicas never claim the same check (FOR UPDATE SKIP LOCKED) and never together exceed a
 * tenant's maxInFlight: moving a check out of `waiting` happens under a per-tenant advisory
 * lock held to the end of the claim transaction, so the slot count it reads cannot go stale.
 */
import pg from 'pg';
import type { PoolClient, QueryResultRow } from 'pg';
import type { Dialect, Mode, SqlDriver, Work } from './driver.js';
import type { StoreErrorKind } from './check-store.js';

/** First key of the two-key advisory locks this store takes, so they cannot meet other users' locks. */
const LOCK_CLASS = 0x43_48_4b; // "CHK"
const MIGRATION_LOCK = 0;

/** Plain identifiers only: the schema name goes into SQL text, where it cannot be a parameter. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function postgresDialect(schema: string | undefined): Dialect {
  return {
    types: {
      kind: 'postgres',
      json: 'JSONB',
      bool: 'BOOLEAN',
      false: 'FALSE',
      bigint: 'BIGINT',
      bytes: 'BYTEA',
    },
    // Bound as JSON text: pg would turn a JS array into a PostgreSQL array, not JSON.
    json: (placeholder) => `${placeholder}::jsonb`,
    // pg parses jsonb itself.
    readJson: (value) => value,
    jsonText: (column) => `${column}::text`,
    bool: (value) => value,
    lockRows: ' FOR UPDATE SKIP LOCKED',
    // A fresh snapshot (READ COMMITTED) is taken by each statement after the lock.
    lockTenant: (tenantId) => ({
      sql: 'SELECT pg_advisory_xact_lock($1, hashtext($2))',
      params: [LOCK_CLASS, tenantId],
    }),
    indexedBy: () => '',
    // Every row in one statement: one round trip.
    claimRows: {
      batch: Infinity,
      match: (placeholder) => `= ANY(${placeholder}::text[])`,
      bind: (ids) => ids,
    },
    // One round trip for the page and its total, from one snapshot.
    pageTotal: ', COUNT(*) OVER () AS total_count',
    // Replicas starting together apply each migration once.
    migrationStart: () => [
      { sql: 'SELECT pg_advisory_xact_lock($1, $2)', params: [LOCK_CLASS, MIGRATION_LOCK] },
      ...(schema ? [{ sql: `CREATE SCHEMA IF NOT EXISTS "${schema}"`, params: [] }] : []),
    ],
    tableExists: (table) => ({ sql: 'SELECT 1 WHERE to_regclass($1) IS NOT NULL', params: [table] }),
  };
}

export interface PostgresDriverOptions {
  /** Schema for the tables (search_path); created by migrate. Tests use one per run. */
  schema?: string;
  /** Pool size per replica. */
  max?: number;
  /**
   * How long a statement waits for a connection before it fails (the store counts as unavailable):
   * with the server down, a request gets its 503 this soon instead of waiting for ever.
   */
  connectTimeoutMs?: number;
}

/** Default of connectTimeoutMs: a request still has its 503 well within 10 s. */
const CONNECT_TIMEOUT_MS = 3_000;

export class PostgresDriver implements SqlDriver {
  readonly dialect: Dialect;
  private readonly pool: pg.Pool;

  constructor(connectionString: string, options: PostgresDriverOptions = {}) {
    if (options.schema !== undefined && !IDENTIFIER.test(options.schema)) {
      throw new Error(`invalid PostgreSQL schema name ${JSON.stringify(options.schema)}`);
    }
    this.dialect = postgresDialect(options.schema);
    this.pool = new pg.Pool({
      connectionString,
      max: options.max ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      // A server that vanished without closing the connection (a failover, a cut network) is found
      // by TCP keepalive instead of a query that waits for ever.
      keepAlive: true,
      ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    });
    // A connection that breaks emits 'error' on its client, and an 'error' event nobody listens
    // to ends the process. pg-pool listens only while the client is idle in the pool; a client
    // checked out for a transaction has no listener of the pool's. So every client gets one of its
    // own for its whole life. The statement it was running fails with the same error (and that
    // failure is what the caller sees, as StoreUnavailableError); the pool drops the client.
    this.pool.on('connect', (client) => {
      client.on('error', () => undefined);
    });
    // An idle client that loses its connection emits here too.
    this.pool.on('error', () => undefined);
  }

  /** Statements on the pool as they come, except `transaction`: one transaction on one connection. */
  async run<T>(mode: Mode, work: Work<T>): Promise<T> {
    if (mode !== 'transaction') return drive(this.pool, work);
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await drive(client, work);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      // A client whose connection broke is destroyed on release, not put back in the pool.
      if (this.classify(error) !== undefined)
        broken = error instanceof Error ? error : new Error(String(error));
      else await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release(broken);
    }
  }

  classify(error: unknown): StoreErrorKind | undefined {
    return classifyPostgresError(error);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** Runs work to its end, each statement as it is yielded. */
async function drive<T>(db: pg.Pool | PoolClient, work: Work<T>): Promise<T> {
  let step = work.next();
  while (!step.done) {
    const { sql, params } = step.value;
    const result = await db.query<QueryResultRow>(sql, params.length > 0 ? (params as unknown[]) : undefined);
    step = work.next({ rows: result.rows, changed: result.rowCount ?? 0 });
  }
  return step.value;
}

/** Node's socket errors that mean the connection is gone or was never made. */
const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * The messages pg and pg-pool give, without a code, when a connection ends or cannot be had
 * (pg/lib/client.js, pg-pool/index.js).
 */
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Connection terminated due to connection timeout',
  'Cannot use a pool after calling end on the pool',
];

/**
 * Which errors mean "the database cannot be used now", by SQLSTATE
 * (https://www.postgresql.org/docs/current/errcodes-appendix.html) or by the socket's errno.
 */
export function classifyPostgresError(error: unknown): StoreErrorKind | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (code.startsWith('08')) return 'connection'; // connection exception
    if (code === '57P01' || code === '57P02' || code === '57P03') return 'shutdown'; // admin/crash shutdown, cannot connect now
    if (code === '53100') return 'disk-full';
    if (code.startsWith('53')) return 'resources'; // insufficient resources
    if (code === '25006') return 'read-only'; // read_only_sql_transaction: a standby
    if (code.startsWith('58')) return 'io'; // system error (I/O)
    if (CONNECTION_ERRNOS.has(code)) return 'connection';
  }
  if (typeof message === 'string' && CONNECTION_MESSAGES.some((text) => message.startsWith(text))) {
    return 'connection';
  }
  // An AggregateError of a connect to several addresses (localhost: ::1 and 127.0.0.1).
  const errors = (error as { errors?: unknown }).errors;
  if (Array.isArray(errors) && errors.length > 0) {
    const kinds = errors.map(classifyPostgresError);
    if (kinds.every((kind) => kind !== undefined)) return kinds[0];
  }
  return undefined;
}
