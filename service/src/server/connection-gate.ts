/**
 * The connections no owner has spoken on yet, bounded (--max-idle-connections,
 * --connect-timeout-ms). Every connection holds a descriptor from the moment
 * it is accepted, before it sends a byte: without a bound, anyone who can
 * reach the port could open idle connections until the daemon runs out of
 * descriptors, and Node would drop them only after its headers timeout
 * (60 s, checked every 30 s), while the attacker opens more.
 *
 * A connection is a stranger's until a request on it carries a valid token.
 * A stranger's connection with no request under way (just opened, or in its
 * TLS handshake) must send a request's headers within --connect-timeout-ms,
 * and there may be at most --max-idle-connections of them: past it a new
 * connection closes the oldest. So a flood of idle connections only ever
 * closes its own, oldest first, and a client that sends its request at once
 * (a probe, an owner's call) is read before its connection is the oldest.
 * A plain bound on connections (`server.maxConnections`) would instead refuse
 * the probes and every owner once the flood had filled it.
 *
 * The answer to a request on a stranger's connection that carried no valid
 * token (a probe, a refusal) says `Connection: close`, and its connection
 * closes once it is sent. Kept open, the connection would be idle among the
 * flood's, closed at the deadline or by a newer one, while Node's answer told
 * the client it could reuse it for the keep-alive timeout: a probe that sends
 * its next request on it would find it closed under it. A client that reuses
 * connections (undici's fetch, a keep-alive agent) sends its next request on
 * a new one instead. Until it is sent, the connection waits among the idle
 * ones, its deadline running, as a client that does not read its answer
 * would otherwise hold it.
 *
 * A connection that carried a request with a valid token is its owner's: it
 * may stay idle between requests for the keep-alive timeout (the SDK reuses
 * its connections). Each owner's budget (auth.ts budgetOf) keeps at most
 * --max-requests connections open, in flight or idle: the answer that would
 * leave one more open says `Connection: close`, and its connection closes
 * once it is sent. So an owner's idle connections never cost another owner
 * its descriptors, and no client finds a connection it was told it could
 * reuse closed under it, as it would if the daemon closed an idle one. A
 * connection upgraded to a WebSocket leaves this gate: it is counted among
 * its owner's connections (--max-connections), a preview's among its
 * previews' requests.
 *
 * The timer of a connection is a Node timer, which Node keeps in one list per
 * duration: starting, refreshing and stopping it costs the same whatever the
 * number of connections.
 * @module
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { budgetOf, type OwnerAccess } from './auth.ts';

/** The idle strangers' bound where the open-file limit cannot be read. */
const DEFAULT_IDLE_CONNECTIONS = 1024;
/** The least the default bound is, however low the open-file limit. */
const MIN_IDLE_CONNECTIONS = 64;

/**
 * The default of --max-idle-connections: a quarter of the process's soft
 * limit of open files (/proc/self/limits; Node has no getrlimit), so idle
 * strangers leave three quarters of the descriptors to sessions, owners'
 * requests and WebSockets; at least 64; 1024 where the limit cannot be read
 * or is unlimited.
 */
export function defaultIdleConnections(limits = '/proc/self/limits'): number {
  let text: string;
  try {
    text = readFileSync(limits, 'utf8');
  } catch (_error) {
    return DEFAULT_IDLE_CONNECTIONS;
  }
  const soft = /^Max open files\s+(\d+)\s/m.exec(text)?.[1];
  if (soft === undefined) return DEFAULT_IDLE_CONNECTIONS;
  return Math.max(MIN_IDLE_CONNECTIONS, Math.floor(Number(soft) / 4));
}

/** One accepted connection: whose it is, and what it has under way. */
interface Held {
  readonly socket: Socket;
  /** The budget of the last valid token a request on it carried; undefined while it is a stranger's. */
  budget: string | undefined;
  /** Requests whose headers arrived and whose responses have not closed. */
  inFlight: number;
  /** What closes a stranger's idle connection at its deadline. */
  timer: NodeJS.Timeout | undefined;
  /** Whether it is among the strangers' idle connections. */
  idle: boolean;
}

export interface GateCounts {
  /** Idle connections no valid token has come on, now. */
  readonly strangers: number;
  /** Strangers' connections closed to make room for newer ones, so far. */
  readonly evicted: number;
  /** Strangers' connections closed for sending no request's headers in time, so far. */
  readonly timedOut: number;
}

export class ConnectionGate {
  readonly #maxStrangers: number;
  readonly #maxPerBudget: number;
  readonly #timeoutMs: number;
  /** Strangers' connections with no request under way, oldest first (a Set keeps insertion order). */
  readonly #strangers = new Set<Held>();
  /** Owners' open connections, by budget. */
  readonly #perBudget = new Map<string, number>();
  /** Each connection's entry, by its socket (a TLS connection's by its raw socket, which is what `connection` gives). */
  readonly #held = new WeakMap<object, Held>();
  /** The answers under way on strangers' connections, which close them unless a valid token makes the connection its owner's. */
  readonly #strangersAnswers = new WeakSet<ServerResponse>();
  #evicted = 0;
  #timedOut = 0;

