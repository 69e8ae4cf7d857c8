/**
 * The daemon's budget for the JSON bodies of requests. A JSON body is read
 * whole before it is validated (half a JSON value is of no use), so however
 * small each call's limit, many requests at once could hold memory without
 * bound. The bytes of every body count from their arrival until their request
 * is answered or goes away; a request whose next bytes would pass the budget
 * is refused with 429 `LIMIT_EXCEEDED` (its connection then closes, as for
 * any request refused before its body was read) and may be sent again once
 * others are done. The byte routes (uploads, archives) stream their bodies
 * with TCP's flow control and take none of it.
 * @module
 */
import { Transform, type Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from './errors.ts';

export class BodyBudget {
  /** Bytes the bodies of all requests may hold at once. */
  readonly limit: number;
  #held = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Bytes of bodies being received or handled now. */
  get held(): number {
    return this.#held;
  }

  /**
   * The body of `request` as it arrives, counted against the budget until the
   * answer to `request` is sent or its connection is gone (fastify's
   * preParsing hook). A request without a body costs nothing.
   */
  meter(request: FastifyRequest, reply: FastifyReply, payload: Readable): Readable {
    if (request.headers['content-length'] === undefined && request.headers['transfer-encoding'] === undefined) return payload;
    let counted = 0;
    let answered = false;
    reply.raw.once('close', () => {
      answered = true;
      this.#held -= counted;
      counted = 0;
    });
    const take = (bytes: number): ServiceError | undefined => {
      // Bytes that still arrive for a request already answered are read by nobody: they are not held.
      if (answered) return undefined;
      if (this.#held + bytes > this.limit) {
        return new ServiceError(
          'LIMIT_EXCEEDED',
          `the bodies of requests being received or handled already hold ${this.#held} of the daemon's ${this.limit} bytes (--body-budget-bytes); send it again once they are done`,
        );
      }
      this.#held += bytes;
      counted += bytes;
      return undefined;
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
