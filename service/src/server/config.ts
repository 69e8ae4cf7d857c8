/**
 * The daemon's configuration, all in one place: one table of settings, each
 * settable from a JSON file, an environment variable and a flag (in rising
 * precedence), validated once into a frozen object. Nothing else reads
 * `process.env` for daemon settings.
 * @module
 */
import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { MAX_TIMER_DELAY_MS } from '@execworld/sdk/seam';
import { TEXT_ANSWER_COPIES } from './byte-budget.ts';
import { DEFAULT_PASS_ENV } from './child-env.ts';
import { describeZodError } from './errors.ts';

const MiB = 1024 * 1024;

/** Where a local daemon's token lives when none is configured: user-only, found by the SDK and CLI. */
export { localTokenFile as defaultTokenFile } from '@execworld/sdk/token-file';

/** Where the daemon keeps what must outlive a crash (spill files, and what a restart cleans up). */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME !== undefined && env.XDG_STATE_HOME !== '' ? env.XDG_STATE_HOME : join(homedir(), '.local', 'state');
  return join(base, 'execworld');
}

const positiveInt = (max: number) => z.coerce.number().int().min(1).max(max);

/** Every setting: its key, flag, environment variable, schema, default and help. */
export const SETTINGS = {
  host: { flag: 'host', env: 'EXECWORLD_HOST', schema: z.string().min(1), default: '127.0.0.1', help: 'address to bind' },
  port: { flag: 'port', env: 'EXECWORLD_PORT', schema: z.coerce.number().int().min(0).max(65535), default: 7878, help: 'port to listen on (0: any free port)' },
  tokenFile: {
    flag: 'token-file',
    env: 'EXECWORLD_TOKEN_FILE',
    schema: z.string().min(1).optional(),
    default: undefined,
    help: 'file holding the token, or lines of "<owner> <token> [<os user>]" (each token on one line, 16 characters or more, not guessable); without it a token is generated into ~/.config/execworld/token',
  },
  stateDir: {
    flag: 'state-dir',
    env: 'EXECWORLD_STATE_DIR',
    schema: z.string().min(1).optional(),
    default: undefined,
    help: 'directory for spill files and crash recovery (default $XDG_STATE_HOME/execworld, ~/.local/state/execworld)',
  },
  defaultCwd: {
    flag: 'default-cwd',
    env: 'EXECWORLD_DEFAULT_CWD',
    schema: z.string().min(1).optional(),
    default: undefined,
    help: "working directory of a process, terminal, shell or run created without one, for an owner not mapped to an OS user (a mapped owner's is its user's home); an existing directory (default: the daemon's own working directory)",
  },
  containment: {
    flag: 'containment',
    env: 'EXECWORLD_CONTAINMENT',
    schema: z.enum(['auto', 'cgroup', 'subreaper', 'job', 'none']),
    default: 'auto',
    help: 'how sessions are contained: cgroup (a cgroup v2 per session), subreaper, job (Windows: a Job Object per session), none, or auto: a cgroup where one can be made, else the subreaper; a job on Windows',
  },
  tlsCert: {
    flag: 'tls-cert',
    env: 'EXECWORLD_TLS_CERT',
    schema: z.string().min(1).optional(),
    default: undefined,
    help: 'PEM certificate file; serves HTTPS and WSS with --tls-key',
  },
  tlsKey: { flag: 'tls-key', env: 'EXECWORLD_TLS_KEY', schema: z.string().min(1).optional(), default: undefined, help: 'PEM private key file' },
  logLevel: {
    flag: 'log-level',
    env: 'EXECWORLD_LOG_LEVEL',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    default: 'info',
    help: 'fatal, error, warn, info, debug, trace or silent',
  },
  metricsAuth: {
    flag: 'metrics-auth',
    env: 'EXECWORLD_METRICS_AUTH',
    schema: z.enum(['token', 'none']),
    default: 'token',
    help: 'GET /metrics needs a token (token), or answers anyone who reaches the daemon (none: for a scraper on a trusted network)',
  },
  ui: {
    flag: 'ui',
    env: 'EXECWORLD_UI',
    schema: z.enum(['on', 'off']),
    default: 'on',
    help: 'serve the browser view at /ui (on), or not (off); the page holds no data, every view needs a token',
  },
  allowedOrigins: {
    flag: 'allowed-origin',
    env: 'EXECWORLD_ALLOWED_ORIGINS',
    schema: z.array(z.string().min(1)),
    default: [] as string[],
    help: "browser origin allowed to open WebSockets and reach /mcp (repeatable; env: comma-separated); none by default but the daemon's own (its scheme and the request's Host)",
  },
  passEnv: {
    flag: 'pass-env',
    env: 'EXECWORLD_PASS_ENV',
    schema: z.array(z.string().regex(/^(\*|[A-Za-z_][A-Za-z0-9_]*\*?)$/, { error: 'pass-env entries are names, prefixes ending in *, or * alone' })),
    default: [...DEFAULT_PASS_ENV],
    help: `name of the daemon's environment children get (repeatable; env: comma-separated; NAME_* a prefix, * all but credential-shaped names)`,
  },
  maxBodyBytes: {
    flag: 'max-body-bytes',
    env: 'EXECWORLD_MAX_BODY_BYTES',
    schema: positiveInt(1024 * MiB),
    default: 32 * MiB,
    help: 'largest JSON request body of any call; each call takes at most what it carries (64 KiB, 8 MiB, or this for data); more is refused with 413',
  },
  bodyBudgetBytes: {
    flag: 'body-budget-bytes',
    env: 'EXECWORLD_BODY_BUDGET_BYTES',
    schema: positiveInt(64 * 1024 * MiB),
    default: 64 * MiB,
    help: 'JSON request bodies held by all requests together, from their first byte until they are answered (at least --max-body-bytes); one owner holds at most half, or one body of --max-body-bytes if more; a request past it is refused with 429',
  },
  answerBudgetBytes: {
    flag: 'answer-budget-bytes',
    env: 'EXECWORLD_ANSWER_BUDGET_BYTES',
    schema: positiveInt(64 * 1024 * MiB),
    default: 512 * MiB,
    help: `answers held by all calls together while they are read and sent: a whole-text read counts ${TEXT_ANSWER_COPIES} bytes for each of its file (at least ${TEXT_ANSWER_COPIES} × --max-read-text-bytes); one owner holds at most half; a call past it is refused with 429`,
  },
  maxReadTextBytes: {
    flag: 'max-read-text-bytes',
    env: 'EXECWORLD_MAX_READ_TEXT_BYTES',
    schema: positiveInt(1024 * MiB),
    default: 16 * MiB,
    help: 'largest file a whole-text read answers (the SDK streams larger ones), and a text edit edits',
  },
  maxListEntries: {
    flag: 'max-list-entries',
    env: 'EXECWORLD_MAX_LIST_ENTRIES',
    schema: positiveInt(100_000_000),
    default: 100_000,
    help: 'most entries one directory listing answers',
  },
  maxFrameBytes: {
    flag: 'max-frame-bytes',
    env: 'EXECWORLD_MAX_FRAME_BYTES',
    schema: positiveInt(1024 * MiB),
    default: 32 * MiB,
    help: 'largest WebSocket message from a client',
  },
  maxSessionsPerOwner: {
    flag: 'max-sessions',
    env: 'EXECWORLD_MAX_SESSIONS',
    schema: positiveInt(100_000),
    default: 256,
    help: 'running terminals plus processes per owner',
  },
  maxRetainedPerOwner: {
    flag: 'max-retained',
    env: 'EXECWORLD_MAX_RETAINED',
    schema: positiveInt(100_000),
    default: 256,
    help: 'ended sessions whose facts are kept per owner',
  },
  ringBytes: {
    flag: 'ring-bytes',
    env: 'EXECWORLD_RING_BYTES',
    schema: positiveInt(1024 * MiB),
    default: 1 * MiB,
    help: 'output kept per stream for replay; a stream with this much unread output pauses its program',
  },
  screenMaxCells: {
    flag: 'screen-max-cells',
    env: 'EXECWORLD_SCREEN_MAX_CELLS',
    schema: positiveInt(16 * MiB),
    default: 256 * 1024,
    help: "most cells (rows × cols) a terminal's screen is kept for; a larger terminal's screen is refused with 429 and its queries go unanswered",
  },
  windowBytes: {
    flag: 'window-bytes',
    env: 'EXECWORLD_WINDOW_BYTES',
    schema: positiveInt(64 * MiB),
    default: 256 * 1024,
    help: 'default WebSocket credit window per stream',
  },
  retentionMs: {
    flag: 'retention-ms',
    env: 'EXECWORLD_RETENTION_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 10 * 60_000,
    help: 'how long an ended session and its output are kept',
  },
  heartbeatMs: {
    flag: 'heartbeat-ms',
    env: 'EXECWORLD_HEARTBEAT_MS',
    schema: positiveInt(600_000),
    default: 15_000,
    help: 'WebSocket ping interval; a peer silent for two intervals is dropped',
  },
  inputBacklogBytes: {
    flag: 'input-backlog-bytes',
    env: 'EXECWORLD_INPUT_BACKLOG_BYTES',
    schema: positiveInt(1024 * MiB),
    default: 4 * MiB,
    help: 'input a terminal or stdin pipe holds for a program that does not read it; more is refused with 429',
  },
  collectBudgetBytes: {
    flag: 'collect-budget-bytes',
    env: 'EXECWORLD_COLLECT_BUDGET_BYTES',
    schema: positiveInt(64 * 1024 * MiB),
    default: 1024 * MiB,
    help: "collect-mode tails held in memory by all processes together (a running one's maxBytes, an ended one's kept bytes); a create beyond it is refused with 429",
  },
  maxSessionMemoryBytes: {
    flag: 'max-session-memory-bytes',
    env: 'EXECWORLD_MAX_SESSION_MEMORY_BYTES',
    schema: z.coerce
      .number()
      .int()
      .min(4 * MiB)
      .max(2 ** 50)
      .optional(),
    default: undefined,
    help: "ceiling of a session's memory limit (limits.memoryBytes; swap included): a create asking more is refused with 400, one asking none gets the default or this",
  },
  maxSessionPids: {
    flag: 'max-session-pids',
    env: 'EXECWORLD_MAX_SESSION_PIDS',
    schema: z.coerce.number().int().min(1).max(4_194_304).optional(),
    default: undefined,
    help: "ceiling of a session's pids limit (limits.pids: processes and threads at once): a create asking more is refused with 400, one asking none gets the default or this",
  },
  maxSessionCpu: {
    flag: 'max-session-cpu',
    env: 'EXECWORLD_MAX_SESSION_CPU',
    schema: z.coerce.number().min(0.01).max(1024).optional(),
    default: undefined,
    help: "ceiling of a session's cpu limit (limits.cpu, in cores, fractional): a create asking more is refused with 400, one asking none gets the default or this",
  },
  defaultSessionMemoryBytes: {
    flag: 'default-session-memory-bytes',
    env: 'EXECWORLD_DEFAULT_SESSION_MEMORY_BYTES',
    schema: z.coerce
      .number()
      .int()
      .min(4 * MiB)
      .max(2 ** 50)
      .optional(),
    default: undefined,
    help: 'memory limit of a session created without one (at most --max-session-memory-bytes)',
  },
  defaultSessionPids: {
    flag: 'default-session-pids',
    env: 'EXECWORLD_DEFAULT_SESSION_PIDS',
    schema: z.coerce.number().int().min(1).max(4_194_304).optional(),
    default: undefined,
    help: "pids limit of a session created without one (at most --max-session-pids). Unset: --max-session-pids when set, else 4096 where the host can enforce pids (a pids controller follows sessions) and none elsewhere. 4096 holds a runaway session's thread or fork bomb to an eighth of the smallest usual pid_max (32768) while a real workload fits: each thread counts, and a parallel build, a JVM (tens to hundreds of threads) or a test runner's workers (a Node worker is some ten threads) stay within a few hundred to a thousand or two",
  },
  defaultSessionCpu: {
    flag: 'default-session-cpu',
    env: 'EXECWORLD_DEFAULT_SESSION_CPU',
    schema: z.coerce.number().min(0.01).max(1024).optional(),
    default: undefined,
    help: 'cpu limit, in cores, of a session created without one (at most --max-session-cpu)',
  },
  maxOwnerPids: {
    flag: 'max-owner-pids',
    env: 'EXECWORLD_MAX_OWNER_PIDS',
    schema: z.coerce.number().int().min(1).max(4_194_304).optional(),
    default: undefined,
    help: "pids (processes and threads at once) all the sessions of one owner hold together, held by the kernel in a cgroup of the owner's above its sessions' where a pids controller follows sessions: a fork past it fails (EAGAIN) for that owner's programs only, and a create it refuses answers 429. Unset: half the smallest of the host's pid_max, its threads-max and the pids.max of the daemon's cgroup and those above it, so that one owner never takes the pids the daemon and the other owners need",
  },
  maxConnectionsPerOwner: {
    flag: 'max-connections',
    env: 'EXECWORLD_MAX_CONNECTIONS',
    schema: positiveInt(100_000),
    default: 64,
    help: 'open WebSocket connections per owner; its read-only tokens have as many again of their own, so watchers never lock it out, and the tokens it minted as many again of each access',
  },
  maxRequestsPerOwner: {
    flag: 'max-requests',
    env: 'EXECWORLD_MAX_REQUESTS',
    schema: positiveInt(100_000),
    default: 256,
    help: "HTTP requests in flight per owner (a download counts until its last byte is sent); its read-only tokens have as many again of their own, the tokens it minted as many again of each access, and its previews' requests and WebSockets as many again; also the HTTP connections each of these keeps open, in flight or idle (the answer that would leave one more open closes its connection)",
  },
  maxSubscriptionsPerOwner: {
    flag: 'max-subscriptions',
    env: 'EXECWORLD_MAX_SUBSCRIPTIONS',
    schema: positiveInt(1_000_000),
    default: 4096,
    help: 'open stream subscriptions per owner, over all its connections; its read-only tokens have as many again of their own, and the tokens it minted as many again of each access',
  },
  maxUploadsPerOwner: {
    flag: 'max-uploads',
    env: 'EXECWORLD_MAX_UPLOADS',
    schema: positiveInt(100_000),
    default: 16,
    help: 'uploads one owner may have open (begun, not yet completed or deleted)',
  },
  uploadIdleMs: {
    flag: 'upload-idle-ms',
    env: 'EXECWORLD_UPLOAD_IDLE_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 3_600_000,
    help: 'an upload its owner has not written to this long is discarded with its bytes (asking for its offset does not count)',
  },
  maxForwardsPerOwner: {
    flag: 'max-forwards',
    env: 'EXECWORLD_MAX_FORWARDS',
    schema: positiveInt(100_000),
    default: 256,
    help: 'port forward connections one owner may have open at once, over all its WebSockets',
  },
  forwardGraceMs: {
    flag: 'forward-grace-ms',
    env: 'EXECWORLD_FORWARD_GRACE_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 30_000,
    help: 'how long a port forward whose WebSocket broke keeps its connection in the world for the client to resume it; then it is reset',
  },
  connectionBufferBytes: {
    flag: 'connection-buffer-bytes',
    env: 'EXECWORLD_CONNECTION_BUFFER_BYTES',
    schema: positiveInt(1024 * MiB),
    default: 16 * MiB,
    help: 'answers queued for a WebSocket client that does not read: past this its calls are not read; past 4 times this it is disconnected (1008); also the most output all subscriptions of one connection together may have sent unacknowledged',
  },
  maxIdleConnections: {
    flag: 'max-idle-connections',
    env: 'EXECWORLD_MAX_IDLE_CONNECTIONS',
    schema: positiveInt(1_000_000).optional(),
    default: undefined,
    help: 'connections that have carried no request with a valid token and have none under way (just opened, or between probes); past it a new connection closes the oldest of them (default: a quarter of the open-file limit, ulimit -n, at least 64; 1024 where it cannot be read)',
  },
  connectTimeoutMs: {
    flag: 'connect-timeout-ms',
    env: 'EXECWORLD_CONNECT_TIMEOUT_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 10_000,
    help: "how long a connection that has carried no request with a valid token may go without sending a request's headers (a TLS handshake included); then it is closed",
  },
  messageTimeoutMs: {
    flag: 'message-timeout-ms',
    env: 'EXECWORLD_MESSAGE_TIMEOUT_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 60_000,
    help: 'longest time a WebSocket message from a client may take to arrive whole, from its first byte (all its fragments); past it the connection is closed (1008)',
  },
  messageBudgetBytes: {
    flag: 'message-budget-bytes',
    env: 'EXECWORLD_MESSAGE_BUDGET_BYTES',
    schema: positiveInt(64 * 1024 * MiB),
    default: 64 * MiB,
    help: "bytes of WebSocket messages an owner's connections together have begun and not finished receiving (at least --max-frame-bytes); a connection whose message would pass it is closed (1008); its read-only tokens have as much again of their own, and the tokens it minted as much again of each access",
  },
  maxMessageRate: {
    flag: 'max-message-rate',
    env: 'EXECWORLD_MAX_MESSAGE_RATE',
    schema: positiveInt(100_000_000),
    default: 20_000,
    help: 'WebSocket messages per second one connection is read at, with bursts of as many; past it its reading pauses until the rate allows more',
  },
  maxOwnerMessageRate: {
    flag: 'max-owner-message-rate',
    env: 'EXECWORLD_MAX_OWNER_MESSAGE_RATE',
    schema: positiveInt(100_000_000),
    default: 50_000,
    help: "WebSocket messages per second an owner's connections together are read at, with bursts of as many; its read-only tokens have as many again of their own, and the tokens it minted as many again of each access",
  },
  requestTimeoutMs: {
    flag: 'request-timeout-ms',
    env: 'EXECWORLD_REQUEST_TIMEOUT_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 120_000,
    help: 'longest time a client may take over an HTTP request: its headers (60 s at most anyway), then a JSON body; a streamed body (upload bytes, an archive to unpack) may take longer but not pause this long between bytes',
  },
  maxTokenTtlMs: {
    flag: 'max-token-ttl-ms',
    env: 'EXECWORLD_MAX_TOKEN_TTL_MS',
    schema: positiveInt(MAX_TIMER_DELAY_MS),
    default: 24 * 3_600_000,
    help: 'longest lifetime of a token an owner mints for itself (token.create ttlMs); a longer one is refused with 400',
  },
  orphanTimeoutMs: {
    flag: 'orphan-timeout-ms',
    env: 'EXECWORLD_ORPHAN_TIMEOUT_MS',
    schema: z.coerce.number().int().min(0).max(MAX_TIMER_DELAY_MS),
    default: 0,
    help: 'terminate sessions nobody has touched for this long (0: never)',
  },
} as const;

