/**
 * The multiplexed WebSocket of `GET /v1/connect`: every operation as a call,
 * and output streams as subscriptions with credit-based flow control.
 *
 * Flow control: a subscription has a window of bytes; the daemon never has
 * more than that sent beyond the client's last ack. A connection's
 * subscriptions together have at most its buffer budget out, whatever their
 * number: a thousand subscriptions of one stream would otherwise be sent a
 * thousand windows at once, in one turn of the event loop. A stream whose
 * readers stopped acknowledging fills its ring, which pauses its program (see
 * streams.ts), so a stalled client costs a bounded amount of memory and blocks
 * only its own streams.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { FastifyBaseLogger as Logger } from 'fastify';
import { ClientMessage, decodeDataFrame, WRITE_FRAME, type ServerMessage, type SubscribeParams } from '@execworld/sdk/protocol';
import type { z } from 'zod';
import type { DaemonMetrics } from './metrics.ts';
import { permitsSession, sameBudget, tokensOf, type OwnerAccess, type Principal } from './auth.ts';
import type { Caller, Dispatcher } from './dispatch.ts';
import { describeZodError, scopeRefusal, ServiceError, toServiceError } from './errors.ts';
import { parseClientJson } from './json-text.ts';
import type { LiveGrants } from './grants.ts';
import type { SessionRegistry } from './sessions/registry.ts';
import type { ForwardTable } from './forwards.ts';
import { readsFreeRoom, type ByteStream } from './streams.ts';
import { StreamFeed } from './ws-subscription.ts';
import { MessageRate, messageUnderWay, OwnerIntakes, type OwnerIntake } from './ws-intake.ts';

/** Bytes queued in the socket beyond which sending waits for the kernel to take some. */
const SOCKET_HIGH_WATER_BYTES = 1024 * 1024;
const NEVER_ABORTED = new AbortController().signal;

/** Subscriptions one connection may hold at once. */
export const MAX_SUBSCRIPTIONS = 1024;
/** Calls one connection may have in flight at once (a call such as terminal.done may wait long). */
export const MAX_CALLS_IN_FLIGHT = 4096;

export interface HubOptions {
  readonly registry: SessionRegistry;
  /** The port forwards, whose streams the connections carry. */
  readonly forwards: ForwardTable;
  /** Where every call goes. */
  readonly dispatcher: Dispatcher;
  readonly windowBytes: number;
  readonly heartbeatMs: number;
  /**
   * Answers queued for a client that does not read: past this the connection's
   * calls are no longer read (TCP then holds the client back); past four times
   * this the client is disconnected with 1008. Also the most output the
   * connection's subscriptions together may have sent and not had acknowledged.
   */
  readonly connectionBufferBytes: number;
  /** Connections of an owner's write tokens together, and as many again of its read tokens, and of its minted ones of each (see {@link OwnerAccess}). */
  readonly maxConnectionsPerOwner: number;
  /** Subscriptions of an owner's write tokens together, and as many again of its read tokens, and of its minted ones of each. */
  readonly maxSubscriptionsPerOwner: number;
  /** Longest time a message may take to arrive whole, from its first byte; past it the connection is closed (1008). */
  readonly messageTimeoutMs: number;
  /** Bytes of messages an owner's connections together may have begun and not finished (budgets as for connections). */
  readonly messageBudgetBytes: number;
  /** Messages a second one connection is read at (see ws-intake.ts). */
  readonly maxMessageRate: number;
  /** Messages a second an owner's connections together are read at (budgets as for connections). */
  readonly maxOwnerMessageRate: number;
  readonly log: Logger;
  /** Where calls and paused connections are counted; nowhere when absent. */
  readonly metrics?: DaemonMetrics | undefined;
  /** What closes the connection of a minted token that expires or is revoked; none when absent. */
  readonly grants?: LiveGrants | undefined;
}

