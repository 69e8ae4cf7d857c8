/**
 * The registry of the daemon's sessions: every terminal and process tree it
 * runs, by id and owner; the per-owner and daemon-wide bounds on them; the
 * idempotent creates; and how long their facts outlive them. Once a session
 * has ended and nothing of it runs any more, its exit facts and retained
 * output are kept for the retention period, so a late client still learns them.
 * @module
 */
import { createHash } from 'node:crypto';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { SubprocessSpawnSpec, SubprocessTerminalSpawnSpec } from '@execworld/sdk/seam';
import { ProviderError, type ExecutionProvider, type ProviderProcess, type ProviderTerminal, type RunAs, type TerminalHandOver } from '../../provider/api.ts';
import type { Principal } from '../auth.ts';
import { ServiceError, toServiceError } from '../errors.ts';
import { OwnerUsageLedger, type OwnerUsage } from './owner-usage.ts';
import { Gate } from './gate.ts';
import { ByteBudget } from '../byte-budget.ts';
import { schemas } from '@execworld/sdk/protocol';
import { collectBytesOf, EndedProcess, ProcessSession } from './process-session.ts';
import { RequestLedger } from './request-ledger.ts';
import { ShellRegistry } from './shells.ts';
import type { StreamMeter } from '../streams.ts';
import { TakeoverRefusedError, type ProcessRecord, type ShellRecord, type TerminalRecord } from '../takeover-state.ts';
import { EndedTerminal, TerminalSession } from './terminal-session.ts';

export interface SessionLimits {
  readonly maxSessionsPerOwner: number;
  /** Collect-mode tails of every held process together, at most. */
  readonly collectBudgetBytes: number;
  readonly maxRetainedPerOwner: number;
  /** Where the session rings report what they take and drop; nowhere when absent. */
  readonly meter?: StreamMeter | undefined;
  readonly ringBytes: number;
  /** The most cells (rows × cols) a terminal's screen is kept for. */
  readonly screenMaxCells: number;
  readonly retentionMs: number;
  readonly orphanTimeoutMs: number;
  /** Working directory of what an owner not mapped to an OS user creates without one. @default the daemon's own */
  readonly defaultCwd?: string | undefined;
  /** Pauses between automatic sweeps of an exited terminal's session. @default SWEEP_RETRY_DELAYS_MS */
  readonly sweepRetryDelaysMs?: readonly number[] | undefined;
  /** Ceilings of a session's limits: a create asking more is refused, one asking none gets the default or the ceiling. */
  readonly maxSessionMemoryBytes?: number | undefined;
  readonly maxSessionPids?: number | undefined;
  readonly maxSessionCpu?: number | undefined;
  /** Limits of a session created without them (each at most its ceiling). */
  readonly defaultSessionMemoryBytes?: number | undefined;
  readonly defaultSessionPids?: number | undefined;
  readonly defaultSessionCpu?: number | undefined;
  /** The pids all the sessions of one owner hold together (the runtime's group total); the runtime's default when absent. */
  readonly maxOwnerPids?: number | undefined;
}

/**
 * The pids limit of a session created without one, where neither
 * --default-session-pids nor --max-session-pids is set and the host can
 * enforce it. Each thread counts: a JVM runs tens to hundreds, a Node worker
 * some ten, a parallel build a few per job, so real workloads stay within a
 * few hundred to a thousand or two; a thread or fork bomb stops at an eighth
 * of the smallest usual pid_max (32768). The owner's total
 * (--max-owner-pids) bounds all of an owner's sessions together.
 */
export const DEFAULT_SESSION_PIDS = 4096;

/**
 * The group an owner's sessions are held in together (see the provider's
 * `group`): a digest of the owner's name, since owners are any strings of
 * the token file and a group names a cgroup directory.
 */
export function ownerGroup(owner: string): string {
  return `o-${createHash('sha256').update(owner, 'utf8').digest('hex').slice(0, 32)}`;
}

