/**
 * The vitest fixtures of a test that talks to a daemon: the file's daemon,
 * started by the first test (or suite hook) that asks for it and closed after
 * the file's last test, and a daemon of one test alone, closed when that test
 * ends, passed or failed. No test file starts or stops a daemon by hand but
 * the few that test/lint/daemon-fixtures.test.ts lists, which keeps it so.
 *
 * In this process (`daemonTest`; the daemon of test/helpers/daemon.ts):
 *
 *   const test = daemonTest({ maxSessionsPerOwner: 4 });
 *   const test = daemonTest(() => [{}, { owners: [carol] }]); // read when the daemon starts, after the file's setup
 *   test('lists', async ({ daemon }) => { ... });
 *   test('refuses', async ({ startDaemon }) => { const tight = await startDaemon({ maxSessionsPerOwner: 1 }); ... });
 *   test.beforeAll(async ({ startFileDaemon }) => { budgeted = await startFileDaemon({ bodyBudgetBytes: 64 * 1024 }); });
 *
 * The bin in a child process (`daemonProcessTest`; test/helpers/daemon-process.ts),
 * for what needs a process of its own (its memory, its signals, its user, a
 * restart on its state directory):
 *
 *   const test = daemonProcessTest(['--ring-bytes', String(4 * MiB)]);
 *   test('survives', async ({ daemonProcess }) => { ... });
 *   test('restarts', async ({ spawnDaemon }) => { const first = await spawnDaemon(['--state-dir', dir]); ... });
 *
 * Fixtures are torn down after the hooks of their scope: a test's daemons
 * after its afterEach hooks, the file's after the file's afterAll hooks. A
 * file whose afterAll removes what its daemon uses (an OS user) takes the
 * test's daemon, so that the daemon is gone first.
 */
import type { RemoteRuntime } from '@execworld/sdk';
import { connect } from '@execworld/sdk';
import { test, type TestContext } from 'vitest';
import type { Config } from '../../service/src/server/config.ts';
import { ALICE, startInProcessDaemon, type InProcessDaemonOptions, type TestDaemon } from './daemon.ts';
import { startDaemonProcess, type DaemonProcess } from './daemon-process.ts';

/** Starts a daemon in this process of `overrides` and `options`. */
export type StartDaemon = (overrides?: Partial<Config>, options?: InProcessDaemonOptions) => Promise<TestDaemon>;

/** Starts the bin's daemon in a child process of `args`, `nodeArgs` and `options` (see {@link startDaemonProcess}). */
export type SpawnDaemon = (...settings: Parameters<typeof startDaemonProcess>) => Promise<DaemonProcess>;

/** A fixture's settings: given, or a function that gives them when the daemon starts (after the file's setup). */
type Settings<Start extends (...args: never[]) => unknown> = Parameters<Start> | [() => Parameters<Start>];

function settingsOf<Start extends (...args: never[]) => unknown>(settings: Settings<Start>): Parameters<Start> {
  const [first] = settings;
  return (typeof first === 'function' ? first() : settings) as Parameters<Start>;
}

/**
 * A fixture that hands `use` a function starting daemons with `start`, and
 * ends every one it started with `end` once `use` is done, whether or not the
 * test failed.
 */
async function startedBy<Start extends (...args: never[]) => Promise<Started>, Started>(
  start: Start,
  end: (started: Started) => Promise<unknown>,
  use: (start: Start) => Promise<void>,
): Promise<void> {
  const started: Started[] = [];
  try {
    await use((async (...args: Parameters<Start>) => {
      const daemon = await start(...args);
      started.push(daemon);
      return daemon;
    }) as Start);
  } finally {
    await Promise.all(started.map(end));
  }
}

const closed = (daemon: TestDaemon): Promise<void> => daemon.close();
// Stopping a daemon that already exited (a test that stopped or killed it) answers at once.
const stopped = (daemon: DaemonProcess): Promise<number | null> => daemon.stop();

