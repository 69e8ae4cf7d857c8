/**
 * The daemon's budget for the JSON bodies of requests. A JSON body is read
 * whole before it is validated (half a JSON value is of no use), so however
 * small each call's limit, many requests at once could hold memory without
 * bound. The bytes of every body count from their arrival until their request
 * is answered or goes away, against the daemon's budget and its owner's share
 * of it (byte-budget.ts); a request whose next bytes would pass either is
 * refused with 429 `LIMIT_EXCEEDED` (its connection then closes, as for any
 * request refused before its body was read) and may be sent again once others
 * are done. The byte routes (uploads, archives) stream their bodies with TCP's
 * flow control and take none of it, but for the few taken whole (a file's
 * text), which count here like JSON.
 * @module
 */
import { Transform, type Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceError } from './errors.ts';
import { ByteBudget, holderOf } from './byte-budget.ts';

export class BodyBudget {
  readonly #budget: ByteBudget;

  /** `limit` for all bodies at once; `largest`, the most one body may be (--max-body-bytes), which an owner may always send. */
  constructor(limit: number, largest: number) {
    this.#budget = new ByteBudget(limit, {
      what: (owner) =>
        owner === undefined ? 'the bodies of requests being received or handled' : `the bodies of owner ${owner}'s requests being received or handled`,
      flag: '--body-budget-bytes',
      largest,
      retry: 'send it again once they are done',
    });
  }

  /** Bytes the bodies of all requests may hold at once. */
  get limit(): number {
    return this.#budget.limit;
  }

  /** Bytes of bodies being received or handled now. */
  get held(): number {
    return this.#budget.held;
  }

  /**
   * The body of `request` as it arrives, counted against the budget until the
   * answer to `request` is sent or its connection is gone (fastify's
   * preParsing hook). A request without a body costs nothing.
   */
  meter(request: FastifyRequest, reply: FastifyReply, payload: Readable): Readable {
    if (request.headers['content-length'] === undefined && request.headers['transfer-encoding'] === undefined) return payload;
    // The principal is known by now: the token is taken in the onRequest hook, before the body is parsed.
    const owner = holderOf(request.principal);
    let counted = 0;
    let answered = false;
    reply.raw.once('close', () => {
      answered = true;
      this.#budget.give(owner, counted);
      counted = 0;
    });
    const take = (bytes: number): ServiceError | undefined => {
      // Bytes that still arrive for a request already answered are read by nobody: they are not held.
      if (answered) return undefined;
      const refused = this.#budget.take(owner, bytes);
      if (refused === undefined) counted += bytes;
      return refused;
    };
    const metered = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        const refusal = take(chunk.length);
        if (refusal === undefined) done(null, chunk);
        else done(refusal);
      },
    });
    metered.once('error', () => payload.unpipe(metered));
    return payload.pipe(metered);
  }
}
