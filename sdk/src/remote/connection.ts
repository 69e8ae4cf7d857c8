/**
 * The SDK's connection to a daemon: the protocol client (calls, stream
 * subscriptions with credits, resends and resumes: client/protocol-client.ts)
 * over a Node `ws` channel with heartbeats (ws-channel.ts), kept open by the
 * redial loop (client/redial.ts).
 *
 * A dropped connection is not a failure. The connection reconnects on its own;
 * every subscription resumes from the byte after the last one it received, so
 * nothing is lost or repeated; a call in flight is sent again when the
 * operation table says repeating it is safe (reads, waits, writes carrying a
 * writer and sequence number, creates carrying a request id: see
 * `Idempotency` in protocol/operations.ts) and otherwise fails with
 * OUTCOME_UNKNOWN. Only when the daemon cannot be reached again within the
 * reconnect deadline does everything fail, with CONNECTION_LOST.
 * @module
 */
import type { StreamRef } from '../protocol/frames.ts';
import type { CallName, OperationInput, OperationResult } from '../protocol/operations.ts';
import { ProtocolClient, type Logger } from '../client/protocol-client.ts';
import { Redialer } from '../client/redial.ts';
import type { StreamHandlers, Subscription } from '../client/subscription.ts';
import type { ForwardWriter } from '../client/forward-writer.ts';
import type { CertificateAuthority } from './reach.ts';
import { dialChannel } from './ws-channel.ts';

export type { Logger } from '../client/protocol-client.ts';

export interface ConnectionOptions {
  /** The daemon's base URL, http(s)://host:port. */
  readonly url: string;
  readonly token: string;
  /** Every request's headers: the token where it travels, and the caller's own. */
  readonly headers: Readonly<Record<string, string>>;
  /** Longest wait for one connection attempt. */
  readonly connectTimeoutMs: number;
  /** Longest wait for the answer to a call that is not a long wait. */
  readonly requestTimeoutMs: number;
  /** Ping interval; a daemon silent for two intervals is taken for gone and the connection is remade. */
  readonly heartbeatMs: number;
  /** How long to keep trying to reconnect before everything fails with CONNECTION_LOST. */
  readonly reconnectDeadlineMs: number;
  readonly reconnectInitialDelayMs: number;
  readonly reconnectMaxDelayMs: number;
  /** Credit window per stream. */
  readonly windowBytes: number;
  readonly logger: Logger | undefined;
  /** PEM certificates to trust for an https:// daemon. */
  readonly ca?: CertificateAuthority | undefined;
}

export class Connection {
  readonly options: ConnectionOptions;
  readonly #client: ProtocolClient;
  readonly #redialer: Redialer;

  constructor(options: ConnectionOptions) {
    this.options = options;
    const { url, logger } = options;
    this.#client = new ProtocolClient({ requestTimeoutMs: options.requestTimeoutMs, windowBytes: options.windowBytes, logger });
    this.#redialer = new Redialer(
      this.#client,
      () => dialChannel(options),
      { target: url, initialDelayMs: options.reconnectInitialDelayMs, maxDelayMs: options.reconnectMaxDelayMs, deadlineMs: options.reconnectDeadlineMs },
      {
        onLost: () => logger?.info({ url }, 'execworld connection lost; reconnecting'),
        onOpen: () => logger?.info({ url }, 'execworld connection restored'),
      },
    );
  }

  /**
   * Counts the calls sent and the messages received: unchanged between two
   * reads, nothing was asked of the daemon and nothing came from it meanwhile.
   */
  get traffic(): number {
    return this.#client.traffic;
  }

  /** True while the socket is open. */
  get connected(): boolean {
    return this.#client.connected;
  }

  /** Makes the first connection; fails at once when the daemon refuses or cannot be reached. */
  async start(): Promise<void> {
    this.#client.attach(await dialChannel(this.options));
  }

  /** See {@link ProtocolClient.call}. */
  call<N extends CallName>(op: N, params: OperationInput<N>): Promise<OperationResult<N>> {
    return this.#client.call(op, params);
  }

  /** Subscribes to a stream from `from`; the subscription lives until it ends, is closed, or the connection fails. */
  subscribe(target: StreamRef, from: number, handlers: StreamHandlers, window = this.options.windowBytes): Subscription {
    return this.#client.subscribe(target, from, handlers, window);
  }

  /** A port forward's direction toward the world; see {@link ProtocolClient.forwardWriter}. */
  forwardWriter(fwd: number): ForwardWriter {
    return this.#client.forwardWriter(fwd);
  }

  /** Resolves once the connection is open again (or failed). */
  whenOpen(): Promise<void> {
    return this.#client.whenOpen();
  }

  /** Closes the socket; calls still owed fail with CLOSED. */
  close(): void {
    this.#redialer.stop();
    this.#client.close();
  }
}
