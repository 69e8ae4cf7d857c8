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
import { ByteReply } from './byte-calls.ts';
import type { FileProvider } from '../provider/api.ts';
import { permitsSession, reachOf, type Principal } from './auth.ts';
import { holderOf, type ByteBudget } from './byte-budget.ts';
import type { CallContext, Transport } from './call-context.ts';
import { BOUND_OPERATIONS, type BoundOperation } from './handlers.ts';
import { describeZodError, readOnlyRefusal, scopeRefusal, ServiceError, toServiceError } from './errors.ts';
import type { LiveGrants } from './grants.ts';
import type { ForwardLink } from './forwards.ts';
import type { DaemonMetrics } from './metrics.ts';

/** What every call reaches, the same for every transport. */
export interface DaemonServices extends Pick<
  CallContext,
  'registry' | 'uploads' | 'forwards' | 'version' | 'image' | 'minter' | 'maxTokenTtlMs' | 'maxReadTextBytes'
> {
  /** The world's files, whose view and transfer calls each call gets as its principal's. */
  readonly files: FileProvider;
  /** Where a minted token's expiry and revocation are checked, and a waiting call held until they come. */
  readonly grants: LiveGrants;
  /** The bytes of answers being read and sent (--answer-budget-bytes), which calls set aside with `holdAnswer`. */
  readonly answers: ByteBudget;
}

/** The kinds of session, by the prefix of their operations' names. */
const SESSION_OPERATIONS = /^(terminal|process|shell)\./;
/** The operations of a port forward: a token of one port makes these, and their handlers ask permitsPort for its port. */
const PORT_OPERATIONS = /^port\./;

/**
 * Why `principal`'s token does not reach operation `spec` with `params` (validated), if it does not. A token
 * of one session makes the calls of that session (its id in the params) and the lists of its kind, which are
 * cut to it ({@link inScope}), and identity.get; a token of one port makes only the port forward's calls.
 */
function scopeProblem(spec: BoundOperation['spec'], principal: Principal, params: unknown): ServiceError | undefined {
  const reach = reachOf(principal);
  if (reach === 'owner') return undefined;
  if (reach === 'port') {
    return PORT_OPERATIONS.test(spec.name) ? undefined : scopeRefusal(`the token reaches one port in the world only: ${spec.name} is no call of it`);
  }
  if (spec.name === 'identity.get') return undefined;
  if (SESSION_OPERATIONS.test(spec.name)) {
    if (spec.name.endsWith('.list')) return undefined;
    const id = (params as { id?: unknown }).id;
    if (spec.params.id !== undefined && typeof id === 'string') {
      return permitsSession(principal, id) ? undefined : scopeRefusal(`the token acts on one session only, not on ${id}`);
    }
  }
  return scopeRefusal(`the token acts on one session only: ${spec.name} reaches beyond it`);
}

