import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The Windows lane's tests need its Wine prefix: scripts/windows/lane.sh runs them (vitest.windows.config.ts).
    exclude: [...configDefaults.exclude, 'test/windows/**'],
    // Type tests (*.test-d.ts) are checked by the compiler, not run: a type error is a failed test.
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'], tsconfig: './tsconfig.typetest.json' },
    // node-pty is not safe in worker threads; every test file gets its own process.
    pool: 'forks',
    testTimeout: 30_000,
    // vi.stubEnv changes are undone after each test.
    unstubEnvs: true,
    hookTimeout: 30_000,
  },
});
