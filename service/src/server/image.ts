/**
 * The daemon's image: which build of it runs now, and since when. A takeover
 * (takeover.ts) execs a new build in the same process, so the daemon's start
 * (kept across takeovers) and this image's start are two facts, told by
 * `/v1/health`, `/metrics` and the takeover control socket alike.
 * @module
 */

/** The last takeover, as the image that took over saw it. */
export interface LastTakeover {
  /** When the previous image stopped reading its sessions (ms since the epoch). */
  readonly at: number;
  /** From then to this image listening on the inherited socket. */
  readonly pauseMs: number;
  /** The sessions handed over. */
  readonly sessions: number;
  /** Set when the new build failed after the exec and this build, the previous one, took the sessions back. */
  readonly rolledBack?: { readonly entry: string; readonly reason: string };
}

/** This image of the daemon. */
export interface ImageFacts {
  readonly pid: number;
  /** When the daemon started (ms since the epoch): its first image's start, kept across takeovers. */
  readonly startedAt: number;
  /** When this image started (ms since the epoch): a takeover changes it, the pid stays. */
  readonly imageStartedAt: number;
  /** Takeovers this daemon went through. */
  readonly takeovers: number;
  readonly lastTakeover?: LastTakeover;
}

/** The image of a daemon started afresh in this process: no takeover, started when this process did. */
export function freshImage(): ImageFacts {
  const now = Math.round(performance.timeOrigin);
  return { pid: process.pid, startedAt: now, imageStartedAt: now, takeovers: 0 };
}

/** Holds this image's facts; the last takeover's pause is known only once the new image listens. */
export class DaemonImage {
  #facts: ImageFacts;

  constructor(facts: ImageFacts = freshImage()) {
    this.#facts = facts;
  }

  get facts(): ImageFacts {
    return this.#facts;
  }

  /** Records the takeover this image came from. */
  tookOver(last: LastTakeover): void {
    this.#facts = { ...this.#facts, lastTakeover: last };
  }
}
