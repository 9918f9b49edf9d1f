/**
 * The PostgreSQL server the tests use. Tests that need it fail loudly when it is missing; they
 * never skip.
 *
 * Which server that is, the global setup (test/support/postgres-global-setup.ts) decides once per
 * run: the one at TEST_DATABASE_URL (default below) when it answers, else an embedded PostgreSQL
 * it starts for the run. It hands the URL to the workers (`provide`), whose setup file puts it in
 * process.env.TEST_DATABASE_URL, so that child processes the tests spawn see it too.
 */
export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

export function testDatabaseUrl(): string {
  return process.env.TEST_DATABASE_URL ?? DEFAULT_TEST_DATABASE_URL;
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The PostgreSQL URL of this run, chosen by the global setup. */
    testDatabaseUrl: string;
  }
}
