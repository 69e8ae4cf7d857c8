/**
 * The shells the daemon runs itself: a `PersistentShell` (the SDK's engine)
 * per shell, over the owner's own terminal sessions, so each of its terminals
 * is listed, attachable and bounded like any other.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger as Logger } from 'fastify';
import { schemas } from '@execworld/sdk/protocol';
import type { SubprocessRuntime, SubprocessTerminalSpawnSpec } from '@execworld/sdk/seam';
import { bash, PersistentShell, pwsh, RunDetachedError, type RunOptions, type RunResult, type ShellOptions } from '@execworld/sdk/shell';
import { ServiceError } from '../errors.ts';
import type { ExecutionProvider, ShellDefaults } from '../../provider/api.ts';
import type { Principal } from '../auth.ts';
import { TakeoverRefusedError, type ShellRecord } from '../takeover-state.ts';
import { RequestLedger } from './request-ledger.ts';
import type { TerminalSession } from './terminal-session.ts';
import { terminalView } from './shell-terminal.ts';

type ShellInfo = typeof schemas.ShellInfo._zod.output;
type RunRecord = typeof schemas.ShellRunRecord._zod.output;

/**
 * The first PowerShell `resolve` finds among `shells`' candidates for `env` (on Windows 7 on
 * the PATH, then where its installer puts it, then Windows PowerShell 5.1).
 * @throws the first candidate's failure when none is found.
 */
export async function resolvePwsh(
  resolve: (command: string, env?: Readonly<Record<string, string>>) => Promise<string>,
  shells: ShellDefaults,
  env?: Readonly<Record<string, string>>,
): Promise<string> {
  let first: unknown;
  for (const candidate of shells.pwshCandidates(env)) {
    try {
      return await resolve(candidate, env);
    } catch (error) {
      first ??= error;
    }
  }
  throw first;
}
type WireResult = typeof schemas.RunResult._zod.output;

/** The limits of a shell's terminal session, as a create names them (memoryBytes, pids, cpu). */
export type ShellLimits = Readonly<Partial<Record<'memoryBytes' | 'pids' | 'cpu', number | undefined>>>;

export interface ShellSpec {
  readonly dialect: 'bash' | 'pwsh';
  readonly cwd: string;
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** The OS user the shell runs as, by name or uid (see SessionRegistry.runAs); the owner's when absent. */
  readonly user?: string | undefined;
  /** Limits of the shell's terminal session (see SessionRegistry.sessionLimits). */
  readonly limits?: ShellLimits | undefined;
}

class DaemonShell {
  readonly id: string;
  readonly kind = 'shell';
  readonly owner: string;
  readonly spec: ShellSpec;
  readonly createdAt: Date;
  /** Who made it: its terminals are made as this principal. */
  readonly principal: Principal;
  /** The shell program looked up for it (pwsh), when it is not the dialect's own. */
  shellPath: string | undefined;
  shell: PersistentShell | undefined;
  terminalId: string | null = null;
  /** Every terminal the shell ran on (a new one after each exit of the shell), forgotten with it. */
  readonly terminalIds: string[] = [];
  running = false;
  closed = false;
  /**
   * The last runs, oldest first, for those who follow the shell without taking its answers (the browser view):
   * at most SHELL_RUNS_KEPT, each with the start of its command and the end of its output.
   */
  readonly runs: RunRecord[] = [];
  dropped = 0;
  /** The run last started with a requestId, and its last answer once it had one: what a caller asking for it again gets. */
  request: { requestId: string; answer?: WireResult | undefined } | undefined;
  /** Ends the call in progress and leaves its run going (a caller asking for the same run again takes it over). */
  detach: AbortController | undefined;
  /** Settles once the call in progress ended. */
  callEnded: Promise<void> = Promise.resolve();

  /** @param kept - the id and creation time a takeover kept */
  constructor(principal: Principal, spec: ShellSpec, kept?: { id: string; createdAt: Date }) {
    this.id = kept?.id ?? `s_${randomBytes(12).toString('base64url')}`;
    this.createdAt = kept?.createdAt ?? new Date();
    this.principal = principal;
    this.owner = principal.owner;
    this.spec = spec;
  }

  info(): ShellInfo {
    const state = this.closed ? 'closed' : this.running ? 'running' : this.shell?.pending === true ? 'open' : 'idle';
    return { id: this.id, dialect: this.spec.dialect, cwd: this.spec.cwd, terminalId: this.terminalId, state, createdAt: this.createdAt.toISOString() };
  }

