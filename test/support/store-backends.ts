/**
 * The two kinds of store every store test runs against: SQLite (a file per database in a temp
 * folder) and PostgreSQL (a schema per database on the server of the run, test/support/postgres.ts).
 * Each `create` is an empty database of its own; `teardown` removes them all.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Store as CheckStore } from '../../src/checks/store/appointment-store.js';
import { openStore } from '../../src/checks/store/open.js';
import { testDatabaseUrl } from './postgres.js';

const PG_URL = testDatabaseUrl();

/** One kind of store; every `create` is an empty database (file or schema) of its own. */
export interface Backend {
  name: string;
  setup(): Promise<void>;
  /** A new empty database; returns how to open it. */
  create(): string;
  open(location: string): Promise<CheckStore>;
  teardown(): Promise<void>;
}

export function sqliteBackend(): Backend {
  let dir = '';
  return {
    name: 'sqlite',
    setup() {
      dir = mkdtempSync(join(tmpdir(), 'store-test-'));
      return Promise.resolve();
    },
    create: () => `sqlite:${join(dir, `${randomUUID()}.db`)}`,
    open: (location) => openStore(location),
    teardown() {
      if (dir) rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  };
}

export function postgresBackend(): Backend {
  const run = `store_test_${process.pid}_${Date.now()}`;
  const schemas: string[] = [];
  return {
    name: 'postgres',
    async setup() {
      const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5000 });
      try {
        await client.connect();
        await client.query('SELECT 1');
      } catch (error) {
        throw new Error(
          `PostgreSQL is unreachable at ${PG_URL} (${error instanceof Error ? error.message : String(error)}). ` +
            'The store tests need it (the global setup test/support/postgres-global-setup.ts picks it).',
        );
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    create() {
      const schema = `${run}_${schemas.length}`;
      schemas.push(schema);
      return schema;
    },
    open: (schema) => openStore(PG_URL, { schema }),
    async teardown() {
      if (schemas.length === 0) return;
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Registers a backend's set-up and tear-down with the enclosing `describe` block and returns how
 * to open a store on one of its databases; every store opened is closed after each test.
 */
export function storesOn(backend: Pick<Backend, 'setup' | 'open' | 'teardown'>): {
  /** Opens a store on the database at `location`, migrated unless `migrate` is false. */
  open(location: string, migrate?: boolean): Promise<CheckStore>;
} {
  const opened: CheckStore[] = [];
  beforeAll(() => backend.setup());
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()));
  });
  afterAll(() => backend.teardown());
  return {
    async open(location, migrate = true) {
      const store = await backend.open(location);
      opened.push(store);
      if (migrate) await store.migrate();
      return store;
    },
  };
}

/**
 * Registers with the enclosing `describe` block one migrated store on a new database of the
 * backend, shared by all its tests: opened before the first (after the backend's set-up), handed
 * to `use`, closed after the last (before the backend's tear-down).
 */
export function sharedStoreOn(backend: Backend, use: (store: CheckStore) => void): void {
  let store: CheckStore | undefined;
  beforeAll(async () => {
    await backend.setup();
    store = await backend.open(backend.create());
    await store.migrate();
    use(store);
  });
  afterAll(async () => {
    await store?.close();
    await backend.teardown();
  });
}
