import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // expect.poll ends as soon as what it waits for holds; its bound (1 s by default) is only how
    // long a failing wait takes. A page answering through a loaded 2-core machine (the browser,
    // the service and the sandbox on it) may take longer than 1 s, which is no defect of the page.
    expect: { poll: { timeout: 10_000 } },
    // Picks the PostgreSQL server of the run: TEST_DATABASE_URL's, else an embedded one.
    globalSetup: ['test/support/postgres-global-setup.ts'],
    setupFiles: ['test/support/setup.ts'],
  },
});
