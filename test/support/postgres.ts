/**
 * The PostgreSQL server the tests use. Tests that need it fail loudly when it is missing; they
 * never skip.
 */
export function testDatabaseUrl(): string {
  return process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
}
