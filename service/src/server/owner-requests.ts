/**
 * The HTTP requests each owner has in flight, bounded (--max-requests). Every
 * request holds a socket, and a download or an upload a file besides, until
 * its answer is sent: without a bound, one owner's client could open requests
 * until the daemon runs out of descriptors, and every other owner with it.
 *
 * A request counts from when its token is accepted until its response closes
 * (sent, or its connection cut), so a download counts until its last byte
 * left. A WebSocket upgrade to the API is not counted here: its connection
 * is, among the owner's connections. Budgets are those of connections
 * ({@link OwnerAccess}): an owner's read-only tokens have as many requests
 * again, and the tokens it minted as many again of each access.
 *
 * An owner's previews have a budget of their own, the same number again:
 * their requests and WebSockets are their app's visitors', not the owner's
 * calls, so a busy preview never refuses the owner's own; and each holds two
 * sockets (the visitor's and the app's) while it lasts, so a visitor, who
 * needs only a token scoped to the port, cannot open them without end either.
 * A preview's WebSocket counts until its tunnel closes.
 * @module
 */
import { budgetOf, tokensOf, type OwnerAccess } from './auth.ts';
import { ServiceError } from './errors.ts';

export class OwnerRequests {
  readonly #limit: number;
  /** Requests in flight, by budget (auth.ts budgetOf, or an owner's previews'); a budget with none has no entry. */
  readonly #counts = new Map<string, number>();

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`the requests in flight per owner are at least 1, not ${limit}`);
    this.#limit = limit;
  }

  /**
   * Counts a request of `who` (`'call'`, or a preview's request or WebSocket,
   * `'preview'`) until `held` closes: a call's or a preview request's
   * response, a preview WebSocket's socket. When the budget is spent, answers
   * the refusal and counts nothing.
   */
  admit(who: OwnerAccess, held: Closes, kind: 'call' | 'preview' = 'call'): ServiceError | undefined {
    const key = kind === 'preview' ? `preview\n${who.owner}` : budgetOf(who);
    const count = this.#counts.get(key) ?? 0;
    if (count >= this.#limit) {
      const what =
        kind === 'preview'
          ? `the previews of owner ${who.owner} already have ${this.#limit} requests and WebSockets in flight (the limit)`
          : `${tokensOf(who)} already have ${this.#limit} HTTP requests in flight (the limit)`;
      return new ServiceError('LIMIT_EXCEEDED', `${what}; retry once one is answered`);
    }
    this.#counts.set(key, count + 1);
    held.once('close', () => {
      const left = (this.#counts.get(key) ?? 1) - 1;
      if (left === 0) this.#counts.delete(key);
      else this.#counts.set(key, left);
    });
    return undefined;
  }
}

/** What a request holds while it is in flight: it emits 'close' once, when that ends (a response, a socket). */
interface Closes {
  once(event: 'close', listener: () => void): unknown;
}
