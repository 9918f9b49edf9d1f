// global test setup
import { inject } from 'vitest';

// The PostgreSQL server of this run (see test/support/postgres.ts), for testDatabaseUrl() and for
// the child processes the tests spawn.
process.env.TEST_DATABASE_URL = inject('testDatabaseUrl');