/** A list's answer as a token of one session sees it: that session only. */
function inScope(principal: Principal, result: unknown): unknown {
  if (reachOf(principal) === 'owner' || typeof result !== 'object' || result === null) return result;
  return Object.fromEntries(
    Object.entries(result).map(([key, value]) => [
      key,
      Array.isArray(value) ? value.filter((item) => permitsSession(principal, String((item as { id?: unknown }).id))) : value,
    ]),
  );
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
  /** The WebSocket a call came on: it takes up the forwards the call makes. */
  readonly link?: ForwardLink | undefined;
  /**
   * Calls `done` once the call's answer is sent, or can no longer be (its
   * connection gone): what the answer set aside is held until then. Without
   * it, until the dispatcher answers.
   */
  readonly whenAnswered?: ((done: () => void) => void) | undefined;
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
    // Expiry and revocation are checked on every call, whatever carried it; health, which needs no token, has no principal.
    const lapsed = spec.auth ? this.#services.grants.refusal(principal) : undefined;
    if (lapsed !== undefined) throw new ServiceError('UNAUTHORIZED', lapsed);
    if (spec.access === 'write' && principal.access === 'read') throw readOnlyRefusal(spec.name);
    if (spec.bytes !== undefined && caller.transport !== 'rest') {
      throw new ServiceError('INVALID_ARGUMENT', `${spec.name} carries bytes: it is made over REST only, as ${spec.method} ${spec.path}`);
    }
    const started = performance.now();
    let outcome = 'ok';
    let heldForAnswer = 0;
    try {
      const validated = operation.schema.safeParse(params);
      if (!validated.success) throw new ServiceError('INVALID_ARGUMENT', describeZodError(validated.error, caller.where));
      const outside = spec.auth ? scopeProblem(spec, principal, validated.data) : undefined;
      if (outside !== undefined) throw outside;
      const { files } = this.#services;
      // A call that waits, or that takes a stream of bytes (an upload's, an unpack's), holds its token: one that
      // expires or is revoked meanwhile ends the call, refused.
      let ended: string | undefined;
      let signal = caller.signal;
      let release = (): void => {};
      if ((spec.waits || spec.bytes?.body !== undefined) && principal.minted !== undefined) {
        const grant = new AbortController();
        release = this.#services.grants.hold(principal, (reason) => {
          ended = reason;
          grant.abort();
        });
        signal = AbortSignal.any([caller.signal, grant.signal]);
      }
      // The bytes this call's answer set aside, held until the transport sent it.
      const owner = holderOf(principal);
      const { answers } = this.#services;
      const holdAnswer = (asked: number): void => {
        // An answer larger than an owner's share (a collected tail of hundreds of MiB) holds the share: no call is refused for its size alone.
        const bytes = Math.min(asked, answers.share);
        if (bytes > heldForAnswer) {
          const refused = answers.take(owner, bytes - heldForAnswer);
          if (refused !== undefined) throw refused;
        } else answers.give(owner, heldForAnswer - bytes);
        heldForAnswer = bytes;
      };
      const ctx: CallContext = {
        principal,
        holdAnswer,
        maxReadTextBytes: this.#services.maxReadTextBytes,
        registry: this.#services.registry,
        // An owner that runs as another OS user has its calls made by that user (a worker process of theirs).
        files: () => files.view({ root: principal.root, runAs: principal.runAs }),
        transfer: () => files.transfer({ root: principal.root, runAs: principal.runAs }),
        uploads: this.#services.uploads,
        minter: this.#services.minter,
        maxTokenTtlMs: this.#services.maxTokenTtlMs,
        forwards: this.#services.forwards,
        link: caller.link,
        version: this.#services.version,
        image: this.#services.image,
        signal,
        unbounded: caller.unbounded,
        body: caller.body,
      };
      let result: unknown;
      try {
        result = await operation.handler(ctx, validated.data);
        if (ended !== undefined) throw new ServiceError('UNAUTHORIZED', ended);
      } catch (error) {
        // An answer that will not be sent holds nothing.
        answers.give(owner, heldForAnswer);
        // What the call stopped with (aborted, say) is the token's lapse.
        if (ended !== undefined) throw new ServiceError('UNAUTHORIZED', ended);
        throw error;
      } finally {
        release();
      }
      if (heldForAnswer > 0) {
        const held = heldForAnswer;
        let given = false;
        const giveBack = (): void => {
          if (given) return;
          given = true;
          answers.give(owner, held);
        };
        if (caller.whenAnswered === undefined) giveBack();
        else caller.whenAnswered(giveBack);
      }
      if (result instanceof ByteReply) return this.#heldWhileSent(principal, result);
      return SESSION_OPERATIONS.test(spec.name) && spec.name.endsWith('.list') ? inScope(principal, result) : result;
    } catch (error) {
      const serviceError = toServiceError(error);
      outcome = serviceError.code;
      throw serviceError;
    } finally {
      this.#metrics?.observeCall(spec.name, caller.transport, (performance.now() - started) / 1000, outcome, params);
    }
  }

  /**
   * A byte answer still streaming holds its token like a call that waits: one
   * that expires or is revoked meanwhile cuts the answer (the client sees it
   * end short, as after any cut), where it would have run to its end.
   */
  #heldWhileSent(principal: Principal, answer: ByteReply): ByteReply {
    const { body } = answer;
    if (principal.minted === undefined || Buffer.isBuffer(body)) return answer;
    const release = this.#services.grants.hold(principal, (reason) => body.destroy(new ServiceError('UNAUTHORIZED', reason)));
    return new ByteReply(body, {
      headers: { ...answer.headers },
      trailers: { ...answer.trailers },
      onClose: () => {
        release();
        answer.onClose?.();
      },
    });
  }
}
