/**
 * Opens the check store named by DATABASE_URL. Callers run `migrate()` themselves, so a
 * read-only tool can open a store without changing its schema.
 *
 *   sqlite:<path>            embedded file (parent directory created); sqlite::memory: for tests
 *   postgres://...           PostgreSQL (also postgresql://), for several replicas
 */
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Store } from './appointment-store.js';
import { SqlStore } from './sql-store.js';
import { SqliteDriver } from './sqlite.js';

export interface OpenStoreOptions {
  /** PostgreSQL only: the schema for the tables (a unique one per test run). */
  schema?: string;
}

export async function openStore(databaseUrl: string, options: OpenStoreOptions = {}): Promise<Store> {
  if (databaseUrl.startsWith('sqlite:')) {
    // `sqlite:///abs/path` and `sqlite://rel` are accepted too, as other tools write them.
    const path = databaseUrl.slice('sqlite:'.length).replace(/^\/\//, '');
    if (path === '') throw new Error('DATABASE_URL sqlite: needs a file path, e.g. sqlite:data/adapter.db');
    if (path !== ':memory:') await mkdir(dirname(path), { recursive: true });
    return new SqlStore(new SqliteDriver(path));
  }
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    // Loaded only when used: the pg driver is not on an SQLite service's start-up path.
    const { PostgresDriver } = await import('./postgres.js');
    return new SqlStore(new PostgresDriver(databaseUrl, options.schema ? { schema: options.schema } : {}));
  }
  // Only the scheme is named: the rest of the URL may carry a password.
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(databaseUrl)?.[1];
  throw new Error(
    `DATABASE_URL has an unsupported scheme${scheme ? ` "${scheme}:"` : ''}; use sqlite:<path> or postgres://...`,
  );
}
