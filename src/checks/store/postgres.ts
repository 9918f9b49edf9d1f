/**
 * The PostgreSQL driver of the check store, for several replicas sharing one database.
 * Replicas never claim the same check (FOR UPDATE SKIP LOCKED) and never together exceed a
 * tenant's maxInFlight: moving a check out of `waiting` happens under a per-tenant advisory
 * lock held to the end of the claim transaction, so the slot count it reads cannot go stale.
 */
import pg from 'pg';
import type { PoolClient, QueryResultRow } from 'pg';
import type { Dialect, Mode, SqlDriver, Work } from './driver.js';

/** First key of the two-key advisory locks this store takes, so they cannot meet other users' locks. */
const LOCK_CLASS = 0x43_48_4b; // "CHK"
const MIGRATION_LOCK = 0;

/** Plain identifiers only: the schema name goes into SQL text, where it cannot be a parameter. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function postgresDialect(schema: string | undefined): Dialect {
  return {
    types: { kind: 'postgres', json: 'JSONB', bool: 'BOOLEAN', false: 'FALSE', bigint: 'BIGINT' },
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
}

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
      ...(options.schema ? { options: `-c search_path=${options.schema}` } : {}),
    });
    // An idle client that loses its connection emits here; without a listener that would crash the process.
    this.pool.on('error', () => undefined);
  }

  /** Statements on the pool as they come, except `transaction`: one transaction on one connection. */
  async run<T>(mode: Mode, work: Work<T>): Promise<T> {
    if (mode !== 'transaction') return drive(this.pool, work);
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await drive(client, work);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
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
