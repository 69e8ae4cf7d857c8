/**
 * The page's connection to the daemon: the SDK's protocol client (calls with
 * the operation table's resend, subscriptions that resume where they were,
 * acknowledgements) over a channel on the DOM's WebSocket, dialled again
 * after each loss for as long as the page is open. A call in flight when
 * the link drops is sent again when the table says that is safe and fails
 * with OUTCOME_UNKNOWN otherwise; a call made while it is down waits for it.
 */
import { dialBrowser, ProtocolClient, Redialer, type StreamHandlers, type Subscription } from '@execworld/sdk/client';
import type { CallName, OperationInput, OperationResult } from '@execworld/sdk/protocol';

export type { StreamHandlers, Subscription };

export interface StreamTarget {
  readonly kind: 'terminal' | 'process';
  readonly id: string;
  readonly stream: 'output' | 'stdout' | 'stderr';
}

type LinkState = 'connecting' | 'open' | 'closed';

/** The first delay before a dial after a loss; it doubles after each dial that fails, up to the longest. */
const FIRST_RETRY_MS = 100;
const LONGEST_RETRY_MS = 4000;
/** Longest wait for the answer to a call that is not a long wait (the SDK's default). */
const REQUEST_TIMEOUT_MS = 30_000;
/** Bytes of a stream the daemon may send beyond what the page has shown (the SDK's default). */
const WINDOW_BYTES = 256 * 1024;

export class Link {
  readonly #client: ProtocolClient;
  readonly #redialer: Redialer;
  /** Called after every successful (re)connect. */
  onOpen: () => void = () => undefined;
  /** Called when a dial ends before the connection opened (the daemon is away, or refused the token). */
  onDialFailed: () => void = () => undefined;
  onState: (state: LinkState, detail: string) => void = () => undefined;

  constructor(token: string) {
    this.#client = new ProtocolClient({ requestTimeoutMs: REQUEST_TIMEOUT_MS, windowBytes: WINDOW_BYTES });
    const retrying = (delayMs: number | undefined): void => this.onState('closed', `connection lost; reconnecting in ${delayMs} ms`);
    this.#redialer = new Redialer(
      this.#client,
      () => dialBrowser({ url: location.href, token }),
      { target: location.origin, initialDelayMs: FIRST_RETRY_MS, maxDelayMs: LONGEST_RETRY_MS, deadlineMs: Infinity },
      {
        onDialing: () => this.onState('connecting', 'connecting…'),
        onOpen: () => {
          this.onState('open', 'live');
          this.onOpen();
        },
        onLost: (_reason, delayMs) => retrying(delayMs),
        onDialFailed: (_error, delayMs) => {
          this.onDialFailed();
          retrying(delayMs);
        },
      },
    );
  }

  get open(): boolean {
    return this.#client.connected;
  }

  start(): void {
    this.#redialer.start();
  }

  /** Closes the connection and dials no more. */
  stop(): void {
    this.#redialer.stop();
    this.#client.close();
  }

  call<N extends CallName>(op: N, params: OperationInput<N>): Promise<OperationResult<N>> {
    return this.#client.call(op, params);
  }

  /** Subscribes to `target` from `from`; the subscription resumes by itself after a reconnect, until it ends or is closed. */
  subscribe(target: StreamTarget, from: number, handlers: StreamHandlers): Subscription {
    return this.#client.subscribe(target, from, handlers);
  }
}

/** A fresh id for a writer or a create's request id: `getRandomValues` is there in any context, `randomUUID` in secure ones only. */
export function randomId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `${prefix}-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}
