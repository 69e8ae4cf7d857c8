/**
 * The daemon's metrics in Prometheus' text format (`GET /metrics`), kept by
 * prom-client in a registry of the daemon's own. Labels name kinds,
 * operations, codes and limits, never a session or a token; the per-owner
 * usage (cpu, limits hit, OOM kills, memory now) is labelled by owner, and
 * its labels stay bounded: the owners are those of the token file, a set
 * fixed when the daemon starts, each present from the first scrape.
 * @module
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Transport } from './call-context.ts';
import type { LimitHit, OwnerUsage } from './sessions/owner-usage.ts';
import type { StreamMeter } from './streams.ts';
import type { ImageFacts, LastTakeover } from './image.ts';
import type { GateCounts } from './connection-gate.ts';

/** The operations that start a program: their failures are spawn failures, counted by code. */
const SPAWNING = new Set(['process.create', 'terminal.create', 'shell.create']);
/** The operations that write input to a program. */
const INPUT = new Set(['terminal.input', 'process.stdin', 'shell.send']);

/** What the daemon reports of its sessions and memory when scraped. */
export interface MetricsSources {
  /** Sessions by kind and state, now. */
  sessions(): { kind: string; state: string; count: number }[];
  /** Bytes held now, by budget (rings, connection buffers, request bodies). */
  memory(): Record<string, number>;
  /** The owners of the token file: the one set the owner label takes its values from. */
  readonly owners?: readonly string[];
  /** Each owner's usage over every session it ran; read once a scrape. */
  usage?(): ReadonlyMap<string, OwnerUsage>;
  /** This image of the daemon: its start, and the last takeover. */
  image?(): ImageFacts;
  /** The endings of sessions callers asked for: those under way, and those waiting their turn. */
  endings?(): { running: number; waiting: number };
}

const LIMITS: readonly LimitHit[] = ['memory', 'pids', 'cpu'];

export class DaemonMetrics {
  readonly registry = new Registry();
  readonly #calls: Histogram<'operation' | 'transport' | 'outcome'>;
  readonly #authFailures: Counter;
  readonly #spawnFailures: Counter<'code'>;
  readonly #inputBytes: Counter;
  readonly #connectionPauses: Counter;
  readonly #connectionThrottles: Counter;
  /**
   * WebSocket messages read from clients (data messages handled, pings and
   * pongs), counted by the hub as a plain number on every message (cheaper
   * than a Counter's inc) and read at each scrape.
   */
  websocketMessages = 0;
  /** What the session rings report: bytes in, bytes evicted, programs paused. */
  readonly streams: StreamMeter;

  #sources: MetricsSources | undefined;
  /** What the connection gate counts; nothing until {@link watchGate}. */
  #gate: (() => GateCounts) | undefined;
  /** The owners' usage as the last scrape read it, once for the four metrics made of it. */
  #usage: ReadonlyMap<string, OwnerUsage> | undefined;

