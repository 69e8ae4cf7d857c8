/**
 * The seam between the protocol and what carries it. A `Channel` is one open
 * connection to a daemon that moves whole frames: JSON text messages one way
 * and the other, binary data frames from the daemon, and write frames of port
 * forwards to it. It is opened by its
 * transport (a Node `ws` socket in `remote/ws-channel.ts`, the DOM's
 * `WebSocket` in `browser.ts`, a linked pair in memory in `memory.ts`) and
 * handed to the protocol client open; it closes once, and then it is done:
 * a reconnect is a new channel.
 * @module
 */

/** Where a channel stands. A channel is handed over `open`; after `closed` it sends nothing and hears nothing. */
export type ChannelState = 'open' | 'closing' | 'closed';

/** Why a channel closed: the WebSocket close code and reason when there were some, and the error that broke it, if any. */
export interface ChannelCloseReason {
  /** 1000 for a close asked for; 1006 when the connection broke without a close frame. */
  readonly code: number;
  readonly reason: string;
  readonly error?: Error | undefined;
}

/** One open connection that carries the protocol's frames. */
export interface Channel {
  readonly state: ChannelState;
  /** Sends one text frame; dropped once the channel is no longer open. */
  send(text: string): void;
  /** Sends one binary frame (a port forward's write frame); dropped once the channel is no longer open. */
  sendBinary(bytes: Uint8Array): void;
  /** Each frame from the daemon: text as a string, a data frame as its bytes. Set by the protocol client. */
  onmessage: ((frame: string | Uint8Array) => void) | undefined;
  /** Called once, when the channel is closed, by either side or by a broken connection. Set by the protocol client. */
  onclose: ((reason: ChannelCloseReason) => void) | undefined;
  /** Closes the channel; `onclose` follows. */
  close(code?: number, reason?: string): void;
}
