/**
 * `LocalRuntime`: the subprocess seam on this host.
 * @module
 */
import { endAll, mergeEnvironment, runCommand, scrubEnvironment, settleAll, spawnDefaults, terminalDefaults } from '@execworld/sdk/seam';
import type { CommandResult, RunCommandOptions, SpawnRequest, SubprocessRuntime, SubprocessSpawnSpec, TerminalSpawnRequest } from '@execworld/sdk/seam';
import type { ChildProcess } from 'node:child_process';
import type {
  ExecutionProvider,
  ListeningSocket,
  ProcessExtensions,
  ProcessHandOver,
  ProviderProcess,
  ProviderCapabilities,
  ShellDefaults,
  TerminalExtensions,
  TerminalHandOver,
} from './api.ts';
import { SpillDirectory, type SpillFileSystem } from './collector.ts';
import type { Containment, ContainmentChoice, ContainmentMode, SessionCell } from './containment/index.ts';
import type { CellGroup, LimitSupport } from './containment/containment.ts';
import { isGroupKey } from './containment/cgroup-limits.ts';
import type { SessionRecorder } from './containment/journal.ts';
import { ProviderError, type ProviderErrorCode } from './errors.ts';
import { UserWorkers, type FileWorker } from './fs/worker-files.ts';
import type { WorkerFailure } from './fs/worker-protocol.ts';
import { sessionRows, type ProcessInspector } from './inspect/inspector.ts';
import { hostPlatform, platformFor, type Platform, type PlatformOverrides } from './platform/index.ts';
import { canSpawnPrograms, CollectedChild, startChild } from './posix/children.ts';
import { assertStdio, ManagedProcess, type ProcessHost, type ProgramStart } from './process.ts';
import { executablePath, launchFailure, resolveExecutable } from './resolve-executable.ts';
import { assertOwnUser, launchAs, userEnvironment, type RunAs } from './run-as.ts';
import { SessionCells } from './session-cells.ts';
import { MAX_TERMINAL_SIZE, type HostTerminal } from './host-terminal.ts';
import { abortReasonText, assertCwdString, assertEnvironment, assertGraceMs, assertPositiveInteger, assertProgram } from './validate.ts';

export interface LocalRuntimeOptions {
  /**
   * The ambient environment children start from, before the scrub.
   * @default process.env, read at each spawn
   */
  readonly ambientEnv?: Readonly<Record<string, string | undefined>>;
  /**
   * Directory under which the private spill directory is made.
   * @default the OS temp dir
   */
  readonly spillParent?: string;
  /**
   * Input bytes a terminal or a process's stdin pipe holds for a program that
   * does not read them before further writes are refused with LIMIT_EXCEEDED.
   * @default 4 MiB
   */
  readonly inputBacklogBytes?: number;
  /** Test hook: the spill file calls. */
  readonly spillFileSystem?: SpillFileSystem;
  /** Test hook: the process inspector; by default the host platform's. */
  readonly inspector?: ProcessInspector;
  /** Test hook: the platform whose rules apply (its strategy in `platform/`). @default this host's */
  readonly platform?: NodeJS.Platform;
  /** Test hooks of the Windows strategy: taskkill, the kernel32 calls, the pseudoconsole. */
  readonly windows?: PlatformOverrides;
  /**
   * How each terminal and process tree is contained, so that nothing it starts
   * outlives it: `cgroup`, `subreaper`, `none`, a containment made with
   * `selectContainment`, or `auto`: a cgroup where this host allows one
   * (Linux, a writable cgroup v2 hierarchy), else none. `auto` never makes the
   * host process a subreaper, which would change the fate of every orphan of
   * the host, not only the sessions'; ask for `subreaper` for that.
   * @default 'auto'
   */
  readonly containment?: ContainmentChoice | Containment;
  /**
   * Where the sessions are recorded for the next start after a crash (the
   * daemon's state directory): the cgroup, or the sessions' processes.
   */
  readonly journal?: SessionRecorder;
  /**
   * The directory a relative PATH entry of `resolveExecutable` is taken from.
   * The daemon's is `/`: a lookup there says nothing of the daemon's own
   * working directory (a worker of another user looks from `/` too).
   * @default this process's working directory, as a local lookup would be
   */
  readonly lookupCwd?: string;
  /**
   * The workers of the users programs run as (see `runAs`), which answer as
   * those users what a spawn would find; shared with the daemon's files.
   * @default workers of this runtime's own, started when first needed
   */
  readonly users?: UserWorkers;
  /**
   * The most pids (processes and threads at once) all the sessions of one
   * group (`group` of a spawn's extensions) hold together, where a pids
   * controller can hold them.
   * @default the containment's: half the smallest of pid_max, threads-max and the daemon's cgroups' pids.max
   */
  readonly groupPids?: number;
}

