/**
 * One managed process tree: the seam's `spawn`. What the tree is, how it is
 * spawned, signalled and told alive, is the platform's tree control
 * (`platform/`): a process group and its containment cell on POSIX, the
 * top-level process's tree ended with taskkill on Windows.
 * @module
 */
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type {
  SubprocessCollect,
  SubprocessCollectedOutputs,
  SubprocessHandle,
  SubprocessOutcome,
  SubprocessOutputMode,
  SubprocessSpawnSpec,
} from '@execworld/sdk/seam';
import { OutputCollector, type SpillDirectory } from './collector.ts';
import type { SessionAccounting, SessionCell, SessionUsage } from './containment/containment.ts';
import { ProviderError } from './errors.ts';
import { InputBacklog } from './input-backlog.ts';
import type { ManagedTree, TreeControl } from './platform/platform.ts';
import { launchAs, type RunAs } from './run-as.ts';
import { readAgain, stopReading } from './stream-handover.ts';
import { cwdError } from './validate.ts';

/** How often an awaited tree is checked for absence. */
export const TREE_POLL_MS = 15;

export interface ProcessHost {
  /** How the tree is spawned, signalled and told alive. */
  readonly tree: TreeControl;
  readonly spill: SpillDirectory;
  /**
   * Whether a process group has a live (non-zombie) member; undefined when that
   * cannot be told. Used once the leader is gone, when `kill(-pgid, 0)` still
   * succeeds for a group of zombies. With a complete `cell` holding the group's
   * session, only the cell's processes are read.
   */
  groupHasLiveMembers(pgid: number, cell?: SessionCell): boolean | undefined;
  /** The containment cell the process is spawned into and owns from then on, where the tree control takes cells. */
  readonly cell?: SessionCell | undefined;
  /** The process group of each live process, from one reading of the process table, or of a complete `cell`'s processes. */
  processGroups?(cell?: SessionCell): ReadonlyMap<number, number | undefined>;
  /** Input bytes waiting in the stdin pipe for the program to read them, at most. @default DEFAULT_INPUT_BACKLOG_BYTES */
  readonly inputBacklogBytes?: number | undefined;
  /** A child of the previous image of this process (a takeover), held instead of a new one spawned from the spec. */
  readonly adopted?: ChildProcess | undefined;
  /**
   * Starts a program of this process's own user without copying this process
   * (Linux: posix_spawn), as Node's spawn would: undefined where it does not
   * (Node's spawn starts it then). @throws what Node's spawn reports as its
   * `error` event: the program could not be started.
   */
  readonly startProgram?: ((program: ProgramStart) => ChildProcess | undefined) | undefined;
}

/** A program for {@link ProcessHost.startProgram}: Node's spawn's arguments, stdio as `nodeStdio` makes them. */
export interface ProgramStart {
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly stdio: readonly ['pipe' | 'ignore', 'pipe' | 'inherit', 'pipe' | 'inherit'];
  /** Node's `detached`: a session (POSIX) of its own. */
  readonly detached: boolean;
}

/** What a process hands to the next image of this process in a takeover: its child and the pipe descriptors still open. */
export interface ProcessPipesHandOver {
  readonly pid: number;
  readonly graceMs: number;
  /** Absent for a pipe that is not one, or is closed (stdin ended, output at its end). */
  readonly stdin?: number | undefined;
  readonly stdout?: number | undefined;
  readonly stderr?: number | undefined;
}

function isCollect(mode: SubprocessOutputMode): mode is SubprocessCollect {
  return typeof mode === 'object';
}

function nodeStdio(spec: SubprocessSpawnSpec): ProgramStart['stdio'] {
  const output = (mode: SubprocessOutputMode): 'inherit' | 'pipe' => (mode === 'inherit' ? 'inherit' : 'pipe');
  return [spec.stdio.stdin === 'ignore' ? 'ignore' : 'pipe', output(spec.stdio.stdout), output(spec.stdio.stderr)];
}

/** Extensions of a spawn beyond the seam, for the daemon. */
export interface SpawnHooks {
  /** Called with every chunk of a collected stream, after the collector took it. */
  onCollected?(stream: 'stdout' | 'stderr', chunk: Buffer): void;
  /** The OS user the process runs as (the host must be root); by default the host's own. */
  runAs?: RunAs | undefined;
}

