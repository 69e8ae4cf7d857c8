/**
 * MCP tasks (the 2025-11-25 revision's experimental long-running calls): a
 * `tools/call` with `task` is answered at once with a task, its work goes on
 * in the daemon, and the client polls `tasks/get`, fetches `tasks/result`,
 * lists or cancels.
 *
 * The server is stateless (a server per request, route.ts), so the tasks live
 * here, in one board of the daemon that every per-request server reads
 * through the SDK's `TaskStore` interface: {@link McpTasks.storeFor} is the
 * board as one principal sees it. The SDK binds a task to the transport's
 * session id, which a stateless transport does not have; the view binds it to
 * the principal's owner and its token's scope instead: an owner never sees,
 * fetches or cancels another's task; a token of the owner's whole reach sees
 * every task of the owner, and a read one cancels none (their answers are
 * output its read tools could read); a token scoped to a session sees,
 * fetches and cancels only the tasks started with a token of that session
 * (whose work could act on that session alone). A port's token reaches no
 * task: it is refused /mcp (app.ts).
 *
 * Bounded: the tokens of an owner's token file hold at most `perOwner` tasks,
 * and the tokens it minted as many again of their own (as they have their own
 * budgets of connections and requests: auth.ts), so what holds a token handed
 * on cannot take the owner's place on the board; running or finished, each
 * for its TTL from its creation (the client's `ttl` within the board's least
 * and most, else the default), and an answer of at most `maxResultBytes`.
 * When its TTL passes a task is dropped with its answer, and a task still
 * running is interrupted first, as `tasks/cancel` interrupts it: the abort
 * reaches the operation through its caller's signal, as when an HTTP client
 * goes away, and the shell interrupts its command (SIGINT). The daemon's
 * shutdown drops every task the same way, before it ends the sessions.
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/interfaces.js';
import { ErrorCode, McpError, type CallToolResult, type Result, type Task } from '@modelcontextprotocol/sdk/types.js';
import { budgetOf, reachOf, tokensOf, type Principal } from '../auth.ts';
import { readOnlyRefusal, ServiceError } from '../errors.ts';
import { toolError } from './tools.ts';

export interface TaskLimits {
  /** Tasks an owner holds at most, running or finished. */
  readonly perOwner: number;
  /** A task's TTL when its client asks none. */
  readonly defaultTtlMs: number;
  /** The least and the most TTL a client's ask is brought within. */
  readonly minTtlMs: number;
  readonly maxTtlMs: number;
  /** How often a client is told to poll. */
  readonly pollIntervalMs: number;
  /** The largest answer a task keeps, as JSON bytes. */
  readonly maxResultBytes: number;
}

export const TASK_LIMITS: TaskLimits = {
  perOwner: 32,
  defaultTtlMs: 10 * 60_000,
  minTtlMs: 1000,
  maxTtlMs: 60 * 60_000,
  pollIntervalMs: 500,
  maxResultBytes: 2 * 1024 * 1024,
};

/** The tool call a task runs; it answers a tool result (a tool error included) and never throws. */
export type TaskWork = (signal: AbortSignal) => Promise<CallToolResult>;

interface Entry {
  task: Task;
  /** The budget the task spends: its token's (auth.ts budgetOf). */
  readonly budget: string;
  /** The session the token that started it was scoped to; undefined for a token of the owner's whole reach. */
  readonly session: string | undefined;
  readonly abort: AbortController;
  /** Settles when the work answered and its answer is kept. */
  readonly done: Promise<void>;
  result: CallToolResult | undefined;
  readonly expiry: NodeJS.Timeout;
}

/** A refusal as a JSON-RPC error: the catalog's code and message in its data, as a tool error carries them in its metadata. */
export function protocolError(code: number, error: ServiceError): McpError {
  return new McpError(code, `${error.code}: ${error.message}`, error.body());
}

function notFound(taskId: string): McpError {
  return new McpError(ErrorCode.InvalidParams, `Failed to retrieve task: no task ${taskId} (an unknown id, another owner's, or its TTL passed)`);
}