/** The limits a create asks for (see the wire's SessionLimits). */
export interface CreateLimits {
  readonly memoryBytes?: number | undefined;
  readonly pids?: number | undefined;
  readonly cpu?: number | undefined;
}

/**
 * How many sessions the daemon's callers start ending at once; the others
 * wait their turn. An ending is a few steps (signals, its cgroup read and
 * removed), each a callback on the event loop: with a thousand in flight,
 * every turn of the loop ran hundreds of them, and anything else (a health
 * check, a keystroke) waited behind them all. Eight at a time end a thousand
 * terminals about as fast, with a turn of the loop a few of them long.
 */
const ENDINGS_AT_ONCE = 8;
/**
 * How long an ending holds its turn at most. Most end in a few milliseconds;
 * one whose program outlasts SIGTERM waits its grace (as long as its creator
 * chose) doing nothing, and goes on without a turn, so that it never holds
 * up the endings of other sessions, or other owners'.
 */
const ENDING_TURN_MS = 100;

/** Each limit, its ceiling's and its default's setting, and the flag that names the ceiling. */
const LIMIT_SETTINGS = [
  { name: 'memoryBytes', max: 'maxSessionMemoryBytes', fallback: 'defaultSessionMemoryBytes', flag: '--max-session-memory-bytes' },
  { name: 'pids', max: 'maxSessionPids', fallback: 'defaultSessionPids', flag: '--max-session-pids' },
  { name: 'cpu', max: 'maxSessionCpu', fallback: 'defaultSessionCpu', flag: '--max-session-cpu' },
] as const;

export type AnySession = TerminalSession | ProcessSession;

/** How a create is made beyond its spec. */
export interface CreateOptions {
  /** Makes a retried create idempotent (see {@link RequestLedger}). */
  readonly requestId?: string | undefined;
  /** The OS user it runs as, by name or uid (see {@link SessionRegistry.runAs}); the principal's own when absent. */
  readonly user?: string | undefined;
  /** What the session may use (see {@link SessionRegistry.sessionLimits}). */
  readonly limits?: CreateLimits | undefined;
}

export interface TerminalCreateOptions extends CreateOptions {
  /** Whether the daemon answers the program's terminal queries. @default true */
  readonly answerQueries?: boolean | undefined;
}

/** The host's users, as the creates that name one (`user`) need them. */
export interface HostAccounts {
  /** The user a name or a numeric uid stands for, or undefined when the host has none such. */
  lookup(nameOrUid: string): RunAs | undefined;
  /** The daemon's own uid; undefined on a host without uids (Windows). */
  readonly uid: number | undefined;
}

/** A host whose user database holds nobody: every user a create names is unknown. */
const NO_ACCOUNTS: HostAccounts = { lookup: () => undefined, uid: process.getuid?.() };

export class SessionRegistry {
  readonly runtime: ExecutionProvider;
  /** The shells the daemon runs on the owners' terminals. */
  readonly shells: ShellRegistry;
  readonly #limits: SessionLimits;
  readonly #log: Logger;
  readonly #sessions = new Map<string, AnySession>();
  /**
   * The creates made with a requestId, so a retried create returns the same session. Bounded by
   * the sessions an owner may run and have retained, and as many creates under way again: an
   * entry goes with its session, so under these limits none of a session still held is dropped.
   */
  readonly #ledger: RequestLedger<AnySession>;
  readonly #evictions = new Map<string, NodeJS.Timeout>();
  /** What the owners' sessions used, those forgotten included, for the metrics. */
  readonly #usage = new OwnerUsageLedger();
  /** The endings callers asked for, a few at a time (see ENDINGS_AT_ONCE). */
  readonly #endings = new Gate(ENDINGS_AT_ONCE, ENDING_TURN_MS);
  /** Collect-mode bytes (maxBytes) of the process creates under way, by owner, before their sessions count their own. */
  readonly #collectPending = new Map<string, number>();
  /** The rule and the words of the collect budget; the bytes held are counted by the sessions themselves (#collectHeld). */
  readonly #collectBudget: ByteBudget;
  /** Per owner, creates under way: they hold a slot before their session exists. */
  readonly #reserved = new Map<string, number>();
  #orphanSweep: NodeJS.Timeout | undefined;
  #pidsSupport: boolean | undefined;
  #shuttingDown: Promise<void> | undefined;

