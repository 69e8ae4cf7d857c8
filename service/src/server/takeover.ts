/**
 * The takeover: a running daemon becomes a new build of itself in place, and
 * keeps its listening socket and its terminals (see `docs/lifecycle.md`).
 *
 * Why an exec, not a second process: only a process's parent collects a
 * child's exit status, and Linux cannot hand children to a process of our
 * choice (an orphan goes to init or the nearest subreaper ancestor). A new
 * daemon beside the old one could be passed the pty masters (SCM_RIGHTS) but
 * would never learn its programs' exit codes. execve keeps the pid, so every
 * program stays this process's child; it keeps every descriptor without
 * close-on-exec; it leaves cgroups as they are.
 *
 * The trigger is a request on a unix socket in the state directory
 * (`takeover.sock`, 0600 in a 0700 directory: only the daemon's user reaches
 * it), which `execworld serve --takeover` sends with the path of its own
 * entry. A signal could not say which build to become, nor carry back why a
 * takeover was refused. The daemon then:
 *
 * 1. writes a snapshot of its state and rehearses: the new entry runs as a
 *    child with `serve --takeover-check <state>`, which loads every module and
 *    parses the state. A build that cannot start fails here, and this daemon
 *    serves on as if nothing happened;
 * 2. then, in one synchronous stretch (nothing is accepted, read or answered
 *    in between): stops reading its terminals and its processes' output pipes,
 *    writes the state (0600) again, clears close-on-exec on the listening
 *    socket, the masters and the pipes, closes its
 *    WebSocket connections with 1012 (service restart), tells its session
 *    watcher to exit, and execs the new entry with serve's own arguments and
 *    `--takeover-state <state>`. Connections arriving meanwhile wait in the
 *    listening socket's backlog for the new image.
 *
 * The new image adopts the sessions before it listens on the inherited socket.
 * @module
 */
import { spawn } from 'node:child_process';
import { chmodSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { isAbsolute, join } from 'node:path';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { Daemon } from './app.ts';
import type { DaemonImage } from './image.ts';
import {
  markRolledBack,
  readableVersions,
  readTakeoverState,
  TAKEOVER_STATE_VERSION,
  TakeoverRefusedError,
  TakeoverStateError,
  writeTakeoverState,
  type TakeoverState,
} from './takeover-state.ts';

/** The control socket's name in the state directory. */
export const TAKEOVER_SOCKET = 'takeover.sock';

/** How long a rehearsal may take before it counts as failed. */
const REHEARSAL_TIMEOUT_MS = 60_000;
/** The most of a failed rehearsal's stderr told back. */
const REHEARSAL_STDERR_BYTES = 4096;
/** The longest request line the control socket reads. */
const MAX_REQUEST_BYTES = 16 * 1024;
/** A control connection that sends no request in this time is closed. */
const REQUEST_TIMEOUT_MS = 10_000;

/** The calls of the C library a takeover makes, passed in by the daemon's start (the provider binds them). */
export interface ExecCalls {
  keepAcrossExec(fd: number): void;
  setCloseOnExec(fd: number): void;
  /** Returns only when the exec failed, with its errno. */
  execve(file: string, argv: readonly string[], env: NodeJS.ProcessEnv): number;
}

export interface TakeoverControlOptions {
  readonly daemon: Daemon;
  readonly stateDir: string;
  /** serve's own arguments, which the new image runs with (any earlier `--takeover-state` left out). */
  readonly serveArgs: readonly string[];
  /** The absolute path of this build's entry: a new build that fails before it serves gives the sessions back to it. */
  readonly entry: string;
  readonly image: DaemonImage;
  readonly calls: ExecCalls;
  readonly log: Logger;
}

/** The path of the control socket of the daemon whose state directory is `stateDir`. */
export function takeoverSocketPath(stateDir: string): string {
  return join(stateDir, TAKEOVER_SOCKET);
}

/** serve's arguments without `--takeover-state <file>` and the other takeover options, which are each start's own. */
export function withoutTakeoverOptions(args: readonly string[]): string[] {
  const kept: string[] = [];
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index]!;
    if (arg === '--takeover') continue;
    if (arg === '--takeover-state' || arg === '--takeover-check') {
      index += 1;
      continue;
    }
    if (arg.startsWith('--takeover-state=') || arg.startsWith('--takeover-check=')) continue;
    kept.push(arg);
  }
  return kept;
}

