/**
 * What a WebSocket client may make the daemon hold and do before a message of
 * it is handled: how fast its messages are read (--max-message-rate per
 * connection, --max-owner-message-rate over an owner's connections), and how
 * long and how large a message may be while it arrives (--message-timeout-ms,
 * --message-budget-bytes).
 *
 * The rates are token buckets of one second's worth of messages. A message
 * that finds either bucket empty is held, and the connection is no longer
 * read (TCP then holds the client back) until the buckets have refilled for
 * it: a burst of real keystrokes only slows, while a flood of messages that
 * draw no answer (acks of a subscription that does not exist, say) cannot
 * keep the event loop to itself.
 *
 * A message is held by the `ws` library's Receiver from its first byte until
 * its last fragment: {@link messageUnderWay} reads the Receiver's state, the
 * one place that knows (see there for what it relies on).
 * @module
 */
import type { WebSocket } from 'ws';
import { budgetOf, type OwnerAccess } from './auth.ts';

/** A token bucket of `rate` messages a second, holding at most one second's worth. */
export class MessageRate {
  readonly rate: number;
  #tokens: number;
  #at = performance.now();

  constructor(rate: number) {
    if (!(rate > 0)) throw new RangeError(`a message rate is above 0, not ${rate}`);
    this.rate = rate;
    this.#tokens = rate;
  }

  #refill(now: number): void {
    if (this.#tokens < this.rate) this.#tokens = Math.min(this.rate, this.#tokens + ((now - this.#at) * this.rate) / 1000);
    this.#at = now;
  }

  /** Whether a message may be read at `now`. */
  allows(now: number): boolean {
    this.#refill(now);
    return this.#tokens >= 1;
  }

  /** Spends one message: call it only after {@link allows} said yes. */
  take(): void {
    this.#tokens -= 1;
  }

  /** Milliseconds from `now` until a message may be read, 0 if one may now. */
  wait(now: number): number {
    this.#refill(now);
    return this.#tokens >= 1 ? 0 : Math.ceil(((1 - this.#tokens) * 1000) / this.rate);
  }
}

/**
 * What one owner's budget (auth.ts budgetOf) holds over all its connections:
 * its message rate, and the bytes of the messages they are receiving.
 */
class OwnerIntake {
  readonly rate: MessageRate;
  /** Bytes of messages begun and not finished, over the budget's connections. */
  heldBytes = 0;
  connections = 0;

  constructor(rate: number) {
    this.rate = new MessageRate(rate);
  }
}

/** The owners' shares of message reading and of bytes held in messages under way, by budget. */
export class OwnerIntakes {
  readonly #rate: number;
  readonly #byBudget = new Map<string, OwnerIntake>();
  /** Bytes of messages under way over every budget. */
  #heldBytes = 0;

  constructor(ownerRate: number) {
    this.#rate = ownerRate;
  }

  /** The share of `who`'s budget, counted for one more connection until {@link leave}. */
  join(who: OwnerAccess): OwnerIntake {
    const key = budgetOf(who);
    let intake = this.#byBudget.get(key);
    if (intake === undefined) {
      intake = new OwnerIntake(this.#rate);
      this.#byBudget.set(key, intake);
    }
    intake.connections += 1;
    return intake;
  }

  /** Bytes of messages begun and not finished, over every connection. */
  get heldBytes(): number {
    return this.#heldBytes;
  }

  /** Counts `bytes` more (or fewer, when negative) held in messages under way of `intake`'s budget. */
  hold(intake: OwnerIntake, bytes: number): void {
    intake.heldBytes += bytes;
    this.#heldBytes += bytes;
  }

  /** A connection of `who` is gone (after it released the bytes it held). */
  leave(who: OwnerAccess, intake: OwnerIntake): void {
    intake.connections -= 1;
    if (intake.connections === 0) this.#byBudget.delete(budgetOf(who));
  }
}

export type { OwnerIntake };

/** The fields of `ws`'s Receiver (lib/receiver.js, ws 3 to 8) that say what it holds of a message not yet emitted. */
interface ReceiverState {
  /** The opcode of a fragmented message under way (1 text, 2 binary), 0 when none is. */
  _fragmented: number;
  /** The payload its frame headers announced so far, of the data message under way; 0 between messages. */
  _totalPayloadLength: number;
  /** Bytes received and not yet parsed: part of a frame (its header or its payload). */
  _bufferedBytes: number;
}

/**
 * What `socket`'s Receiver holds of a message it has begun and not emitted:
 * undefined when it holds none, else the bytes the message announced so far
 * (what it will hold once its frames have arrived) or those it has buffered,
 * whichever is more. ws has no public event for a message that begins; this
 * reads three fields of its Receiver (`_fragmented`, `_totalPayloadLength`,
 * `_bufferedBytes`), which ws has kept under these names since version 3. If
 * a later ws changes them, the test of an unfinished message fails
 * (test/server/ws-intake.test.ts) rather than the daemon.
 */
export function messageUnderWay(socket: WebSocket): number | undefined {
  const receiver = (socket as unknown as { _receiver?: ReceiverState | null })._receiver;
  if (receiver === undefined || receiver === null) return undefined;
  const { _fragmented: fragmented, _totalPayloadLength: announced, _bufferedBytes: buffered } = receiver;
  if (fragmented === 0 && announced === 0 && buffered === 0) return undefined;
  return Math.max(announced, buffered);
}