  readonly #accounts: HostAccounts;

  /** @param accounts - the host's users, for the creates that name one. */
  constructor(runtime: ExecutionProvider, limits: SessionLimits, log: Logger, accounts: HostAccounts = NO_ACCOUNTS) {
    this.runtime = runtime;
    this.shells = new ShellRegistry(this, log, limits.maxSessionsPerOwner);
    this.#accounts = accounts;
    this.#limits = limits;
    this.#log = log;
    this.#ledger = new RequestLedger(2 * limits.maxSessionsPerOwner + limits.maxRetainedPerOwner);
    this.#collectBudget = new ByteBudget(limits.collectBudgetBytes, {
      what: (owner) =>
        owner === undefined ? 'collected output of running and retained processes' : `collected output of owner ${owner}'s running and retained processes`,
      flag: '--collect-budget-bytes',
      // A process's stdout and stderr, each at the most it may collect.
      largest: 2 * schemas.MAX_COLLECT_BYTES,
      retry: 'create it once others ended, or collect less',
    });
    if (limits.orphanTimeoutMs > 0) {
      this.#orphanSweep = setInterval(() => this.#sweepOrphans(), Math.min(60_000, Math.max(100, limits.orphanTimeoutMs / 4)));
      this.#orphanSweep.unref();
    }
  }

  get size(): number {
    return this.#sessions.size;
  }

  /** Each owner's usage (cpu, limits hit, OOM kills, memory now) over every session it ran, for the metrics. */
  usage(): Map<string, OwnerUsage> {
    return this.#usage.totals(this.#sessions.values());
  }

  /** Sessions by kind and state (running, or exited and retained), for the metrics. */
  counts(): { kind: string; state: string; count: number }[] {
    const counts = new Map<string, number>();
    for (const session of this.#sessions.values()) {
      const key = `${session.kind}/${session.finishedAt === undefined ? 'running' : 'exited'}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].map(([key, count]) => {
      const [kind, state] = key.split('/') as [string, string];
      return { kind, state, count };
    });
  }

  /**
   * The OS user `principal`'s program runs as when its create names `user` (a
   * user name or a numeric uid, as docker's `--user` takes), undefined for
   * the daemon's own. Without `user`, the owner's: the one its token file
   * maps it to (the principal's), else the daemon's. An owner mapped to an OS user may name only
   * that user, by name or uid; it is compared before any lookup, so that a
   * refusal tells such an owner nothing of the host's other users. An owner
   * that is not mapped runs as the daemon's user, and may name another only
   * when the daemon is root (the one that may become another user: see
   * run-as.ts); naming the daemon's own user (root or 0 of a root daemon) is
   * no switch.
   * @throws {ServiceError} USER_NOT_ALLOWED for a user the owner may not run as;
   *   INVALID_ARGUMENT for a user the host does not have.
   */
  runAs(principal: Principal, user?: string): RunAs | undefined {
    const mapped = principal.runAs;
    if (user === undefined) return mapped;
    if (mapped !== undefined) {
      if (user === mapped.name || (/^[0-9]+$/.test(user) && Number(user) === mapped.uid)) return mapped;
      throw new ServiceError('USER_NOT_ALLOWED', `owner ${principal.owner} runs as OS user ${mapped.name} (uid ${mapped.uid}) and may not name user ${user}`);
    }
    const own = this.#accounts.uid;
    if (own === undefined) throw new ServiceError('USER_NOT_ALLOWED', `user ${user}: on this host the daemon runs programs as its own user only`);
    const account = this.#accounts.lookup(user);
    if (account === undefined) throw new ServiceError('INVALID_ARGUMENT', `user ${user}: the daemon's host has no such OS user`);
    if (account.uid === own) return undefined;
    if (own !== 0) {
      throw new ServiceError('USER_NOT_ALLOWED', `user ${user}: the daemon runs as uid ${own}, not root, and runs programs as its own user only`);
    }
    return account;
  }

  /** Where `command` is, as `principal`'s programs (as `user`, when named) would find it: as their OS user. */
  resolveExecutable(principal: Principal, command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal, user?: string): Promise<string> {
    return this.runtime.resolveExecutable(command, env, signal, this.runAs(principal, user));
  }

  /**
   * Where what `principal` creates without a working directory runs: the home of
   * the OS user it runs as when that is not the daemon's (the user its token
   * file maps it to, or the one its create names: the directory its programs
   * would start in after a login), else the daemon's --default-cwd, else the
   * daemon's own working directory. Never a client's: a path on the client's
   * machine means nothing in the world.
   */
  defaultCwd(principal: Principal, user?: string): string {
    return this.runAs(principal, user)?.home ?? this.#limits.defaultCwd ?? process.cwd();
  }

  /** Bytes the sessions' rings hold now. */
  retainedBytes(): number {
    let bytes = 0;
    for (const session of this.#sessions.values()) bytes += session.retainedBytes();
    return bytes;
  }

  /**
   * The limits a session is held to: those asked for, each at most its
   * ceiling (--max-session-*); one not asked for is the default, else the
   * ceiling, so that no session escapes a ceiling by asking nothing.
   * @throws {ServiceError} INVALID_ARGUMENT naming the limit past its ceiling.
   */
  sessionLimits(asked: CreateLimits | undefined): CreateLimits | undefined {
    const limits: Record<string, number> = {};
    for (const { name, max, fallback, flag } of LIMIT_SETTINGS) {
      const ceiling = this.#limits[max];
      // The built-in pids default only where the host enforces it: elsewhere a create without limits runs as ever.
      const builtIn = name === 'pids' && this.#pidsEnforced() ? DEFAULT_SESSION_PIDS : undefined;
      const value = asked?.[name] ?? this.#limits[fallback] ?? ceiling ?? builtIn;
      if (value === undefined) continue;
      if (ceiling !== undefined && value > ceiling) {
        throw new ServiceError('INVALID_ARGUMENT', `limits.${name}: ${value} is above this daemon's ceiling of ${ceiling} (${flag})`);
      }
      limits[name] = value;
    }
    return Object.keys(limits).length === 0 ? undefined : limits;
  }

  /** Whether the runtime holds sessions to a pids limit (read once: the host's controllers do not change). */
  #pidsEnforced(): boolean {
    this.#pidsSupport ??= this.runtime.limitSupport?.().supported.includes('pids') ?? false;
    return this.#pidsSupport;
  }

  /**
   * A spawn the runtime refused because the owner's sessions already hold
   * their whole total of pids, as the owner's LIMIT_EXCEEDED naming the total
   * and its setting; any other error as it came.
   */
  #ownerPidsRefusal(error: unknown, owner: string): unknown {
    if (!(error instanceof ProviderError) || error.code !== 'LIMIT_EXCEEDED') return error;
    const total = this.runtime.limitSupport?.().groupPids;
    return new ServiceError(
      'LIMIT_EXCEEDED',
      `owner ${owner}'s sessions together already hold all ${total ?? 'their'} pids an owner may hold at once (--max-owner-pids): the kernel refused the new session's fork; end some of its processes or sessions first`,
      { cause: error },
    );
  }

  /** Starts a terminal; a retry with the same `requestId` gets the session the first made. */
  createTerminal(principal: Principal, spec: SubprocessTerminalSpawnSpec, options: TerminalCreateOptions = {}): Promise<TerminalSession> {
    const { owner } = principal;
    const { user, answerQueries = true } = options;
    return this.#ledger.once(principal, options.requestId, 'terminal', async () => {
      const runAs = this.runAs(principal, user);
      const limits = this.sessionLimits(options.limits);
      // The slot is held from before the spawn's await until the session is registered:
      // creates pipelined on one connection cannot all pass the count.
      const release = this.#admit(owner);
      try {
        const handle = await this.runtime.spawnTerminal(spec, { runAs, limits, group: ownerGroup(owner) }).catch((error: unknown) => {
          throw this.#ownerPidsRefusal(error, owner);
        });
        const session: TerminalSession = new TerminalSession(
          owner,
          spec,
          handle,
          {
            ringBytes: this.#limits.ringBytes,
            meter: this.#limits.meter,
            answerQueries,
            screenMaxCells: this.#limits.screenMaxCells,
            sweepRetryDelaysMs: this.#limits.sweepRetryDelaysMs,
            onFinished: () => this.#finished(session),
          },
          this.#log,
        );
        session.limits = limits;
        this.#sessions.set(session.id, session);
        this.#log.info({ session: session.id, owner, pid: handle.pid, user: runAs?.name }, 'terminal started');
        return session;
      } finally {
        release();
      }
    });
  }

  /** Starts a managed process tree; a retry with the same `requestId` gets the session the first made. */
  createProcess(principal: Principal, spec: SubprocessSpawnSpec, options: CreateOptions = {}): Promise<ProcessSession> {
    const { owner } = principal;
    const { user } = options;
    return this.#ledger.once(principal, options.requestId, 'process', async () => {
      const runAs = this.runAs(principal, user);
      const limits = this.sessionLimits(options.limits);
      const release = this.#admit(owner);
      const wanted = collectBytesOf(spec);
      const refused = wanted > 0 ? this.#collectBudget.refusal(owner, wanted, this.#collectHeld(owner), this.#collectHeld()) : undefined;
      if (refused !== undefined) {
        release();
        throw refused;
      }
      // Held from before the spawn's await, like the session slot: concurrent creates cannot all pass the budget.
      this.#collectPending.set(owner, (this.#collectPending.get(owner) ?? 0) + wanted);
      try {
        // Chunks collected before the session exists need no announcing: nobody waits for them yet.
        const made: { session?: ProcessSession } = {};
        // Answered once the program runs or was refused, like a terminal: a refused spawn is this create's error and takes no slot.
        const handle = await this.runtime
          .startProcess(spec, { runAs, limits, group: ownerGroup(owner), onCollected: (stream) => made.session?.collected(stream) })
          .catch((error: unknown) => {
            throw this.#ownerPidsRefusal(error, owner);
          });
        const session: ProcessSession = new ProcessSession(owner, spec, handle, { ...this.#limits, onFinished: () => this.#finished(session) }, this.#log);
        made.session = session;
        session.limits = limits;
        // Registered, the session counts its own bytes (see #collectHeld); in the same turn, the pending ones go.
        this.#sessions.set(session.id, session);
        this.#log.info({ session: session.id, owner, pid: session.handle.pid, user: runAs?.name }, 'process started');
        return session;
      } finally {
        release();
        const pending = (this.#collectPending.get(owner) ?? 0) - wanted;
        if (pending > 0) this.#collectPending.set(owner, pending);
        else this.#collectPending.delete(owner);
      }
    });
  }

  /**
   * Bytes of the collect budget held: each process's tails at their maxBytes
   * while it runs, at what they retain once its streams ended (they stay
   * readable until it is forgotten), and the creates under way at theirs:
   * `owner`'s, or everyone's.
   */
  #collectHeld(owner?: string): number {
    let bytes = 0;
    for (const [whose, pending] of this.#collectPending) if (owner === undefined || whose === owner) bytes += pending;
    for (const session of this.#sessions.values())
      if (session.kind === 'process' && (owner === undefined || session.owner === owner)) bytes += session.collectHeld;
    return bytes;
  }

  /** The owner's session `id`; another owner's id is as unknown as a missing one. */
  get<K extends AnySession['kind']>(owner: string, id: string, kind: K): Extract<AnySession, { kind: K }> {
    const session = this.#sessions.get(id);
    if (session === undefined || session.owner !== owner || session.kind !== kind) {
      throw new ServiceError('NOT_FOUND', `no ${kind} ${id}`);
    }
    session.lastTouched = Date.now();
    return session as Extract<AnySession, { kind: K }>;
  }

  list<K extends AnySession['kind']>(owner: string, kind: K): Extract<AnySession, { kind: K }>[] {
    return [...this.#sessions.values()].filter((session): session is Extract<AnySession, { kind: K }> => session.owner === owner && session.kind === kind);
  }

  /** Terminates the session if it still runs, then forgets it. */
  async delete(owner: string, id: string, kind: AnySession['kind']): Promise<void> {
    const session = this.get(owner, id, kind);
    await this.terminate(session);
    this.#forget(session.id);
  }

  /** The endings callers asked for: under way, and waiting their turn. */
  get endings(): { running: number; waiting: number } {
    return this.#endings.load;
  }

  /** Ends `session` as its own terminate does, in its turn among the endings callers asked for. */
  terminate(session: AnySession): Promise<void> {
    return this.#endings.run(() => session.terminate());
  }

  /**
   * Why a takeover cannot keep every session now, in an operator's words; undefined when it can.
   * Terminals are handed over, running or ended; processes and shells not yet.
   */
  takeoverRefusal(): string | undefined {
    if (this.#shuttingDown !== undefined) return 'the daemon is shutting down';
    if (this.runtime.handOverTerminal === undefined || this.runtime.adoptTerminal === undefined)
      return "this platform's terminals cannot be handed over to a new image of the daemon";
    // A cgroup is adopted by its path, and without containment there is nothing to adopt; the subreaper's tracking is not handed over yet.
    const { containment } = this.runtime.capabilities;
    if (containment !== 'cgroup' && containment !== 'none') return `sessions contained by ${containment} are not handed over yet`;
    if (this.#reserved.size > 0) return 'a create is under way; try again';
    for (const session of this.#sessions.values()) {
      if (session.kind === 'process') {
        if (this.runtime.handOverProcess === undefined || this.runtime.adoptProcess === undefined)
          return "this platform's processes cannot be handed over to a new image of the daemon";
        if (session.collects) return `process ${session.id} collects its output (stdio maxBytes), which is not handed over yet; delete it first`;
        if (session.finishedAt === undefined && (session.exit !== undefined || session.failure !== undefined))
          return `process ${session.id} exited and what it left running is being ended; try again`;
      } else if (session.exit !== undefined && session.finishedAt === undefined)
        return `terminal ${session.id} exited and its session is being swept; try again`;
    }
    return undefined;
  }

  /**
   * For a takeover: what the next image of the daemon needs to rebuild every
   * session, with `stopReading` each running terminal no longer read (its
   * bytes stay in the kernel's buffers for the next image). Without it, a
   * snapshot for the rehearsal, which leaves everything as it is.
   * @throws {TakeoverRefusedError} when a session cannot be handed over (see {@link takeoverRefusal}).
   */
  takeoverRecords(stopReading: boolean): { terminals: TerminalRecord[]; processes: ProcessRecord[]; shells: ShellRecord[] } {
    const refusal = this.takeoverRefusal();
    if (refusal !== undefined) throw new TakeoverRefusedError(refusal);
    // First, while nothing was stopped: a shell that cannot be handed over now refuses the takeover.
    const shells = this.shells.takeoverRecords();
    const records: TerminalRecord[] = [];
    const processes: ProcessRecord[] = [];
    for (const session of this.#sessions.values()) {
      if (session.kind === 'process') {
        processes.push(this.#processRecord(session, stopReading));
        continue;
      }
      if (session.exit !== undefined) {
        records.push(session.takeoverRecord(undefined));
        continue;
      }
      const kept = stopReading ? this.runtime.handOverTerminal!(session.handle) : placeholderHandOver(session.handle.pid);
      if (kept === undefined) throw new TakeoverRefusedError(`terminal ${session.id} cannot be handed over: its program closed the terminal`);
      // What the terminal's output stream buffered while the ring was full goes to the ring now, in order.
      if (stopReading) for (let chunk = session.handle.output.read() as Buffer | null; chunk !== null; chunk = session.handle.output.read() as Buffer | null);
      records.push(session.takeoverRecord(kept));
    }
    return { terminals: records, processes, shells };
  }

  /** A process's record: with `stopReading`, its pipes are no longer read (see {@link takeoverRecords}). */
  #processRecord(session: ProcessSession, stopReading: boolean): ProcessRecord {
    if (session.finishedAt !== undefined) return session.takeoverRecord(undefined);
    if (!stopReading) return session.takeoverRecord({ pid: session.handle.pid, cellKey: '' });
    const kept = this.runtime.handOverProcess!(session.handle);
    // Exited between the refusal's look and now: its exit is this image's libuv's, which reaped it.
    if (kept === undefined) throw new TakeoverRefusedError(`process ${session.id} exited just now; try again`);
    if (typeof kept === 'string') throw new TakeoverRefusedError(`process ${session.id} cannot be handed over now: ${kept}`);
    const { pid, stdin, stdout, stderr, cellKey, cellPath } = kept;
    return session.takeoverRecord({ pid, stdin, stdout, stderr, cellKey, ...(cellPath === undefined ? {} : { cellPath }) });
  }

  /** After a takeover that did not happen: every terminal and process is read again. */
  resumeAfterTakeover(): void {
    for (const session of this.#sessions.values()) if (session.exit === undefined) session.handle.resumeAfterHandOver?.();
  }

  /** Rebuilds the sessions the previous image of the daemon handed over (see {@link takeoverRecords}). */
  adoptSessions(records: readonly TerminalRecord[], processes: readonly ProcessRecord[] = [], shells: readonly ShellRecord[] = []): void {
    for (const record of processes) this.#adoptProcess(record);
    for (const record of records) {
      let handle: ProviderTerminal;
      if (record.terminal !== undefined) {
        if (this.runtime.adoptTerminal === undefined) throw new Error("this platform's terminals cannot be adopted");
        handle = this.runtime.adoptTerminal(record.terminal, { rows: record.rows, cols: record.cols });
      } else if (record.ended !== undefined) {
        handle = new EndedTerminal(0, record.ended.exit);
      } else {
        throw new Error(`terminal ${record.id} is neither running nor ended`);
      }
      const session: TerminalSession = new TerminalSession(
        record.owner,
        { argv: record.argv, cwd: record.cwd, rows: record.rows, cols: record.cols, graceMs: record.terminal?.graceMs ?? 0 },
        handle,
        {
          ringBytes: this.#limits.ringBytes,
          meter: this.#limits.meter,
          answerQueries: record.answerQueries,
          screenMaxCells: this.#limits.screenMaxCells,
          sweepRetryDelaysMs: this.#limits.sweepRetryDelaysMs,
          onFinished: () => this.#finished(session),
          kept: record,
        },
        this.#log,
      );
      if (record.limits !== undefined) session.limits = record.limits;
      this.#sessions.set(session.id, session);
      this.#log.info({ session: session.id, owner: record.owner, pid: handle.pid, running: record.terminal !== undefined }, 'terminal adopted');
    }
    // On their terminals, adopted above.
    this.shells.adopt(shells);
  }

  #adoptProcess(record: ProcessRecord): void {
    const { stdio } = record;
    const spec: SubprocessSpawnSpec = {
      argv: record.argv,
      cwd: record.cwd,
      graceMs: record.graceMs,
      stdio: { stdin: stdio.stdin === 'data' ? { data: '' } : stdio.stdin, stdout: stdio.stdout, stderr: stdio.stderr },
    };
    let handle: ProviderProcess;
    if (record.process !== undefined) {
      if (this.runtime.adoptProcess === undefined) throw new Error("this platform's processes cannot be adopted");
      handle = this.runtime.adoptProcess({ ...record.process, graceMs: record.graceMs }, spec);
    } else if (record.ended !== undefined) {
      handle = new EndedProcess(record.pid, record.ended.exit);
    } else {
      throw new Error(`process ${record.id} is neither running nor ended`);
    }
    const session: ProcessSession = new ProcessSession(
      record.owner,
      spec,
      handle,
      { ...this.#limits, onFinished: () => this.#finished(session), kept: record },
      this.#log,
    );
    if (record.limits !== undefined) session.limits = record.limits;
    this.#sessions.set(session.id, session);
    this.#log.info({ session: session.id, owner: record.owner, pid: handle.pid, running: record.process !== undefined }, 'process adopted');
    // Its caller's connection closed with the previous image: the command ends, as when a caller goes away.
    if (record.endsWithCaller) void this.delete(record.owner, session.id, 'process').catch(() => undefined);
  }

  /** True once shutdown began: no new work is taken. */
  get shuttingDown(): boolean {
    return this.#shuttingDown !== undefined;
  }

  /** Stops taking work, terminates every session and waits until nothing runs. */
  shutdown(): Promise<void> {
    this.#shuttingDown ??= (async () => {
      clearInterval(this.#orphanSweep);
      await this.shells.shutdown();
      const results = await Promise.allSettled([...this.#sessions.values()].map((session) => session.terminate()));
      for (const result of results) if (result.status === 'rejected') this.#log.error({ err: result.reason }, 'session cleanup failed at shutdown');
      await this.runtime.dispose().catch((error: unknown) => this.#log.error({ err: error }, 'runtime disposal failed'));
      // Nothing is kept past the daemon's life: spill files go with their sessions.
      for (const id of [...this.#sessions.keys()]) this.#forget(id);
    })();
    return this.#shuttingDown;
  }

  /** Reserves one of the owner's session slots; the returned function gives the reservation back. */
  #admit(owner: string): () => void {
    if (this.#shuttingDown !== undefined) throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    const reserved = this.#reserved.get(owner) ?? 0;
    const running = [...this.#sessions.values()].filter((session) => session.owner === owner && session.finishedAt === undefined).length + reserved;
    if (running >= this.#limits.maxSessionsPerOwner) {
      throw new ServiceError(
        'LIMIT_EXCEEDED',
        `owner ${owner} already runs ${running} terminals and processes (the limit is ${this.#limits.maxSessionsPerOwner})`,
      );
    }
    this.#reserved.set(owner, reserved + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#reserved.get(owner) ?? 1) - 1;
      if (left === 0) this.#reserved.delete(owner);
      else this.#reserved.set(owner, left);
    };
  }

  #finished(session: AnySession): void {
    if (!this.#sessions.has(session.id) || this.#shuttingDown !== undefined) return;
    const timer = setTimeout(() => this.#forget(session.id), this.#limits.retentionMs);
    timer.unref();
    this.#evictions.set(session.id, timer);
    const retained = [...this.#sessions.values()]
      .filter((other) => other.owner === session.owner && other.finishedAt !== undefined)
      .sort((a, b) => a.finishedAt!.getTime() - b.finishedAt!.getTime());
    for (const old of retained.slice(0, Math.max(0, retained.length - this.#limits.maxRetainedPerOwner))) this.#forget(old.id);
  }

  #forget(id: string): void {
    clearTimeout(this.#evictions.get(id));
    this.#evictions.delete(id);
    const session = this.#sessions.get(id);
    if (session === undefined) return;
    this.#sessions.delete(id);
    this.#usage.forget(session);
    session.dispose();
    this.#ledger.forget(id);
  }

  #sweepOrphans(): void {
    const cutoff = Date.now() - this.#limits.orphanTimeoutMs;
    for (const session of this.#sessions.values()) {
      if (session.finishedAt === undefined && session.lastTouched < cutoff) {
        this.#log.warn({ session: session.id }, 'terminating a session nobody touched within the orphan timeout');
        session.terminate().catch((error: unknown) => this.#log.error({ err: toServiceError(error) }, 'orphan cleanup failed'));
      }
    }
  }
}

/** What a rehearsal's snapshot says of a running terminal: its pid; no descriptor is handed over by it. */
function placeholderHandOver(pid: number): TerminalHandOver {
  return { pid, fd: 3, device: '', graceMs: 0, cellKey: '' };
}
