/**
 * The real daemon (`execworld serve`) in a child process, for tests and
 * benchmarks that measure it apart from the client.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { markerPids } from './proc.ts';
import { waitFor } from './wait.ts';

/** The daemon's bin, `execworld`. */
export const BIN = fileURLToPath(new URL('../../service/bin/execworld.js', import.meta.url));

/** The V8 flags of the bin's `#!/usr/bin/env -S node … --` line (`--flag` or `--flag=value`), which are part of how the daemon runs. */
export const DAEMON_NODE_FLAGS: readonly string[] = /^#!\S*env -S node((?: --?\w[\w-]*(?:=\S+)?)*)(?: --)?$/
  .exec(readFileSync(BIN, 'utf8').split('\n')[0]!)![1]!
  .split(' ')
  .filter(Boolean);

/** Node's arguments that start the daemon as its bin would: the bin's flags, `nodeArgs`, the bin, then `args`. */
export function daemonArgv(args: readonly string[], nodeArgs: readonly string[] = []): string[] {
  return [...DAEMON_NODE_FLAGS, ...nodeArgs, BIN, ...args];
}

export interface DaemonProcess {
  readonly url: string;
  readonly token: string;
  readonly pid: number;
  rssKiB(): number;
  /** The most resident memory the daemon ever had (VmHWM). */
  peakRssKiB(): number;
  /** CPU seconds the daemon used so far. */
  cpuSeconds(): number;
  /** The start of the daemon's log (its first 64 KiB), JSON lines. */
  log(): string;
  /** The pid of the daemon's session watcher, from its log; undefined when it has none. */
  watcherPid(): number | undefined;
  /**
   * SIGTERM to the daemon itself, or with `via: 'launcher'` to the command
   * that started it (tini, as `docker stop` does); resolves with the
   * launched command's exit status once it has exited.
   */
  stop(options?: { via?: 'daemon' | 'launcher' }): Promise<number | null>;
}

/**
 * Starts the daemon of this checkout on a free port, with a home of its own;
 * with `uid` as that user (its group `gid`, the uid's number when not given,
 * and no supplementary group but `groups`), every privilege of this process
 * dropped; `env` added to this process's environment; with `maxOpenFiles`,
 * its limit of open files (`ulimit -n`, soft and hard) that low.
 */
export async function startDaemonProcess(
  args: string[] = [],
  nodeArgs: string[] = [],
  options: { uid?: number; gid?: number; groups?: readonly number[]; env?: NodeJS.ProcessEnv; maxOpenFiles?: number } = {},
): Promise<DaemonProcess> {
  const home = mkdtempSync(join(tmpdir(), 'execworld-bench-'));
  const argv = [process.execPath, ...daemonArgv(['serve', '--port', '0', ...args], nodeArgs)];
  if (options.uid !== undefined) {
    // Another user runs it: its home is theirs, and setpriv drops every privilege of this process.
    const gid = options.gid ?? options.uid;
    chownSync(home, options.uid, gid);
    const groups = options.groups === undefined || options.groups.length === 0 ? ['--clear-groups'] : [`--groups=${options.groups.join(',')}`];
    argv.unshift('setpriv', `--reuid=${options.uid}`, `--regid=${gid}`, ...groups, '--');
  }
  if (options.maxOpenFiles !== undefined) argv.unshift('prlimit', `--nofile=${options.maxOpenFiles}:${options.maxOpenFiles}`, '--');
  return serveFrom(argv, { env: { ...process.env, XDG_CONFIG_HOME: home, XDG_STATE_HOME: home, ...options.env } });
}

/**
 * Runs `argv`, a command that starts the daemon however it is installed (the
 * bin of this checkout, `npx execworld serve` in a project that installed the
 * packed tarballs, the image's command), and waits for the line of its log
 * that gives its address and token file.
 */
export async function serveFrom(argv: readonly string[], options: { cwd?: string; env: NodeJS.ProcessEnv }): Promise<DaemonProcess> {
  const child: ChildProcess = spawn(argv[0]!, argv.slice(1), { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'inherit'] });
  let logs = '';
  const onLog = (chunk: Buffer): void => {
    // Keep only the start of the log: the address line is all that is needed.
    if (logs.length < 64 * 1024) logs += chunk.toString();
  };
  child.stdout!.on('data', onLog);
  const deadline = Date.now() + 60_000;
  while (!/"address":"http:\/\/[^"]+"/.test(logs)) {
    if (Date.now() > deadline || child.exitCode !== null || child.signalCode !== null) {
      // One that never said where it listens is nobody's to stop: it ends here.
      child.kill('SIGKILL');
      throw new Error(`daemon did not start: ${logs}`);
    }
    await sleep(20);
  }
  const url = /"address":"(http:\/\/[^"]+)"/.exec(logs)![1]!;
  const token = readFileSync(/"tokenFile":"([^"]+)"/.exec(logs)![1]!, 'utf8').trim();
  // The daemon's own pid, from its log: `argv` may be a launcher (npx) that runs it as its child.
  const pid = Number(/"pid":(\d+)/.exec(logs)![1]);
  return {
    url,
    token,
    pid,
    rssKiB: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]),
    peakRssKiB: () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]),
    cpuSeconds: () => {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
    log: () => logs,
    watcherPid: () => {
      const match = /"watcher":(\d+)/.exec(logs);
      return match === null ? undefined : Number(match[1]);
    },
    // The daemon itself is signalled: a launcher such as npx runs it under a shell that does not pass SIGTERM on.
    stop: async (stopOptions = {}) => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
      process.kill(stopOptions.via === 'launcher' ? child.pid! : pid, 'SIGTERM');
      return exited;
    },
  };
}

/** Calls the REST operation `method path` of `daemon` with its token; throws what a refusal says. */
export async function callDaemon(daemon: DaemonProcess, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${daemon.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${daemon.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const parsed: unknown = await response.json();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(parsed)}`);
  return parsed;
}

/**
 * Sessions of `daemon` that would outlive it: a terminal whose program
 * ignores the hang-up the daemon's death brings, and a process whose child
 * left its session (setsid -f), each a `sleep marker`; answers once the three
 * sleeps run and the daemon has seen the whole tree, the escapee included.
 */
export async function leaveSessions(daemon: DaemonProcess, marker: string): Promise<void> {
  await callDaemon(daemon, 'POST', '/v1/terminals', {
    argv: ['/bin/sh', '-c', `trap '' HUP; sleep ${marker}`],
    cwd: '/tmp',
    rows: 24,
    cols: 80,
    graceMs: 1000,
  });
  const tree = await callDaemon(daemon, 'POST', '/v1/processes', {
    argv: ['/bin/sh', '-c', `setsid -f sleep ${marker}; sleep ${marker}`],
    cwd: '/tmp',
    stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
    graceMs: 1000,
  });
  await waitFor('three sleeps', () => markerPids(marker).length === 3);
  // The daemon has seen the whole tree once it says the tree still runs.
  const waited = (await callDaemon(daemon, 'POST', `/v1/processes/${tree.id}/wait`, { timeoutMs: 300 })) as { treeExited: boolean };
  if (waited.treeExited) throw new Error('the process tree ended before the daemon could leave it');
}
