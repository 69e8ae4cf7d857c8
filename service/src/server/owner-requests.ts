/**
 * The HTTP requests each owner has in flight, bounded (--max-requests). Every
 * request holds a socket, and a download or an upload a file besides, until
 * its answer is sent: without a bound, one owner's client could open requests
 * until the daemon runs out of descriptors, and every other owner with it.
 *
 * A request counts from when its token is accepted until its response closes
 * (sent, or its connection cut), so a download counts until its last byte
 * left. A WebSocket upgrade is not counted here: its connection is, among the
 * owner's connections; nor is a preview's request, which is its app's
 * visitors', not the owner's. Budgets are per owner and access, as
 * connections' are: an owner's read-only tokens have as many requests again.
 * @module
 */
import type { ServerResponse } from 'node:http';
import { tokensOf, type OwnerAccess } from './auth.ts';
import { ServiceError } from './errors.ts';

export class OwnerRequests {
  readonly #limit: number;
  /** Requests in flight, by owner and access; an owner with none has no entry. */
  readonly #counts = new Map<string, number>();

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`the requests in flight per owner are at least 1, not ${limit}`);
    this.#limit = limit;
  }

  /**
   * Counts a request of `who` until `response` closes; or, when `who`'s tokens
   * already have the limit in flight, answers the refusal and counts nothing.
   */
  admit(who: OwnerAccess, response: ServerResponse): ServiceError | undefined {
    const key = budgetKey(who);
    const count = this.#counts.get(key) ?? 0;
    if (count >= this.#limit) {
      return new ServiceError('LIMIT_EXCEEDED', `${tokensOf(who)} already have ${this.#limit} HTTP requests in flight (the limit); retry once one is answered`);
    }
    this.#counts.set(key, count + 1);
    response.once('close', () => {
      const left = (this.#counts.get(key) ?? 1) - 1;
      if (left === 0) this.#counts.delete(key);
      else this.#counts.set(key, left);
    });
    return undefined;
  }
}

/** Owner names may hold any character but a newline (they come from the token file's lines): the access goes first. */
const budgetKey = (who: OwnerAccess): string => `${who.access}\n${who.owner}`;
