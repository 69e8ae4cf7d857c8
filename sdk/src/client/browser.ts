/**
 * A channel over the DOM's `WebSocket`, for a page served by the daemon. A
 * browser cannot set headers on an upgrade, so the token travels in the
 * Kubernetes-style token subprotocol beside the protocol's own. Nothing here
 * imports Node or a socket library: the browser view's bundle carries it.
 *
 * A browser says nothing of why an upgrade was refused (a 401 and a daemon
 * that is away look the same), so a dial that fails rejects with
 * CONNECTION_FAILED alone; a page that must tell them apart asks a REST
 * route with the token.
 * @module
 */
import { base64url, WS_SUBPROTOCOL, WS_TOKEN_PROTOCOL_PREFIX } from '../protocol/codec.ts';
import { ConnectionError } from '../errors.ts';
import type { Channel, ChannelCloseReason, ChannelState } from './channel.ts';

/** What of the DOM's `WebSocket` the channel uses (declared here: the SDK is compiled without the DOM's types). */
export interface DomWebSocket {
  readonly readyState: number;
  binaryType: string;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { readonly data: unknown }) => void) | null;
  onclose: ((event: { readonly code: number; readonly reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type DomWebSocketConstructor = new (url: string, protocols: string[]) => DomWebSocket;

export interface BrowserDialOptions {
  /** The daemon's base URL (http, https, or the page's own address); the channel goes to its /v1/connect. */
  readonly url: string;
  readonly token: string;
  /** The WebSocket class. @default globalThis.WebSocket */
  readonly WebSocket?: DomWebSocketConstructor | undefined;
}

/** The WebSocket URL of the daemon at `base`: its /v1/connect, ws: for http:, wss: for https:. */
function connectUrl(base: string): string {
  const url = new URL('/v1/connect', base);
  url.protocol = url.protocol === 'https:' || url.protocol === 'wss:' ? 'wss:' : 'ws:';
  return url.href;
}

export class BrowserChannel implements Channel {
  readonly #socket: DomWebSocket;
  #state: ChannelState = 'open';
  onmessage: ((frame: string | Uint8Array) => void) | undefined;
  onclose: ((reason: ChannelCloseReason) => void) | undefined;

  /** Takes an open socket. */
  constructor(socket: DomWebSocket) {
    this.#socket = socket;
    socket.onmessage = (event) => {
      const { data } = event;
      if (typeof data === 'string') this.onmessage?.(data);
      else if (data instanceof ArrayBuffer) this.onmessage?.(new Uint8Array(data));
    };
    socket.onclose = (event) => {
      this.#state = 'closed';
      this.onclose?.({ code: event.code, reason: event.reason });
    };
    socket.onerror = null;
  }

  get state(): ChannelState {
    return this.#state;
  }

  send(text: string): void {
    if (this.#state === 'open') this.#socket.send(text);
  }

  sendBinary(bytes: Uint8Array): void {
    if (this.#state === 'open') this.#socket.send(bytes);
  }

  close(code = 1000, reason = ''): void {
    if (this.#state !== 'open') return;
    this.#state = 'closing';
    this.#socket.close(code, reason);
  }
}

/** One attempt to open a channel: resolves once the socket is open, rejects with CONNECTION_FAILED when it closed first. */
export function dialBrowser(options: BrowserDialOptions): Promise<BrowserChannel> {
  const Socket = options.WebSocket ?? (globalThis as unknown as { WebSocket: DomWebSocketConstructor }).WebSocket;
  const url = connectUrl(options.url);
  return new Promise((resolve, reject) => {
    const socket = new Socket(url, [WS_SUBPROTOCOL, WS_TOKEN_PROTOCOL_PREFIX + base64url(options.token)]);
    socket.binaryType = 'arraybuffer';
    socket.onopen = () => {
      socket.onopen = null;
      resolve(new BrowserChannel(socket));
    };
    // An error is followed by a close; the close says the dial failed.
    socket.onerror = () => undefined;
    socket.onclose = (event) => {
      reject(new ConnectionError('CONNECTION_FAILED', `the WebSocket to ${url} closed before it opened (${event.code})`));
    };
  });
}