export class ManagedProcess implements SubprocessHandle {
  readonly pid: number;
  readonly stdin: Writable | undefined;
  readonly stdout: Readable | undefined;
  readonly stderr: Readable | undefined;
  readonly collected: SubprocessCollectedOutputs;
  readonly done: Promise<SubprocessOutcome>;
  /**
   * Beyond the seam: resolves once the operating system started the program
   * (child_process 'spawn'), rejects with what `done` rejects with when it
   * could not. The daemon answers a create only once this settled.
   */
  readonly spawned: Promise<void>;

  readonly #host: ProcessHost;
  readonly #graceMs: number;
  readonly #child: ChildProcess | undefined;
  readonly #collectors = new Map<'stdout' | 'stderr', OutputCollector>();
  readonly #cell: SessionCell | undefined;
  /** The bound on what waits in the stdin pipe. */
  readonly #stdinBacklog: InputBacklog;
  /** This tree as its tree control sees it, once it was spawned. */
  #tree: ManagedTree | undefined;
  #resolve!: (outcome: SubprocessOutcome) => void;
  #reject!: (error: Error) => void;
  #settled = false;
  /** The direct child has exited (and was reaped). */
  #childExited = false;
  /** The whole tree was seen gone; from now on no signal is ever sent. */
  #gone = false;
  #laddered = false;
  /** Its pipes are no longer read: a takeover's exec is under way. */
  #handedOver = false;
  #killTimer: NodeJS.Timeout | undefined;
  #drainTimer: NodeJS.Timeout | undefined;
  #observer: Promise<void> | undefined;
  #removeAbort: (() => void) | undefined;

  /** What the tree used: its cell's counters; undefined where its cell keeps none. */
  usage(): SessionUsage | undefined {
    return this.#cell?.usage?.();
  }

  /** Its cell's counters for the daemon's metrics; undefined where its cell keeps none. */
  accounting(): SessionAccounting | undefined {
    return this.#cell?.accounting?.();
  }