/**
 * The subprocess seam on this host: detached process trees with pipe, inherit
 * and bounded collect stdio; terminals over a real pty with exact foreground and
 * input-wait facts on Linux; scrubbed environments; cleanup fenced on process
 * identities. Disposal terminates and joins everything still owned, and a
 * synchronous last-resort kill runs if the host process exits first.
 */
export class LocalRuntime implements SubprocessRuntime, ExecutionProvider {
  readonly platform: NodeJS.Platform;
  /** The rules of `platform`, chosen once. */
  readonly #platform: Platform;
  readonly #options: LocalRuntimeOptions;
  readonly #spill: SpillDirectory;
  /** Spill directories of processes run as other users, by uid. */
  readonly #userSpill = new Map<number, SpillDirectory>();
  readonly #processes = new Set<ManagedProcess>();
  readonly #terminals = new Set<HostTerminal>();
  /** Each terminal's and process's cell and its key, for a takeover. */
  readonly #terminalCells = new WeakMap<HostTerminal | ManagedProcess, { key: string; cell: SessionCell | undefined }>();
  #inspector: ProcessInspector | undefined;
  readonly #cells: SessionCells;
  #users: UserWorkers | undefined;
  /** The workers were made here, so they end with this runtime. */
  #ownsUsers = false;
  #disposing: Promise<void> | undefined;
  #exitListener: (() => void) | undefined;

