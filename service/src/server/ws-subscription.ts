/**
 * One subscription of a WebSocket connection: a stream's bytes sent from an
 * offset, within a window of bytes beyond the client's last ack (credit-based
 * flow control) and within the room the connection's budget leaves, which its
 * subscriptions share, with bulk output coalesced into large frames.
 * @module
 */
import { encodeDataFrame, type ServerMessage } from '@execworld/sdk/protocol';
import type { ByteStream } from './streams.ts';

/** Where a subscription's frames go: its connection. */
export interface FrameSink {
  /** Whether the socket takes more now (its queue is below the high-water mark). */
  readonly writable: boolean;
  /**
   * Bytes `subscription` may send now before acks come back. The
   * connection's subscriptions share one budget, so that many of them (of one
   * stream, say) cannot together have more out than one connection may; while
   * some wait for room, the others wait behind them.
   */
  roomFor(subscription: StreamFeed): number;
  send(message: ServerMessage): void;
  sendData(frame: Uint8Array): void;
  /** The bytes `subscription` has sent and not had acknowledged changed by `bytes`. */
  unacked(bytes: number): void;
  /** `subscription` has bytes to send and no room: it is pumped again, in its turn, once acks free some. */
  waitForRoom(subscription: StreamFeed): void;
}

/** Largest payload of one data frame. */
export const FRAME_BYTES = 64 * 1024;
/**
 * Output coalescing. A stream that sent at least COALESCE_AFTER_BYTES within
 * the last RATE_WINDOW_MS is streaming in bulk: its next bytes wait up to
 * COALESCE_MS in the ring, so they leave as one large frame instead of one per
 * read of the terminal (a pty hands out at most 4 KiB a read), which costs a
 * send on the daemon and a message on the client each. Interactive output
 * (an echo, a prompt) sends far less than that and leaves at once.
 */
const COALESCE_AFTER_BYTES = 32 * 1024;
const RATE_WINDOW_MS = 2;
const COALESCE_MS = 1;
/** One subscription of a client link: a stream's bytes sent on as data frames within the client's window (the SDK's end of it is its Subscription). */
export class StreamFeed {
  readonly id: number;
  readonly #connection: FrameSink;
  readonly #stream: ByteStream;
  readonly #window: number;
  #sent: number;
  #acked: number;
  #endSent = false;
  #closed = false;
  readonly #unsubscribe: () => void;
  /** Bytes sent since `#rateSince` (a performance.now() time), to tell bulk output from interactive. */
  #rateBytes = 0;
  #rateSince = 0;
  #holdTimer: NodeJS.Timeout | undefined;
  /** Whether the subscriber's acks free ring room. */
  readonly #frees: boolean;

  /** @param frees whether acks tell the stream its bytes were taken (see readsFreeRoom). */
  constructor(id: number, connection: FrameSink, stream: ByteStream, from: number, window: number, frees: boolean) {
    this.id = id;
    this.#connection = connection;
    this.#stream = stream;
    this.#window = window;
    this.#frees = frees;
    this.#sent = from;
    this.#acked = from;
    this.#unsubscribe = stream.onChange(() => this.pump());
  }

  ack(offset: number): void {
    const acked = Math.min(offset, this.#sent);
    if (acked <= this.#acked) return;
    this.#connection.unacked(this.#acked - acked);
    this.#acked = acked;
    if (this.#frees) this.#stream.consumed(acked);
    this.pump();
  }

  /** Sends what the window and the socket allow. */
  pump(): void {
    if (this.#closed) return;
    const stream = this.#stream;
    if (this.#holdTimer !== undefined) {
      // A hold ends early once a whole frame is waiting or the stream ended.
      if (!stream.ended && stream.end - this.#sent < FRAME_BYTES) return;
      clearTimeout(this.#holdTimer);
      this.#holdTimer = undefined;
    }
    if (this.#sent < stream.start) {
      this.#connection.send({ t: 'gap', sub: this.id, from: this.#sent, to: stream.start });
      // What was sent before bytes that are gone is no longer owed an ack: the client resumes past them.
      this.#connection.unacked(this.#acked - this.#sent);
      this.#sent = stream.start;
      this.#acked = Math.max(this.#acked, this.#sent);
    }
    if (this.#hold()) return;
    while (this.#sent < stream.end && this.#sent - this.#acked < this.#window && this.#connection.writable) {
      const room = this.#connection.roomFor(this);
      if (room <= 0) {
        this.#connection.waitForRoom(this);
        break;
      }
      const slice = stream.read(this.#sent, Math.min(FRAME_BYTES, this.#window - (this.#sent - this.#acked), room));
      if (slice.gap !== null) this.#connection.send({ t: 'gap', sub: this.id, from: slice.gap.from, to: slice.gap.to });
      if (slice.data.length === 0) break;
      this.#connection.sendData(encodeDataFrame(this.id, slice.from, slice.data));
      this.#connection.unacked(slice.next - this.#sent);
      this.#rateBytes += slice.next - this.#sent;
      this.#sent = slice.next;
    }
    if (stream.ended && this.#sent === stream.end && !this.#endSent) {
      this.#endSent = true;
      this.#connection.send({ t: 'end', sub: this.id, offset: this.#sent, ...(stream.reset === true ? { reset: true as const } : {}) });
    }
  }

  /** Whether the pending bytes wait for more to join them (see COALESCE_AFTER_BYTES); arms the timer that sends them. */
  #hold(): boolean {
    const stream = this.#stream;
    const pending = stream.end - this.#sent;
    if (pending === 0 || pending >= FRAME_BYTES || stream.ended) return false;
    const now = performance.now();
    if (now - this.#rateSince > RATE_WINDOW_MS) {
      this.#rateSince = now;
      this.#rateBytes = 0;
      return false;
    }
    if (this.#rateBytes < COALESCE_AFTER_BYTES) return false;
    // The next window starts with what the hold sends: a stream that keeps streaming stays coalesced.
    this.#rateSince = now;
    this.#rateBytes = 0;
    this.#holdTimer = setTimeout(() => {
      this.#holdTimer = undefined;
      this.pump();
    }, COALESCE_MS);
    return true;
  }

  /** Ends the subscription; what it had out is no longer owed an ack. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#holdTimer);
    this.#unsubscribe();
    this.#connection.unacked(this.#acked - this.#sent);
  }
}
