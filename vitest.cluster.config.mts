import { defineConfig } from 'vitest/config';

// `npm run test:cluster`: the tests that start Keel's production topology themselves (scripts/cluster-stack.ts), a
// Temporal server v1.29.1 built with Go on PostgreSQL, instead of the dev server `npm test` shares.
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 300_000,
    // Building the Temporal server with Go, when it is not cached yet, takes about 4 minutes on 2 cores.
    hookTimeout: 600_000,
  },
});