  /** A new run's record, the oldest one forgotten past the bound. */
  begin(command: string): RunRecord {
    const record: RunRecord = {
      command: command.slice(0, schemas.SHELL_RUN_COMMAND_CHARS),
      state: 'running',
      exitCode: null,
      signal: null,
      waitingFor: null,
      output: '',
      truncated: false,
      startedAt: new Date().toISOString(),
      durationMs: 0,
    };
    this.runs.push(record);
    if (this.runs.length > schemas.SHELL_RUNS_KEPT) {
      this.runs.shift();
      this.dropped += 1;
    }
    return record;
  }

  /** An answer of the run `record`: its output joins what it printed before, and its reason is the run's state. */
  static answer(record: RunRecord, result: RunResult): void {
    const output = record.output + result.output;
    record.output = output.length > schemas.SHELL_RUN_OUTPUT_CHARS ? output.slice(output.length - schemas.SHELL_RUN_OUTPUT_CHARS) : output;
    record.truncated ||= result.truncated || output.length > schemas.SHELL_RUN_OUTPUT_CHARS;
    record.state = result.reason;
    record.exitCode = result.exitCode;
    record.signal = result.signal;
    record.waitingFor = result.waitingFor ?? null;
    record.durationMs = Date.now() - Date.parse(record.startedAt);
  }
}

/** What shells need of the session registry that holds their terminals (it is that registry; named here so neither module imports the other). */
export interface ShellTerminals {
  readonly runtime: Pick<ExecutionProvider, 'capabilities' | 'shells'>;
  resolveExecutable(principal: Principal, command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal, user?: string): Promise<string>;
  createTerminal(
    principal: Principal,
    spec: SubprocessTerminalSpawnSpec,
    options: { answerQueries?: boolean; user?: string | undefined; limits?: ShellLimits | undefined },
  ): Promise<TerminalSession>;
  /** Ends a session and forgets it. */
  delete(owner: string, id: string, kind: 'terminal'): Promise<void>;
  /** The owner's terminal session `id`. */
  get(owner: string, id: string, kind: 'terminal'): TerminalSession;
}

export class ShellRegistry {
  readonly #registry: ShellTerminals;
  readonly #log: Logger;
  readonly #shells = new Map<string, DaemonShell>();

  /** How many shells are kept. */
  get size(): number {
    return this.#shells.size;
  }
  /** The creates made with a requestId: as many as an owner may hold shells, and as many under way again. */
  readonly #ledger: RequestLedger<DaemonShell>;
  readonly #maxPerOwner: number;

  /** @param maxPerOwner - shells one owner may hold (each also holds a terminal while its shell runs). */
  constructor(registry: ShellTerminals, log: Logger, maxPerOwner: number) {
    this.#registry = registry;
    this.#log = log;
    this.#maxPerOwner = maxPerOwner;
    this.#ledger = new RequestLedger(2 * maxPerOwner);
  }

  /** Starts a shell and answers once it is ready; a retry with the same `requestId` gets the same shell. */
  create(principal: Principal, spec: ShellSpec, requestId?: string): Promise<DaemonShell> {
    return this.#ledger.once(principal, requestId, 'shell', () => this.#create(principal, spec));
  }

  async #create(principal: Principal, spec: ShellSpec): Promise<DaemonShell> {
    const { owner } = principal;
    const held = this.list(owner).length;
    if (held >= this.#maxPerOwner) throw new ServiceError('LIMIT_EXCEEDED', `owner ${owner} already holds ${held} shells (the limit is ${this.#maxPerOwner})`);
    const registry = this.#registry;
    if (!registry.runtime.capabilities.terminals) throw new ServiceError('UNSUPPORTED', 'shells run on terminals, and this host has none');
    const entry = new DaemonShell(principal, spec);
    // pwsh is looked up as a terminal's program is: on the PATH of the shell's own environment
    // (and on Windows where PowerShell is installed).
    entry.shellPath =
      spec.dialect === 'pwsh'
        ? await resolvePwsh((command, env) => registry.resolveExecutable(principal, command, env, undefined, spec.user), registry.runtime.shells, spec.env)
        : undefined;
    entry.shell = await PersistentShell.start(this.#runtimeOf(entry), engineOptions(entry));
    this.#shells.set(entry.id, entry);
    this.#log.info({ shell: entry.id, owner, terminal: entry.terminalId }, 'shell started');
    return entry;
  }

  /** The runtime the engine of `entry` starts its terminals on: the owner's terminal sessions. */
  #runtimeOf(entry: DaemonShell): SubprocessRuntime {
    const registry = this.#registry;
    const { principal, spec } = entry;
    return {
      resolveExecutable: (command, env, signal) => registry.resolveExecutable(principal, command, env, signal, spec.user),
      spawn: () => {
        throw new ServiceError('UNSUPPORTED', 'a shell starts terminals only');
      },
      // The engine answers the queries of a shell that asks (pwsh), and tells the daemon not to.
      spawnTerminal: async (terminalSpec: SubprocessTerminalSpawnSpec, options?: { answerQueries?: boolean }) => {
        const session = await registry.createTerminal(principal, terminalSpec, {
          answerQueries: options?.answerQueries ?? true,
          user: spec.user,
          limits: spec.limits,
        });
        entry.terminalId = session.id;
        entry.terminalIds.push(session.id);
        return terminalView(session);
      },
    };
  }