export interface DaemonFixtures {
  $file: {
    /** The file's daemon, of the settings `daemonTest` was given. */
    daemon: TestDaemon;
    /** Starts another daemon for the rest of the file (a suite hook's, beside the file's daemon); every one it started is closed after the file. */
    startFileDaemon: StartDaemon;
  };
  $test: {
    /** Starts a daemon for this test alone; every one it started is closed when the test ends. */
    startDaemon: StartDaemon;
    /** Starts the bin's daemon in a child process for this test alone; every one it started is stopped when the test ends. */
    spawnDaemon: SpawnDaemon;
  };
}

// eslint-disable-next-line no-empty-pattern -- vitest reads what a fixture needs from its first parameter's pattern: nothing
const startDaemonFixture = async ({}, use: (start: StartDaemon) => Promise<void>) => startedBy<StartDaemon, TestDaemon>(startInProcessDaemon, closed, use);
/** A test's daemons in child processes; when the test fails, each one's pid, address and the end of its log are printed. */
const spawnDaemonFixture = async ({ onTestFailed }: TestContext, use: (spawn: SpawnDaemon) => Promise<void>) => {
  const spawned: DaemonProcess[] = [];
  onTestFailed(() => {
    for (const daemon of spawned) console.error(`daemon ${daemon.pid} at ${daemon.url}; the end of its log:\n${daemon.log().slice(-4096)}`);
  });
  await startedBy<SpawnDaemon, DaemonProcess>(
    async (...settings) => {
      const daemon = await startDaemonProcess(...settings);
      spawned.push(daemon);
      return daemon;
    },
    stopped,
    use,
  );
};

/** `test` with the fixtures {@link DaemonFixtures}; the file's daemon is started with `settings`. */
export function daemonTest(...settings: Settings<StartDaemon>) {
  return test.extend<DaemonFixtures>({
    daemon: [
      // eslint-disable-next-line no-empty-pattern -- as above
      async ({}, use) => {
        const daemon = await startInProcessDaemon(...settingsOf<StartDaemon>(settings));
        try {
          await use(daemon);
        } finally {
          await daemon.close();
        }
      },
      { scope: 'file' },
    ],
    startFileDaemon: [startDaemonFixture, { scope: 'file' }],
    startDaemon: startDaemonFixture,
    spawnDaemon: spawnDaemonFixture,
  });
}

export interface DaemonProcessFixtures {
  $file: {
    /** The file's daemon in a child process, of the settings `daemonProcessTest` was given. */
    daemonProcess: DaemonProcess;
  };
  $test: {
    /** As {@link DaemonFixtures}' `spawnDaemon`. */
    spawnDaemon: SpawnDaemon;
  };
}

/** `test` with the fixtures {@link DaemonProcessFixtures}; the file's daemon is started with `settings`. */
export function daemonProcessTest(...settings: Settings<SpawnDaemon>) {
  return test.extend<DaemonProcessFixtures>({
    daemonProcess: [
      // eslint-disable-next-line no-empty-pattern -- as above
      async ({}, use) => {
        const daemon = await startDaemonProcess(...settingsOf<SpawnDaemon>(settings));
        try {
          await use(daemon);
        } finally {
          await daemon.stop();
        }
      },
      { scope: 'file' },
    ],
    spawnDaemon: spawnDaemonFixture,
  });
}

/** A daemon of this process with `count` SDK connections to it as alice, and what closes them and it. */
export interface ConnectedDaemon {
  readonly daemon: TestDaemon;
  readonly runtimes: readonly RemoteRuntime[];
  readonly close: () => Promise<void>;
}

/**
 * A daemon in this process and `count` connections to it, for the
 * conformance contracts: a contract makes its subject in its suite's
 * beforeAll and closes it in its afterAll, so the daemon lives as long as
 * that suite (vitest has no fixture of a suite's scope). `close` disposes the
 * connections, then closes the daemon; a connection that fails closes what
 * was started.
 */
export async function connectedDaemon(count = 1, ...settings: Parameters<StartDaemon>): Promise<ConnectedDaemon> {
  const daemon = await startInProcessDaemon(...settings);
  const runtimes: RemoteRuntime[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(runtimes.map((runtime) => runtime.dispose()));
    await daemon.close();
  };
  try {
    for (let index = 0; index < count; index += 1) runtimes.push(await connect(daemon.url, { token: ALICE }));
  } catch (error) {
    await close();
    throw error;
  }
  return { daemon, runtimes, close };
}