/** Settings that take several values: a repeatable flag, a comma-separated variable. */
export const LIST_SETTINGS = new Set(['allowedOrigins', 'passEnv']);

type Settings = typeof SETTINGS;
export type Config = Readonly<{ [K in keyof Settings]: z.infer<Settings[K]['schema']> }>;
export type ConfigKey = keyof Settings;

export const DEFAULT_CONFIG: Config = Object.freeze(
  Object.fromEntries(Object.entries(SETTINGS).map(([key, setting]) => [key, setting.default])) as unknown as Config,
);

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch (_error) {
    return false;
  }
}

/** What `execworld serve --help` says of the settings file, `--config`. */
export const CONFIG_FILE_HELP = 'JSON file of settings (keys as the flags, in camelCase)';
export const CONFIG_FILE_ENV = 'EXECWORLD_CONFIG';

/** A setting's default as `--help` shows it, empty for none. */
export function shownDefault(key: ConfigKey): string {
  const value: string | number | readonly string[] | undefined = SETTINGS[key].default;
  if (value === undefined) return '';
  return typeof value === 'object' ? value.join(',') : String(value);
}

/**
 * Builds the configuration from a file, the environment and the flags of
 * `execworld serve` (parsed by the CLI, from the rows it makes of
 * {@link SETTINGS}: `config` and each setting's `flag`).
 * @throws {ConfigError} naming the setting and its source when a value is invalid.
 */
