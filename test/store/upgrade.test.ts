/**
 * A database made by the previous release (55c4503) upgrades in place, on SQLite and on
 * PostgreSQL: its rows survive, the store works on it, and its schema ends up the same as a new
 * database's. The databases are the dumps in test/fixtures/store/, made by that release's store
 * (their headers say how). PostgreSQL must be reachable, as for check-store.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Check } from '../../src/checks/store/check-store.js';
import type { Store as CheckStore } from '../../src/checks/store/appointment-store.js';
import { openStore } from '../../src/checks/store/open.js';
import { testDatabaseUrl } from '../support/postgres.js';
import { storesOn } from '../support/store-backends.js';

const T0 = Date.UTC(2025, 0, 1, 8, 0, 0);
const DONE = '00000000-0000-4000-8000-000000000001';
const POLLING = '00000000-0000-4000-8000-000000000002';
const WAITING = '00000000-0000-4000-8000-000000000003';

function fixture(kind: 'sqlite' | 'postgres'): string {
  return readFileSync(new URL(`../fixtures/store/previous-release.${kind}.sql`, import.meta.url), 'utf8');
}

/** One kind of database: a copy of the previous release's, a new one, and what can be read around the store. */
interface Backend {
  name: 'sqlite' | 'postgres';
  setup(): Promise<void>;
  /** A database restored from the previous release's dump; returns where it is. */
  previous(): Promise<string>;
  /** A new empty database. */
  fresh(): string;
  open(location: string): Promise<CheckStore>;
  /** The versions recorded in a migrations table, in order. */
  versions(location: string, table: string): Promise<number[]>;
  /** Tables, columns and indexes, without the migration tables, as comparable text. */
  schema(location: string): Promise<string[]>;
  teardown(): Promise<void>;
}

