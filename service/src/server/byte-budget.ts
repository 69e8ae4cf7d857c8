/**
 * A budget of bytes the daemon holds in memory for its callers: the bodies of
 * requests being received, the answers being read and sent, the output
 * processes collect. Each is bounded for all owners together (its setting),
 * and each owner holds at most a share of it: half, or what one call may take
 * if that is more. So one owner's calls, however many, always leave another
 * owner half the budget, where a single bound for all would let one owner
 * refuse everyone else's calls for as long as it held its bytes.
 *
 * The budgets count by owner, whatever token of the owner's made the call
 * (its read-only and minted tokens among them): bytes are memory, which the
 * owner's tokens share, where connections and requests in flight
 * (owner-requests.ts) are budgets of each kind of token.
 * @module
 */
import { ServiceError } from './errors.ts';

/**
 * What a whole-text answer holds for each byte of its file, as the answer
 * budget counts it: the bytes read, the text made of them, the answer
 * serialized, and its bytes as they are written. Measured: 25 reads of a
 * 16 MiB file at once grew the daemon by about 56 MiB each.
 */
export const TEXT_ANSWER_COPIES = 4;

export interface ByteBudgetOptions {
  /** What holds the bytes, as a refusal names them, all owners' or one owner's: "the bodies of (owner alice's) requests being received". */
  readonly what: (owner: string | undefined) => string;
  /** The setting that bounds the budget: "--body-budget-bytes". */
  readonly flag: string;
  /** The most one call may take: an owner's share is never less, so an owner can always make its largest call. */
  readonly largest: number;
  /** What the caller may do after a refusal: "send it again once they are done". */
  readonly retry: string;
}

/** Whose bytes a call holds, as the budgets count them: its owner's, or nobody's for a call without a token (health). */
export function holderOf(principal: { readonly owner: string } | undefined): string {
  return principal?.owner ?? '';
}

export class ByteBudget {
  /** Bytes all owners together may hold. */
  readonly limit: number;
  /** Bytes one owner may hold: half the limit, or one call's most if more (never more than the limit). */
  readonly share: number;
  readonly #options: ByteBudgetOptions;
  /** Bytes held, by owner; an owner holding none has no entry. */
  readonly #held = new Map<string, number>();
  #total = 0;

  constructor(limit: number, options: ByteBudgetOptions) {
    if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`${options.flag} is a number of bytes, not ${limit}`);
    this.limit = limit;
    this.share = Math.min(limit, Math.max(Math.ceil(limit / 2), options.largest));
    this.#options = options;
  }

  /** Bytes held by all owners. */
  get held(): number {
    return this.#total;
  }

  /** Bytes held by `owner`. */
  heldBy(owner: string): number {
    return this.#held.get(owner) ?? 0;
  }

  /**
   * Why `owner` may not hold `bytes` more, when its holdings are `ownerHeld`
   * and everyone's `totalHeld` (by default what was taken here; a budget
   * whose holdings are counted elsewhere passes its own).
   */
  refusal(owner: string, bytes: number, ownerHeld = this.heldBy(owner), totalHeld = this.#total): ServiceError | undefined {
    const { what, flag, retry } = this.#options;
    if (ownerHeld + bytes > this.share) {
      const share = this.share < this.limit ? `the ${this.share} bytes one owner may hold of ${flag}'s ${this.limit}` : `the ${this.limit} bytes of ${flag}`;
      return new ServiceError('LIMIT_EXCEEDED', `${what(owner)} already hold ${ownerHeld} of ${share}, and this one takes ${bytes} more; ${retry}`);
    }
    if (totalHeld + bytes > this.limit) {
      return new ServiceError('LIMIT_EXCEEDED', `${what(undefined)} already hold ${totalHeld} of the daemon's ${this.limit} bytes (${flag}); ${retry}`);
    }
    return undefined;
  }

  /** Takes `bytes` for `owner` until given back; when they do not fit, takes nothing and answers why. */
  take(owner: string, bytes: number): ServiceError | undefined {
    const refused = this.refusal(owner, bytes);
    if (refused !== undefined) return refused;
    this.#held.set(owner, this.heldBy(owner) + bytes);
    this.#total += bytes;
    return undefined;
  }

  /** Gives back `bytes` that `owner` took. */
  give(owner: string, bytes: number): void {
    if (bytes === 0) return;
    const left = this.heldBy(owner) - bytes;
    if (left <= 0) this.#held.delete(owner);
    else this.#held.set(owner, left);
    this.#total -= bytes;
  }
}
