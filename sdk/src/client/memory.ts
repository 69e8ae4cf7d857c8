/**
 * Two channels linked in memory, for tests: what one end sends the other
 * receives, in order, a microtask later, as a socket would deliver it. Either
 * end's `close` closes both, after what was already sent has arrived; a close
 * code of 1006 stands for a connection that broke.
 * @module
 */
import type { Channel, ChannelCloseReason, ChannelState } from './channel.ts';

export class MemoryChannel implements Channel {
  #state: ChannelState = 'open';
  #peer!: MemoryChannel;
  onmessage: ((frame: string | Uint8Array) => void) | undefined;
  onclose: ((reason: ChannelCloseReason) => void) | undefined;

  private constructor() {}

  /** Two open channels, each the other's peer: a client's end and a daemon's end. */
  static createLinkedPair(): [MemoryChannel, MemoryChannel] {
    const client = new MemoryChannel();
    const server = new MemoryChannel();
    client.#peer = server;
    server.#peer = client;
    return [client, server];
  }

  get state(): ChannelState {
    return this.#state;
  }

  send(text: string): void {
    this.#deliver(text);
  }

  /** Sends a binary frame: a daemon's data frame, or a client's write frame. */
  sendBinary(bytes: Uint8Array): void {
    this.#deliver(bytes.slice());
  }

  #deliver(frame: string | Uint8Array): void {
    if (this.#state !== 'open') return;
    const peer = this.#peer;
    queueMicrotask(() => {
      if (peer.#state !== 'closed') peer.onmessage?.(frame);
    });
  }

  close(code = 1000, reason = ''): void {
    if (this.#state !== 'open') return;
    this.#state = 'closing';
    const peer = this.#peer;
    if (peer.#state === 'open') peer.#state = 'closing';
    // After every frame already sent, as a close frame follows the data before it.
    queueMicrotask(() => {
      for (const end of [this, peer]) {
        if (end.#state === 'closed') continue;
        end.#state = 'closed';
        end.onclose?.({ code, reason });
      }
    });
  }
}
