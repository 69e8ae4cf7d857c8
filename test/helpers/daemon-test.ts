/**
 * The vitest fixtures of a test that talks to a daemon in this process: the
 * file's daemon, started by the first test (or suite hook) that asks for it
 * and closed after the file's last test, and `startDaemon` for a test that
 * needs one of its own, closed when that test ends, passed or failed. No
 * test file starts or stops a daemon by hand.
 *
 *   const test = daemonTest({ maxSessionsPerOwner: 4 });
 *   const test = daemonTest(() => [{}, { owners: [carol] }]); // read when the daemon starts, after the file's setup
 *   test('lists', async ({ daemon }) => { ... });
 *   test('refuses', async ({ startDaemon }) => { const tight = await startDaemon({ maxSessionsPerOwner: 1 }); ... });
 */
import { test } from 'vitest';
import type { Config } from '../../service/src/server/config.ts';
import { startInProcessDaemon, type InProcessDaemonOptions, type TestDaemon } from './daemon.ts';

/** Starts a daemon in this process of `overrides` and `options`. */
export type StartDaemon = (overrides?: Partial<Config>, options?: InProcessDaemonOptions) => Promise<TestDaemon>;

export interface DaemonFixtures {
  $file: {
    /** The file's daemon, of the settings `daemonTest` was given. */
    daemon: TestDaemon;
  };
  $test: {
    /** Starts a daemon for this test alone; every one it started is closed when the test ends. */
    startDaemon: StartDaemon;
  };
}

/** `test` with the fixtures {@link DaemonFixtures}; the file's daemon is started with `settings`. */
export function daemonTest(...settings: Parameters<StartDaemon> | [() => Parameters<StartDaemon>]) {
  return test.extend<DaemonFixtures>({
    daemon: [
      // eslint-disable-next-line no-empty-pattern -- vitest reads what a fixture needs from its first parameter's pattern: nothing
      async ({}, use) => {
        const [first, ...rest] = settings;
        const daemon = await (typeof first === 'function'
          ? startInProcessDaemon(...first())
          : startInProcessDaemon(first, ...(rest as [InProcessDaemonOptions?])));
        try {
          await use(daemon);
        } finally {
          await daemon.close();
        }
      },
      { scope: 'file' },
    ],
    // eslint-disable-next-line no-empty-pattern -- as above
    startDaemon: async ({}, use: (start: StartDaemon) => Promise<void>) => {
      const started: TestDaemon[] = [];
      try {
        await use(async (more, moreOptions) => {
          const daemon = await startInProcessDaemon(more, moreOptions);
          started.push(daemon);
          return daemon;
        });
      } finally {
        await Promise.all(started.map((daemon) => daemon.close()));
      }
    },
  });
}