  /**
   * For a takeover: what the next image of the daemon needs to go on with
   * every shell (its terminals go over as terminals). A call in progress
   * goes with this image; the run it waited for stays open, and a `wait`
   * answers it after the takeover.
   * @throws {TakeoverRefusedError} naming a shell that cannot be handed over now.
   */
  takeoverRecords(): ShellRecord[] {
    return [...this.#shells.values()].map((entry) => {
      const engine = entry.shell?.takeoverSnapshot() ?? 'it is starting';
      if (typeof engine === 'string') throw new TakeoverRefusedError(`shell ${entry.id} cannot be handed over now: ${engine}; try again`);
      const { principal, spec } = entry;
      return {
        id: entry.id,
        owner: entry.owner,
        principal: {
          access: principal.access,
          ...(principal.runAs === undefined ? {} : { runAs: { ...principal.runAs } }),
          ...(principal.root === undefined ? {} : { root: principal.root }),
        },
        createdAt: entry.createdAt.toISOString(),
        spec: {
          dialect: spec.dialect,
          cwd: spec.cwd,
          ...(spec.env === undefined ? {} : { env: { ...spec.env } }),
          ...(spec.user === undefined ? {} : { user: spec.user }),
          ...(spec.limits === undefined
            ? {}
            : { limits: Object.fromEntries(Object.entries(spec.limits).filter(([, value]) => value !== undefined)) as Record<string, number> }),
        },
        ...(entry.shellPath === undefined ? {} : { shellPath: entry.shellPath }),
        terminalId: entry.terminalId,
        terminalIds: [...entry.terminalIds],
        runs: entry.runs.map((run) => ({ ...run })),
        dropped: entry.dropped,
        ...(entry.request === undefined ? {} : { request: { ...entry.request } }),
        engine,
      };
    });
  }

  /**
   * Goes on with the shells the previous image of the daemon handed over
   * (see {@link takeoverRecords}), once their terminals were adopted: each
   * engine reads its terminal on from where it was.
   */
  adopt(records: readonly ShellRecord[]): void {
    for (const record of records) {
      const principal: Principal = { owner: record.owner, access: record.principal.access, runAs: record.principal.runAs, root: record.principal.root };
      const entry = new DaemonShell(principal, record.spec, { id: record.id, createdAt: new Date(record.createdAt) });
      entry.shellPath = record.shellPath;
      entry.terminalId = record.terminalId;
      entry.terminalIds.push(...record.terminalIds);
      entry.runs.push(...record.runs);
      entry.dropped = record.dropped;
      entry.request = record.request;
      const session = record.engine.session;
      const terminal = session === undefined || record.terminalId === null ? undefined : this.#registry.get(record.owner, record.terminalId, 'terminal');
      entry.shell = PersistentShell.resume(
        this.#runtimeOf(entry),
        engineOptions(entry),
        record.engine,
        terminal === undefined ? undefined : terminalView(terminal, session!.offset),
      );
      this.#shells.set(entry.id, entry);
      this.#log.info({ shell: entry.id, owner: record.owner, terminal: entry.terminalId, open: entry.shell.pending }, 'shell adopted');
    }
  }

  get(owner: string, id: string): DaemonShell {
    const entry = this.#shells.get(id);
    if (entry === undefined || entry.owner !== owner) throw new ServiceError('NOT_FOUND', `no shell ${id}`);
    return entry;
  }

  list(owner: string): DaemonShell[] {
    return [...this.#shells.values()].filter((entry) => entry.owner === owner);
  }

  /**
   * Runs one call of the engine on the shell, and answers its result in wire form. `command` is given by a
   * run, which starts a record in the shell's list of runs; a send, wait or interrupt answers for the open run,
   * the last one listed.
   */
  async call(
    owner: string,
    id: string,
    command: string | undefined,
    body: (shell: PersistentShell, detach: AbortSignal) => Promise<RunResult>,
  ): Promise<WireResult> {
    const entry = this.get(owner, id);
    const shell = entry.shell!;
    const busy = entry.running || (command !== undefined && shell.pending);
    // A call refused as busy starts no run and changes none.
    const record = busy ? undefined : command !== undefined ? entry.begin(command) : shell.pending ? entry.runs.at(-1) : undefined;
    const before = record?.state;
    if (record !== undefined) record.state = 'running';
    const detach = new AbortController();
    let ended = (): void => undefined;
    // A call refused as busy leaves the one under way its marks.
    if (!busy) {
      entry.running = true;
      entry.detach = detach;
      entry.callEnded = new Promise((resolve) => (ended = resolve));
    }
    try {
      const result = await body(shell, detach.signal);
      if (record !== undefined) DaemonShell.answer(record, result);
      // The engine measures each run on the terminal it typed it into (see terminalView's usageMeter).
      const answer = { ...result, waitingFor: result.waitingFor ?? null, terminalId: entry.terminalId };
      // An answer of the run a requestId names: kept for its caller asking again.
      if (entry.request !== undefined && record !== undefined) entry.request.answer = answer;
      return answer;
    } catch (error) {
      // A call detached from its run leaves the run going, and its record as it is; a caller still there learns who took the run.
      if (error instanceof RunDetachedError) throw new ServiceError('SHELL_BUSY', 'the run was asked for again by its requestId, and that call answers it');
      if (record !== undefined) {
        // A run that never started leaves the list; a call on the open run that failed leaves it as it was.
        if (command !== undefined) entry.runs.splice(entry.runs.indexOf(record), 1);
        else if (before !== undefined) record.state = before;
      }
      throw error;
    } finally {
      if (!busy) {
        entry.running = false;
        entry.detach = undefined;
        ended();
      }
    }
  }

  /**
   * `shell.run`. With a `requestId` the run is one its caller may ask for
   * again: the caller's going away (a lost connection, a takeover's exec)
   * leaves it running, and a run of the same requestId answers it (as a
   * wait, after the call still waiting on it gave way) or gives the answer
   * its caller did not get, instead of starting it again.
   */
  async run(owner: string, id: string, params: ShellRunParams, signal: AbortSignal): Promise<WireResult> {
    const entry = this.get(owner, id);
    const { command, requestId } = params;
    if (requestId !== undefined && entry.request?.requestId === requestId) {
      if (entry.running) {
        entry.detach?.abort();
        await entry.callEnded;
      }
      if (entry.shell!.pending) return this.call(owner, id, undefined, (shell, detach) => shell.wait(runOptions(params, signal, detach, true)));
      if (entry.request.answer !== undefined) return entry.request.answer;
    }
    const request = requestId === undefined ? undefined : { requestId };
    return this.call(owner, id, command, (shell, detach) => {
      // Only once the run starts: a call refused as busy changes nothing.
      entry.request = request;
      return shell.run(command, runOptions(params, signal, detach, requestId !== undefined));
    });
  }

  /** Ends the shell and forgets it; a shell whose cleanup failed stays, closed, for the delete to be retried. */
  async delete(owner: string, id: string): Promise<void> {
    const entry = this.get(owner, id);
    entry.closed = true;
    await entry.shell?.close();
    this.#shells.delete(id);
    // Its terminals were the shell's way of running, not sessions of their own: they go with it, so that nothing
    // of a shell that was ended stays listed (one the owner deleted meanwhile is gone already).
    await Promise.all(entry.terminalIds.map((terminal) => this.#registry.delete(owner, terminal, 'terminal').catch(() => undefined)));
    this.#ledger.forget(id);
  }

  /** Ends every shell (their terminals are ended with the registry's sessions). */
  async shutdown(): Promise<void> {
    const all = [...this.#shells.values()];
    this.#shells.clear();
    await Promise.allSettled(all.map((entry) => entry.shell?.close() ?? Promise.resolve()));
  }
}

/** The options of `entry`'s engine. */
function engineOptions(entry: DaemonShell): ShellOptions {
  const { spec, shellPath } = entry;
  return {
    dialect: spec.dialect === 'pwsh' ? pwsh : bash,
    cwd: spec.cwd,
    env: spec.env,
    ...(shellPath === undefined ? {} : { shellPath, startTimeoutMs: 60_000 }),
  };
}

/**
 * The run options of a wire call: the caller's going away interrupts the run
 * (`signal`), or with `detachable` (a run its caller may ask for again) only
 * ends the call; `detach` ends the call too (its run asked for again).
 */
export function runOptions(
  params: { timeoutMs?: number | undefined; idleTimeoutMs?: number | undefined; waitMs?: number | undefined; maxOutputBytes?: number | undefined },
  signal: AbortSignal,
  detach?: AbortSignal,
  detachable = false,
): RunOptions {
  const { timeoutMs, idleTimeoutMs, waitMs, maxOutputBytes } = params;
  const ends = detachable ? AbortSignal.any(detach === undefined ? [signal] : [signal, detach]) : detach;
  return { timeoutMs, idleTimeoutMs, waitMs, maxOutputBytes, ...(detachable ? {} : { signal }), ...(ends === undefined ? {} : { detach: ends }) };
}

/** The fields of a `shell.run` its answer depends on. */
type ShellRunParams = Parameters<typeof runOptions>[0] & { readonly command: string; readonly requestId?: string | undefined };
