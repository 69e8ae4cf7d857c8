/**
 * The SDK's channel: a Node `ws` socket to a daemon, with heartbeats. A daemon
 * that answered no ping for two intervals (a stalled proxy, a host gone
 * without a FIN) is taken for gone: the socket is terminated, which closes
 * the channel, and the client's transport dials anew.
 * @module
 */
import type { WebSocket } from 'ws';
import type { Channel, ChannelCloseReason, ChannelState } from '../client/channel.ts';
import type { Logger } from '../client/protocol-client.ts';
import { dial, type DialOptions } from './dial.ts';

export interface WsChannelOptions extends DialOptions {
  /** Ping interval; a daemon silent for two intervals is taken for gone. */
  readonly heartbeatMs: number;
  readonly logger: Logger | undefined;
}

export class WsChannel implements Channel {
  readonly #socket: WebSocket;
  #state: ChannelState = 'open';
  #alive = true;
  #error: Error | undefined;
  readonly #heartbeat: ReturnType<typeof setInterval>;
  onmessage: ((frame: string | Uint8Array) => void) | undefined;
  onclose: ((reason: ChannelCloseReason) => void) | undefined;

  /** Takes an open socket. */
  constructor(socket: WebSocket, options: WsChannelOptions) {
    this.#socket = socket;
    socket.on('message', (data: Buffer, isBinary) => {
      this.onmessage?.(isBinary ? data : data.toString('utf8'));
    });
    socket.on('pong', () => (this.#alive = true));
    socket.on('ping', () => (this.#alive = true));
    socket.on('error', (error) => {
      this.#error = error;
      options.logger?.debug({ err: error }, 'execworld connection error');
    });
    socket.on('close', (code, reason) => {
      clearInterval(this.#heartbeat);
      this.#state = 'closed';
      this.onclose?.({ code, reason: reason.toString('utf8'), error: this.#error });
    });
    this.#heartbeat = setInterval(() => {
      if (!this.#alive) {
        options.logger?.warn({ url: options.url }, 'execworld daemon missed its heartbeat; reconnecting');
        socket.terminate();
        return;
      }
      this.#alive = false;
      socket.ping();
    }, options.heartbeatMs);
  }

  get state(): ChannelState {
    return this.#state;
  }

  send(text: string): void {
    if (this.#state === 'open') this.#socket.send(text);
  }

  sendBinary(bytes: Uint8Array): void {
    if (this.#state === 'open') this.#socket.send(bytes, { binary: true });
  }

  close(code = 1000, reason = ''): void {
    if (this.#state !== 'open') return;
    this.#state = 'closing';
    clearInterval(this.#heartbeat);
    this.#socket.close(code, reason);
  }
}

/** One attempt to open a channel to the daemon: rejects with why it could not be reached or refused (see dial.ts). */
export async function dialChannel(options: WsChannelOptions): Promise<WsChannel> {
  return new WsChannel(await dial(options), options);
}
