import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // node-pty is not safe in worker threads; every test file gets its own process.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