  constructor(options: LocalRuntimeOptions = {}) {
    this.#options = options;
    const injected = options.platform !== undefined || options.windows !== undefined;
    this.#platform = injected ? platformFor(options.platform ?? hostPlatform.name, options.windows) : hostPlatform;
    this.platform = this.#platform.name;
    this.#spill = new SpillDirectory({
      ...(options.spillParent !== undefined ? { parent: options.spillParent } : {}),
      ...(options.spillFileSystem !== undefined ? { fs: options.spillFileSystem } : {}),
    });
    this.#inspector = options.inspector;
    this.#users = options.users;
    this.#cells = new SessionCells({
      choice: options.containment,
      platform: this.#platform,
      journal: options.journal,
      identityOf: (pid) => this.#getInspector().identity(pid),
    });
  }

  /** The TCP sockets the processes `pids` listen on, as this host's platform reads them; undefined where it cannot. */
  listeningSockets(pids: readonly number[]): ListeningSocket[] | undefined {
    return this.#platform.listeningSockets(pids);
  }

  get capabilities(): ProviderCapabilities {
    return {
      platform: this.platform,
      terminals: this.#platform.terminals.available,
      exactInputWait: this.exactInputWait,
      containment: this.containmentMode,
      signals: this.#platform.signals,
    };
  }

  /** The shells of this runtime's platform: its default dialect, and where PowerShell is looked for. */
  get shells(): ShellDefaults {
    return this.#platform.shells;
  }

  /** How this runtime's sessions are contained. */
  get containmentMode(): ContainmentMode {
    return this.#cells.mode;
  }

  /** Whether terminals on this host can prove that a foreground group waits for input. */
  get exactInputWait(): boolean {
    try {
      return this.#getInspector().exactInputWait;
    } catch (_error) {
      return false;
    }
  }

  /** The environment a child gets: the scrubbed ambient one with `explicit` applied. */
  childEnvironment(explicit?: Readonly<Record<string, string | null | undefined>>): Record<string, string> {
    if (explicit !== undefined) assertEnvironment(explicit);
    return mergeEnvironment(scrubEnvironment(this.#options.ambientEnv ?? process.env), explicit, this.#platform.caseInsensitiveEnv);
  }

  /**
   * @param runAs - beyond the seam: look it up as this user would, by its
   *   worker, on the environment a program of the user's gets.
   */
  async resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal, runAs?: RunAs): Promise<string> {
    const worker = runAs === undefined ? undefined : this.#workerOf(runAs);
    if (worker === undefined) return resolveExecutable(command, this.#environmentFor(env, runAs), this.#platform, signal, this.#options.lookupCwd);
    const answer = await worker.call('resolveExecutable', command, this.#environmentFor(env, runAs));
    signal?.throwIfAborted();
    if ('failure' in answer) throw providerFailure(answer.failure);
    return answer.path;
  }

  /** Which session limits this runtime's containment enforces, and why not the others. */
  limitSupport(): LimitSupport {
    const support = this.#cells.limitSupport();
    const groupPids = this.#options.groupPids;
    return support.groupPids === undefined || groupPids === undefined ? support : { ...support, groupPids };
  }

  /** The cell group of a spawn's `group`: its key, and this runtime's total when it names one. */
  #group(group: string | undefined): CellGroup | undefined {
    if (group === undefined) return undefined;
    if (!isGroupKey(group)) throw new ProviderError('INVALID_ARGUMENT', `group ${JSON.stringify(group)} is not a plain name of letters, digits, _, - and .`);
    return { key: group, pids: this.#options.groupPids };
  }

  /**
   * A spawn that the kernel refused (EAGAIN, or a terminal's fork that
   * failed) while its group held its whole total of pids: LIMIT_EXCEEDED,
   * naming the total. Anything else as it came.
   */
  #groupRefusal(error: unknown, cell: SessionCell | undefined, terminal: boolean): unknown {
    if (cell?.groupFull === undefined) return error;
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    if (!terminal && code !== 'EAGAIN') return error;
    if (!cell.groupFull()) return error;
    const total = this.limitSupport().groupPids;
    return new ProviderError(
      'LIMIT_EXCEEDED',
      `the sessions of this group already hold all${total === undefined ? '' : ` ${total}`} pids of their total together: the kernel refused the fork (${code ?? (error as Error).message})`,
      { cause: error },
    );
  }

  /**
   * Beyond the seam, `cwd`, `stdio` (or any of its entries) and `graceMs` may
   * be left out: this process's working directory, pipes, and 5 s; `limits`
   * holds the tree's cell to them (as `hooks.limits`, which wins), and
   * `usage()` reads what the tree used from that cell.
   */
  spawn(request: SpawnRequest, hooks: ProcessExtensions = {}): ManagedProcess {
    this.#assertActive();
    assertProgram(request?.argv, 'expected a non-empty program name at argv[0]');
    assertOwnUser(request.user);
    const spec: SubprocessSpawnSpec = spawnDefaults(request, () => process.cwd());
    assertGraceMs(spec.graceMs);
    if (spec.signal?.aborted === true) {
      throw new ProviderError('ABORTED', `aborted before spawn: ${abortReasonText(spec.signal)}`, { cause: spec.signal.reason });
    }
    assertCwdString(spec.cwd);
    assertStdio(spec.stdio);
    const env = this.#environmentFor(spec.env, hooks.runAs);
    this.#platform.sealDescriptors();
    const { key, cell } = this.#cells.create(hooks.limits ?? request.limits, this.#group(hooks.group));
    let handle: ManagedProcess;
    try {
      handle = new ManagedProcess(spec, env, { ...this.#processHost(hooks.runAs), cell }, hooks);
    } catch (error) {
      cell?.remove();
      throw error;
    }
    this.#cells.recordRoot(key, handle.pid);
    this.#ownProcess(handle, key, cell);
    return handle;
  }

  #ownProcess(handle: ManagedProcess, key: string, cell: SessionCell | undefined): void {
    this.#terminalCells.set(handle, { key, cell });
    this.#own(this.#processes, handle, key, async () => {
      await handle.done.catch(() => undefined);
      await handle.waitForExit();
    });
  }

  /**
   * Beyond the seam, for a takeover: stops reading `process`'s output pipes and
   * answers what the next image of this process needs to adopt it (see
   * {@link adoptProcess}); undefined once its program exited; why not, when
   * it cannot be handed over now.
   */
  handOverProcess(process: ProviderProcess): ProcessHandOver | string | undefined {
    const handle = process as ManagedProcess;
    const place = this.#terminalCells.get(handle);
    if (place === undefined || typeof handle.handOver !== 'function') return "it is not this runtime's";
    const kept = handle.handOver();
    if (kept === undefined || typeof kept === 'string') return kept;
    return { ...kept, cellKey: place.key, ...(place.cell?.path === undefined ? {} : { cellPath: place.cell.path }) };
  }

  /**
   * Beyond the seam, for a takeover: the process that the previous image of
   * this process handed over, on its pipe descriptors, with its child and its
   * cell. `spec` says what it was spawned with (its stdio modes, its grace).
   */
  adoptProcess(record: ProcessHandOver, spec: SubprocessSpawnSpec): ManagedProcess {
    this.#assertActive();
    const cell = this.#cells.adopt(record.cellKey, record.cellPath);
    const adopted = new CollectedChild(record.pid, record) as unknown as ChildProcess;
    const handle = new ManagedProcess(spec, {}, { ...this.#processHost(), cell, adopted });
    this.#cells.recordRoot(record.cellKey, handle.pid);
    this.#ownProcess(handle, record.cellKey, cell);
    return handle;
  }

  /**
   * Beyond the seam, for the daemon: `spawn`, answered once the program runs.
   * A spawn as another user (`runAs`) first asks, as that user, whether its
   * working directory and program are there, so that a refusal says why.
   * @throws what `spawned` rejects with when the program could not start.
   */
  async startProcess(spec: SubprocessSpawnSpec, extensions: ProcessExtensions = {}): Promise<ManagedProcess> {
    this.#assertActive();
    assertProgram(spec?.argv, 'expected a non-empty program name at argv[0]');
    assertCwdString(spec.cwd);
    const runAs = extensions.runAs;
    if (runAs !== undefined) await this.#checkLaunch(runAs, spec.argv[0], this.#environmentFor(spec.env, runAs), spec.cwd);
    const handle = this.spawn(spec, extensions);
    try {
      await handle.spawned;
    } catch (error) {
      throw this.#groupRefusal(error, this.#terminalCells.get(handle)?.cell, false);
    }
    return handle;
  }

  /**
   * Beyond the seam, `cwd` and `graceMs` may be left out: this process's working directory, and 5 s;
   * `limits` holds the terminal's session to them (as `extensions.limits`, which wins).
   */
  async spawnTerminal(request: TerminalSpawnRequest, extensions: TerminalExtensions = {}): Promise<HostTerminal> {
    this.#assertActive();
    assertProgram(request?.argv, 'terminal argv must contain a program');
    assertOwnUser(request.user);
    const spec = terminalDefaults(request, () => process.cwd());
    spec.signal?.throwIfAborted();
    assertCwdString(spec.cwd);
    assertPositiveInteger('rows', spec.rows, MAX_TERMINAL_SIZE);
    assertPositiveInteger('cols', spec.cols, MAX_TERMINAL_SIZE);
    assertGraceMs(spec.graceMs);
    const terminals = this.#platform.terminals;
    terminals.assertSupported();
    const inspector = this.#getInspector();
    const runAs = extensions.runAs;
    const env = this.#environmentFor(spec.env, runAs);
    // The terminal's type is the caller's to name; the daemon's own TERM says nothing about it.
    env.TERM = spec.env?.TERM ?? 'dumb';
    env.PWD = spec.cwd;
    const [file, ...args] = request.argv;
    let program: { file: string; args: readonly string[]; cwd: string; uid?: number; gid?: number };
    if (runAs === undefined) {
      const failure = launchFailure(file, env, spec.cwd, this.#platform);
      if (failure !== undefined) throw failure;
      program = { file, args, cwd: spec.cwd };
    } else {
      await this.#checkLaunch(runAs, file, env, spec.cwd);
      this.#assertActive();
      program = launchAs(runAs, file, args, spec.cwd);
    }
    this.#platform.sealDescriptors();
    const { key, cell } = this.#cells.create(extensions.limits ?? request.limits, this.#group(extensions.group));
    let terminal: HostTerminal;
    try {
      terminal = terminals.open({
        ...program,
        env,
        rows: spec.rows,
        cols: spec.cols,
        graceMs: spec.graceMs,
        inspector,
        cell,
        ...(this.#options.inputBacklogBytes === undefined ? {} : { inputBacklogBytes: this.#options.inputBacklogBytes }),
      });
    } catch (error) {
      const refusal = this.#groupRefusal(error, cell, true);
      cell?.remove();
      throw refusal;
    }
    this.#cells.recordRoot(key, terminal.pid);
    this.#ownTerminal(terminal, key, cell);
    return terminal;
  }

  /** A published terminal is released only once it exited and its session was swept. */
  #ownTerminal(terminal: HostTerminal, key: string, cell: SessionCell | undefined): void {
    this.#terminalCells.set(terminal, { key, cell });
    this.#own(this.#terminals, terminal, key, async () => {
      await terminal.done;
      // After the callers awaiting done have run: the sweep is not their latency.
      await new Promise((resolve) => setImmediate(resolve));
      await terminal.terminate();
    });
  }

  /**
   * Beyond the seam, for a takeover: stops reading `terminal` and answers what
   * the next image of this process needs to adopt it (see {@link adoptTerminal}),
   * or undefined when it cannot be handed over (it exited, its master closed).
   */
  handOverTerminal(terminal: HostTerminal): TerminalHandOver | undefined {
    const place = this.#terminalCells.get(terminal);
    if (place === undefined || terminal.handOver === undefined) return undefined;
    const kept = terminal.handOver();
    if (kept === undefined) return undefined;
    return { ...kept, cellKey: place.key, ...(place.cell?.path === undefined ? {} : { cellPath: place.cell.path }) };
  }

  /**
   * Beyond the seam, for a takeover: the terminal that the previous image of
   * this process handed over, on its master descriptor, with its child and its cell.
   */
  adoptTerminal(record: TerminalHandOver, size: { rows: number; cols: number }): HostTerminal {
    this.#assertActive();
    const cell = this.#cells.adopt(record.cellKey, record.cellPath);
    const terminal = this.#platform.terminals.open({
      file: '',
      args: [],
      cwd: '/',
      env: {},
      rows: size.rows,
      cols: size.cols,
      graceMs: record.graceMs,
      inspector: this.#getInspector(),
      cell,
      adopt: { pid: record.pid, fd: record.fd, device: record.device },
      ...(this.#options.inputBacklogBytes === undefined ? {} : { inputBacklogBytes: this.#options.inputBacklogBytes }),
    });
    this.#cells.recordRoot(record.cellKey, terminal.pid);
    this.#ownTerminal(terminal, record.cellKey, cell);
    return terminal;
  }

  /**
   * Runs a command to completion on this host and answers its exit, output
   * and duration: a string through `/bin/sh -c` (`cmd.exe /d /s /c` on
   * Windows), an argv array as it is, as one {@link spawn}.
   */
  run(command: string | readonly string[], options: RunCommandOptions = {}): Promise<CommandResult> {
    return runCommand(
      (spec) => this.spawn(spec),
      this.platform,
      command,
      options,
      (message) => new ProviderError('INVALID_ARGUMENT', message),
    );
  }

  /** Live handles, for operators and tests. */
  get liveCount(): { processes: number; terminals: number } {
    return { processes: this.#processes.size, terminals: this.#terminals.size };
  }

  /**
   * Terminates every process tree and terminal still owned and waits until they
   * are gone. Idempotent; later spawns throw. Several failures are reported as
   * one AggregateError.
   */
  dispose(): Promise<void> {
    this.#disposing ??= this.#disposeOnce();
    return this.#disposing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispose();
  }

  async #disposeOnce(): Promise<void> {
    const failure = await settleAll(endAll(this.#processes, this.#terminals), 'local subprocess teardown failed');
    if (failure !== undefined) this.#terminateForHostExit();
    this.#processes.clear();
    this.#terminals.clear();
    this.#updateExitListener();
    this.#cells.close();
    if (this.#ownsUsers) await this.#users?.close();
    if (failure !== undefined) throw failure.error;
  }

  /** Throws what a spawn of `file` in `cwd` as `runAs` would fail with, asked as that user by its worker. */
  async #checkLaunch(runAs: RunAs, file: string, env: Record<string, string>, cwd: string): Promise<void> {
    const worker = this.#workerOf(runAs);
    const failure = worker === undefined ? launchFailure(file, env, cwd, this.#platform) : await worker.call('launchCheck', file, env, cwd);
    if (failure === undefined) return;
    throw failure instanceof ProviderError ? failure : providerFailure(failure, ` (as user ${runAs.name})`);
  }

  /** The worker of `runAs`; undefined when that is this process's own user. */
  #workerOf(runAs: RunAs): FileWorker | undefined {
    if (this.#users === undefined) {
      this.#users = new UserWorkers();
      this.#ownsUsers = true;
    }
    return this.#users.of(runAs);
  }

  #assertActive(): void {
    if (this.#disposing !== undefined) throw new ProviderError('UNSUPPORTED', 'the runtime has been disposed');
  }

  #getInspector(): ProcessInspector {
    this.#inspector ??= this.#platform.createInspector();
    return this.#inspector;
  }

  /** The environment of a child: the user's own entries (HOME, USER, …) under the caller's explicit ones. */
  #environmentFor(explicit: Readonly<Record<string, string | null | undefined>> | undefined, runAs: RunAs | undefined): Record<string, string> {
    if (runAs === undefined) return this.childEnvironment(explicit);
    return this.childEnvironment({ ...userEnvironment(runAs), ...explicit });
  }

  /** The spill directory of the user's processes: theirs alone. */
  #spillFor(runAs: RunAs | undefined): SpillDirectory {
    if (runAs === undefined) return this.#spill;
    let directory = this.#userSpill.get(runAs.uid);
    if (directory === undefined) {
      directory = new SpillDirectory({
        ...(this.#options.spillParent !== undefined ? { parent: this.#options.spillParent } : {}),
        ...(this.#options.spillFileSystem !== undefined ? { fs: this.#options.spillFileSystem } : {}),
        owner: { uid: runAs.uid, gid: runAs.gid },
      });
      this.#userSpill.set(runAs.uid, directory);
    }
    return directory;
  }

  #processHost(runAs?: RunAs): ProcessHost {
    return {
      tree: this.#platform.tree,
      ...(this.#platform.host ? { startProgram: (program: ProgramStart) => this.#startProgram(program) } : {}),
      spill: this.#spillFor(runAs),
      inputBacklogBytes: this.#options.inputBacklogBytes,
      groupHasLiveMembers: (pgid, cell) => {
        const inspector = this.#getInspector();
        if (cell?.complete !== true) return inspector.groupHasLiveMembers(pgid);
        // The tree's group lies in its POSIX session (setsid at the spawn), whose every process descends
        // from the tree and is held by a complete cell: a group with no live member there has none anywhere.
        return sessionRows(inspector, cell).some((row) => row.alive && row.pgrp === pgid);
      },
      processGroups: (cell) =>
        new Map(
          sessionRows(this.#getInspector(), cell)
            .filter((row) => row.alive)
            .map((row) => [row.identity.pid, row.pgrp]),
        ),
    };
  }

  /**
   * A process's program started with posix_spawn, where this host has it
   * (posix/children.ts): no copy of this process at each spawn. Undefined for
   * Node's spawn to start it: where posix_spawn is not used, and where no
   * executable file is found, so that the failure is reported as it always was.
   */
  #startProgram(program: ProgramStart): ChildProcess | undefined {
    // Asked first: elsewhere (Windows) the name is not looked up here at all.
    if (!canSpawnPrograms()) return undefined;
    // posix_spawn searches no PATH: the file execvp would find from the child's PATH and directory.
    const file = executablePath(program.file, program.env, program.cwd, this.#platform);
    if (file === undefined) return undefined;
    return startChild({ ...program, file, argv0: program.file, newSession: program.detached }) as unknown as ChildProcess | undefined;
  }

  /** Keeps `handle` in `set` until `release` resolves; a failed release keeps it for disposal. */
  #own<T>(set: Set<T>, handle: T, key: string, release: () => Promise<void>): void {
    set.add(handle);
    this.#updateExitListener();
    release().then(
      () => {
        this.#cells.released(key);
        if (this.#disposing !== undefined) return;
        set.delete(handle);
        this.#updateExitListener();
      },
      () => {
        // Stays owned: disposal retries and reports it.
      },
    );
  }

  /** The synchronous last resort is installed exactly while something is owned. */
  #updateExitListener(): void {
    const owned = this.#processes.size + this.#terminals.size > 0;
    if (owned && this.#exitListener === undefined) {
      this.#exitListener = () => this.#terminateForHostExit();
      // Prepended: it must run before listeners that were there first.
      process.prependListener('exit', this.#exitListener);
    } else if (!owned && this.#exitListener !== undefined) {
      process.off('exit', this.#exitListener);
      this.#exitListener = undefined;
    }
  }

  #terminateForHostExit(): void {
    for (const handle of this.#processes) {
      try {
        handle.terminateForHostExit();
      } catch (_error) {
        // Each target is contained.
      }
    }
    for (const terminal of this.#terminals) {
      try {
        terminal.terminateForHostExit();
      } catch (_error) {
        // Each target is contained.
      }
    }
  }
}

/** A worker's answer that a spawn or a lookup would fail, as the provider's error (the errno as its cause's code). */
function providerFailure(failure: WorkerFailure, suffix = ''): ProviderError {
  const cause = failure.errno === undefined ? undefined : Object.assign(new Error(failure.errno), { code: failure.errno });
  return new ProviderError(failure.code as ProviderErrorCode, `${failure.message}${suffix}`, cause === undefined ? undefined : { cause });
}
