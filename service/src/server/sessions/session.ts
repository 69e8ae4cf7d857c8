/**
 * What every session of the daemon has: an id, an owner, its times, and the
 * sequencer that makes retried input writes idempotent.
 *
 * A session's life is not a connection's: clients come and go, and a session
 * ends only by its own exit, a terminate, or shutdown. See `docs/lifecycle.md`
 * for the words (`exit`, `finishedAt`, `settled`, `treeExited`) used here.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { SessionLimits, SessionUsage } from '../../provider/api.ts';
import { InputSequencer } from '../input-sequencer.ts';

const newId = (prefix: 't' | 'p'): string => `${prefix}_${randomBytes(12).toString('base64url')}`;

export abstract class Session {
  readonly id: string;
  readonly owner: string;
  readonly createdAt: Date;
  lastTouched = Date.now();
  /** Nothing of the session runs any more; from now on its facts are only kept. */
  finishedAt: Date | undefined;
  /** The limits it runs under, as its create and the daemon's settings made them; undefined for none. */
  limits: SessionLimits | undefined;
  /** Makes retried input writes idempotent, per writer. */
  protected readonly writes = new InputSequencer();
  protected readonly log: Logger;

  /** @param kept - the id and creation time a takeover kept, for a session the previous image of the daemon handed over */
  constructor(prefix: 't' | 'p', owner: string, log: Logger, kept?: { id: string; createdAt: Date }) {
    this.id = kept?.id ?? newId(prefix);
    this.createdAt = kept?.createdAt ?? new Date();
    this.owner = owner;
    this.log = log.child({ session: this.id });
  }

  abstract readonly kind: 'terminal' | 'process';
  /** Ends the session; resolves once nothing of it runs. */
  abstract terminate(): Promise<void>;
  /** Bytes of output the session holds in memory now. */
  abstract retainedBytes(): number;

  /**
   * The limits and usage of its info: `usage`, read from its cell at the
   * call (a few small reads of its cgroup files), or what the cell kept when
   * it was removed; left out where the cell keeps no counters.
   */
  protected accounting(usage: SessionUsage | undefined): { limits?: SessionLimits; usage?: SessionUsage } {
    return { ...(this.limits === undefined ? {} : { limits: { ...this.limits } }), ...(usage === undefined ? {} : { usage }) };
  }

  /** Releases what the session holds outside memory once it is forgotten (spill files). */
  dispose(): void {
    // Nothing by default.
  }
}
