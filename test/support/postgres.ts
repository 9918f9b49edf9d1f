/**
 * The PostgreSQL server the tests use. Tests that need it fail loudly when it is missing; they
 * never skip.
 *
 * Which server that is, the global setup (test/support/postgres-global-setup.ts) decides once per
 * run: the one at TEST_DATABASE_URL (default below) when it answers, else an embedded PostgreSQL
 * it starts for the run. It hands the URL to the workers (`provide`), whose setup file puts it in
 * process.env.TEST_DATABASE_URL, so that child processes the tests spawn see it too.
 */
import pg from 'pg';

export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

export function testDatabaseUrl(): string {
  return process.env.TEST_DATABASE_URL ?? DEFAULT_TEST_DATABASE_URL;
}

/** A schema of one test's own on the run's server, for the service processes it spawns. */
export interface TestSchema {
  name: string;
  /** The DATABASE_URL of a service on this schema (its search_path). */
  url: string;
  /** A connection to the server, open until `drop`, for a test that reads the rows itself. */
  admin: pg.Client;
  /** Drops the schema and closes `admin`: the test's cleanup. */
  drop: () => Promise<void>;
}

/** Creates `${prefix}_${pid}_${now}` on the run's server. */
export async function createTestSchema(prefix: string): Promise<TestSchema> {
  const name = `${prefix}_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: testDatabaseUrl() });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${name}`);
  const url = new URL(testDatabaseUrl());
  url.searchParams.set('options', `-c search_path=${name}`);
  return {
    name,
    url: url.toString(),
    admin,
    drop: async () => {
      await admin.query(`DROP SCHEMA ${name} CASCADE`);
      await admin.end();
    },
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The PostgreSQL URL of this run, chosen by the global setup. */
    testDatabaseUrl: string;
  }
}