function sqliteBackend(): Backend {
  let dir = '';
  const read = <T>(location: string, work: (db: Database.Database) => T): T => {
    const db = new Database(location, { readonly: true });
    try {
      return work(db);
    } finally {
      db.close();
    }
  };
  return {
    name: 'sqlite',
    setup() {
      dir = mkdtempSync(join(tmpdir(), 'store-upgrade-'));
      return Promise.resolve();
    },
    previous() {
      const file = join(dir, `${randomUUID()}.db`);
      const db = new Database(file);
      db.exec(fixture('sqlite'));
      db.close();
      return Promise.resolve(file);
    },
    fresh: () => join(dir, `${randomUUID()}.db`),
    open: (file) => openStore(`sqlite:${file}`),
    versions: (file, table) =>
      Promise.resolve(
        read(file, (db) =>
          (
            db.prepare(`SELECT version FROM ${table} ORDER BY version`).all() as Array<{ version: number }>
          ).map((row) => row.version),
        ),
      ),
    schema: (file) =>
      Promise.resolve(
        read(file, (db) =>
          (
            db
              .prepare(
                `SELECT type, name, sql FROM sqlite_master WHERE tbl_name NOT LIKE '%_migrations' ORDER BY type, name`,
              )
              .all() as Array<{ type: string; name: string; sql: string | null }>
          ).map((row) => `${row.type} ${row.name}: ${(row.sql ?? '').replace(/\s+/g, ' ')}`),
        ),
      ),
    teardown() {
      if (dir) rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  };
}

function postgresBackend(): Backend {
  const url = testDatabaseUrl();
  const run = `store_upgrade_${process.pid}_${Date.now()}`;
  const schemas: string[] = [];
  const withClient = async <T>(work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  const fresh = (): string => {
    const schema = `${run}_${schemas.length}`;
    schemas.push(schema);
    return schema;
  };
  return {
    name: 'postgres',
    async setup() {
      // Fails loudly when PostgreSQL is not there, as the contract tests do.
      await withClient((client) => client.query('SELECT 1'));
    },
    async previous() {
      const schema = fresh();
      await withClient(async (client) => {
        await client.query(`CREATE SCHEMA "${schema}"`);
        await client.query(`SET search_path TO "${schema}"`);
        await client.query(fixture('postgres'));
      });
      return schema;
    },
    fresh,
    open: (schema) => openStore(url, { schema }),
    versions: (schema, table) =>
      withClient(async (client) =>
        (
          await client.query<{ version: number }>(`SELECT version FROM "${schema}".${table} ORDER BY version`)
        ).rows.map((row) => row.version),
      ),
    schema: (schema) =>
      withClient(async (client) => {
        const columns = await client.query<Record<string, string>>(
          `SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns
           WHERE table_schema = $1 AND table_name NOT LIKE '%_migrations' ORDER BY table_name, ordinal_position`,
          [schema],
        );
        const indexes = await client.query<Record<string, string>>(
          `SELECT indexname, indexdef FROM pg_indexes
           WHERE schemaname = $1 AND tablename NOT LIKE '%_migrations' ORDER BY indexname`,
          [schema],
        );
        const checks = await client.query<Record<string, string>>(
          `SELECT conname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
           JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1 AND conname NOT LIKE '%_migrations_%'
           ORDER BY conname`,
          [schema],
        );
        return [
          ...columns.rows.map((r) => `column ${Object.values(r).join(' ')}`),
          ...indexes.rows.map(
            (r) =>
              `index ${r.indexname}: ${r.indexdef?.replaceAll(`"${schema}".`, '').replaceAll(`${schema}.`, '')}`,
          ),
          ...checks.rows.map((r) => `constraint ${r.conname}: ${r.def}`),
        ];
      }),
    async teardown() {
      if (schemas.length === 0) return;
      await withClient(async (client) => {
        for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      });
    },
  };
}

describe.each([sqliteBackend(), postgresBackend()])('a $name database of the previous release', (backend) => {
  const stores = storesOn(backend);
  const open = (location: string): Promise<CheckStore> => stores.open(location);

  it('keeps its rows through the upgrade', async () => {
    const store = await open(await backend.previous());
    const done = await store.get('tenant-a', DONE);
    expect(done).toMatchObject({
      state: 'done',
      idempotencyKey: 'urn:visit|done-1',
      upstreamTaskId: 'task-1',
      upstreamStatus: 'COMPLETED',
      envelope: { task_id: 'task-1', status: 'COMPLETED', nested: { list: [1, 'two'] } },
      // Version 4: the narrative migration (issue 16) made the stored CER a new version.
      version: 4,
      outcome: 'complete',
      leaseOwner: null,
      createdAt: T0,
      updatedAt: T0 + 30,
    });
    expect(done?.cer).toMatchObject({
      outcome: 'complete',
      disposition: 'eligible',
      meta: { versionId: '4', lastUpdated: new Date(T0 + 30).toISOString() },
      text: { status: 'generated' },
    });
    // Every stored CER got its narrative, once, from its structured elements.
    expect(done?.cer.text?.div).toMatch(
      /^<div xmlns="http:\/\/www.w3.org\/1999\/xhtml"><p><b>.+<\/b><\/p><p>eligible<\/p>/,
    );
    expect(done?.request).toMatchObject({ resourceType: 'CoverageEligibilityRequest', id: DONE });
    // Stored by the previous release, before the check-digit rule: rows keep what they hold.
    expect(done?.upstreamRequest).toMatchObject({ tpa_name: 'DAMAN', emirates_id: '784-1990-1234567-1' });
    expect(await store.get('tenant-a', POLLING)).toMatchObject({
      state: 'polling',
      upstreamTaskId: 'task-2',
      nextRunAt: T0 + 5_000,
      leaseOwner: 'replica-a:1',
      leaseUntil: T0 + 60_010,
      version: 2,
      cer: { text: { status: 'generated' } },
    });
    expect(await store.get('tenant-a', WAITING)).toMatchObject({ state: 'waiting', idempotencyKey: null });
    // The answers: decided once by the upgrade for the finished check, none for those still running.
    expect(done?.answer).toEqual({ status: 200 });
    expect((await store.get('tenant-a', POLLING))?.answer).toBeNull();
    expect((await store.get('tenant-a', WAITING))?.answer).toBeNull();
    expect(JSON.parse((await store.getCerJson('tenant-a', DONE))?.json ?? '{}')).toEqual(done?.cer);
    expect(await store.getCerVersion('tenant-a', DONE)).toEqual({ version: 4, updatedAt: T0 + 30 });
    // Migration 7 filled the request identifier's bare value of the rows already stored.
    const byIdentifier = await store.search(
      'tenant-a',
      { requestIdentifier: [[{ value: 'done-1' }]] },
      { count: 10, offset: 0 },
    );
    expect(byIdentifier.checks.map((check) => check.id)).toEqual([DONE]);
    expect(await store.getGuard('tenant-a', 'axa')).toMatchObject({ kind: 'credentials', until: null });
    expect((await store.search('tenant-a', {}, { count: 10, offset: 0 })).total).toBe(3);
  });

  it('works as a store after the upgrade', async () => {
    const store = await open(await backend.previous());
    // Idempotency still finds the old check.
    const again = await store.insert({
      ...(await store.get('tenant-a', DONE))!,
      id: randomUUID(),
      now: T0 + 1_000,
    });
    expect(again).toMatchObject({ created: false, check: { id: DONE } });
    // The polling check's lease ran out: it is claimed with the waiting one (due first), which starts.
    const claimed = await store.claimDue({
      owner: 'replica-b:1',
      now: T0 + 100_000,
      leaseMs: 30_000,
      limit: 10,
      maxInFlight: () => 10,
    });
    expect(claimed.map((c) => [c.id, c.state])).toEqual([
      [WAITING, 'starting'],
      [POLLING, 'polling'],
    ]);
    const polling: Check = { ...claimed[1]!, ...(await store.documents(POLLING))! };
    const finished = await store.update(
      POLLING,
      'replica-b:1',
      { state: 'done', outcome: 'complete', cer: { ...polling.cer, outcome: 'complete' } },
      T0 + 100_001,
      polling,
      { release: true },
    );
    expect(finished).toMatchObject({ state: 'done', version: 3, leaseOwner: null });
    expect(await store.get('tenant-a', POLLING)).toEqual(finished);
    expect(await store.purgeBefore(T0 + 50)).toBe(1); // the old done check (updated at T0 + 30)
    expect(await store.deleteGuard('tenant-a', 'AXA')).toBe(true);
  });

  it('records the versions of the one migration list and ends with the schema of a new database', async () => {
    const previous = await backend.previous();
    const oldVersions = await backend.versions(previous, 'store_migrations');
    const store = await open(previous);
    await store.migrate(); // idempotent
    expect(await backend.versions(previous, 'schema_migrations')).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    ]);
    // Left as it was: the previous release still starts on this database.
    expect(await backend.versions(previous, 'store_migrations')).toEqual(oldVersions);
    expect(oldVersions).toEqual(backend.name === 'sqlite' ? [1, 2, 3, 4, 5] : [1, 2, 3, 4]);

    const fresh = backend.fresh();
    await open(fresh);
    expect(await backend.versions(fresh, 'schema_migrations')).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
    ]);
    const schema = await backend.schema(previous);
    expect(schema).toEqual(await backend.schema(fresh));
    // The covering indexes of the claim (both) and of the version probe (SQLite only) are there.
    expect(schema.some((line) => line.includes('checks_claim_cover_idx'))).toBe(true);
    expect(schema.some((line) => line.includes('checks_version_idx'))).toBe(backend.name === 'sqlite');
    expect(schema.some((line) => line.includes('checks_claim_idx'))).toBe(false);
    expect(schema.some((line) => line.includes('checks_outcome_idx'))).toBe(true);
  });
});
