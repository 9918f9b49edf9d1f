/**
 * The port between the check store (sql-store.ts) and a database: a driver runs the store's
 * statements, and its dialect says where the database's SQL differs. Implemented by sqlite.ts
 * and postgres.ts.
 */
import type { Row } from './rows.js';
import type { DateRange, StoreErrorKind } from './check-store.js';

/** One statement and its parameters. */
export interface Statement {
  sql: string;
  params: readonly unknown[];
}

/** What a statement gave back: its rows (SELECT, RETURNING) and how many rows it changed. */
export interface Result {
  rows: Row[];
  changed: number;
}

/**
 * Store work as a generator of statements: it yields each statement and is handed its result.
 * The same code runs synchronously on SQLite (no turn of the event loop inside a transaction)
 * and asynchronously on PostgreSQL.
 */
export type Work<T> = Generator<Statement, T, Result>;

/** One statement of a piece of work, handed its whole result. */
export function* one(sql: string, params: readonly unknown[] = []): Work<Result> {
  return yield { sql, params };
}

/** One statement of a piece of work, handed its rows. */
export function* query(sql: string, params: readonly unknown[] = []): Work<Row[]> {
  return (yield { sql, params }).rows;
}

/** Collects bind parameters while a statement is built; returns their placeholders. */
export class Params {
  readonly values: unknown[] = [];

  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** A date range on an epoch-ms column: [from, before), or outside it with `not`. */
export function rangeCondition(params: Params, column: string, range: DateRange): string {
  const bounds: string[] = [];
  if (range.from !== undefined) bounds.push(`${column} >= ${params.add(range.from)}`);
  if (range.before !== undefined) bounds.push(`${column} < ${params.add(range.before)}`);
  const within = bounds.length ? bounds.join(' AND ') : 'TRUE';
  return range.not ? `NOT (${within})` : `(${within})`;
}

/**
 * How a driver runs a piece of work:
 * - `single`: each statement on its own (autocommit);
 * - `write`: one atomic write, which SQLite commits with the other writes of the same turn;
 * - `snapshot`: reads that must agree with each other;
 * - `transaction`: one transaction that takes the locks its statements ask for (claims, migrations).
 */
export type Mode = 'single' | 'write' | 'snapshot' | 'transaction';

/** The port a database driver implements. */
export interface SqlDriver {
  readonly dialect: Dialect;
  run<T>(mode: Mode, work: Work<T>): Promise<T>;
  /**
   * Whether an error of this driver means the store cannot be used now (connection lost, server
   * shutting down, disk full, read-only after a failover), and which kind; undefined for any
   * other error (a constraint, a bug). See outage.ts.
   */
  classify(error: unknown): StoreErrorKind | undefined;
  close(): Promise<void>;
}

/** Where the two databases' SQL differs (sqlite.ts, postgres.ts). */
/** The two databases the store runs on. */
export type StoreKind = 'sqlite' | 'postgres';

/** Column types of one database. */
export interface ColumnTypes {
  readonly kind: StoreKind;
  /** JSON documents: TEXT on SQLite, JSONB on PostgreSQL. */
  readonly json: string;
  readonly bool: string;
  /** The literal false, as a column default. */
  readonly false: string;
  /** Epoch milliseconds. */
  readonly bigint: string;
  /** Bytes: BLOB on SQLite, BYTEA on PostgreSQL. */
  readonly bytes: string;
}

export interface Dialect {
  readonly types: ColumnTypes;
  /** The SQL of a JSON parameter (bound as JSON text). */
  readonly json: (placeholder: string) => string;
  /** A JSON column's value as the driver returns it, parsed. */
  readonly readJson: (value: unknown) => unknown;
  /** A JSON column as its text. */
  readonly jsonText: (column: string) => string;
  /** A boolean parameter. */
  readonly bool: (value: boolean) => unknown;
  /**
   * How a claim's UPDATE names the rows it takes, at most `batch` of them in one statement:
   * `id ${match(placeholder)}`, the placeholder bound to `bind(ids)`.
   */
  readonly claimRows: {
    batch: number;
    match: (placeholder: string) => string;
    bind: (ids: readonly string[]) => unknown;
  };
  /** Ends a claim's SELECTs of due rows: the row locks they take. */
  readonly lockRows: string;
  /** Taken before a claim counts a tenant's slots, held to the end of the claim. */
  readonly lockTenant: (tenantId: string) => Statement | undefined;
  /** Follows a table name: the index the query must use. */
  readonly indexedBy: (index: string) => string;
  /** Added to a search page's columns when the total rides along with the page. */
  readonly pageTotal: string;
  /** Statements a migration starts with. */
  readonly migrationStart: () => Statement[];
  /** A query that returns a row when the table exists. */
  readonly tableExists: (table: string) => Statement;
}
