/**
 * The Windows lane's world, as its script made it (scripts/windows/lane.sh):
 * Windows node.exe and the bundled daemon in a Wine prefix, and a daemon
 * started there for a Linux test to talk to.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';

const laneDirectory = process.env.EXECWORLD_WINDOWS_LANE;
if (laneDirectory === undefined || laneDirectory === '') throw new Error('EXECWORLD_WINDOWS_LANE is not set: run these tests with npm run test:windows');

/** The lane's directory (Linux path). */
export const LANE = laneDirectory;
const WINE = '/usr/lib/wine/wine64';
const APP = join(LANE, 'app');

/** A Linux path as Windows programs under Wine name it (drive Z: is /). */
export function windowsPath(path: string): string {
  return `Z:${path.replaceAll('/', '\\')}`;
}

/** Windows node.exe, as the daemon's processes name it. */
export const WINDOWS_NODE = windowsPath(join(APP, 'node.exe'));

/** The environment Wine runs with in the lane. */
export const WINE_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  WINEPREFIX: join(LANE, 'prefix'),
  WINEARCH: 'win64',
  WINEDEBUG: '-all',
  WINEDLLOVERRIDES: 'mscoree,mshtml=',
  DISPLAY: '',
};

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface WineDaemon {
  readonly url: string;
  readonly token: string;
  /** The wine process that is the daemon: killing it is the daemon dying. */
  readonly process: ChildProcess;
  /** The daemon's log so far. */
  log(): string;
  /** Kills the daemon and waits for its process to end. */
  kill(): Promise<void>;
}

/** `execworld serve` on Windows node.exe, with its own state directory and token. */
export async function startWineDaemon(args: readonly string[] = []): Promise<WineDaemon> {
  const state = mkdtempSync(join(LANE, 'daemon-'));
  const token = randomBytes(24).toString('hex');
  writeFileSync(join(state, 'token'), `${token}\n`);
  const port = await freePort();
  const logPath = join(state, 'daemon.log');
  // node.exe cannot write to a Linux pipe: the log goes to a file.
  const log = openSync(logPath, 'w');
  const child = spawn(
    WINE,
    [
      join(APP, 'node.exe'),
      '--single-threaded-gc',
      windowsPath(join(APP, 'execworld.mjs')),
      'serve',
      '--port',
      String(port),
      '--state-dir',
      windowsPath(state),
      '--token-file',
      windowsPath(join(state, 'token')),
      ...args,
    ],
    { env: WINE_ENV, stdio: ['ignore', log, log] },
  );
  closeSync(log);
  const read = (): string => readFileSync(logPath, 'utf8');
  const deadline = Date.now() + 90_000;
  while (!read().includes('"msg":"listening"')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the daemon under Wine did not start:\n${read()}`);
    await sleep(100);
  }
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    process: child,
    log: read,
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
