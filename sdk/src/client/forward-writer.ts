/**
 * One port forward's direction toward the world, on the client: bytes at
 * absolute offsets, sent as write frames within the daemon's window and kept
 * until the daemon says its connection took them (`written`), so that on the
 * next channel after a lost one they are sent again from there; the daemon
 * skips what it already had, so nothing is lost or repeated.
 * @module
 */
import { FORWARD_WINDOW_BYTES } from '../protocol/codec.ts';

/** What a writer asks of its client. */
export interface ForwardWriterHost {
  /** Sends `bytes` at `offset` as write frames on the open channel, if one is. */
  sendWrite(writer: ForwardWriter, offset: number, bytes: Uint8Array): void;
  dropWriter(writer: ForwardWriter): void;
}

export class ForwardWriter {
  /** The forward's number, as port.connect gave it. */
  readonly fwd: number;
  /** The offset after the last byte written. */
  sent = 0;
  /** Every byte before this offset was taken by the connection in the world. */
  taken = 0;
  /** Called when `written` freed room in the window. */
  onroom: (() => void) | undefined;
  closed = false;
  /** The bytes [taken, sent), in the chunks they were written in. */
  readonly #kept: Uint8Array[] = [];
  /** The offset of the first kept chunk's first byte (its head may be taken already). */
  #keptFrom = 0;
  readonly #host: ForwardWriterHost;

  constructor(host: ForwardWriterHost, fwd: number) {
    this.#host = host;
    this.fwd = fwd;
  }

  /** Bytes that may be written before the window is full; the caller stops reading its source at 0 and waits for `onroom`. */
  get room(): number {
    return FORWARD_WINDOW_BYTES - (this.sent - this.taken);
  }

  /** Sends `bytes` on: whatever the room, they are kept and sent (the caller keeps to the window by pausing its source). */
  write(bytes: Uint8Array): void {
    if (this.closed || bytes.length === 0) return;
    this.#kept.push(bytes);
    const offset = this.sent;
    this.sent += bytes.length;
    this.#host.sendWrite(this, offset, bytes);
  }

  /** The daemon's `written`: bytes before `offset` are taken and no longer kept. */
  onWritten(offset: number): void {
    const next = Math.min(offset, this.sent);
    if (next <= this.taken) return;
    this.taken = next;
    while (this.#kept.length > 0 && this.#keptFrom + this.#kept[0]!.length <= next) this.#keptFrom += this.#kept.shift()!.length;
    this.onroom?.();
  }

  /** What is kept from `taken` on, for a new channel: each chunk and its offset. */
  *resend(): Generator<{ offset: number; bytes: Uint8Array }> {
    let offset = this.#keptFrom;
    for (const chunk of this.#kept) {
      const skip = Math.max(0, this.taken - offset);
      if (skip < chunk.length) yield { offset: offset + skip, bytes: chunk.subarray(skip) };
      offset += chunk.length;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.#kept.length = 0;
    this.#host.dropWriter(this);
  }
}