export function loadConfig(flags: Readonly<Record<string, string | readonly string[] | boolean | undefined>>, env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, unknown> = {};
  const sources: Record<string, string> = {};
  const configFile = (flags.config as string | undefined) ?? env[CONFIG_FILE_ENV];
  if (configFile !== undefined && configFile !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(configFile, 'utf8'));
    } catch (error) {
      throw new ConfigError(`cannot read config file ${configFile}: ${(error as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ConfigError(`config file ${configFile} must hold a JSON object`);
    for (const [key, value] of Object.entries(parsed)) {
      if (!Object.hasOwn(SETTINGS, key)) throw new ConfigError(`config file ${configFile}: unknown setting ${key}`);
      raw[key] = value;
      sources[key] = `config file ${configFile}`;
    }
  }
  for (const [key, setting] of Object.entries(SETTINGS)) {
    const fromEnv = env[setting.env];
    if (fromEnv !== undefined && fromEnv !== '') {
      raw[key] = LIST_SETTINGS.has(key)
        ? fromEnv
            .split(',')
            .map((entry) => entry.trim())
            .filter(Boolean)
        : fromEnv;
      sources[key] = `environment variable ${setting.env}`;
    }
    const fromFlag = flags[setting.flag];
    if (fromFlag !== undefined) {
      raw[key] = fromFlag;
      sources[key] = `--${setting.flag}`;
    }
  }

  const config: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(SETTINGS) as [ConfigKey, Settings[ConfigKey]][]) {
    const value = Object.hasOwn(raw, key) ? raw[key] : setting.default;
    const result = (setting.schema as z.ZodType).safeParse(value);
    if (!result.success) throw new ConfigError(`${sources[key] ?? key}: ${describeZodError(result.error, key)}`);
    config[key] = result.data;
  }
  if ((config.tlsCert === undefined) !== (config.tlsKey === undefined)) throw new ConfigError('--tls-cert and --tls-key go together');
  const defaultCwd = config.defaultCwd as string | undefined;
  if (defaultCwd !== undefined && !isDirectory(defaultCwd)) throw new ConfigError(`${sources.defaultCwd ?? 'defaultCwd'}: ${defaultCwd} is not a directory`);
  if ((config.bodyBudgetBytes as number) < (config.maxBodyBytes as number)) {
    throw new ConfigError(
      `--body-budget-bytes (${String(config.bodyBudgetBytes)}) must be at least --max-body-bytes (${String(config.maxBodyBytes)}): a body a call takes must fit in it`,
    );
  }
  if ((config.answerBudgetBytes as number) < TEXT_ANSWER_COPIES * (config.maxReadTextBytes as number)) {
    throw new ConfigError(
      `--answer-budget-bytes (${String(config.answerBudgetBytes)}) must be at least ${TEXT_ANSWER_COPIES} × --max-read-text-bytes (${String(config.maxReadTextBytes)}): the largest whole-text read must fit in it`,
    );
  }
  if ((config.messageBudgetBytes as number) < (config.maxFrameBytes as number)) {
    throw new ConfigError(
      `--message-budget-bytes (${String(config.messageBudgetBytes)}) must be at least --max-frame-bytes (${String(config.maxFrameBytes)}): a message a connection takes must fit in it`,
    );
  }
  return Object.freeze(config) as Config;
}
