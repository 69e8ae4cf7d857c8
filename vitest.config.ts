import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The slow lane (`npm run test:slow`, which .ci/run also runs): the test files
 * that take minutes on a two-core machine. Each is a whole product path, not
 * a unit: the DeepSeek harness's persistent pwsh stack over three providers,
 * the image's Dockerfile replayed and run, the packed tarballs installed and
 * used, an archive of 250,000 entries unpacked with the daemon's memory
 * measured (a minute and a half of one core by itself), twenty takeovers of
 * a daemon in a row, and a takeover of every kind of session with clients
 * riding through (two minutes). Then the files of a minute or more each,
 * most of it spent starting daemons and CLI processes one after another:
 * the CLI's session commands, its exec and the daemon's CLI, a takeover given
 * back, the token file refused for each of nine faults, the owner's pids total
 * (a thread bomb held at 4096, and a takeover), the browser's /ui page, and
 * the CLI's run command and its options, which start a CLI process per case.
 */
export const SLOW_FILES = [
  'test/dsh/pwsh.test.ts',
  'test/docker/image.test.ts',
  'test/package/packages.test.ts',
  'test/server/unpack-memory.test.ts',
  'test/server/takeover-repeat.test.ts',
  'test/server/takeover.test.ts',
  'test/cli/sessions.test.ts',
  'test/cli/exec.test.ts',
  'test/server/cli.test.ts',
  'test/server/takeover-give-back.test.ts',
  'test/deploy/token-secret.test.ts',
  'test/server/owner-pids.test.ts',
  'test/ui/browser.test.ts',
  'test/cli/run.test.ts',
  'test/cli/options.test.ts',
];

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The Windows lane's tests need its Wine prefix: scripts/windows/lane.sh runs them (vitest.windows.config.ts).
    // The slow lane's files run apart (npm run test:slow, vitest.slow.config.ts), so this suite stays under ten minutes.
    exclude: [...configDefaults.exclude, 'test/windows/**', ...SLOW_FILES],
    // Type tests (*.test-d.ts) are checked by the compiler, not run: a type error is a failed test.
    typecheck: { enabled: true, include: ['test/**/*.test-d.ts'], tsconfig: './tsconfig.typetest.json' },
    // node-pty is not safe in worker threads; every test file gets its own process.
    pool: 'forks',
    // Two files at a time, whatever the cores: most of a file's time is spent waiting on the programs, sockets and
    // daemons it starts, so a 2-core machine runs the suite in about 6 minutes instead of 9 (one at a time, the
    // default there). Tests wait for events with generous deadlines, never for fixed times, so a busier machine
    // makes them slower, not wrong.
    maxWorkers: 2,
    testTimeout: 30_000,
    // vi.stubEnv changes are undone after each test.
    unstubEnvs: true,
    hookTimeout: 30_000,
  },
});