  constructor() {
    const registers = [this.registry];
    const sources = (): MetricsSources | undefined => this.#sources;
    /** Each owner of the token file with its usage (zero for one that ran nothing). */
    const owners = (): [string, OwnerUsage | undefined][] => (sources()?.owners ?? []).map((owner) => [owner, this.#usage?.get(owner)]);
    collectDefaultMetrics({ register: this.registry, prefix: 'execworld_' });
    new Gauge({
      name: 'execworld_sessions',
      help: 'Sessions the daemon holds, by kind (terminal, process) and state (running, exited).',
      labelNames: ['kind', 'state'],
      registers,
      collect() {
        this.reset();
        for (const { kind, state, count } of sources()?.sessions() ?? []) this.set({ kind, state }, count);
      },
    });
    new Gauge({
      name: 'execworld_session_endings',
      help: 'Endings of sessions callers asked for (a delete, a terminate), by state: running, holding a turn (at most 8 at once, each for at most 100 ms), or waiting for one.',
      labelNames: ['state'],
      registers,
      collect() {
        const load = sources()?.endings?.() ?? { running: 0, waiting: 0 };
        this.set({ state: 'running' }, load.running);
        this.set({ state: 'waiting' }, load.waiting);
      },
    });
    new Gauge({
      name: 'execworld_memory_bytes',
      help: 'Bytes held in memory by budget: rings (session output kept for readers), connections (answers queued for clients), bodies (JSON request bodies being received or handled), answers (answers set aside while they are read and sent), messages (WebSocket messages clients have begun and not finished sending).',
      labelNames: ['budget'],
      registers,
      collect() {
        this.reset();
        for (const [budget, bytes] of Object.entries(sources()?.memory() ?? {})) this.set({ budget }, bytes);
      },
    });
    new Counter({
      name: 'execworld_owner_cpu_seconds_total',
      help: "CPU seconds used by an owner's sessions (running ones so far, and every one that ended), by owner and mode (user, system).",
      labelNames: ['owner', 'mode'],
      registers,
      collect() {
        this.reset();
        for (const [owner, usage] of owners()) {
          this.inc({ owner, mode: 'user' }, (usage?.cpuUserMs ?? 0) / 1000);
          this.inc({ owner, mode: 'system' }, (usage?.cpuSystemMs ?? 0) / 1000);
        }
      },
    });
    new Counter({
      name: 'execworld_owner_limit_hits_total',
      help: "An owner's sessions that ran into a limit, by owner and limit (memory, pids, cpu); a session counts once per limit.",
      labelNames: ['owner', 'limit'],
      registers,
      collect() {
        this.reset();
        for (const [owner, usage] of owners()) for (const limit of LIMITS) this.inc({ owner, limit }, usage?.limitHits[limit] ?? 0);
      },
    });
    new Counter({
      name: 'execworld_owner_oom_kills_total',
      help: "Processes of an owner's sessions the kernel's OOM killer killed, by owner.",
      labelNames: ['owner'],
      registers,
      collect() {
        this.reset();
        for (const [owner, usage] of owners()) this.inc({ owner }, usage?.oomKills ?? 0);
      },
    });
    new Gauge({
      name: 'execworld_daemon_start_time_seconds',
      help: "When the daemon started, in seconds since the epoch; a takeover keeps it (process_start_time_seconds is the running build's).",
      registers,
      collect() {
        const image = sources()?.image?.();
        if (image !== undefined) this.set(image.startedAt / 1000);
      },
    });
    new Counter({
      name: 'execworld_takeovers_total',
      help: 'Upgrades in place (serve --takeover) since the daemon started.',
      registers,
      collect() {
        this.reset();
        this.inc(sources()?.image?.().takeovers ?? 0);
      },
    });
    // The last takeover's facts, each a gauge that is 0 before any.
    const lastTakeover = (name: string, help: string, value: (last: LastTakeover) => number): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.reset();
          const last = sources()?.image?.().lastTakeover;
          if (last !== undefined) this.set(value(last));
        },
      });
    };
    lastTakeover(
      'execworld_last_takeover_time_seconds',
      'When the last takeover began (the previous build stopped reading its sessions), in seconds since the epoch; 0 before any.',
      (last) => last.at / 1000,
    );
    lastTakeover(
      'execworld_last_takeover_pause_seconds',
      "The pause clients saw in the last takeover: from the previous build's last read to this build listening; 0 before any.",
      (last) => last.pauseMs / 1000,
    );
    lastTakeover(
      'execworld_last_takeover_rolled_back',
      'Whether the last takeover was rolled back: 1 when the new build failed before it served and this build took the sessions back; 0 otherwise.',
      (last) => (last.rolledBack === undefined ? 0 : 1),
    );
    new Gauge({
      name: 'execworld_owner_memory_bytes',
      help: "Memory in use now by an owner's running sessions, by owner; only where a memory controller follows sessions.",
      labelNames: ['owner'],
      registers,
      collect() {
        this.reset();
        for (const [owner, usage] of owners()) if (usage?.memoryBytes !== null && usage?.memoryBytes !== undefined) this.set({ owner }, usage.memoryBytes);
      },
    });
    this.#calls = new Histogram({
      name: 'execworld_call_duration_seconds',
      help: 'Time to answer an operation, by operation, transport (rest, websocket, mcp) and outcome (ok or the error code).',
      labelNames: ['operation', 'transport', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.#authFailures = new Counter({ name: 'execworld_auth_failures_total', help: 'Requests and upgrades refused for a missing or wrong token.', registers });
    this.#spawnFailures = new Counter({
      name: 'execworld_spawn_failures_total',
      help: 'Creates of a process, terminal or shell that failed, by error code.',
      labelNames: ['code'],
      registers,
    });
    this.#inputBytes = new Counter({
      name: 'execworld_input_bytes_total',
      help: 'Bytes of input written to programs (terminal input, stdin, shell sends).',
      registers,
    });
    const output = new Counter({ name: 'execworld_output_bytes_total', help: 'Bytes of output programs produced into their rings.', registers });
    const evicted = new Counter({
      name: 'execworld_ring_evicted_bytes_total',
      help: 'Bytes dropped from the head of rings after every reader had them.',
      registers,
    });
    const paused = new Counter({
      name: 'execworld_flow_pauses_total',
      help: 'Times a program was paused because its ring was full of bytes no reader had taken.',
      registers,
    });
    this.#connectionPauses = new Counter({
      name: 'execworld_connection_pauses_total',
      help: 'Times a WebSocket client stopped being read because it did not read its answers.',
      registers,
    });
    this.#connectionThrottles = new Counter({
      name: 'execworld_connection_throttles_total',
      help: "Times a WebSocket client stopped being read because it sent messages faster than its rate or its owner's (--max-message-rate, --max-owner-message-rate).",
      registers,
    });
    const gate = (): GateCounts => this.#gate?.() ?? { strangers: 0, evicted: 0, timedOut: 0 };
    new Gauge({
      name: 'execworld_idle_connections',
      help: 'Connections no valid token has come on, with no request under way (bounded by --max-idle-connections).',
      registers,
      collect() {
        this.set(gate().strangers);
      },
    });
    new Counter({
      name: 'execworld_idle_connections_closed_total',
      help: 'Connections no valid token had come on that the daemon closed, by reason: evicted (the oldest, past --max-idle-connections), timeout (no request within --connect-timeout-ms).',
      labelNames: ['reason'],
      registers,
      collect() {
        this.reset();
        const counts = gate();
        this.inc({ reason: 'evicted' }, counts.evicted);
        this.inc({ reason: 'timeout' }, counts.timedOut);
      },
    });
    const messagesRead = (): number => this.websocketMessages;
    new Counter({
      name: 'execworld_websocket_messages_total',
      help: 'WebSocket messages read from clients: data messages handled, and pings and pongs.',
      registers,
      collect() {
        this.reset();
        this.inc(messagesRead());
      },
    });
    this.streams = { appended: (bytes) => output.inc(bytes), evicted: (bytes) => evicted.inc(bytes), paused: () => paused.inc() };
  }

  /** One operation answered: its time, and what it says of spawns and input. */
  observeCall(operation: string, transport: Transport, seconds: number, outcome: string, params?: unknown): void {
    this.#calls.observe({ operation, transport, outcome }, seconds);
    if (outcome !== 'ok' && SPAWNING.has(operation)) this.#spawnFailures.inc({ code: outcome });
    if (outcome === 'ok' && INPUT.has(operation)) {
      const data = (params as { data?: unknown; input?: unknown } | undefined)?.data ?? (params as { input?: unknown } | undefined)?.input;
      if (typeof data === 'string') this.#inputBytes.inc(Buffer.byteLength(data));
    }
  }

  /** Where the sessions and memory are read when scraped. */
  readFrom(sources: MetricsSources): void {
    this.#sources = sources;
  }

  /** Reads the connection gate's counts at each scrape. */
  watchGate(counts: () => GateCounts): void {
    this.#gate = counts;
  }

  authFailure(): void {
    this.#authFailures.inc();
  }

  connectionPaused(): void {
    this.#connectionPauses.inc();
  }

  /** A WebSocket client stopped being read for its message rate. */
  connectionThrottled(): void {
    this.#connectionThrottles.inc();
  }

  /** The text a scrape answers. */
  async text(): Promise<{ contentType: string; body: string }> {
    // Kept after the scrape: one under way beside it reads this or a later one, never less (the totals only grow).
    this.#usage = this.#sources?.usage?.();
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
