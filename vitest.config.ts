import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Picks the PostgreSQL server of the run: TEST_DATABASE_URL's, else an embedded one.
    globalSetup: ['test/support/postgres-global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
  },
});
