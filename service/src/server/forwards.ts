/**
 * Port forwards: each is one TCP connection to 127.0.0.1:port in the world,
 * made as the owner's OS user (the daemon's PortConnect), whose bytes travel on the
 * owner's WebSocket in both directions, at absolute byte offsets and within a
 * window of credit each way, as output streams do.
 *
 * From the world: the connection's bytes go into a {@link RingStream} of
 * FORWARD_WINDOW_BYTES, the stream `{kind: 'forward', id, stream: 'output'}`
 * of the WebSocket, sent and acknowledged as any output is. Once the ring
 * holds a window the client has not acknowledged, the daemon stops reading
 * the connection, so a slow reader at the far end holds back its own forward
 * only, and TCP holds back the program in the world. Bytes sent and not yet
 * acknowledged stay in the ring, so a client that lost its WebSocket
 * subscribes again from the byte after its last and misses none.
 *
 * To the world: the client sends write frames (codec.ts) at offsets; the
 * daemon writes each byte once to the connection (a resent frame's bytes
 * before what it took are skipped) and answers `written` with the offset the
 * connection took, which is the client's credit: it never has more than
 * FORWARD_WINDOW_BYTES sent beyond it, and keeps those bytes to send again
 * after a reconnect. A client past its window is cut off (the forward is
 * reset), so the daemon holds at most a window per forward either way.
 *
 * Half-close is kept: `port.shutdown` at an offset shuts the connection's
 * write side (a FIN) once every byte before it is written, and the world's
 * FIN ends the output stream; each direction goes on alone. A reset in the
 * world ends the output stream with `reset`; `port.close` with `reset` sends
 * one (RST) into the world.
 *
 * A forward lives on the WebSocket that last took it up: the one it was made
 * on (port.connect over the WebSocket), then any that subscribed to its
 * output or wrote to it. One made over REST lives on none until a WebSocket
 * takes it up, and is reset after --forward-grace-ms if none does. When the
 * WebSocket it lives on breaks (closed without a close frame: a cut network,
 * a missed heartbeat), the forward waits --forward-grace-ms for the client to
 * come back and resume it, then is reset; when it is closed with a close
 * frame (the client closed it, or the daemon did: a token revoked, the daemon
 * going away), its forwards end now.
 * A forward of a token that expires is reset when it expires.
 * @module
 */
import type { Socket } from 'node:net';
import { MAX_TIMER_DELAY_MS } from '@execworld/sdk/seam';
import { FORWARD_WINDOW_BYTES, type ServerMessage } from '@execworld/sdk/protocol';
import type { PortConnect } from '../provider/api.ts';
import type { Principal } from './auth.ts';
import { ServiceError } from './errors.ts';
import { connectFailure, portRefusal } from './port-access.ts';
import { RingStream } from './streams.ts';

export interface ForwardTableOptions {
  /** Forwards one owner may have at once, over all its connections. */
  readonly maxPerOwner: number;
  /** How long a forward whose WebSocket broke waits to be taken up again before it is reset. */
  readonly graceMs: number;
  /** How a connection to a port is made as the owner's user. */
  readonly connect: PortConnect;
}

/** Where a forward's acknowledgements of write frames go: the WebSocket that took it up. */
export interface ForwardLink {
  send(message: ServerMessage): void;
  /** False once the WebSocket closed (and its forwards were detached from it). */
  readonly open: boolean;
}

/** The bytes of a forward from the world: a ring, which says whether the connection ended with a reset. */
export class ForwardOutput extends RingStream {
  #reset = false;

  /** Whether the connection was reset (or cut) in the world rather than closed. */
  get reset(): boolean {
    return this.#reset;
  }

  /** Ends the stream as reset. */
  abort(): void {
    if (this.ended) return;
    this.#reset = true;
    this.finish();
  }
}

