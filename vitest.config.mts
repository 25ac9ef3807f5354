import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Those start a Temporal cluster of their own: `npm run test:cluster`.
    exclude: ['test/cluster/**', '**/node_modules/**'],
    // One real Temporal dev server and one real PostgreSQL for the whole run (test/setup/global-setup.ts).
    globalSetup: ['test/setup/global-setup.ts'],
    pool: 'forks',
    // Tests allow loopback explicitly: their receivers and fakes listen on 127.0.0.1. Processes a test starts (a
    // worker, the API, npm start) read it through domain/config.ts; no test connects anywhere else.
    env: { KEEL_EGRESS_ALLOW: 'loopback' },
    // The crash tests kill processes and stop the database; files run one at a time so timings stay honest.
    fileParallelism: false,
    testTimeout: 90_000,
    hookTimeout: 180_000,
  },
});
