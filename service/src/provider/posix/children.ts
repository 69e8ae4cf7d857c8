/**
 * The children libuv does not spawn or wait for: the terminals and processes
 * this process starts with posix_spawn (libc.ts, `spawnProgram`), and after a
 * takeover (an exec in place) the programs of the sessions it kept, which are
 * still its children though libuv waits only for the children it spawned
 * itself and node-pty's waiting threads died with the old image.
 *
 * A process's child is held as Node's `ChildProcess` is ({@link CollectedChild}),
 * its stdio pipes as sockets. Each exit is collected here
 * with `waitpid(pid, WNOHANG)` once it exited: where pidfds are there (Linux
 * 5.3), an epoll set of them says which exited, so a SIGCHLD costs a call per
 * exit whatever the number of children (libuv asks every child it has on
 * every SIGCHLD); elsewhere every child is asked. Both on every SIGCHLD and on
 * a slow poll (a SIGCHLD of a child libuv reaped first says nothing of ours,
 * and one signal may stand for several exits).
 * @module
 */
import { EventEmitter } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { readKernelText } from '../kernel-text.ts';
import { canSpawnPrograms, collectExit, ExitSet, socketPair, spawnProgram, type ChildExit } from './libc.ts';

/** The slow poll, against an exit whose SIGCHLD was taken by another listener's moment. */
const POLL_MS = 1_000;

const waiting = new Map<number, (exit: ChildExit | undefined) => void>();
let timer: NodeJS.Timeout | undefined;

/** The pidfds of the children waited for, where there are pidfds; opened with the first. */
let exitSet: ExitSet | undefined | null = null;
/** Children waited for that the set does not watch (none where it is there, but one it could not add). */
const unwatched = new Set<number>();

function collectOne(pid: number): void {
  const resolve = waiting.get(pid);
  if (resolve === undefined) return;
  const exit = collectExit(pid);
  if (exit === undefined) return;
  waiting.delete(pid);
  unwatched.delete(pid);
  // 'gone': reaped by something else, its status lost; told as undefined.
  resolve(exit === 'gone' ? undefined : exit);
}

function collect(): void {
  if (exitSet === undefined || exitSet === null) for (const pid of [...waiting.keys()]) collectOne(pid);
  else {
    for (const pid of exitSet.exited()) {
      collectOne(pid);
      // Told exited, yet not collected: asked again on every SIGCHLD until it is.
      if (waiting.has(pid)) unwatched.add(pid);
    }
    for (const pid of [...unwatched]) collectOne(pid);
  }
  if (waiting.size === 0) stop();
}

function stop(): void {
  process.off('SIGCHLD', collect);
  clearInterval(timer);
  timer = undefined;
}

/**
 * Resolves with the exit of child `pid` once it exited, or undefined when its
 * status cannot be had (it is no child of this process).
 */
export function waitForChildExit(pid: number): Promise<ChildExit | undefined> {
  return new Promise((resolve) => {
    waiting.set(pid, resolve);
    if (exitSet === null) exitSet = ExitSet.open();
    if (exitSet !== undefined && !exitSet.add(pid)) unwatched.add(pid);
    if (timer === undefined) {
      process.on('SIGCHLD', collect);
      // Held, not unref'd: a child waited for keeps this process alive, as Node's ChildProcess does (signal listeners do not).
      timer = setInterval(collect, POLL_MS);
    }
    // It may have exited before it was adopted: its zombie waits.
    setImmediate(collect);
  });
}

/**
 * After a takeover, before this image starts any child of its own: the
 * children of the previous image that are no session's (its session watcher,
 * the workers of other users, told to exit by the exec closing their pipes)
 * are collected once they exit, so that none stays a zombie. `sessions`: the
 * pids of the programs adopted, which are collected with their sessions.
 * Returns the pids it waits for (Linux; none where /proc does not list children).
 */
export function reapPreviousImageHelpers(sessions: ReadonlySet<number>): number[] {
  let listed: string;
  try {
    // After the exec this process has one thread, its main one, which the previous image's children belong to now.
    listed = readKernelText(`/proc/self/task/${process.pid}/children`);
  } catch (_error) {
    return [];
  }
  const helpers = listed
    .split(' ')
    .map(Number)
    .filter((pid) => Number.isSafeInteger(pid) && pid > 0 && !sessions.has(pid));
  for (const pid of helpers) void waitForChildExit(pid);
  return helpers;
}

/** The descriptors of a process's stdio pipes: made at its spawn, or handed over by the previous image (a pipe it had closed is absent). */
export interface ChildPipes {
  readonly stdin?: number | undefined;
  readonly stdout?: number | undefined;
  readonly stderr?: number | undefined;
}

/**
 * A child started by {@link startChild}, or one of the previous image of this
 * process (a takeover), seen as Node's `ChildProcess` is by those who hold
 * one: its pid, its stdio pipes as sockets on their descriptors, 'spawn' at
 * once, 'exit' with the exact code or signal once {@link waitForChildExit}
 * collects it, and 'close' once it exited and its output pipes closed, as
 * Node orders them.
 *
 * The pipes are socketpairs, as libuv makes them at its spawn: a `net.Socket` on
 * each keeps what Node's own did, back-pressure (a paused socket stops
 * reading, and the program blocks on a full pipe) and half-close (ending
 * stdin shuts its write side down, and the program reads end of file).
 */