/** WebSocket close code of a connection that broke without a close frame (RFC 6455 §7.4.1). */
const CLOSE_ABNORMAL = 1006;
/** WebSocket close code for a peer that broke the daemon's policy (RFC 6455 §7.4.1). */
const CLOSE_POLICY_VIOLATION = 1008;
/** Messages held past a rate that are read in one turn of the event loop, at most (see ClientLink's #readHeld). */
const HELD_PER_TURN = 64;
/** How long a peer closed for what it sent has to answer the close before its socket is cut, and what it holds with it. */
const CLOSE_GRACE_MS = 1000;

/**
 * A call or an ack, the messages of every keystroke, checked by hand to the
 * letter of their schemas in ClientMessage (the zod union took some 10 µs a
 * message); anything else, or anything off, is undefined and goes to the
 * schema, which also names what was wrong.
 */
export function commonMessage(json: unknown): ClientMessage | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const message = json as Record<string, unknown>;
  let keys = 0;
  for (const key in message) {
    if (!Object.hasOwn(message, key)) return undefined;
    keys += 1;
  }
  if (message.t === 'call') {
    const { id, op, params } = message;
    if (!Number.isSafeInteger(id) || (id as number) < 0 || typeof op !== 'string') return undefined;
    if (params === undefined) return keys === 3 && 'op' in message && 'id' in message ? { t: 'call', id: id as number, op } : undefined;
    if (typeof params !== 'object' || params === null || Array.isArray(params) || keys !== 4) return undefined;
    return { t: 'call', id: id as number, op, params: params as Record<string, unknown> };
  }
  if (message.t === 'ack') {
    const { sub, offset } = message;
    if (keys !== 3 || !Number.isSafeInteger(sub) || !Number.isSafeInteger(offset) || (offset as number) < 0) return undefined;
    return { t: 'ack', sub: sub as number, offset: offset as number };
  }
  return undefined;
}

/** One client's WebSocket on the daemon: its calls, its stream feeds and their shared send budget (the SDK's end of it is its Connection). */
class ClientLink {
  /**
   * Whose connection it is: every call on it is made as this principal. A read
   * token's calls of write operations are refused; its subscriptions and acks only read.
   */
  readonly principal: Principal;
  readonly #socket: WebSocket;
  readonly #hub: WebSocketHub;
  readonly #options: HubOptions;
  readonly #log: Logger;
  readonly #subscriptions = new Map<number, StreamFeed>();
  readonly #calls = new Set<AbortController>();
  #nextSub = 1;
  /** Output the subscriptions have sent and the client has not acknowledged, over all of them. */
  #unacked = 0;
  /** Subscriptions with output to send and no room, in the order they ran out (a Set keeps insertion order). */
  readonly #waiting = new Set<StreamFeed>();
  /** The waiting subscription being pumped, whose turn it is. */
  #turn: StreamFeed | undefined;
  /** The pending pass that gives freed room to the waiting subscriptions. */
  #drain: NodeJS.Immediate | undefined;
  /** The payload of the ping awaiting its pong; only that pong proves the peer reads. */
  #pingPayload: Buffer | undefined;
  /** Bytes queued when the last heartbeat ran: a queue that shrank is a peer that reads. */
  #bufferedAtHeartbeat = 0;
  /** Calls are not read while the client leaves too many answers unread. */
  #readingPaused = false;
  /** Messages are not read while the connection or its owner is past its message rate. */
  #ratePaused = false;
  /** The daemon closed the connection: what the client still sends is read only to find its close, and not handled. */
  #closing = false;
  /** The socket closed: its forwards and subscriptions were let go. */
  #closed = false;
  readonly #heartbeat: NodeJS.Timeout;
  /** This connection's message rate, and its owner's share (rate, bytes held in messages under way). */
  readonly #rate: MessageRate;
  readonly #intake: OwnerIntake;
  /** Messages received and held until the rates allow them to be read, in order. */
  readonly #held: [Buffer, boolean][] = [];
  /** What reads the held messages once the rates allow. */
  #refill: NodeJS.Timeout | undefined;
  /** Data messages received whole so far, read or held: a message that ends is told by this count changing. */
  #received = 0;
  /** What closes the connection when the message under way has not all arrived in time, and the count it began at. */
  #assembly: NodeJS.Timeout | undefined;
  #assemblyFrom = 0;
  /** Bytes of the message under way counted in the owner's share. */
  #heldBytes = 0;
  /** What cuts the socket of a peer closed for what it sent, if it does not answer the close. */
  #cut: NodeJS.Timeout | undefined;