  /**
   * The pids of the tree's live processes now: its cell's, or without one the members of the process group it leads
   * (what left the group is not seen there).
   */
  members(): number[] | undefined {
    if (this.pid <= 0 || this.#gone) return [];
    if (this.#cell !== undefined) return this.#cell.pids();
    const groups = this.#host.processGroups?.();
    if (groups === undefined) return this.#childExited ? undefined : [this.pid];
    return [...groups].filter(([, pgid]) => pgid === this.pid).map(([pid]) => pid);
  }

  constructor(spec: SubprocessSpawnSpec, env: Record<string, string>, host: ProcessHost, hooks: SpawnHooks = {}) {
    this.#host = host;
    this.#graceMs = spec.graceMs;
    this.#cell = host.tree.takesCells ? host.cell : undefined;
    this.#stdinBacklog = new InputBacklog(host.inputBacklogBytes, 'the process is not reading its stdin');
    this.done = new Promise<SubprocessOutcome>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // As another user, the working directory is the launcher's to enter, as that user (see run-as.ts): root looks at nothing of it.
    const runAs = hooks.runAs;
    let failure: Error | undefined = runAs === undefined && host.adopted === undefined ? cwdError(spec.cwd) : undefined;
    // Node drops the host's supplementary groups, then takes the user's gid and uid, before it execs the launcher.
    const { file, args, ...where } =
      runAs === undefined ? { file: spec.argv[0]!, args: spec.argv.slice(1), cwd: spec.cwd } : launchAs(runAs, spec.argv[0]!, spec.argv.slice(1), spec.cwd);
    const stdio = nodeStdio(spec);
    const start = (): ChildProcess | undefined => {
      if (runAs === undefined && host.startProgram !== undefined) {
        try {
          const started = host.startProgram({ file, args, cwd: where.cwd, env, stdio, detached: host.tree.detached });
          if (started !== undefined) return started;
        } catch (error) {
          failure = error as Error;
          return undefined;
        }
      }
      return spawnChild(file, args, { ...where, env, stdio: [...stdio], detached: host.tree.detached, windowsHide: true });
    };
    // Only the fork itself runs inside: the child is born in the cell, and nothing else of this process is.
    const child = failure === undefined ? (host.adopted ?? (this.#cell === undefined ? start() : this.#cell.spawnInside(start))) : undefined;
    if (child === undefined) {
      // Never started: its cwd is not there, or the program could not be started.
      this.pid = -1;
      this.collected = {};
      this.#settled = true;
      this.#gone = true;
      this.#cell?.remove();
      this.#reject(failure!);
      this.spawned = this.done.then(() => undefined);
      this.spawned.catch(() => undefined);
      return;
    }
    if (child.pid !== undefined && host.adopted === undefined) this.#cell?.attach(child.pid);
    this.#child = child;
    this.pid = child.pid ?? -1;
    // 'spawn' comes before any 'exit'; a spawn that failed rejects done, and this with it.
    this.spawned = Promise.race([new Promise<void>((resolve) => child.once('spawn', resolve)), this.done.then(() => undefined)]);
    this.spawned.catch(() => undefined);

    const stdin = spec.stdio.stdin;
    if (typeof stdin === 'object') {
      // A child may exit without reading its input; EPIPE is not the caller's failure.
      child.stdin?.on('error', () => {});
      child.stdin?.end(stdin.data);
    }
    this.stdin = stdin === 'pipe' ? (child.stdin ?? undefined) : undefined;
    this.stdout = spec.stdio.stdout === 'pipe' ? (child.stdout ?? undefined) : undefined;
    this.stderr = spec.stdio.stderr === 'pipe' ? (child.stderr ?? undefined) : undefined;
    const collected: { stdout?: OutputCollector; stderr?: OutputCollector } = {};
    for (const stream of ['stdout', 'stderr'] as const) {
      const mode = spec.stdio[stream];
      const pipe = child[stream];
      if (!isCollect(mode) || pipe === null) continue;
      const collector = new OutputCollector(mode, host.spill, stream);
      pipe.on('data', (chunk: Buffer) => {
        collector.push(chunk);
        hooks.onCollected?.(stream, chunk);
      });
      pipe.on('error', () => {});
      collected[stream] = collector;
      this.#collectors.set(stream, collector);
    }
    this.collected = collected;

    child.once('error', (error) => {
      // An error with a pid (a failed kill, say) is not a spawn failure.
      if (child.pid === undefined) this.#fail(error);
    });
    child.once('exit', (code, signal) => {
      this.#childExited = true;
      // Descendants may hold collected pipes open: wait for them at most graceMs.
      this.#drainTimer ??= setTimeout(() => this.#settle(code, signal), this.#graceMs);
    });
    child.once('close', (code, signal) => this.#settle(code, signal));

    const abort = spec.signal;
    if (abort !== undefined) {
      const onAbort = (): void => this.terminate();
      abort.addEventListener('abort', onAbort, { once: true });
      this.#removeAbort = () => abort.removeEventListener('abort', onAbort);
    }
  }

  /** The collector of a collected stream. */
  collector(stream: 'stdout' | 'stderr'): OutputCollector | undefined {
    return this.#collectors.get(stream);
  }

  /**
   * Beyond the seam, for the daemon: writes to the stdin pipe, refused while
   * the program has not read what waits and `data` would take that past the
   * input backlog bound. Resolves once the pipe took the bytes; rejects with
   * the pipe's error.
   */
  writeStdin(data: Buffer): Promise<void> {
    const stdin = this.stdin;
    if (stdin === undefined) return Promise.reject(new ProviderError('INVALID_ARGUMENT', 'stdin is not a pipe'));
    try {
      this.#stdinBacklog.admit(stdin.writableLength, data.length);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    // EPIPE from a program that exited with input waiting: each write's callback reports it, the
    // stream's error event must not end the host.
    if (stdin.listenerCount('error') === 0) stdin.on('error', () => {});
    return new Promise((resolve, reject) => {
      stdin.write(data, (error) => (error === null || error === undefined ? resolve() : reject(error)));
    });
  }

  /**
   * For a takeover: stops reading the output pipes (what the program writes
   * meanwhile waits in the kernel's pipe buffers for the next image) and
   * answers the descriptors that image takes the pipes on; what the sockets
   * had read is delivered to their readers first, in order. Undefined when
   * the program has exited (its exit belongs to this image's libuv, which
   * reaped it); a string saying why when it cannot be handed over now.
   */
  handOver(): ProcessPipesHandOver | string | undefined {
    if (this.#childExited || this.#settled || this.pid <= 0) return undefined;
    if (this.#collectors.size > 0) return 'its output is collected (stdio maxBytes), which is not handed over';
    // Its stdin data still being written: what is left would be cut off by the exec (the pipe is close-on-exec here).
    const data = this.stdin === undefined ? this.#child?.stdin : undefined;
    if (data !== null && data !== undefined && !data.destroyed && !data.writableFinished) return 'its stdin data is still being written; try again';
    const stdin = this.stdin;
    let stdinFd: number | undefined;
    if (stdin !== undefined && !stdin.destroyed && !stdin.writableFinished) {
      // Bytes Node holds for a pipe the program does not empty: part of a write may be in the pipe already.
      if (stdin.writableLength > 0 || stdin.writableEnded) return 'its stdin holds a write or a close the program has not taken yet; try again';
      stdinFd = descriptorOf(stdin);
      if (stdinFd === undefined) return 'its stdin pipe has no descriptor';
    }
    const output: { stdout?: number; stderr?: number } = {};
    for (const name of ['stdout', 'stderr'] as const) {
      const pipe = this[name];
      // At its end (end of file read, perhaps not yet told): nothing more comes from it.
      if (pipe === undefined || pipe.destroyed || pipe.readableEnded || (pipe as unknown as { _readableState: { ended: boolean } })._readableState.ended)
        continue;
      const fd = descriptorOf(pipe);
      if (fd === undefined) return `its ${name} pipe has no descriptor`;
      output[name] = fd;
    }
    for (const name of ['stdout', 'stderr'] as const) {
      const pipe = this[name];
      if (output[name] !== undefined && pipe !== undefined) stopReading(pipe);
    }
    this.#handedOver = true;
    return { pid: this.pid, graceMs: this.#graceMs, ...(stdinFd === undefined ? {} : { stdin: stdinFd }), ...output };
  }

  /** Reads on after a takeover that did not happen. */
  resumeAfterHandOver(): void {
    if (!this.#handedOver) return;
    this.#handedOver = false;
    for (const pipe of [this.stdout, this.stderr]) if (pipe !== undefined && !pipe.destroyed) readAgain(pipe);
  }

  /** True once the whole tree was observed gone. */
  get treeExited(): boolean {
    return this.#gone;
  }

  /** True once `done` settled. */
  get settled(): boolean {
    return this.#settled;
  }

  terminate(): void {
    if (this.#gone || this.#laddered) return;
    this.#laddered = true;
    void this.#observe();
    // The first check runs at once: a tree already gone is never signalled.
    if (this.#gone) return;
    this.#signalTree('SIGTERM');
    this.#killTimer = setTimeout(() => {
      this.#killTimer = undefined;
      if (this.#treeAlive()) this.#signalTree('SIGKILL');
    }, this.#graceMs);
  }

  async waitForExit(signal?: AbortSignal): Promise<boolean> {
    const observed = this.#observe();
    if (this.#gone) return true;
    if (signal === undefined) {
      await observed;
      return true;
    }
    if (signal.aborted) return false;
    let removeListener: (() => void) | undefined;
    const aborted = new Promise<false>((resolve) => {
      const onAbort = (): void => resolve(false);
      signal.addEventListener('abort', onAbort, { once: true });
      removeListener = () => signal.removeEventListener('abort', onAbort);
    });
    try {
      return await Promise.race([observed.then(() => true), aborted]);
    } finally {
      removeListener?.();
    }
  }

  /** Synchronous last resort while the host process exits: SIGKILL the tree, nothing awaited. */
  terminateForHostExit(): void {
    if (this.#gone || this.pid <= 0) return;
    this.#signalTree('SIGKILL');
  }

  #signalTree(signal: NodeJS.Signals): void {
    if (!this.#treeAlive()) return;
    this.#host.tree.signal(this.#treeView(), signal);
    // The program itself by its pid too, where it may have left what the tree's signal reaches (a program of the
    // daemon's user, a root-acting owner's, may move itself out of its cell): a kill only, as a second SIGTERM
    // could mean something to a program that has one handler. Its pid names no other process until it is reaped.
    if (signal === 'SIGKILL' && !this.#childExited) this.#child?.kill('SIGKILL');
  }

  #treeAlive(): boolean {
    if (this.#gone || this.pid <= 0) return false;
    // The program runs until its exit is seen, whatever cell it is in now.
    return !this.#childExited || this.#host.tree.alive(this.#treeView());
  }

  #treeView(): ManagedTree {
    const host = this.#host;
    const cell = this.#cell;
    this.#tree ??= {
      pid: this.pid,
      child: this.#child,
      cell,
      rootExited: () => this.#childExited,
      groupHasLiveMembers: (pgid) => host.groupHasLiveMembers(pgid, cell),
      processGroups: () => host.processGroups?.(cell),
    };
    return this.#tree;
  }

  #observe(): Promise<void> {
    if (this.#observer !== undefined) return this.#observer;
    this.#observer = new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const check = (): boolean => {
        if (this.#treeAlive()) return false;
        this.#gone = true;
        // Nothing will be spawned into it again, and nothing of it runs.
        this.#cell?.remove();
        // The group id may be reused from now on: the SIGKILL must not fire.
        clearTimeout(this.#killTimer);
        this.#killTimer = undefined;
        clearInterval(timer);
        resolve();
        return true;
      };
      if (!check()) timer = setInterval(check, TREE_POLL_MS);
    });
    return this.#observer;
  }

  #finish(): void {
    this.#settled = true;
    clearTimeout(this.#drainTimer);
    this.#removeAbort?.();
    this.#removeAbort = undefined;
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.collected[stream] !== undefined) this.#child?.[stream]?.destroy();
    }
    for (const collector of this.#collectors.values()) collector.seal();
    // The SIGKILL timer stays armed: the escalation must still reach survivors.
  }

  #settle(exitCode: number | null, signal: NodeJS.Signals | null): void {
    if (this.#settled) return;
    this.#finish();
    this.#resolve({ exitCode, signal });
  }

  #fail(error: Error): void {
    if (this.#settled) return;
    this.#finish();
    this.#gone = true;
    this.#cell?.remove();
    this.#reject(error);
  }
}

/** The descriptor under a pipe's socket (libuv's), where it has one. */
function descriptorOf(stream: Readable | Writable): number | undefined {
  const fd = (stream as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/** Validates the stdio dispositions of a spec; throws naming the bad one. */
export function assertStdio(stdio: unknown): void {
  if (typeof stdio !== 'object' || stdio === null) throw new ProviderError('INVALID_ARGUMENT', 'stdio must be an object');
  const { stdin, stdout, stderr } = stdio as Record<string, unknown>;
  const dataOk = typeof stdin === 'object' && stdin !== null && typeof (stdin as { data?: unknown }).data === 'string';
  if (stdin !== 'ignore' && stdin !== 'pipe' && !dataOk) {
    throw new ProviderError('INVALID_ARGUMENT', "stdio.stdin must be 'ignore', 'pipe' or { data: string }");
  }
  for (const [name, mode] of [
    ['stdout', stdout],
    ['stderr', stderr],
  ] as const) {
    if (mode === 'pipe' || mode === 'inherit') continue;
    const collect = mode as { maxBytes?: unknown; spill?: { maxBytes?: unknown } } | null;
    const positive = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
    if (typeof collect !== 'object' || collect === null || !positive(collect.maxBytes)) {
      throw new ProviderError('INVALID_ARGUMENT', `stdio.${name} must be 'pipe', 'inherit' or { maxBytes: positive integer }`);
    }
    if (collect.spill !== undefined && (typeof collect.spill !== 'object' || collect.spill === null || !positive(collect.spill.maxBytes))) {
      throw new ProviderError('INVALID_ARGUMENT', `stdio.${name}.spill.maxBytes must be a positive integer`);
    }
  }
}