/**
 * Listens on the control socket of `stateDir` (a stale one, left by a
 * previous image, is replaced) and serves status and takeover requests.
 */
export async function startTakeoverControl(options: TakeoverControlOptions): Promise<Server> {
  const path = takeoverSocketPath(options.stateDir);
  rmSync(path, { force: true });
  let busy = false;
  const server = createServer((socket) => {
    socket.setTimeout(REQUEST_TIMEOUT_MS, () => socket.destroy());
    let buffered = '';
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8');
      const end = buffered.indexOf('\n');
      if (end < 0) {
        if (buffered.length > MAX_REQUEST_BYTES) answer(socket, { error: `a request is one JSON line of at most ${MAX_REQUEST_BYTES} bytes` }, true);
        return;
      }
      socket.off('data', onData);
      socket.setTimeout(0);
      let request: { op?: unknown; entry?: unknown };
      try {
        request = JSON.parse(buffered.slice(0, end)) as typeof request;
      } catch (_error) {
        answer(socket, { error: 'the request is not JSON' }, true);
        return;
      }
      if (request?.op === 'status') {
        answer(socket, options.image.facts, true);
        return;
      }
      if (request?.op !== 'takeover') {
        answer(socket, { error: 'op must be status or takeover' }, true);
        return;
      }
      if (typeof request.entry !== 'string' || !isAbsolute(request.entry) || !isFile(request.entry)) {
        answer(socket, { error: "entry must be the absolute path of the new build's execworld entry" }, true);
        return;
      }
      if (busy) {
        answer(socket, { error: 'a takeover is under way' }, true);
        return;
      }
      busy = true;
      takeOver(options, request.entry, socket)
        .catch((error: unknown) => {
          options.log.error({ err: error }, 'takeover failed; this daemon serves on');
          answer(socket, { error: `the takeover failed: ${(error as Error).message}` }, true);
        })
        .finally(() => {
          busy = false;
        });
    };
    socket.on('data', onData);
    socket.on('error', () => socket.destroy());
  });
  await listenPrivately(server, path);
  server.unref();
  return server;
}

/**
 * Listens on the Unix socket `path`, made 0600 as it is bound: a socket is made
 * with the mode the umask leaves, and one that anyone may write takes anyone's
 * connection until it is changed (a connection made then stays open). The
 * umask is this process's, so it is set only around the bind, which is
 * synchronous, and put back at once.
 */
export async function listenPrivately(server: Server, path: string): Promise<void> {
  const listening = new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const umask = process.umask(0o177);
  try {
    server.listen(path);
  } finally {
    process.umask(umask);
  }
  await listening;
  // Said again, whatever made it: the mode is the only lock on it.
  chmodSync(path, 0o600);
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch (_error) {
    return false;
  }
}

/** Writes one JSON line; with `end`, closes the connection after it. */
function answer(socket: Socket, value: object, end = false): void {
  if (socket.destroyed) return;
  const line = `${JSON.stringify(value)}\n`;
  if (end) socket.end(line);
  else socket.write(line);
}