export class CollectedChild extends EventEmitter {
  readonly pid: number;
  readonly stdin: Socket | null;
  readonly stdout: Socket | null;
  readonly stderr: Socket | null;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  #closesNeeded = 1;
  #exited = false;

  constructor(pid: number, pipes: ChildPipes) {
    super();
    this.pid = pid;
    // As child_process makes them: stdin is not read, the output pipes are not written.
    this.stdin = pipes.stdin === undefined ? null : new Socket({ fd: pipes.stdin, readable: false });
    this.stdout = pipes.stdout === undefined ? null : new Socket({ fd: pipes.stdout, readable: true, writable: false });
    this.stderr = pipes.stderr === undefined ? null : new Socket({ fd: pipes.stderr, readable: true, writable: false });
    for (const pipe of [this.stdout, this.stderr]) {
      if (pipe === null) continue;
      this.#closesNeeded += 1;
      pipe.once('close', () => this.#maybeClose());
    }
    setImmediate(() => this.emit('spawn'));
    void waitForChildExit(pid).then((exit) => {
      // Its status is lost only when something else reaped it: told as a kill, as an adopted terminal's is.
      const { exitCode, signal } = exit ?? { exitCode: 0, signal: osConstants.signals.SIGKILL };
      const name =
        signal === 0 ? null : ((Object.entries(osConstants.signals).find(([, value]) => value === signal)?.[0] as NodeJS.Signals | undefined) ?? 'SIGKILL');
      this.exitCode = name === null ? exitCode : null;
      this.signalCode = name;
      this.#exited = true;
      // As Node's: the program is gone, so its stdin is too.
      this.stdin?.destroy();
      this.emit('exit', this.exitCode, this.signalCode);
      this.#maybeClose();
    });
  }

  /** Signals the child, as ChildProcess.kill does; false when it is gone. */
  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    if (this.#exited) return false;
    try {
      process.kill(this.pid, signal);
      return true;
    } catch (_error) {
      return false;
    }
  }

  #maybeClose(): void {
    this.#closesNeeded -= 1;
    if (this.#closesNeeded === 0) this.emit('close', this.exitCode, this.signalCode);
  }
}

/** Whether {@link startChild} starts children here: Linux, glibc's posix_spawn, never refused by this host. */
export { canSpawnPrograms } from './libc.ts';

/** How {@link startChild} gives a child each of its standard descriptors, as Node's spawn's `stdio` does. */
export type ChildStdio = 'pipe' | 'ignore' | 'inherit';

/** A program {@link startChild} starts: `file` is its path, resolved already (posix_spawn searches no PATH). */
export interface ChildStart {
  readonly file: string;
  /** Its argv[0]: the name it was asked by, as Node's spawn gives it. */
  readonly argv0: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly stdio: readonly [ChildStdio, ChildStdio, ChildStdio];
  /** The child calls setsid before its exec, as Node's `detached` does. */
  readonly newSession: boolean;
}

/**
 * Starts a program as Node's spawn does, without copying this process
 * (posix_spawn, see `spawnProgram`): a pipe is a socketpair whose end here is
 * the child's socket, an ignored descriptor is /dev/null, an inherited one is
 * this process's own. Its exit is collected by {@link waitForChildExit}.
 * Undefined where posix_spawn is not used (not there, refused by this host),
 * or the exec answered ENOEXEC (a script without `#!`, which Node's spawn
 * runs with /bin/sh as execvp does): Node's spawn starts it then.
 * @throws {NodeJS.ErrnoException} when it cannot be started (the exec's errno), as the `error` event of Node's spawn reports it.
 */
export function startChild(start: ChildStart): CollectedChild | undefined {
  if (!canSpawnPrograms()) return undefined;
  const ours: (number | undefined)[] = [undefined, undefined, undefined];
  const theirs: (number | undefined)[] = [undefined, undefined, undefined];
  let started = false;
  try {
    for (const [fd, how] of start.stdio.entries()) {
      if (how === 'ignore') theirs[fd] = openSync('/dev/null', fd === 0 ? 'r' : 'w');
      else if (how === 'pipe') [ours[fd], theirs[fd]] = socketPair();
    }
    let pid: number;
    try {
      pid = spawnProgram(start.file, [start.argv0, ...start.args], start.env, start.cwd, theirs, { newSession: start.newSession });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOEXEC' || !canSpawnPrograms()) return undefined;
      throw Object.assign(error as Error, {
        message: `spawn ${start.argv0} ${code}`,
        syscall: `spawn ${start.argv0}`,
        path: start.argv0,
        spawnargs: [...start.args],
      });
    }
    started = true;
    return new CollectedChild(pid, { stdin: ours[0], stdout: ours[1], stderr: ours[2] });
  } finally {
    // The child has its copies (dup2 onto its 0-2); a start that failed keeps none of ours either.
    for (const fd of theirs) if (fd !== undefined) closeQuietly(fd);
    if (!started) for (const fd of ours) if (fd !== undefined) closeQuietly(fd);
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch (_error) {
    // Closed already.
  }
}