  constructor(socket: WebSocket, raw: Duplex, principal: Principal, hub: WebSocketHub, intake: OwnerIntake, options: HubOptions, log: Logger) {
    this.#socket = socket;
    this.principal = principal;
    this.#hub = hub;
    this.#options = options;
    this.#log = log;
    this.#rate = new MessageRate(options.maxMessageRate);
    this.#intake = intake;
    socket.on('message', (data, isBinary) => this.#receive(data as Buffer, isBinary));
    socket.on('ping', () => this.#control());
    socket.on('pong', (payload: Buffer) => {
      this.#control();
      // An unsolicited pong proves nothing: a peer that never reads could send them forever.
      if (this.#pingPayload !== undefined && payload.equals(this.#pingPayload)) this.#pingPayload = undefined;
    });
    socket.on('close', (code) => this.#dispose(code));
    socket.on('error', (error) => this.#log.debug({ err: error }, 'websocket error'));
    // After ws's own listener (added before the connection was handed over), so its Receiver has parsed the chunk.
    raw.on('data', () => this.#watchMessage());
    this.#heartbeat = setInterval(() => this.#beat(), options.heartbeatMs);
    // Bytes that came with the upgrade may have been parsed before the listener above was added.
    setImmediate(() => this.#watchMessage());
  }

  /**
   * A data message arrived whole: read now if the connection's and its
   * owner's rates allow it, else held (in order) and the connection no
   * longer read until they do.
   */
  #receive(data: Buffer, isBinary: boolean): void {
    if (this.#closing) return;
    this.#received += 1;
    if (this.#held.length === 0 && this.#hub.takeMessage(this.#rate, this.#intake)) {
      this.#onMessage(data, isBinary);
      return;
    }
    this.#held.push([data, isBinary]);
    this.#pauseForRate();
  }

  /** A ping or a pong, parsed and answered by ws already: it spends the rates, and past them pauses reading. */
  #control(): void {
    if (this.#closing) return;
    if (this.#held.length > 0 || !this.#hub.takeMessage(this.#rate, this.#intake)) this.#pauseForRate();
  }

  #pauseForRate(): void {
    if (this.#ratePaused) return;
    this.#ratePaused = true;
    this.#options.metrics?.connectionThrottled();
    this.#updateReading();
    this.#scheduleRefill();
  }

  #scheduleRefill(): void {
    const now = performance.now();
    const wait = Math.max(this.#rate.wait(now), this.#intake.rate.wait(now), 1);
    this.#refill = setTimeout(() => this.#readHeld(), wait);
  }

  /**
   * Reads the held messages the rates now allow, a few a turn: their answers
   * are sent between turns, so a client that leaves them unread is seen
   * (#checkBudget) before the next are read. Reading goes on once none is held.
   */
  #readHeld(): void {
    this.#refill = undefined;
    let read = 0;
    while (this.#held.length > 0 && this.#socket.readyState === this.#socket.OPEN) {
      // A client that leaves its answers unread has its held messages wait too: #onSent reads them on.
      if (this.#readingPaused) return;
      if (read === HELD_PER_TURN) {
        this.#refill = setTimeout(() => this.#readHeld(), 0);
        return;
      }
      if (!this.#hub.takeMessage(this.#rate, this.#intake)) {
        this.#scheduleRefill();
        return;
      }
      read += 1;
      const [data, isBinary] = this.#held.shift()!;
      this.#onMessage(data, isBinary);
    }
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    // A ping or pong past the rate held nothing: the rates must allow one more before reading goes on.
    if (!this.#hub.allowsMessage(this.#rate, this.#intake)) {
      this.#scheduleRefill();
      return;
    }
    this.#ratePaused = false;
    this.#updateReading();
  }

  /** Reads the socket unless the client leaves too many answers unread or is past its rate. */
  #updateReading(): void {
    if (!this.#closing && (this.#readingPaused || this.#ratePaused)) {
      this.#socket.pause();
      // A message the daemon does not read on is not the client's delay.
      clearTimeout(this.#assembly);
      this.#assembly = undefined;
    } else {
      this.#socket.resume();
      this.#watchMessage();
    }
  }

  /**
   * Looks at the message the client is sending, after each chunk of its
   * bytes: a message must arrive whole within --message-timeout-ms of its
   * first byte (the heartbeat's pongs, which the client may send between its
   * fragments, do not count as its end), and the messages an owner's
   * connections are receiving together must fit in --message-budget-bytes.
   */
  #watchMessage(): void {
    if (this.#socket.readyState !== this.#socket.OPEN) return;
    const underWay = messageUnderWay(this.#socket);
    const bytes = underWay ?? 0;
    if (bytes !== this.#heldBytes) {
      this.#hub.holdMessageBytes(this.#intake, bytes - this.#heldBytes);
      this.#heldBytes = bytes;
      const budget = this.#options.messageBudgetBytes;
      if (bytes > 0 && this.#intake.heldBytes > budget) {
        this.#drop(`messages under way of these tokens would hold over ${budget} bytes (--message-budget-bytes)`, {
          held: this.#intake.heldBytes,
        });
        return;
      }
    }
    if (underWay === undefined) {
      clearTimeout(this.#assembly);
      this.#assembly = undefined;
      return;
    }
    if (this.#readingPaused || this.#ratePaused) return;
    if (this.#assembly === undefined) {
      const timeoutMs = this.#options.messageTimeoutMs;
      this.#assembly = setTimeout(() => this.#drop(`a message did not all arrive within ${timeoutMs} ms (--message-timeout-ms)`), timeoutMs);
      this.#assemblyFrom = this.#received;
    } else if (this.#assemblyFrom !== this.#received) {
      // The message timed before ended, and this is the next one: its time starts now.
      this.#assembly.refresh();
      this.#assemblyFrom = this.#received;
    }
  }

  /** Closes the connection for what the client sent (1008, `reason`), and cuts it if the client does not answer soon. */
  #drop(reason: string, detail: Record<string, unknown> = {}): void {
    if (this.#cut !== undefined) return;
    this.#log.warn({ ...detail, reason }, 'websocket peer broke a bound on its messages; disconnecting it');
    this.close(CLOSE_POLICY_VIOLATION, reason);
    this.#cut = setTimeout(() => this.#socket.terminate(), CLOSE_GRACE_MS);
  }

  #beat(): void {
    const buffered = this.#socket.bufferedAmount;
    const draining = buffered < this.#bufferedAtHeartbeat;
    this.#bufferedAtHeartbeat = buffered;
    if (this.#pingPayload !== undefined && !draining) {
      this.#log.info('websocket peer missed its heartbeat; dropping it');
      this.#socket.terminate();
      return;
    }
    this.#pingPayload = randomBytes(8);
    this.#socket.ping(this.#pingPayload);
  }

  /** Subscriptions open on this connection. */
  get subscriptionCount(): number {
    return this.#subscriptions.size;
  }

  /** Bytes of answers and data queued for the client. */
  get bufferedBytes(): number {
    return this.#socket.bufferedAmount;
  }

  /** Whether more data may be queued on the socket now. */
  get writable(): boolean {
    return this.#socket.readyState === this.#socket.OPEN && this.#socket.bufferedAmount < SOCKET_HIGH_WATER_BYTES;
  }

  /** Sends `message`; `done` is called once it was written, or could not be (the connection closed). */
  send(message: ServerMessage, done?: () => void): void {
    if (this.#socket.readyState !== this.#socket.OPEN) {
      done?.();
      return;
    }
    this.#socket.send(
      JSON.stringify(message),
      done === undefined
        ? () => this.#onSent()
        : () => {
            this.#onSent();
            done();
          },
    );
    this.#checkBudget();
  }

  roomFor(subscription: StreamFeed): number {
    // Behind others that wait, a subscription waits too: one that acks and sends at once would take all the room, every time.
    if (this.#waiting.size > 0 && this.#turn !== subscription) return 0;
    return this.#options.connectionBufferBytes - this.#unacked;
  }

  unacked(bytes: number): void {
    this.#unacked += bytes;
    if (bytes < 0) this.#scheduleDrain();
  }

  #hasRoom(): boolean {
    return this.#unacked < this.#options.connectionBufferBytes && this.writable;
  }

  waitForRoom(subscription: StreamFeed): void {
    this.#waiting.add(subscription);
    this.#scheduleDrain();
  }

  /**
   * Gives room, once there is some, to the waiting subscriptions in turn.
   * Never from inside a pump or an ack (a subscription may be in the middle of
   * one): on the next turn of the event loop, which also lets other work in.
   * A full socket stops the pass; the subscriptions it did not reach keep
   * their places, and the socket's next drained frame pumps them again.
   */
  #scheduleDrain(): void {
    if (this.#drain !== undefined || this.#waiting.size === 0 || !this.#hasRoom()) return;
    this.#drain = setImmediate(() => {
      this.#drain = undefined;
      for (const subscription of [...this.#waiting]) {
        if (!this.#hasRoom()) break;
        // Out of the queue for its turn; it joins the back again if the room runs out before its output does.
        this.#waiting.delete(subscription);
        this.#turn = subscription;
        subscription.pump();
      }
      this.#turn = undefined;
    });
  }

  sendData(frame: Uint8Array): void {
    this.#socket.send(frame, { binary: true }, () => {
      this.#onSent();
      // Once the kernel took bytes, streams held back by a full socket may go on.
      if (this.writable) for (const subscription of this.#subscriptions.values()) subscription.pump();
    });
  }

  /**
   * The outgoing budget: answers to calls are queued whatever the socket holds,
   * so a client that sends calls and never reads would grow the daemon without
   * bound. Past the budget its calls are no longer read; past four times the
   * budget it is disconnected.
   */
  #checkBudget(): void {
    const buffered = this.#socket.bufferedAmount;
    const budget = this.#options.connectionBufferBytes;
    if (buffered > 4 * budget) {
      this.#log.warn({ buffered }, 'websocket peer does not read its answers; disconnecting it');
      this.#socket.close(CLOSE_POLICY_VIOLATION, 'the client does not read its answers');
      // The close frame waits behind what the client does not read: do not wait for its answer.
      this.#socket.terminate();
      return;
    }
    if (buffered > budget && !this.#readingPaused) {
      this.#readingPaused = true;
      this.#updateReading();
      this.#options.metrics?.connectionPaused();
    }
  }

  #onSent(): void {
    if (this.#readingPaused && this.#socket.bufferedAmount <= this.#options.connectionBufferBytes / 2) {
      this.#readingPaused = false;
      // Messages held past the rate, whose reading stopped for the unread answers, go on first.
      if (this.#ratePaused && this.#refill === undefined) this.#readHeld();
      else this.#updateReading();
    }
  }

  #onMessage(data: Buffer, isBinary: boolean): void {
    // Every message is checked, not only the connection: a token may lapse before its holder hears of it.
    const lapsed = this.#options.grants?.refusal(this.principal);
    if (lapsed !== undefined) {
      this.close(CLOSE_POLICY_VIOLATION, lapsed);
      return;
    }
    if (isBinary) {
      this.#onWrite(data);
      return;
    }
    let json: unknown;
    try {
      json = parseClientJson(data.toString('utf8'), 'message');
    } catch (error) {
      this.send({ t: 'error', id: null, error: (error as ServiceError).body() });
      return;
    }
    let message = commonMessage(json);
    if (message === undefined) {
      const parsed = ClientMessage.safeParse(json);
      if (!parsed.success) {
        const id = typeof (json as { id?: unknown } | null)?.id === 'number' ? (json as { id: number }).id : null;
        this.send({ t: 'error', id, error: { code: 'INVALID_ARGUMENT', message: describeZodError(parsed.error, 'message') } });
        return;
      }
      message = parsed.data;
    }
    switch (message.t) {
      case 'call':
        void this.#call(message.id, message.op, message.params ?? {});
        return;
      case 'subscribe':
        this.#subscribe(message.id, message.params);
        return;
      case 'unsubscribe': {
        const subscription = this.#subscriptions.get(message.sub);
        if (subscription !== undefined) this.#waiting.delete(subscription);
        subscription?.close();
        this.#subscriptions.delete(message.sub);
        this.send({ t: 'result', id: message.id, result: { ok: true } });
        return;
      }
      case 'ack':
        this.#subscriptions.get(message.sub)?.ack(message.offset);
        return;
    }
  }

  /** A write frame: bytes for a port forward's connection in the world. */
  #onWrite(data: Buffer): void {
    let frame: ReturnType<typeof decodeDataFrame>;
    try {
      frame = decodeDataFrame(data, WRITE_FRAME);
    } catch (error) {
      this.send({ t: 'error', id: null, error: { code: 'INVALID_ARGUMENT', message: `a binary message is a write frame: ${(error as Error).message}` } });
      return;
    }
    try {
      this.#options.forwards.get(this.principal, frame.sub).write(this, frame.offset, frame.payload as Buffer);
    } catch (error) {
      this.send({ t: 'error', id: null, error: toServiceError(error).body() });
    }
  }

  async #call(id: number, name: string, params: Record<string, unknown>): Promise<void> {
    const dispatcher = this.#options.dispatcher;
    if (this.#calls.size >= MAX_CALLS_IN_FLIGHT) {
      this.send({ t: 'error', id, error: { code: 'LIMIT_EXCEEDED', message: `at most ${MAX_CALLS_IN_FLIGHT} calls may be in flight on one connection` } });
      return;
    }
    let controller: AbortController | undefined;
    // What the answer set aside (a file's text) is given back once the answer is written.
    let sent: (() => void) | undefined;
    try {
      const operation = dispatcher.operation(name);
      // Only a call that may wait (the table's `waits`) needs to learn that its caller went away (an AbortController costs microseconds).
      if (operation.spec.waits) {
        controller = new AbortController();
        this.#calls.add(controller);
      }
      const caller: Caller = {
        principal: this.principal,
        transport: 'websocket',
        signal: controller?.signal ?? NEVER_ABORTED,
        unbounded: true,
        where: 'params',
        whenAnswered: (done) => (sent = done),
        link: this,
      };
      const result = await dispatcher.call(operation, caller, params);
      this.send({ t: 'result', id, result }, sent);
    } catch (error) {
      const serviceError = toServiceError(error);
      if (serviceError.code === 'INTERNAL') this.#log.error({ err: serviceError.cause ?? error, op: name }, 'call failed');
      this.send({ t: 'error', id, error: serviceError.body() }, sent);
    } finally {
      if (controller !== undefined) this.#calls.delete(controller);
    }
  }

  #subscribe(id: number, params: z.infer<typeof SubscribeParams>): void {
    try {
      if (this.#subscriptions.size >= MAX_SUBSCRIPTIONS) {
        throw new ServiceError('LIMIT_EXCEEDED', `at most ${MAX_SUBSCRIPTIONS} subscriptions may be open on one connection`);
      }
      const limit = this.#options.maxSubscriptionsPerOwner;
      if (this.#hub.subscriptionsOf(this.principal) >= limit) {
        throw new ServiceError('LIMIT_EXCEEDED', `${tokensOf(this.principal)} already have ${limit} subscriptions open (the limit)`);
      }
      const stream = this.#resolveStream(params.target);
      if (params.from > stream.end) throw new ServiceError('INVALID_ARGUMENT', `from ${params.from} is past the end of the stream (${stream.end})`);
      const sub = this.#nextSub++;
      const from = Math.max(params.from, stream.start);
      // A forward's stream has one reader, who opened it: its acks are what let the connection be read on.
      const frees = params.target.kind === 'forward' || readsFreeRoom(this.principal.access);
      if (frees) stream.consumed(params.from);
      const subscription = new StreamFeed(sub, this, stream, from, params.window ?? this.#options.windowBytes, frees);
      this.#subscriptions.set(sub, subscription);
      this.send({ t: 'result', id, result: { sub, from, gap: params.from < from ? { from: params.from, to: from } : null } });
      subscription.pump();
    } catch (error) {
      const serviceError = toServiceError(error);
      this.send({ t: 'error', id, error: serviceError.body() });
    }
  }

  #resolveStream(target: z.infer<typeof SubscribeParams>['target']): ByteStream {
    const registry = this.#options.registry;
    if (target.kind === 'forward') {
      if (target.stream !== 'output') throw new ServiceError('INVALID_ARGUMENT', "a forward has one stream, 'output'");
      const forward = this.#options.forwards.get(this.principal, target.id);
      forward.attach(this);
      return forward.output;
    }
    if (!permitsSession(this.principal, target.id)) throw scopeRefusal(`the token does not reach session ${target.id}`);
    if (target.kind === 'terminal') {
      if (target.stream !== 'output') throw new ServiceError('INVALID_ARGUMENT', "a terminal has one stream, 'output'");
      return registry.get(this.principal.owner, target.id, 'terminal').output;
    }
    if (target.stream === 'output') throw new ServiceError('INVALID_ARGUMENT', "a process has 'stdout' and 'stderr'");
    return registry.get(this.principal.owner, target.id, 'process').stream(target.stream);
  }

  /** False once the socket closed: a forward made by a call still under way then is not taken up by it (see forwards.ts). */
  get open(): boolean {
    return !this.#closed;
  }

  /** @param code the close code: 1006 when the connection broke without a close frame. */
  #dispose(code: number): void {
    this.#closed = true;
    // A broken connection's forwards wait for the client to resume them; a closed one's end now (see forwards.ts).
    this.#options.forwards.detach(this, code === CLOSE_ABNORMAL);
    clearInterval(this.#heartbeat);
    clearImmediate(this.#drain);
    clearTimeout(this.#refill);
    clearTimeout(this.#assembly);
    clearTimeout(this.#cut);
    this.#held.length = 0;
    this.#hub.holdMessageBytes(this.#intake, -this.#heldBytes);
    this.#heldBytes = 0;
    this.#hub.left(this.principal, this.#intake);
    this.#waiting.clear();
    for (const subscription of this.#subscriptions.values()) subscription.close();
    this.#subscriptions.clear();
    for (const call of this.#calls) call.abort();
    this.#calls.clear();
  }

  /** Closes the socket: as the daemon goes away, or as its token expires or is revoked. */
  close(code: number, reason: string): void {
    this.#socket.close(code, reason);
    // Nothing more is handled; reading goes on (whatever the rates or the answers unread) for the client's close.
    this.#closing = true;
    this.#held.length = 0;
    clearTimeout(this.#refill);
    clearTimeout(this.#assembly);
    this.#assembly = undefined;
    this.#updateReading();
  }
}

export class WebSocketHub {
  readonly #options: HubOptions;
  readonly #connections = new Set<ClientLink>();
  readonly #intakes: OwnerIntakes;

  constructor(options: HubOptions) {
    this.#options = options;
    this.#intakes = new OwnerIntakes(options.maxOwnerMessageRate);
  }

  /** Whether the connection's rate and its owner's both allow a message now. */
  allowsMessage(rate: MessageRate, intake: OwnerIntake): boolean {
    const now = performance.now();
    return rate.allows(now) && intake.rate.allows(now);
  }

  /** Spends a message of the connection's rate and its owner's, if both allow one now; counts it as read. */
  takeMessage(rate: MessageRate, intake: OwnerIntake): boolean {
    if (!this.allowsMessage(rate, intake)) return false;
    rate.take();
    intake.rate.take();
    if (this.#options.metrics !== undefined) this.#options.metrics.websocketMessages += 1;
    return true;
  }

  /** Counts `bytes` more (or fewer) held in messages under way of `intake`'s budget. */
  holdMessageBytes(intake: OwnerIntake, bytes: number): void {
    this.#intakes.hold(intake, bytes);
  }

  /** Bytes of messages clients have begun and not finished sending, over every connection. */
  messageBytes(): number {
    return this.#intakes.heldBytes;
  }

  /** A connection of `principal` is gone: its owner's share counts it no more. */
  left(principal: Principal, intake: OwnerIntake): void {
    this.#intakes.leave(principal, intake);
  }

  get connections(): number {
    return this.#connections.size;
  }

  /** Bytes queued for clients over every connection. */
  bufferedBytes(): number {
    let bytes = 0;
    for (const connection of this.#connections) bytes += connection.bufferedBytes;
    return bytes;
  }

  /** Open connections of the owner's tokens of `identity`'s access. */
  connectionsOf(identity: OwnerAccess): number {
    let count = 0;
    for (const connection of this.#connections) if (sameBudget(connection.principal, identity)) count += 1;
    return count;
  }

  /** Open subscriptions of the owner's tokens of `identity`'s access, over all their connections. */
  subscriptionsOf(identity: OwnerAccess): number {
    let count = 0;
    for (const connection of this.#connections) if (sameBudget(connection.principal, identity)) count += connection.subscriptionCount;
    return count;
  }

  /** Why `identity` may not open another connection now, if it may not. */
  refusal(identity: OwnerAccess): ServiceError | undefined {
    const limit = this.#options.maxConnectionsPerOwner;
    return this.connectionsOf(identity) >= limit
      ? new ServiceError('LIMIT_EXCEEDED', `${tokensOf(identity)} already have ${limit} WebSocket connections open (the limit)`)
      : undefined;
  }

  /** Takes the WebSocket `socket` of `principal`, upgraded from the connection `raw` (whose bytes it reads). */
  accept(socket: WebSocket, raw: Duplex, principal: Principal, log: Logger): void {
    // Checked again after the upgrade: upgrades of one owner may have raced past the check before it.
    const refusal = this.refusal(principal);
    if (refusal !== undefined) {
      socket.close(CLOSE_POLICY_VIOLATION, refusal.message.slice(0, 120));
      return;
    }
    const connection = new ClientLink(socket, raw, principal, this, this.#intakes.join(principal), this.#options, log);
    this.#connections.add(connection);
    const release = this.#options.grants?.hold(principal, (reason) => connection.close(CLOSE_POLICY_VIOLATION, reason));
    socket.on('close', () => {
      this.#connections.delete(connection);
      release?.();
    });
  }

  /** Closes every connection: 1001 as the daemon shuts down, 1012 (service restart) before a takeover's exec. */
  closeAll(code: 1001 | 1012 = 1001, reason = 'daemon shutting down'): void {
    for (const connection of this.#connections) connection.close(code, reason);
  }
}
