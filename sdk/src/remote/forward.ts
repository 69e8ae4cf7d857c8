/**
 * Port forwarding, as `kubectl port-forward` does it, over the SDK's one
 * WebSocket: a local TCP listener whose every accepted connection becomes a
 * connection to 127.0.0.1:`remotePort` in the daemon's world (made as the
 * owner's OS user), its bytes carried both ways at absolute offsets with
 * credit flow control (see service/src/server/forwards.ts for the daemon's
 * side):
 *
 * - From the world: the forward's output stream, acknowledged only once the
 *   local socket took each chunk, so a slow local reader holds back its own
 *   forward (the daemon stops reading the world's connection) and no other.
 * - To the world: write frames; the local socket is not read while the
 *   daemon's window for it is full.
 * - Half-close both ways: the local side's FIN shuts the world connection's
 *   write side only, and the world's FIN ends the local socket's write side
 *   only. A reset on either side resets the other.
 * - A lost WebSocket is ridden through: the connection redials, the output
 *   resumes from the byte after the last received and the writes from the
 *   last the daemon took, so the local connections notice nothing.
 *
 * A local connection that cannot be forwarded (the port refuses, the token may
 * not reach it) is closed with a reset, and `onError` hears why.
 * @module
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { FORWARD_WINDOW_BYTES } from '../protocol/codec.ts';
import type { ForwardWriter } from '../client/forward-writer.ts';
import type { Subscription } from '../client/subscription.ts';
import { ConnectionError, invalidArgument } from '../errors.ts';
import type { Connection } from './connection.ts';

export interface ForwardPortOptions {
  /** The port on 127.0.0.1 in the world. */
  readonly remotePort: number;
  /** The local port to listen on; 0 picks a free one. @default 0 */
  readonly localPort?: number | undefined;
  /** The local address to listen on. @default '127.0.0.1' */
  readonly host?: string | undefined;
  /** Told why a local connection could not be forwarded or was cut (a refused port, a refused token, a reset). */
  readonly onError?: ((error: Error) => void) | undefined;
}

/** A running forward: where it listens, and how to stop it. */
export interface PortForward {
  /** The local address it listens on. */
  readonly host: string;
  /** The local port it listens on (the one picked, when 0 was asked). */
  readonly port: number;
  readonly remotePort: number;
  /** Local connections forwarded now. */
  readonly connections: number;
  /** Stops listening and resets the connections it forwards. */
  close(): Promise<void>;
}

/** Starts forwarding `options.localPort` on this host to `options.remotePort` in the world, over `connection`. */
export async function forwardPort(connection: Connection, options: ForwardPortOptions): Promise<PortForward> {
  const { remotePort } = options;
  const localPort = options.localPort ?? 0;
  const host = options.host ?? '127.0.0.1';
  if (!Number.isInteger(remotePort) || remotePort < 1 || remotePort > 65535)
    throw invalidArgument(`remotePort must be a port, 1 to 65535, got ${String(remotePort)}`);
  if (!Number.isInteger(localPort) || localPort < 0 || localPort > 65535)
    throw invalidArgument(`localPort must be a port, 0 to 65535, got ${String(localPort)}`);
  const open = new Set<ForwardedSocket>();
  // Half-open: a local side that shut its writes still gets the answer. Paused: nothing is read before the world's side is there.
  const server: Server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => {
    const forwarded = new ForwardedSocket(
      connection,
      remotePort,
      socket,
      (error) => options.onError?.(error),
      () => open.delete(forwarded),
    );
    open.add(forwarded);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(localPort, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    host,
    port: address.port,
    remotePort,
    get connections() {
      return open.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const forwarded of [...open]) forwarded.reset();
        server.close(() => resolve());
      }),
  };
}

/** One accepted local connection and its forward in the world. */
class ForwardedSocket {
  readonly #connection: Connection;
  readonly #local: Socket;
  readonly #onError: (error: Error) => void;
  readonly #onDone: () => void;
  #id: string | undefined;
  #output: Subscription | undefined;
  #writer: ForwardWriter | undefined;
  /** The world's side ended (its FIN came and went on to the local socket). */
  #worldEnded = false;
  /** The local side ended (its FIN came and was passed on as port.shutdown). */
  #localEnded = false;
  #done = false;

  constructor(connection: Connection, remotePort: number, local: Socket, onError: (error: Error) => void, onDone: () => void) {
    this.#connection = connection;
    this.#local = local;
    this.#onError = onError;
    this.#onDone = onDone;
    local.on('error', () => undefined);
    local.on('close', (hadError) => this.#closed(hadError));
    void this.#start(remotePort);
  }

  async #start(remotePort: number): Promise<void> {
    let id: string;
    try {
      ({ id } = await this.#connection.call('port.connect', { port: remotePort }));
    } catch (error) {
      this.#onError(error as Error);
      this.#local.resetAndDestroy();
      return;
    }
    this.#id = id;
    if (this.#done) {
      this.#closeForward(true);
      return;
    }
    const local = this.#local;
    this.#output = this.#connection.subscribe(
      { kind: 'forward', id, stream: 'output' },
      0,
      {
        onData: (chunk, offset) => {
          const end = offset + chunk.length;
          // Acknowledged once the local socket took it: a slow local reader holds the daemon back on this forward only.
          local.write(chunk, (error) => {
            if (error === undefined || error === null) this.#output?.ack(end);
          });
        },
        onGap: (from, to) => this.#fail(new ConnectionError('CONNECTION_LOST', `bytes ${from} to ${to} from port ${remotePort} were lost`)),
        onEnd: (_offset, reset) => {
          this.#worldEnded = true;
          if (reset === true) this.#fail(new ConnectionError('CONNECTION_LOST', `the connection to port ${remotePort} in the world was reset`));
          else local.end();
        },
        onError: (error) => this.#fail(error),
      },
      FORWARD_WINDOW_BYTES,
    );
    const writer = this.#connection.forwardWriter(Number(id));
    this.#writer = writer;
    writer.onroom = () => {
      if (writer.room > 0 && !this.#localEnded && !this.#done) local.resume();
    };
    local.on('data', (chunk: Buffer) => {
      writer.write(chunk);
      // The daemon's window for this forward is full: read the local socket no further until it takes some.
      if (writer.room <= 0) local.pause();
    });
    local.on('end', () => {
      this.#localEnded = true;
      // After the last write frame on the same channel (and resent after them on the next), so the daemon has every byte first.
      this.#connection.call('port.shutdown', { id, offset: writer.sent }).catch((error: Error) => this.#fail(error));
    });
    local.resume();
  }

  /** Cuts the local connection and resets the world's. */
  reset(): void {
    this.#local.resetAndDestroy();
  }

  #fail(error: Error): void {
    if (this.#done) return;
    this.#onError(error);
    this.#local.resetAndDestroy();
  }

  /** The local socket is closed: the forward ends, closed in the world when both sides ended cleanly, else reset. */
  #closed(hadError: boolean): void {
    if (this.#done) return;
    this.#done = true;
    this.#output?.close();
    this.#writer?.close();
    this.#onDone();
    if (this.#id !== undefined) this.#closeForward(hadError || !this.#worldEnded || !this.#localEnded);
  }

  #closeForward(reset: boolean): void {
    // Idempotent: resent after a reconnect. A forward the daemon already ended (its grace ran out, the daemon went away) answers NOT_FOUND, which is no news.
    this.#connection.call('port.close', { id: this.#id!, reset }).catch(() => undefined);
  }
}
