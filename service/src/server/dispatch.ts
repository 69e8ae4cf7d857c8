/**
 * The one place an operation of the table is invoked, whatever carried it:
 * look it up, check the caller's access, validate its parameters, build the
 * call context, run the handler, time it and count it, and map what it threw
 * to the catalog. The transports (REST routes in app.ts, the WebSocket in
 * ws.ts, the MCP tools in mcp/) only turn their own framing into a call and
 * its answer or error back into theirs.
 * @module
 */
import type { Readable } from 'node:stream';
import type { FileProvider } from '../provider/api.ts';
import type { Principal } from './auth.ts';
import type { CallContext, Transport } from './call-context.ts';
import { BOUND_OPERATIONS, type BoundOperation } from './handlers.ts';
import { describeZodError, readOnlyRefusal, ServiceError, toServiceError } from './errors.ts';
import type { DaemonMetrics } from './metrics.ts';

/** What every call reaches, the same for every transport. */
export interface DaemonServices extends Pick<CallContext, 'registry' | 'uploads' | 'forwards' | 'version'> {
  /** The world's files, whose view and transfer calls each call gets as its principal's. */
  readonly files: FileProvider;
}

export type { Transport } from './call-context.ts';

/** Who calls and how: what a transport knows of a call beyond its parameters. */
export interface Caller {
  /** Who calls, as its token was resolved when it was authenticated. */
  readonly principal: Principal;
  readonly transport: Transport;
  /** Aborts when the caller went away. */
  readonly signal: AbortSignal;
  /** Whether the call may wait without bound (a long-lived connection rather than a request with its own timeout). */
  readonly unbounded: boolean;
  /** How an invalid parameter is named in the refusal: `body.rows`, `query.from`, `params.id`. */
  readonly where: string;
  /** The bytes of a call that carries them, unread. */
  readonly body?: Readable | undefined;
}

export class Dispatcher {
  readonly #services: DaemonServices;
  readonly #metrics: DaemonMetrics | undefined;

  constructor(services: DaemonServices, metrics?: DaemonMetrics) {
    this.#services = services;
    this.#metrics = metrics;
  }

  /** The operation named `name`; NOT_FOUND when the table has none. */
  operation(name: string): BoundOperation {
    const operation = BOUND_OPERATIONS.get(name);
    if (operation === undefined) throw new ServiceError('NOT_FOUND', `unknown operation ${name}`);
    return operation;
  }

  /**
   * Invokes `operation` for `caller` with `params` (the path's and the body's
   * or query's merged, not yet validated).
   * @returns what the handler answered.
   * @throws {ServiceError} every failure, already in the catalog's terms.
   */
  async call(operation: BoundOperation, caller: Caller, params: unknown): Promise<unknown> {
    const { spec } = operation;
    const { principal } = caller;
    if (spec.access === 'write' && principal.access === 'read') throw readOnlyRefusal(spec.name);
    if (spec.bytes !== undefined && caller.transport !== 'rest') {
      throw new ServiceError('INVALID_ARGUMENT', `${spec.name} carries bytes: it is made over REST only, as ${spec.method} ${spec.path}`);
    }
    const started = performance.now();
    let outcome = 'ok';
    try {
      const validated = operation.schema.safeParse(params);
      if (!validated.success) throw new ServiceError('INVALID_ARGUMENT', describeZodError(validated.error, caller.where));
      const { files } = this.#services;
      const ctx: CallContext = {
        principal,
        registry: this.#services.registry,
        // An owner that runs as another OS user has its calls made by that user (a worker process of theirs).
        files: () => files.view({ root: principal.root, runAs: principal.runAs }),
        transfer: () => files.transfer({ root: principal.root, runAs: principal.runAs }),
        uploads: this.#services.uploads,
        forwards: this.#services.forwards,
        version: this.#services.version,
        signal: caller.signal,
        unbounded: caller.unbounded,
        body: caller.body,
      };
      return await operation.handler(ctx, validated.data);
    } catch (error) {
      const serviceError = toServiceError(error);
      outcome = serviceError.code;
      throw serviceError;
    } finally {
      this.#metrics?.observeCall(spec.name, caller.transport, (performance.now() - started) / 1000, outcome, params);
    }
  }
}