  /**
   * @param maxStrangers idle connections no valid token has come on (--max-idle-connections)
   * @param timeoutMs how long such a connection may go without a request's headers (--connect-timeout-ms)
   * @param maxPerBudget an owner's budget's open connections, in flight or idle (--max-requests)
   */
  constructor(maxStrangers: number, timeoutMs: number, maxPerBudget: number) {
    this.#maxStrangers = maxStrangers;
    this.#timeoutMs = timeoutMs;
    this.#maxPerBudget = maxPerBudget;
  }

  /** Watches `server`'s connections from their acceptance (before a TLS handshake), their requests and their upgrades. */
  attach(server: Server): void {
    server.prependListener('connection', (socket: Socket) => this.#accepted(socket));
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => this.#request(request, response));
    // An upgraded connection is no longer an HTTP one: its owner's WebSocket budget, or its refusal, closes it.
    server.prependListener('upgrade', (request: IncomingMessage) => this.#release(this.#of(request.socket)));
  }

  get counts(): GateCounts {
    return { strangers: this.#strangers.size, evicted: this.#evicted, timedOut: this.#timedOut };
  }

  /**
   * A request on `socket` carried a valid token of `who`: the connection is
   * that budget's from now on. If the budget has more connections open than
   * its bound, `response` closes this one once it is sent.
   */
  authenticated(socket: Socket, response: ServerResponse, who: OwnerAccess): void {
    const held = this.#of(socket);
    if (held === undefined) return;
    const budget = budgetOf(who);
    if (this.#strangersAnswers.delete(response) && !response.headersSent) response.removeHeader('connection');
    if (held.budget !== budget) {
      this.#leaveBudget(held);
      held.budget = budget;
      this.#perBudget.set(budget, (this.#perBudget.get(budget) ?? 0) + 1);
    }
    if ((this.#perBudget.get(budget) ?? 0) > this.#maxPerBudget && !response.headersSent) response.setHeader('connection', 'close');
  }

  #leaveBudget(held: Held): void {
    if (held.budget === undefined) return;
    const left = (this.#perBudget.get(held.budget) ?? 1) - 1;
    if (left === 0) this.#perBudget.delete(held.budget);
    else this.#perBudget.set(held.budget, left);
    held.budget = undefined;
  }

  /** The entry of `socket`: an HTTP request's socket is a TLSSocket over the raw one for HTTPS. */
  #of(socket: Socket): Held | undefined {
    return this.#held.get(socket) ?? this.#held.get((socket as Socket & { _parent?: object })._parent ?? socket);
  }

  #accepted(socket: Socket): void {
    const held: Held = { socket, budget: undefined, inFlight: 0, timer: undefined, idle: false };
    this.#held.set(socket, held);
    socket.once('close', () => this.#release(held));
    this.#idleNow(held);
  }

  #request(request: IncomingMessage, response: ServerResponse): void {
    const held = this.#of(request.socket);
    if (held === undefined) return;
    held.inFlight += 1;
    this.#busy(held);
    // A stranger's answer closes its connection, unless the request's token makes it its owner's (authenticated).
    if (held.budget === undefined) {
      response.setHeader('connection', 'close');
      this.#strangersAnswers.add(response);
    }
    response.once('close', () => {
      held.inFlight -= 1;
      if (held.inFlight === 0 && !held.socket.destroyed && this.#held.has(held.socket)) this.#idleNow(held);
    });
  }

  /** `held` has no request under way: a stranger's waits for its deadline, the oldest closing past the bound; an owner's may stay. */
  #idleNow(held: Held): void {
    if (held.budget !== undefined) return;
    held.idle = true;
    this.#strangers.add(held);
    held.timer ??= setTimeout(() => {
      this.#timedOut += 1;
      held.socket.destroy();
    }, this.#timeoutMs);
    held.timer.refresh();
    for (const oldest of this.#strangers) {
      if (this.#strangers.size <= this.#maxStrangers || oldest === held) break;
      this.#evicted += 1;
      this.#busy(oldest);
      oldest.socket.destroy();
    }
  }

  /** A request is under way on `held`: it is idle no more, and its deadline stops until it is again. */
  #busy(held: Held): void {
    if (held.idle) this.#strangers.delete(held);
    held.idle = false;
    clearTimeout(held.timer);
    held.timer = undefined;
  }

  /** `held` is gone or upgraded: the gate lets go of it. */
  #release(held: Held | undefined): void {
    if (held === undefined || !this.#held.has(held.socket)) return;
    this.#busy(held);
    this.#leaveBudget(held);
    this.#held.delete(held.socket);
  }
}
