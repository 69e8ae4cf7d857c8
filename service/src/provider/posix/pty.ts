/**
 * A pseudo-terminal with a child process on it, for Linux and macOS.
 *
 * On Linux the terminal is opened with node-pty's `open` (openpty) and given
 * node-pty's modes, and the child is started with Node's own spawn on the
 * slave, through `setsid -c` (`--ctty`), which makes it a session leader with the
 * terminal as its controlling terminal before it execs the program (the pid
 * stays the same). libuv reaps it with every other child, on SIGCHLD. node-pty's
 * `fork` (forkpty) would leave a thread in this process per terminal, waiting
 * for its child; moving the daemon into a session's cgroup for the next spawn
 * moves every thread it has, so each spawn cost more the more terminals ran
 * (40 ms at 1,000). Without a `setsid` on the host, and on macOS (posix_spawn
 * through spawn-helper), node-pty's `fork` is used.
 *
 * It uses node-pty's `resize`, and reads the master side itself,
 * because node-pty's reader loses the end of the output of a command that
 * exits right after printing (microsoft/node-pty#72). The cause is in libuv:
 * when the slave side hangs up, a poll that reports POLLHUP after a short read
 * is taken as end of stream (`uv__stream_io`), but a pty hands its buffer over
 * in small pieces, so a short read does not mean the buffer is empty. node-pty
 * then waits up to 200 ms for a socket close before it reports the exit.
 *
 * Here, every path that ends the stream first drains the master with
 * synchronous non-blocking reads until the kernel says it is empty (EAGAIN) or
 * hung up (EIO). The kernel flushes pending pty input before either answer, so
 * nothing written before the drain is lost. The exit is reported as soon as
 * the child is reaped and the drain is delivered: no timer.
 * @module
 */