/** The listening socket's descriptor, or why it cannot be handed over. */
function listeningDescriptor(daemon: Daemon): number | string {
  if (daemon.app.addresses().length !== 1) return 'the daemon listens on several addresses (--host localhost): only one listening socket is handed over yet';
  const fd = (daemon.app.server as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return typeof fd === 'number' && fd >= 3 ? fd : 'the listening socket has no descriptor to hand over';
}

/** How this process runs the build at `entry` as a daemon with serve's `serveArgs` (node's own flags kept). */
function buildArgv(entry: string, serveArgs: readonly string[]): string[] {
  return [process.execPath, ...process.execArgv, '--', entry, 'serve', ...serveArgs];
}

/** The state of this image, for the next one: with `stopReading`, its terminals are no longer read. */
function stateOf(options: TakeoverControlOptions, listenFd: number, stopReading: boolean): TakeoverState {
  return {
    version: TAKEOVER_STATE_VERSION,
    pid: process.pid,
    handedOverAt: Date.now(),
    startedAt: options.image.facts.startedAt,
    takeovers: options.image.facts.takeovers,
    listenFd,
    ...options.daemon.registry.takeoverRecords(stopReading),
    uploads: options.daemon.uploads.takeoverRecords(),
    previous: { argv: buildArgv(options.entry, options.serveArgs), reads: readableVersions() },
  };
}

/**
 * The descriptors the exec keeps for the image that takes `state`: the
 * standard ones (close-on-exec here, as every descriptor from 3 up is; the new
 * image logs to its standard output), the listening socket, the terminals'
 * masters, the processes' pipes and the uploads' anchors.
 */
function descriptorsOf(state: TakeoverState): number[] {
  const pipes = state.processes.flatMap(({ process: kept }) =>
    kept === undefined ? [] : [kept.stdin, kept.stdout, kept.stderr].filter((fd) => fd !== undefined),
  );
  const uploads = (state.uploads ?? []).flatMap((record) => [record.stage.directory.fd, record.stage.stage.fd]);
  return [0, 1, 2, state.listenFd, ...state.terminals.flatMap((record) => (record.terminal === undefined ? [] : [record.terminal.fd])), ...pipes, ...uploads];
}

/**
 * The handover's synchronous stretch (nothing is accepted, read or answered
 * in between): this image stops reading its sessions, writes its state (with
 * `extra`), keeps the state's descriptors across the exec, tells WebSocket
 * clients to reconnect (1012), tells its session watcher to exit, and execs
 * `argv` with `--takeover-state`. `told` runs just before the exec. Returns
 * only when the exec failed, once this image reads its sessions again, with
 * why; the state file is removed then.
 */
function handOver(
  options: TakeoverControlOptions,
  listenFd: number,
  argv: readonly string[],
  extra: Partial<TakeoverState>,
  told: (state: TakeoverState) => void,
): Error {
  const { daemon, calls } = options;
  const kept: number[] = [];
  let statePath: string | undefined;
  try {
    const state: TakeoverState = { ...stateOf(options, listenFd, true), ...extra };
    statePath = writeTakeoverState(options.stateDir, state);
    for (const fd of descriptorsOf(state)) {
      calls.keepAcrossExec(fd);
      kept.push(fd);
    }
    daemon.hub.closeAll(1012, 'daemon restarting: reconnect');
    daemon.parts.handOver();
    told(state);
    const errno = calls.execve(argv[0]!, [...argv, '--takeover-state', statePath], process.env);
    throw new Error(`the exec failed: execve of ${argv[0]} failed with errno ${errno}`);
  } catch (error) {
    for (const fd of kept) {
      try {
        calls.setCloseOnExec(fd);
      } catch (_error) {
        // Gone.
      }
    }
    daemon.registry.resumeAfterTakeover();
    daemon.parts.resumeAfterHandOver();
    if (statePath !== undefined) rmSync(statePath, { force: true });
    return error as Error;
  }
}

async function takeOver(options: TakeoverControlOptions, entry: string, socket: Socket): Promise<void> {
  const { daemon, log } = options;
  const fail = (why: string): void => {
    log.warn({ entry, why }, 'takeover refused; this daemon serves on');
    answer(socket, { error: why }, true);
  };
  const listenFd = listeningDescriptor(daemon);
  if (typeof listenFd === 'string') return fail(listenFd);
  let draft: TakeoverState;
  try {
    draft = stateOf(options, listenFd, false);
  } catch (error) {
    if (error instanceof TakeoverRefusedError) return fail(error.message);
    throw error;
  }
  const draftPath = writeTakeoverState(options.stateDir, draft);
  const argv = buildArgv(entry, options.serveArgs);
  const rehearsal = await rehearse(argv, draftPath);
  rmSync(draftPath, { force: true });
  if (rehearsal !== undefined) return fail(`the new build failed its rehearsal: ${rehearsal}`);
  answer(socket, { step: 'rehearsed' });
  log.info({ entry, terminals: draft.terminals.length }, 'takeover: the rehearsal passed; handing over');
  const error = handOver(options, listenFd, argv, {}, (state) => {
    log.info({ entry, terminals: state.terminals.length, processes: state.processes.length }, 'takeover: exec');
    answer(socket, { step: 'exec', terminals: state.terminals.length, processes: state.processes.length });
  });
  fail(error.message);
}

/**
 * A new image that failed after the exec but adopted every session (its
 * listening failed, say) gives them back to the build it took them from: a
 * handover like any other, to the previous build, with the state marked
 * rolled back, and the listening socket's descriptor `listenFd` (a copy made
 * before this image used it, which a failed listen may have closed). Returns
 * only when that could not be done, with why.
 */
export function giveBack(options: TakeoverControlOptions, adopted: TakeoverState, listenFd: number, failedEntry: string, reason: string): Error {
  const refusal = rollbackRefusal(adopted, TAKEOVER_STATE_VERSION);
  if (refusal !== undefined) return new Error(refusal);
  return handOver(
    options,
    listenFd,
    adopted.previous!.argv,
    {
      // The pause clients see runs from the first handover; the takeover that failed is not counted.
      handedOverAt: adopted.handedOverAt,
      takeovers: adopted.takeovers,
      previous: adopted.previous,
      rollback: { entry: failedEntry, reason },
    },
    (state) =>
      options.log.error({ entry: adopted.previous!.argv, reason, sessions: state.terminals.length + state.processes.length }, 'giving the sessions back'),
  );
}

/**
 * A new image that failed after the exec, before it read any session (before
 * or while it adopted them: adoption is one synchronous stretch), gives back
 * the state as it came, marked rolled back, and execs the previous build.
 * `beforeExec` stops what this image started (its session watcher).
 * Returns only when that could not be done, with why.
 */
export function giveBackUnread(
  calls: ExecCalls,
  statePath: string,
  adopted: TakeoverState,
  failedEntry: string,
  reason: string,
  beforeExec: () => void,
): Error {
  const refusal = rollbackRefusal(adopted, adopted.version);
  if (refusal !== undefined) return new Error(refusal);
  try {
    markRolledBack(statePath, failedEntry, reason);
    for (const fd of descriptorsOf(adopted)) calls.keepAcrossExec(fd);
    beforeExec();
  } catch (error) {
    return error as Error;
  }
  const argv = adopted.previous!.argv;
  const errno = calls.execve(argv[0]!, [...argv, '--takeover-state', statePath], process.env);
  return new Error(`execve of ${argv[0]} failed with errno ${errno}`);
}

/** Why the sessions of `adopted` cannot be given back in a state of `version`, if they cannot. */
function rollbackRefusal(adopted: TakeoverState, version: number): string | undefined {
  if (adopted.rollback !== undefined) return `this build took the sessions back from ${adopted.rollback.entry}: it does not give them back again`;
  if (adopted.previous === undefined) return 'the previous build said nothing of how to run it (it predates rollback)';
  if (!adopted.previous.reads.includes(version))
    return `the previous build reads takeover states of versions ${adopted.previous.reads.join(' and ')}, not ${version}`;
  return undefined;
}

/** Runs the new entry with `--takeover-check` on the state; undefined when it passed, else why not. */
function rehearse(argv: readonly string[], statePath: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, [...argv.slice(1), '--takeover-check', statePath], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < REHEARSAL_STDERR_BYTES) stderr += chunk.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), REHEARSAL_TIMEOUT_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve(`cannot run ${process.execPath}: ${error.message}`);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const said = stderr.trim().slice(0, REHEARSAL_STDERR_BYTES);
      if (code === 0) resolve(undefined);
      else resolve(`${signal === null ? `it exited with status ${code}` : `it was killed by ${signal}`}${said === '' ? '' : `: ${said}`}`);
    });
  });
}

/**
 * The rehearsal's check, in the new build: the state at `path` is one it
 * reads. Every module of the daemon is loaded by then (serve imports them).
 * @throws {TakeoverStateError} naming what it cannot take.
 */
export function checkTakeoverState(path: string): TakeoverState {
  return readTakeoverState(path);
}

export { TakeoverStateError };