export class Forward {
  readonly id: number;
  readonly port: number;
  readonly principal: Principal;
  readonly output = new ForwardOutput(FORWARD_WINDOW_BYTES);
  readonly #socket: Socket;
  readonly #table: ForwardTable;
  /** Bytes of write frames handed to the connection, and of those the ones it took. */
  #received = 0;
  #taken = 0;
  /** Where the client's side ended (port.shutdown), once it did. */
  #shutAt: number | undefined;
  #link: ForwardLink | undefined;
  #grace: NodeJS.Timeout | undefined;
  #expiry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(id: number, principal: Principal, port: number, socket: Socket, table: ForwardTable) {
    this.id = id;
    this.principal = principal;
    this.port = port;
    this.#socket = socket;
    this.#table = table;
    socket.on('data', (chunk: Buffer) => {
      this.output.append(chunk);
      // A window the client has not acknowledged: read no more until it does (TCP then holds the program back).
      if (this.output.full) socket.pause();
    });
    this.output.onChange(() => {
      if (!this.output.full && socket.isPaused() && !this.#closed) socket.resume();
    });
    socket.on('end', () => this.output.finish());
    socket.on('error', () => this.output.abort());
    // Closed without its end read: reset, or destroyed here.
    socket.on('close', () => this.output.abort());
    socket.resume();
    const expiresAt = principal.minted?.expiresAt;
    if (expiresAt !== undefined) {
      this.#expiry = setTimeout(() => this.close(true), Math.min(Math.max(0, expiresAt - Date.now()), MAX_TIMER_DELAY_MS));
    }
    this.#detached();
  }

  /** Bytes of the client's write frames the connection has taken. */
  get written(): number {
    return this.#taken;
  }

