/**
 * The creates a client made with a `requestId`, so that a retry of one
 * (a response lost with its connection, a request sent again) answers what
 * the first made instead of making another. Sessions (terminals and
 * processes) and shells each keep one; nothing else remembers a requestId.
 * @module
 */
import type { Principal } from '../auth.ts';
import { ServiceError } from '../errors.ts';

/** What a create makes: something with an id, of a kind. */
export interface Made {
  readonly id: string;
  readonly kind: string;
}

interface Entry<T extends Made> {
  readonly owner: string;
  readonly kind: string;
  readonly creation: Promise<T>;
  /** What the create made, once it did. */
  made: T | undefined;
}

/**
 * The creates of each owner by `requestId`, at most `bound` per owner. An
 * entry lives from its create until what it made is forgotten (ended and no
 * longer retained, or deleted): a retry until then, even one that arrives
 * while the first is still under way, gets what the first made; a create that
 * failed is forgotten at once and may be retried for real. One requestId is
 * one create: the same id for another kind is refused.
 *
 * Past the bound, the owner's oldest entry whose create was answered is
 * forgotten (a retry of it then makes a new one); when every entry is a
 * create still under way, the new create is refused.
 */
export class RequestLedger<T extends Made> {
  /** The most entries one owner has: its creates under way, and what they made that is still held. */
  readonly bound: number;
  /** By `owner\0requestId`, oldest first (a Map keeps insertion order). */
  readonly #entries = new Map<string, Entry<T>>();
  /** The key of each thing a create made, so that forgetting it forgets its entry. */
  readonly #keyOf = new Map<string, string>();

  constructor(bound: number) {
    if (!Number.isSafeInteger(bound) || bound < 1) throw new RangeError(`a request ledger holds at least one entry per owner, not ${bound}`);
    this.bound = bound;
  }

  /** Entries held, over every owner. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Runs `create` once per (`principal`'s owner, `requestId`): a retry gets
   * what the first made. Without a requestId every call creates.
   * @throws {ServiceError} INVALID_ARGUMENT when the requestId made something of another kind;
   *   LIMIT_EXCEEDED when the owner has `bound` creates under way.
   */
  async once<R extends T>(principal: Principal, requestId: string | undefined, kind: R['kind'], create: () => Promise<R>): Promise<R> {
    if (requestId === undefined) return create();
    const { owner } = principal;
    const key = `${owner}\0${requestId}`;
    const known = this.#entries.get(key);
    if (known !== undefined) {
      if (known.kind !== kind) throw new ServiceError('INVALID_ARGUMENT', `requestId ${requestId} already created a ${known.kind}`);
      // Its kind is R's: an entry is made only by a create of its kind.
      return (await known.creation) as R;
    }
    this.#makeRoom(owner);
    const creation = create();
    const entry: Entry<T> = { owner, kind, creation, made: undefined };
    this.#entries.set(key, entry);
    creation.then(
      (made) => {
        if (this.#entries.get(key) !== entry) return;
        entry.made = made;
        this.#keyOf.set(made.id, key);
      },
      () => {
        if (this.#entries.get(key) === entry) this.#entries.delete(key);
      },
    );
    return creation;
  }

  /** Forgets the create that made `id` (ended and no longer held): a retry of it makes a new one. */
  forget(id: string): void {
    const key = this.#keyOf.get(id);
    if (key === undefined) return;
    this.#keyOf.delete(id);
    this.#entries.delete(key);
  }

  /** Makes room for one more entry of `owner`'s, forgetting its oldest answered one when it has `bound`. */
  #makeRoom(owner: string): void {
    let count = 0;
    let oldest: [string, Entry<T>] | undefined;
    for (const pair of this.#entries) {
      if (pair[1].owner !== owner) continue;
      count += 1;
      if (oldest === undefined && pair[1].made !== undefined) oldest = pair;
    }
    if (count < this.bound) return;
    if (oldest === undefined) {
      throw new ServiceError('LIMIT_EXCEEDED', `owner ${owner} already has ${count} creates with a requestId under way (the limit is ${this.bound})`);
    }
    this.#entries.delete(oldest[0]);
    this.#keyOf.delete(oldest[1].made!.id);
  }
}
