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
import type { SubprocessOutcome } from '@execworld/sdk/seam';
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
  abstract readonly argv: readonly string[];
  abstract readonly cwd: string;
  /** How its program ended; undefined while it runs. */
  abstract exit: SubprocessOutcome | undefined;
  abstract exitedAt: Date | undefined;
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

  /**
   * What a takeover keeps of every session, whatever its kind: who and what
   * it is, its writers' sequences, and how it ended once nothing of it runs.
   */
  protected keptFacts(): {
    id: string;
    owner: string;
    createdAt: string;
    argv: string[];
    cwd: string;
    limits?: Record<string, number>;
    writers: ReturnType<InputSequencer['snapshot']>;
    ended?: { exit: SubprocessOutcome; exitedAt: string; finishedAt: string };
  } {
    const { exit, exitedAt, finishedAt } = this;
    return {
      id: this.id,
      owner: this.owner,
      createdAt: this.createdAt.toISOString(),
      argv: [...this.argv],
      cwd: this.cwd,
      ...(this.limits === undefined ? {} : { limits: { ...this.limits } as Record<string, number> }),
      writers: this.writes.snapshot(),
      ...(exit === undefined || exitedAt === undefined || finishedAt === undefined
        ? {}
        : { ended: { exit, exitedAt: exitedAt.toISOString(), finishedAt: finishedAt.toISOString() } }),
    };
  }

  /** Releases what the session holds outside memory once it is forgotten (spill files). */
  dispose(): void {
    // Nothing by default.
  }
}