  /** The WebSocket `link` took the forward up: it gets its acknowledgements, and the grace period (if one ran) is over. */
  attach(link: ForwardLink): void {
    this.#link = link;
    clearTimeout(this.#grace);
    this.#grace = undefined;
  }

  /** `link` is gone; `broken` when it closed without a close frame, when the client may come back. */
  detach(link: ForwardLink, broken: boolean): void {
    if (this.#link !== link) return;
    this.#link = undefined;
    if (broken) this.#detached();
    else this.close(true);
  }

  #detached(): void {
    clearTimeout(this.#grace);
    this.#grace = setTimeout(() => this.close(true), this.#table.graceMs);
  }

  /**
   * Bytes for the world at `offset`, from a write frame of `link`. Bytes
   * before what the connection was given are a resend after a reconnect, and
   * skipped; a frame past it, or past the window, breaks the protocol.
   */
  write(link: ForwardLink, offset: number, payload: Buffer): void {
    this.attach(link);
    if (offset > this.#received) this.#broken('INVALID_ARGUMENT', `forward ${this.id}: a write at ${offset} leaves out bytes from ${this.#received}`);
    const skip = this.#received - offset;
    if (skip >= payload.length) {
      // All of it came before: say again where the connection is, as the first answer may have been lost.
      link.send({ t: 'written', fwd: this.id, offset: this.#taken });
      return;
    }
    const bytes = payload.subarray(skip);
    if (this.#received + bytes.length - this.#taken > FORWARD_WINDOW_BYTES) {
      this.#broken('LIMIT_EXCEEDED', `forward ${this.id}: writes past the window of ${FORWARD_WINDOW_BYTES} bytes`);
    }
    if (this.#closed || this.#shutAt !== undefined) return;
    this.#received += bytes.length;
    const end = this.#received;
    this.#socket.write(bytes, (error) => {
      if (error !== undefined && error !== null) return;
      this.#taken = Math.max(this.#taken, end);
      this.#link?.send({ t: 'written', fwd: this.id, offset: this.#taken });
    });
  }

  /** A client that broke the protocol: the forward is reset (bytes would be lost or held without bound otherwise), and it is told why. */
  #broken(code: 'INVALID_ARGUMENT' | 'LIMIT_EXCEEDED', message: string): never {
    this.close(true);
    throw new ServiceError(code, `${message}; the forward was reset`);
  }

  /** The client's side ended at `offset`: shut the connection's write side once every byte before it was given to it. */
  shutdown(offset: number): void {
    if (this.#shutAt !== undefined || this.#closed) return;
    if (offset !== this.#received) {
      throw new ServiceError('INVALID_ARGUMENT', `forward ${this.id}: shutdown at ${offset}, but the bytes written end at ${this.#received}`);
    }
    this.#shutAt = offset;
    // Node sends the FIN after every write queued before it.
    this.#socket.end();
  }

  /** Ends the forward: its connection is closed, or reset (RST) with `reset`; the output stream ends. */
  close(reset: boolean): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#grace);
    clearTimeout(this.#expiry);
    if (reset) this.#socket.resetAndDestroy();
    else this.#socket.destroy();
    this.output.abort();
    this.#table.forget(this);
  }
}

export class ForwardTable {
  readonly #forwards = new Map<number, Forward>();
  readonly #options: ForwardTableOptions;
  /** Connections being made, per owner: they count against the limit before they are forwards. */
  readonly #connecting = new Map<string, number>();
  #nextId = 1;
  #closed = false;

  constructor(options: ForwardTableOptions) {
    this.#options = options;
  }

  get graceMs(): number {
    return this.#options.graceMs;
  }

  /** Open forwards. */
  get size(): number {
    return this.#forwards.size;
  }

  /**
   * Connects to `port` in the world for `principal`; `link`, the WebSocket
   * the call came on, takes the forward up at once. Were it taken up only by
   * the client's subscription, a WebSocket closed between this answer and
   * that subscription (a token revoked, the daemon going away) would leave
   * the connection in the world open for the grace period, and a client that
   * reconnects would take it up again on its new WebSocket.
   * @throws {ServiceError} READ_ONLY or TOKEN_SCOPE (a token that may not reach the port), LIMIT_EXCEEDED, PORT_REFUSED.
   */
  async connect(principal: Principal, port: number, link?: ForwardLink): Promise<{ id: string; port: number }> {
    if (this.#closed) throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    const refusal = portRefusal(principal, port);
    if (refusal !== undefined) throw refusal;
    const { owner } = principal;
    const open = this.#count(owner) + (this.#connecting.get(owner) ?? 0);
    if (open >= this.#options.maxPerOwner) {
      throw new ServiceError('LIMIT_EXCEEDED', `forwards per owner: ${open} are open (--max-forwards ${this.#options.maxPerOwner}); close one`);
    }
    this.#connecting.set(owner, (this.#connecting.get(owner) ?? 0) + 1);
    let socket: Socket;
    try {
      socket = await this.#options.connect(principal.runAs, port);
    } catch (error) {
      throw connectFailure(port, error);
    } finally {
      const left = (this.#connecting.get(owner) ?? 1) - 1;
      if (left === 0) this.#connecting.delete(owner);
      else this.#connecting.set(owner, left);
    }
    if (this.#closed) {
      socket.resetAndDestroy();
      throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    }
    // Numbers fit a write frame's uint32; a daemon that made 2^32 forwards starts again from 1.
    const id = this.#nextId;
    this.#nextId = this.#nextId >= 0xffffffff ? 1 : this.#nextId + 1;
    const forward = new Forward(id, principal, port, socket, this);
    this.#forwards.set(id, forward);
    if (link === undefined) return { id: String(id), port };
    // A WebSocket that closed while the connection was made never hands its client the id: nobody can take the forward up.
    if (link.open) forward.attach(link);
    else forward.close(true);
    return { id: String(id), port };
  }

  /** The forward `id` of `principal`'s owner, which its token may reach. @throws {ServiceError} NOT_FOUND, READ_ONLY or TOKEN_SCOPE */
  get(principal: Principal, id: number | string): Forward {
    // Ids are opaque to callers: one of another shape names nothing, as an unknown one.
    const forward = typeof id === 'number' || /^[0-9]{1,10}$/.test(id) ? this.#forwards.get(Number(id)) : undefined;
    if (forward === undefined || forward.principal.owner !== principal.owner) throw new ServiceError('NOT_FOUND', `no forward ${id}`);
    const refusal = portRefusal(principal, forward.port);
    if (refusal !== undefined) throw refusal;
    return forward;
  }

  /** The WebSocket `link` is gone: see {@link Forward.detach}. */
  detach(link: ForwardLink, broken: boolean): void {
    for (const forward of [...this.#forwards.values()]) forward.detach(link, broken);
  }

  forget(forward: Forward): void {
    if (this.#forwards.get(forward.id) === forward) this.#forwards.delete(forward.id);
  }

  /** Resets every forward; makes no more. */
  shutdown(): void {
    this.#closed = true;
    for (const forward of [...this.#forwards.values()]) forward.close(true);
  }

  #count(owner: string): number {
    let count = 0;
    for (const forward of this.#forwards.values()) if (forward.principal.owner === owner) count += 1;
    return count;
  }
}
