/**
 * More than one connection accepted per turn of the event loop.
 *
 * libuv (Node 20's, 1.46) accepts one connection per listening handle per
 * turn of the loop. While the loop is busy (hundreds of sessions ending at
 * once, a run of creates), a burst of new connections therefore waits in the
 * kernel's backlog a turn each, and a health probe's connection, which comes
 * new each time, waits behind all of them: ending 300 terminals with 64
 * requests in flight on fresh connections held a probe for about a second,
 * the default timeout of a Kubernetes probe.
 *
 * Each lane is one more handle on a duplicate descriptor of the same
 * listening socket. The kernel queues a connection once, and the first handle
 * whose turn comes accepts the oldest one, so `lanes` handles accept up to
 * `lanes` connections a turn, in the order they came. A connection a lane
 * accepts goes to the daemon's server as one of its own would (its
 * `connection` event: the connection gate, TLS, HTTP).
 *
 * Only where the listening socket has a descriptor to duplicate (not on
 * Windows, where the one handle accepts alone).
 * @module
 */
import { createServer, type Server, type Socket } from 'node:net';

/** Handles that accept connections, the server's own among them. */
export const ACCEPT_LANES = 8;

export class AcceptLanes {
  readonly #server: Server;
  readonly #count: number;
  readonly #lanes: Server[] = [];
  #closed = false;

  /** `count` lanes for `server` (its own handle is one of them); none until {@link start}. */
  constructor(server: Server, count = ACCEPT_LANES) {
    if (!Number.isSafeInteger(count) || count < 1) throw new RangeError(`at least one lane, not ${count}`);
    this.#server = server;
    this.#count = count;
  }

  /** How many handles accept connections: the server's own and the lanes open. */
  get open(): number {
    return 1 + this.#lanes.length;
  }

  /**
   * Opens the lanes beside the server's own handle, once it listens: each on a
   * copy of its descriptor that `duplicate` makes (close-on-exec). Returns how
   * many handles accept connections now; 1 where the socket has no descriptor.
   * @param onError told of a lane's failure to accept (a descriptor limit), which leaves the lane open
   */
  start(duplicate: (fd: number) => number, onError: (error: Error) => void): number {
    if (this.#closed || this.#lanes.length > 0) return this.open;
    const fd = (this.#server as unknown as { _handle?: { fd?: number } | null })._handle?.fd;
    if (typeof fd !== 'number' || fd < 0) return this.open;
    for (let index = 1; index < this.#count; index += 1) {
      // The server emits `connection` synchronously from the lane's: nothing is read from the socket before.
      const lane = createServer((socket: Socket) => this.#server.emit('connection', socket));
      lane.on('error', onError);
      lane.listen({ fd: duplicate(fd) });
      this.#lanes.push(lane);
    }
    return this.open;
  }

  /** Stops the lanes accepting (the server's own handle is the server's to close); their descriptors close with them. */
  close(): void {
    this.#closed = true;
    for (const lane of this.#lanes.splice(0)) lane.close();
  }
}