import { spawn as spawnChild } from 'node:child_process';
import { closeSync, existsSync, readSync, writeSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { ReadStream } from 'node:tty';
import { hostFacts } from '../platform/host.ts';
import { waitForChildExit } from './children.ts';
import { bytesReadable, canSpawnPrograms, setCloseOnExec, spawnProgram, setDefaultTerminalModes, terminalForegroundGroup, terminalReadsLines } from './libc.ts';
import { nativePty, type NativePty } from './pty-native.ts';
import { readAgain, stopReading } from '../stream-handover.ts';

export interface PtySpawnOptions {
  readonly file: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string;
  /** The ids the child takes (setgid, then setuid) after it changed to `cwd` and before it execs; -1 or absent keeps the host's. */
  readonly uid?: number | undefined;
  readonly gid?: number | undefined;
  readonly cols: number;
  readonly rows: number;
  /**
   * Runs the fork, which is synchronous, e.g. inside a session's cgroup. Only
   * the fork itself: the rest of the setup is this process's own business.
   * `threads`: the threads the fork starts in this process.
   */
  readonly spawnInside?: <T>(spawn: () => T, threads: number) => T;
}

/**
 * A terminal this process keeps from its previous image (a takeover): its
 * child, the master descriptor it inherited across the exec, and the slave's path.
 */
export interface PtyAdoption {
  readonly pid: number;
  readonly fd: number;
  readonly device: string;
}

/** Exit facts as the kernel reports them: a code, or a signal number. */
export interface PtyExit {
  readonly exitCode: number;
  /** 0 when the child was not killed by a signal. */
  readonly signal: number;
}

export interface PtyEvents {
  /** A chunk of output, in order. Never called after `onExit`. */
  onData(chunk: Buffer): void;
  /** The child was reaped and every output byte was delivered. Called once. */
  onExit(exit: PtyExit): void;
}

/** Largest amount read synchronously at exit, against a descendant that keeps writing. */
const MAX_EXIT_DRAIN_BYTES = 1024 * 1024;
/**
 * A read at least this large means the program is writing in bulk: the master
 * is read on synchronously while it holds more (up to COALESCE_BYTES), so a consumer gets one large
 * chunk instead of one per read (a pty hands out at most 4 KiB a read).
 * Interactive output (an echo, a prompt) is smaller and is delivered at once.
 */
const BULK_READ_BYTES = 2048;
const COALESCE_BYTES = 64 * 1024;
/** Largest amount a flush reads before an input-wait proof is reported. */
const MAX_FLUSH_BYTES = 256 * 1024;
/**
 * One buffer for every synchronous read of a master: reads never overlap (they
 * run to completion on this thread), and every byte is copied out before the
 * next read.
 */
const SCRATCH = Buffer.allocUnsafe(COALESCE_BYTES);
/** Retry delay of a write the terminal's input queue could not take. */
const WRITE_RETRY_MS = 5;

/** A child process on a new pseudo-terminal. */
export class UnixPty {
  readonly pid: number;
  /** Path of the slave side, e.g. `/dev/pts/3`. */
  readonly device: string;
  readonly #fd: number;
  readonly #socket: ReadStream;
  readonly #events: PtyEvents;
  /** The master side will give no more data. */
  #eof = false;
  #exit: PtyExit | undefined;
  #exitReported = false;
  #pendingBytes = 0;
  #writes: { data: Buffer; resolve: () => void; reject: (error: Error) => void }[] = [];
  #writeTimer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #spawnedBySetsid: boolean;
  #handedOver = false;

  constructor(options: PtySpawnOptions | PtyAdoption, events: PtyEvents) {
    this.#events = events;
    const onExit = (exit: PtyExit): void => this.#onChildExit(exit);
    let term: Started;
    if ('fd' in options) {
      term = { pid: options.pid, fd: options.fd, pty: options.device };
      collectExitInto(options.pid, onExit);
    } else {
      const setsid = setsidPath();
      term = setsid === undefined ? forkOnNewTerminal(options, onExit) : spawnOnNewTerminal(options, setsid, onExit);
    }
    this.#spawnedBySetsid = 'fd' in options || setsidPath() !== undefined;
    this.pid = term.pid;
    this.device = term.pty;
    this.#fd = term.fd;
    try {
      // Before any other child is started (spawns are synchronous on this thread):
      // no later shell or process may inherit this terminal's master and type into it.
      setCloseOnExec(term.fd);
    } catch (error) {
      process.kill(term.pid, 'SIGKILL');
      closeDescriptor(term.fd);
      throw new Error(`cannot make the terminal's master close-on-exec: ${(error as Error).message}`, { cause: error });
    }
    this.#socket = new ReadStream(term.fd);
    // Flowing mode: each read is delivered synchronously from libuv's callback.
    this.#socket.on('data', (chunk: Buffer) => {
      if (this.#eof) return;
      this.#events.onData(chunk.length >= BULK_READ_BYTES ? this.#readMore(chunk) : chunk);
    });
    // libuv's premature end of stream: the slave has hung up, so what is left is finite.
    this.#socket.on('end', () => this.#finishInput());
    // EIO: the kernel had delivered everything before it reported the hangup.
    this.#socket.on('error', () => this.#finishInput());
    this.#socket.on('close', () => this.#finishInput());
  }

  /** The master descriptor, which a takeover keeps across the exec. */
  get fd(): number {
    return this.#fd;
  }

  /**
   * Whether this terminal can be handed to the next image of this process:
   * its child is libuv's (node-pty's fork leaves a thread that waits for it,
   * which an exec ends, and its status with it), and its master is open.
   */
  get canHandOver(): boolean {
    return this.#spawnedBySetsid && this.open && !this.#eof;
  }

  /**
   * Stops reading the master for a takeover: what is in the kernel's buffers
   * stays there for the next image, which reads the same descriptor. What the
   * socket had read is delivered first, in order.
   */
  handOver(): void {
    this.#handedOver = true;
    stopReading(this.#socket);
  }

  /** Reads on after a takeover that did not happen. */
  resumeAfterHandOver(): void {
    this.#handedOver = false;
    if (!this.#eof) readAgain(this.#socket);
  }

  /** Stops reading; the terminal's buffers fill and the writer blocks. */
  pause(): void {
    if (!this.#eof) this.#socket.pause();
  }

  resume(): void {
    // Handed over: the next image reads the master; a reader's demand must not start this one again.
    if (!this.#eof && !this.#handedOver) this.#socket.resume();
  }

  get exited(): boolean {
    return this.#exit !== undefined;
  }

  /**
   * Whether the master descriptor is still open. It closes once the slave side
   * hung up (every process closed the terminal) or the terminal was released;
   * from then on its number may name another file, and is never used again.
   */
  get open(): boolean {
    return !this.#closed && !this.#socket.destroyed;
  }

  /** Bytes of input accepted and not yet taken by the kernel. */
  get pendingInputBytes(): number {
    return this.#pendingBytes;
  }

  /**
   * Writes to the terminal's input. Resolves once the kernel took every byte.
   * @throws {PtyClosedError} once the master is closed or the process exited.
   */
  write(data: string | Buffer): Promise<void> {
    if (this.#exit !== undefined) return Promise.reject(new PtyClosedError('exited', 'the terminal process has exited'));
    if (!this.open) return Promise.reject(new PtyClosedError('closed', 'the terminal is closed: its program closed it, or it was released'));
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (bytes.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#writes.push({ data: bytes, resolve, reject });
      this.#pendingBytes += bytes.length;
      if (this.#writes.length === 1) this.#flushWrites();
    });
  }

  /**
   * The terminal's foreground process group, asked on the master: 0 when it
   * has none; undefined when the master is closed or the kernel cannot be
   * asked this way (see {@link terminalForegroundGroup}).
   */
  foregroundGroup(): number | undefined {
    // Once the socket is destroyed its fd is closed, and the number may name another file.
    return this.open ? terminalForegroundGroup(this.#fd) : undefined;
  }

  /** Whether the terminal reads input by lines now (see {@link terminalReadsLines}); undefined where it cannot be told. */
  readsLines(): boolean | undefined {
    return this.open ? terminalReadsLines(this.#fd) : undefined;
  }

  resize(cols: number, rows: number): void {
    // Once the socket is destroyed its fd is closed, and the number may name another file.
    if (!this.open) throw new PtyClosedError('closed', 'the terminal is closed: its program closed it, or it was released');
    nativePty().native.resize(this.#fd, cols, rows);
  }

  /**
   * Delivers, synchronously, every byte the terminal holds for the master right
   * now: what the paused socket buffered, then reads until the kernel has none
   * (its pending output is flushed to the master before a read says so). Does
   * nothing while the consumer holds the terminal paused. Returns false when
   * output may still be held back (paused, or more than MAX_FLUSH_BYTES waiting).
   */
  flush(): boolean {
    if (this.#eof || !this.open) return true;
    if (this.#socket.isPaused()) return false;
    // read() hands each chunk the socket holds to the 'data' listener.
    while (this.#socket.readableLength > 0 && !this.#socket.isPaused() && this.#socket.read() !== null);
    if (this.#socket.isPaused()) return false;
    return this.#readDry(MAX_FLUSH_BYTES, true);
  }

  /** Sends a signal to the child itself. */
  kill(signal: NodeJS.Signals): void {
    process.kill(this.pid, signal);
  }

  /** Releases the master side. Pending writes fail. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#failWrites(() => new PtyClosedError('closed', 'the terminal is closed'));
    this.#socket.destroy();
  }

  /** Fails the writes waiting, with the error `failure` makes: only when there are some (an error's stack costs tens of µs, and every terminal's end came here). */
  #failWrites(failure: () => Error): void {
    clearTimeout(this.#writeTimer);
    this.#writeTimer = undefined;
    this.#pendingBytes = 0;
    const writes = this.#writes.splice(0);
    if (writes.length === 0) return;
    const error = failure();
    for (const write of writes) write.reject(error);
  }

  #flushWrites(): void {
    this.#writeTimer = undefined;
    while (this.#writes.length > 0) {
      // Checked before every write: a closed descriptor's number may already name another file.
      if (!this.open) {
        this.#failWrites(() => new PtyClosedError('closed', 'the terminal is closed: its program closed it, or it was released'));
        return;
      }
      const head = this.#writes[0]!;
      let written: number;
      try {
        written = writeSync(this.#fd, head.data);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN') {
          this.#writeTimer = setTimeout(() => this.#flushWrites(), WRITE_RETRY_MS);
          return;
        }
        this.#writes.shift();
        this.#pendingBytes -= head.data.length;
        head.reject(error as Error);
        continue;
      }
      this.#pendingBytes -= written;
      if (written < head.data.length) {
        head.data = head.data.subarray(written);
        this.#writeTimer = setTimeout(() => this.#flushWrites(), WRITE_RETRY_MS);
        return;
      }
      this.#writes.shift();
      head.resolve();
    }
  }

  /**
   * Reads the master until the kernel has nothing more (EAGAIN: empty; EIO: hung
   * up and empty), `limit` bytes were read, or, with `untilPaused`, the consumer
   * paused the terminal; delivers each read. True when the master was read dry.
   */
  #readDry(limit: number, untilPaused: boolean): boolean {
    let total = 0;
    while (total < limit) {
      const read = this.#readSyncOnce(SCRATCH);
      if (read <= 0) return true;
      total += read;
      // A copy: the scratch buffer is read into again.
      this.#events.onData(Buffer.from(SCRATCH.subarray(0, read)));
      if (untilPaused && this.#socket.isPaused()) return false;
    }
    return false;
  }

  /** One non-blocking read of the master: the byte count, or 0 when it has nothing (EAGAIN, EIO). */
  #readSyncOnce(buffer: Buffer): number {
    try {
      return readSync(this.#fd, buffer, 0, buffer.length, null);
    } catch (_error) {
      return 0;
    }
  }

  /** `first` and what the master holds behind it, up to COALESCE_BYTES, as one chunk. */
  #readMore(first: Buffer): Buffer {
    if (!this.open) return first;
    let used = 0;
    while (first.length + used < COALESCE_BYTES) {
      // Only what the master holds now: a read that finds it empty waits in the kernel for the line discipline's
      // pending work, which a program writing in bulk keeps queuing; the event loop would wait there, not in epoll.
      if (bytesReadable(this.#fd) === 0) break;
      const read = this.#readSyncOnce(SCRATCH.subarray(used, COALESCE_BYTES - first.length));
      if (read <= 0) break;
      used += read;
    }
    // concat copies out of the scratch buffer.
    return used === 0 ? first : Buffer.concat([first, SCRATCH.subarray(0, used)], first.length + used);
  }

  /**
   * Takes what the socket buffered, then reads the master until the kernel has
   * nothing more, and delivers it even while paused: it is bounded by the
   * terminal's buffers (and by MAX_EXIT_DRAIN_BYTES against a writer that keeps going).
   */
  #drain(): void {
    if (this.#eof) return;
    if (!this.#socket.destroyed) {
      // Chunks the socket holds while paused: read() hands each to the 'data' listener.
      while (this.#socket.read() !== null);
    }
    this.#eof = true;
    // The fd is open until the socket is destroyed, which happens after its 'end'
    // listeners ran; never read it afterwards, the number may name another file.
    if (this.#socket.destroyed || this.#closed) return;
    this.#readDry(MAX_EXIT_DRAIN_BYTES, false);
  }

  #finishInput(): void {
    this.#drain();
    // The master is closing (or closed): input queued for it can never be written.
    if (!this.open) this.#failWrites(() => new PtyClosedError('closed', 'the terminal is closed: its program closed it'));
    this.#maybeReportExit();
  }

  #onChildExit(exit: PtyExit): void {
    this.#exit = exit;
    // Everything the child wrote is in the terminal's buffers now. Descendants may
    // still hold the slave open; the stream ends with the top-level process anyway.
    this.#drain();
    this.#failWrites(() => new PtyClosedError('exited', 'the terminal process has exited'));
    this.#maybeReportExit();
  }

  #maybeReportExit(): void {
    if (this.#exitReported || this.#exit === undefined || !this.#eof) return;
    this.#exitReported = true;
    this.#socket.destroy();
    this.#events.onExit(this.#exit);
  }
}

/** What a started terminal is: its child, its master, the slave's path. */
type Started = ReturnType<NativePty['fork']>;

/** Threads node-pty's fork leaves in this process for each terminal: one, which waits for the child. */
const NODE_PTY_FORK_THREADS = 1;

let setsidFound: { path: string | undefined } | undefined;

/** util-linux's (or busybox's) `setsid`, on Linux, where the host has one. */
function setsidPath(): string | undefined {
  setsidFound ??= { path: hostFacts.linuxCalls ? ['/usr/bin/setsid', '/bin/setsid'].find((path) => existsSync(path)) : undefined };
  return setsidFound.path;
}

/** The child on a new terminal, with node-pty's fork (forkpty on Linux, spawn-helper on macOS). */
function forkOnNewTerminal(options: PtySpawnOptions, onExit: (exit: PtyExit) => void): Started {
  const { native, helperPath } = nativePty();
  const env = Object.entries(options.env).map(([name, value]) => `${name}=${value}`);
  const fork = (): Started =>
    native.fork(
      options.file,
      [...options.args],
      env,
      options.cwd,
      options.cols,
      options.rows,
      options.uid ?? -1,
      options.gid ?? -1,
      true,
      helperPath,
      (exitCode, signal) => onExit({ exitCode, signal }),
    );
  return options.spawnInside === undefined ? fork() : options.spawnInside(fork, NODE_PTY_FORK_THREADS);
}

/**
 * Tells `onExit` how child `pid`, which neither libuv nor node-pty waits for
 * (adopted after a takeover, or started with posix_spawn), ended. Its status
 * is lost only when something else reaped it: told as a kill.
 */
function collectExitInto(pid: number, onExit: (exit: PtyExit) => void): void {
  void waitForChildExit(pid).then((exit) => onExit(exit ?? { exitCode: 0, signal: osConstants.signals.SIGKILL }));
}

/**
 * The child on a new terminal, on the slave as its stdio, started with
 * posix_spawn (libc.ts, `spawnProgram`: the signal dispositions and mask
 * reset, the slave made blocking, `cwd`, returning once the child exec'd),
 * its exit collected by {@link waitForChildExit}; or, to take another user's
 * `gid` and `uid` (which posix_spawn cannot), by Node's spawn (libuv: the
 * same, and the supplementary groups dropped before it takes `gid` and
 * `uid`). `setsid -c` (`--ctty`) then leaves the daemon's process group for a
 * session of its own, takes the slave (its stdin) as its controlling
 * terminal (TIOCSCTTY), and execs the program. Both sides are made
 * close-on-exec before anything else is spawned, so no other child inherits
 * them; the slave is dup'd onto the child's 0-2, and the daemon's copy is
 * closed once the child runs.
 */
function spawnOnNewTerminal(options: PtySpawnOptions, setsid: string, onExit: (exit: PtyExit) => void): Started {
  const { native } = nativePty();
  const { master, slave, pty } = native.open(options.cols, options.rows);
  try {
    setCloseOnExec(master);
    setCloseOnExec(slave);
    setDefaultTerminalModes(slave);
    const ids = {
      ...(options.uid === undefined || options.uid < 0 ? {} : { uid: options.uid }),
      ...(options.gid === undefined || options.gid < 0 ? {} : { gid: options.gid }),
    };
    const argv = ['-c', '--', options.file, ...options.args];
    if (Object.keys(ids).length === 0 && canSpawnPrograms()) {
      // posix_spawn: no copy of this process's page tables (see spawnProgram); its exit is collected here, as an adopted child's.
      const begin = () => spawnProgram(setsid, [setsid, ...argv], options.env, options.cwd, [slave, slave, slave]);
      try {
        const pid = options.spawnInside === undefined ? begin() : options.spawnInside(begin, 0);
        collectExitInto(pid, onExit);
        return { pid, fd: master, pty };
      } catch (error) {
        // A sandbox that refuses glibc's clone: Node's spawn, whose fork it allows, starts this terminal and every later one.
        if (canSpawnPrograms()) throw error;
      }
    }
    const start = () => spawnChild(setsid, argv, { cwd: options.cwd, env: options.env, stdio: [slave, slave, slave], ...ids });
    const child = options.spawnInside === undefined ? start() : options.spawnInside(start, 0);
    // A spawn that failed reports it here (and once more as an event, which is not the host's failure).
    child.on('error', () => {});
    if (child.pid === undefined) throw new Error(`cannot start ${options.file} on a terminal: the spawn failed`);
    child.once('exit', (code, signal) => onExit({ exitCode: code ?? 0, signal: signal === null ? 0 : osConstants.signals[signal] }));
    return { pid: child.pid, fd: master, pty };
  } catch (error) {
    closeDescriptor(master);
    throw error;
  } finally {
    closeDescriptor(slave);
  }
}

/** A write or resize refused because the terminal's master is closed or its process exited. */
export class PtyClosedError extends Error {
  /** 'closed': the master is gone though the process may run on; 'exited': the process exited. */
  readonly reason: 'closed' | 'exited';
  constructor(reason: 'closed' | 'exited', message: string) {
    super(message);
    this.reason = reason;
    this.name = 'PtyClosedError';
  }
}

function closeDescriptor(fd: number): void {
  try {
    closeSync(fd);
  } catch (_error) {
    // Already closed.
  }
}
