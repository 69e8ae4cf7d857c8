/**
 * What holds a principal for longer than one call (a WebSocket connection, a
 * call that waits, a port forward, a preview's connection) and must end when
 * its token does: a minted token's expiry, or its revocation. Each holder
 * says how it ends; LiveGrants ends it, with a reason, when its token expires
 * (a timer at the expiry) or is revoked (the minter tells it, within its poll
 * of the revocation directory). A token of the token file never ends: holding
 * one costs nothing.
 * @module
 */
import { MAX_TIMER_DELAY_MS } from '@execworld/sdk/seam';
import type { Principal } from './auth.ts';
import type { TokenMinter } from './minted.ts';

export const EXPIRED = 'the token expired';
export const REVOKED = 'the token was revoked';

interface Holder {
  readonly end: (reason: string) => void;
  timer: NodeJS.Timeout | undefined;
}

export class LiveGrants {
  readonly #minter: Pick<TokenMinter, 'isRevoked' | 'onRevoke'> | undefined;
  readonly #now: () => number;
  /** The holders of each minted token, by its id. */
  readonly #holders = new Map<string, Set<Holder>>();
  readonly #stop: (() => void) | undefined;

  constructor(minter: Pick<TokenMinter, 'isRevoked' | 'onRevoke'> | undefined, now: () => number = Date.now) {
    this.#minter = minter;
    this.#now = now;
    this.#stop = minter?.onRevoke((id) => this.#endAll(id, REVOKED));
  }

  /** Why `principal` may no longer act (its token expired or was revoked), or undefined while it may. */
  refusal(principal: Principal): string | undefined {
    const minted = principal.minted;
    if (minted === undefined) return undefined;
    if (minted.expiresAt <= this.#now()) return EXPIRED;
    if (this.#minter?.isRevoked(minted.id) === true) return REVOKED;
    return undefined;
  }

  /**
   * Holds `principal` until the returned function is called: `end` is called once, with the reason, if its
   * token expires or is revoked first (at once, if it already has). Released holders are never called.
   */
  hold(principal: Principal, end: (reason: string) => void): () => void {
    const minted = principal.minted;
    if (minted === undefined) return () => {};
    const already = this.refusal(principal);
    if (already !== undefined) {
      queueMicrotask(() => end(already));
      return () => {};
    }
    let holders = this.#holders.get(minted.id);
    if (holders === undefined) this.#holders.set(minted.id, (holders = new Set()));
    const holder: Holder = { end, timer: undefined };
    holders.add(holder);
    const release = (): void => {
      clearTimeout(holder.timer);
      const set = this.#holders.get(minted.id);
      set?.delete(holder);
      if (set?.size === 0) this.#holders.delete(minted.id);
    };
    // A timer waits at most MAX_TIMER_DELAY_MS (Node's limit): a later expiry is waited for in steps.
    const arm = (): void => {
      const left = minted.expiresAt - this.#now();
      if (left <= 0) {
        release();
        end(EXPIRED);
        return;
      }
      holder.timer = setTimeout(arm, Math.min(left, MAX_TIMER_DELAY_MS));
      holder.timer.unref();
    };
    arm();
    return release;
  }

  /** Holders now, over every token. */
  get held(): number {
    let count = 0;
    for (const holders of this.#holders.values()) count += holders.size;
    return count;
  }

  close(): void {
    this.#stop?.();
    for (const holders of this.#holders.values()) for (const holder of holders) clearTimeout(holder.timer);
    this.#holders.clear();
  }

  #endAll(id: string, reason: string): void {
    const holders = this.#holders.get(id);
    if (holders === undefined) return;
    this.#holders.delete(id);
    for (const holder of holders) {
      clearTimeout(holder.timer);
      holder.end(reason);
    }
  }
}