const TERMINAL: ReadonlySet<Task['status']> = new Set(['completed', 'failed', 'cancelled']);

export class McpTasks {
  readonly limits: TaskLimits;
  /** Each owner's tasks, in the order they were created. */
  readonly #owners = new Map<string, Map<string, Entry>>();
  #closed = false;

  constructor(limits: TaskLimits = TASK_LIMITS) {
    this.limits = limits;
  }

  /**
   * Starts `work` as a task of `principal`'s owner, kept `ttl` (brought within the limits) from now.
   * @throws {McpError} past the owner's bound (LIMIT_EXCEEDED) or once the daemon shuts down (SHUTTING_DOWN).
   */
  start(principal: Principal, ttl: number | undefined, work: TaskWork): Task {
    if (this.#closed) throw protocolError(ErrorCode.InvalidRequest, new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down'));
    const { owner } = principal;
    const tasks = this.#owners.get(owner) ?? new Map<string, Entry>();
    const budget = budgetOf(principal);
    let held = 0;
    for (const entry of tasks.values()) if (entry.budget === budget) held += 1;
    if (held >= this.limits.perOwner) {
      throw protocolError(
        ErrorCode.InvalidRequest,
        new ServiceError(
          'LIMIT_EXCEEDED',
          `MCP tasks per owner: ${tokensOf(principal)} hold ${this.limits.perOwner} (running, or finished within their ttl); ` +
            'wait for one to expire, ask a shorter ttl, or call without a task',
        ),
      );
    }
    const { minTtlMs, maxTtlMs, defaultTtlMs, pollIntervalMs } = this.limits;
    const kept = Math.round(Math.min(maxTtlMs, Math.max(minTtlMs, ttl ?? defaultTtlMs)));
    const now = new Date().toISOString();
    const taskId = randomUUID();
    const abort = new AbortController();
    const entry: Entry = {
      task: { taskId, status: 'working', ttl: kept, createdAt: now, lastUpdatedAt: now, pollInterval: pollIntervalMs },
      budget,
      session: principal.minted?.session,
      abort,
      result: undefined,
      done: work(abort.signal).then(
        (result) => this.#finish(owner, taskId, result),
        // The work answers its refusals as tool errors; anything else is a fault, which fails the task rather than leave it working.
        (error: unknown) => this.#finish(owner, taskId, toolError(new ServiceError('INTERNAL', `the task's call failed: ${String(error)}`))),
      ),
      expiry: setTimeout(() => this.#drop(owner, taskId), kept),
    };
    // A TTL does not keep the daemon's event loop alive.
    entry.expiry.unref();
    tasks.set(taskId, entry);
    this.#owners.set(owner, tasks);
    return { ...entry.task };
  }

  /** The board as `principal` sees it, for the SDK's handlers of tasks/get, tasks/result, tasks/list and tasks/cancel. */
  storeFor(principal: Principal): TaskStore {
    // A token of the owner's whole reach sees every task of the owner; one of a session, the tasks of its session.
    const visible = (found: Entry): boolean =>
      reachOf(principal) === 'owner' || (principal.minted?.session !== undefined && found.session === principal.minted.session);
    const entryOf = (taskId: string): Entry | undefined => {
      const found = this.#owners.get(principal.owner)?.get(taskId);
      return found !== undefined && visible(found) ? found : undefined;
    };
    const entry = (taskId: string): Entry => {
      const found = entryOf(taskId);
      if (found === undefined) throw notFound(taskId);
      return found;
    };
    return {
      // Tasks are started by the tools/call handler, whose work outlives the request's server (start).
      createTask: () => Promise.reject(new McpError(ErrorCode.InternalError, 'an MCP task is started by its tools/call')),
      getTask: (taskId) => {
        const found = entryOf(taskId);
        return Promise.resolve(found === undefined ? null : { ...found.task });
      },
      getTaskResult: async (taskId) => {
        const found = entry(taskId);
        // A cancelled task's work is being interrupted: its answer (interrupted) follows within the shell's grace.
        await found.done;
        if (found.result === undefined) throw notFound(taskId);
        return found.result;
      },
      storeTaskResult: async (taskId, _status, result: Result) => {
        entry(taskId);
        await this.#finish(principal.owner, taskId, result as CallToolResult);
      },
      // The executor turns a refusal into the promise's rejection, as the interface answers.
      updateTaskStatus: (taskId, status, statusMessage) =>
        new Promise<void>((resolve) => {
          const found = entry(taskId);
          if (status !== 'cancelled') throw new McpError(ErrorCode.InvalidParams, `a task of this server moves to ${status} only by its work`);
          // Cancelling acts on the owner's command, which a read token may not.
          if (principal.access === 'read') throw protocolError(ErrorCode.InvalidRequest, readOnlyRefusal('tasks/cancel'));
          if (TERMINAL.has(found.task.status)) throw new McpError(ErrorCode.InvalidParams, `Cannot cancel task in terminal status: ${found.task.status}`);
          this.#update(found, 'cancelled', statusMessage ?? 'cancelled: its command was interrupted');
          found.abort.abort();
          resolve();
        }),
      listTasks: (cursor) => {
        // Every task of an owner fits one page (twice perOwner at most: its token file's and its minted tokens'): a cursor is never handed out.
        if (cursor !== undefined) return Promise.reject(new Error(`no cursor ${cursor}: tasks/list answers one page`));
        const tasks = [...(this.#owners.get(principal.owner)?.values() ?? [])].filter(visible).map((found) => ({ ...found.task }));
        return Promise.resolve({ tasks });
      },
    };
  }

  /**
   * Drops every task, interrupting those that run, and resolves once their work answered (an interrupt
   * takes at most the shell's grace): the daemon shuts down. Later tasks are refused.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const works: Promise<void>[] = [];
    for (const [owner, tasks] of this.#owners) {
      for (const [taskId, entry] of [...tasks]) {
        works.push(entry.done);
        this.#drop(owner, taskId);
      }
    }
    await Promise.all(works);
  }

  /** Keeps `result` as the task's answer; a tool error fails the task (the spec's failed, its statusMessage the error's text). */
  #finish(owner: string, taskId: string, result: CallToolResult): Promise<void> {
    const found = this.#owners.get(owner)?.get(taskId);
    // Dropped meanwhile (TTL, shutdown): the answer has no one to go to.
    if (found === undefined || found.result !== undefined) return Promise.resolve();
    found.result = this.#bounded(result);
    const text = found.result.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
    // A cancelled task stays cancelled; its answer (interrupted) is still what tasks/result gives.
    if (found.task.status !== 'cancelled') this.#update(found, found.result.isError === true ? 'failed' : 'completed', text.split('\n', 1)[0]);
    return Promise.resolve();
  }

  /** `result`, or, when it is larger than a task keeps, a tool error that says so and keeps its first line (its status and handle). */
  #bounded(result: CallToolResult): CallToolResult {
    const bytes = Buffer.byteLength(JSON.stringify(result));
    if (bytes <= this.limits.maxResultBytes) return result;
    const first =
      result.content
        .map((part) => (part.type === 'text' ? part.text : ''))
        .join('')
        .split('\n', 1)[0] ?? '';
    const error = new ServiceError(
      'LIMIT_EXCEEDED',
      `the answer is ${bytes} bytes, more than an MCP task keeps (${this.limits.maxResultBytes}); read its output with output_read. It began: ${first}`,
    );
    return toolError(error);
  }

  #update(entry: Entry, status: Task['status'], statusMessage: string | undefined): void {
    entry.task = {
      ...entry.task,
      status,
      lastUpdatedAt: new Date().toISOString(),
      ...(statusMessage === undefined ? {} : { statusMessage }),
    };
  }

  /** Forgets a task and its answer; its work, if it still runs, is interrupted. */
  #drop(owner: string, taskId: string): void {
    const tasks = this.#owners.get(owner);
    const found = tasks?.get(taskId);
    if (tasks === undefined || found === undefined) return;
    clearTimeout(found.expiry);
    found.abort.abort();
    tasks.delete(taskId);
    if (tasks.size === 0) this.#owners.delete(owner);
  }
}
