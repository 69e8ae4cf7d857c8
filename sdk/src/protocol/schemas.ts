/**
 * Wire schemas of the REST and WebSocket API. The daemon validates every
 * request with them, the SDK infers its types from them, and the OpenAPI
 * document is generated from them.
 *
 * Every schema of the wire lives in this one file on
 * purpose: it is the API's reference, read top to bottom next to the
 * operation table, and the schemas refer to each other freely.
 * @module
 */
import { z } from 'zod';
import {
  DEFAULT_GRACE_MS,
  DEFAULT_RUN_OUTPUT_BYTES,
  MAX_RUN_OUTPUT_BYTES,
  MAX_TERMINAL_SIZE,
  MAX_TIMER_DELAY_MS,
  MAX_WAIT_MS,
  TERMINAL_SIGNALS,
} from '../seam/limits.ts';
import type { SessionLimits as SeamLimits, SessionUsage as SeamUsage } from '../seam/usage.ts';
import { ErrorBody } from './errors.ts';

export { MAX_TERMINAL_SIZE, MAX_TIMER_DELAY_MS, MAX_WAIT_MS, TERMINAL_SIGNALS };
/** Largest slice of output one read returns. */
export const MAX_READ_BYTES = 4 * 1024 * 1024;

const noNul = (value: string): boolean => !value.includes('\0');

export const SessionId = z
  .string()
  .regex(/^[a-z]_[A-Za-z0-9_-]{1,64}$/, { error: 'id must look like t_…, p_… or s_…' })
  .meta({ id: 'SessionId', description: 'A terminal (t_…), process (p_…) or shell (s_…) id.' });

/**
 * A session id as a request names it. Ids are opaque to clients: one of any
 * other shape is as unknown as a missing one (404), never a validation error.
 */
export const SessionRef = z
  .string()
  .meta({ description: 'A terminal (t_…), process (p_…) or shell (s_…) id; one that names nothing of this owner, whatever its shape, answers 404.' });

export const Argv = z
  .array(
    z
      .string()
      .max(128 * 1024)
      .refine(noNul, { error: 'argv entries must not contain a NUL character' }),
  )
  .min(1, { error: 'argv must contain a program' })
  .max(4096)
  .refine((argv) => argv[0] !== '', { error: 'argv[0] must be a non-empty program name' })
  .meta({ id: 'Argv', description: 'The program and its arguments; argv[0] is the program. Never shell-interpreted.' });

export const Cwd = z
  .string()
  .min(1, { error: 'cwd must be a non-empty path' })
  .max(4096)
  .refine(noNul, { error: 'cwd must not contain a NUL character' })
  .meta({ description: 'Working directory in the execution world.' });

/** The working directory of a create, which may be left out. */
const CreateCwd = Cwd.optional().meta({
  description:
    "Working directory in the execution world; default: the owner's home when the owner runs as an OS user of its own, " +
    "else the daemon's --default-cwd, else the daemon's own working directory.",
});

const EnvName = z
  .string()
  .min(1)
  .max(4096)
  .refine((name) => !name.includes('=') && noNul(name), { error: 'environment names must not contain = or NUL' });
const EnvValue = z
  .string()
  .max(128 * 1024)
  .refine(noNul, { error: 'environment values must not contain a NUL character' });

export const TerminalEnv = z
  .record(EnvName, EnvValue)
  .meta({ id: 'TerminalEnv', description: "Entries applied after the daemon's scrub of its own environment." });

export const ProcessEnv = z.record(EnvName, EnvValue.nullable()).meta({
  id: 'ProcessEnv',
  description: "Entries applied after the daemon's scrub of its own environment; null removes an inherited entry.",
});

export const GraceMs = z.int().min(1).max(MAX_TIMER_DELAY_MS).meta({ description: 'Milliseconds between the TERM and KILL tiers of cleanup.' });
const CreateGraceMs = GraceMs.optional().meta({ description: `Milliseconds between the TERM and KILL tiers of cleanup; default ${DEFAULT_GRACE_MS}.` });
const Dimension = z.int().min(1).max(MAX_TERMINAL_SIZE);

export const Outcome = z
  .object({ exitCode: z.int().nullable(), signal: z.string().nullable() })
  .meta({ id: 'Outcome', description: 'How the top-level process ended: a code, or the signal that killed it.' });
export type Outcome = z.infer<typeof Outcome>;

export const TerminalSignal = z.enum(TERMINAL_SIGNALS, { error: `signal must be one of ${TERMINAL_SIGNALS.join(', ')}` });

/** Where a stream stands: retained window [start, end) and whether it has ended. */
export const StreamState = z
  .object({
    start: z.int().min(0).meta({ description: 'Oldest byte offset still retained.' }),
    end: z.int().min(0).meta({ description: 'Offset of the next byte to be produced: the bytes seen so far.' }),
    ended: z.boolean(),
  })
  .meta({ id: 'StreamState' });

/** A client-chosen id of a create request: a retried create with it returns the session the first one made. */
export const RequestId = z
  .string()
  .regex(/^[A-Za-z0-9._~-]{1,128}$/, { error: 'requestId must be 1 to 128 letters, digits or . _ ~ -' })
  .meta({ description: 'Makes a retried create idempotent: the same requestId returns the session the first request made.' });

/**
 * The OS user a create runs its program as, as docker's `--user` names one: a
 * user name or a numeric uid (no `name:group`). Shaped here, so that what
 * reaches the daemon's lookup is a plain name or a plain number.
 */
export const CreateUser = z
  .string()
  .regex(/^(?:[0-9]{1,10}|[A-Za-z_][A-Za-z0-9_.-]{0,31})$/, {
    error: 'user must be an OS user name (a letter or _ then up to 31 letters, digits, _ . -) or a numeric uid',
  })
  .optional()
  .meta({
    description:
      "The OS user the program runs as: a user name or a numeric uid (docker's --user without :group). An owner mapped to an OS user " +
      '(user= in the token file) may name only that user; an owner that is not may name another only when the daemon runs as root, ' +
      "and then runs in that user's home unless cwd says otherwise. Absent: the owner's user, else the daemon's.",
  });

/** What a session may use, enforced by the host (cgroup controllers); a create asking for one the host cannot enforce is refused. */
export const SessionLimits = z
  .strictObject({
    memoryBytes: z
      .int()
      .min(4 * 1024 * 1024)
      .max(2 ** 50)
      .optional()
      .meta({ description: "Bytes of memory (and swap) the session's processes may use together; past it the kernel's OOM killer ends one of them." }),
    pids: z.int().min(1).max(4_194_304).optional().meta({ description: 'Processes and threads the session may hold at once; a fork past it fails (EAGAIN).' }),
    cpu: z
      .number()
      .min(0.01)
      .max(1024)
      .optional()
      .meta({ description: 'Cores the session may use, fractional (0.25: a quarter of one core), measured per 100 ms.' }),
  })
  .meta({
    id: 'SessionLimits',
    description:
      "Limits of the session's processes, all together. The daemon's --max-session-* settings are ceilings (a limit above one is refused; " +
      'a create without that limit gets the default, else the ceiling); /v1/health says which limits this host can enforce.',
  });
export type SessionLimits = z.infer<typeof SessionLimits>;

/** What a session used, read from its cgroups. */
export const SessionUsage = z
  .object({
    cpuUserMs: z.number(),
    cpuSystemMs: z.number(),
    peakMemoryBytes: z
      .number()
      .nullable()
      .meta({ description: 'The peak of the memory its processes used together; null where no memory controller follows it.' }),
    limitHit: z
      .enum(['memory', 'pids', 'cpu'])
      .nullable()
      .meta({ description: 'The limit it ran into (memory first, then pids, then cpu: it was throttled), or null.' }),
    oomKilled: z.boolean().meta({ description: "The kernel's OOM killer ended one of its processes: a SIGKILL of its own kind." }),
  })
  .meta({ id: 'SessionUsage', description: "What the session's processes used, all together, from its start." });
export type SessionUsage = z.infer<typeof SessionUsage>;

/** The runtimes' types of limits and usage are the wire's: each side takes the other's values as they are. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _sameLimits: Same<Required<SessionLimits>, Required<{ -readonly [K in keyof SeamLimits]: Exclude<SeamLimits[K], undefined> }>> = true;
const _sameUsage: Same<SessionUsage, { -readonly [K in keyof SeamUsage]: SeamUsage[K] }> = true;

// Terminals

export const TerminalCreate = z
  .strictObject({
    argv: Argv,
    cwd: CreateCwd,
    env: TerminalEnv.optional(),
    rows: Dimension,
    cols: Dimension,
    graceMs: CreateGraceMs,
    requestId: RequestId.optional(),
    user: CreateUser,
    limits: SessionLimits.optional(),
    answerQueries: z
      .boolean()
      .optional()
      .meta({
        description:
          'Whether the daemon answers the queries the program sends its terminal (cursor position, device attributes, mode ' +
          'and setting reports), so that a program asking never waits for a client; default true. False when a client runs ' +
          'its own terminal emulator and answers them itself: the daemon then never does, attached client or not.',
      }),
  })
  .meta({ id: 'TerminalCreate' });
export type TerminalCreate = z.infer<typeof TerminalCreate>;

export const TerminalInfo = z
  .object({
    id: SessionId,
    pid: z.int(),
    argv: z.array(z.string()),
    cwd: z.string(),
    rows: z.int(),
    cols: z.int(),
    status: z.enum(['running', 'exited']),
    exit: Outcome.nullable(),
    /** Every process of the session is gone: its program exited and the sweep of what it left finished. */
    treeExited: z.boolean(),
    createdAt: z.string(),
    exitedAt: z.string().nullable(),
    answerQueries: z.boolean().meta({ description: "Whether the daemon answers the program's terminal queries (see TerminalCreate)." }),
    output: StreamState,
    limits: SessionLimits.optional().meta({ description: "The limits its session runs under (asked for, or the daemon's defaults); absent: none." }),
    usage: SessionUsage.optional().meta({
      description: 'What its session used so far, read from its cgroups at the call (once ended, what they last held); absent where no cgroup counts.',
    }),
  })
  .meta({ id: 'TerminalInfo' });
export type TerminalInfo = z.infer<typeof TerminalInfo>;

export const TerminalList = z.object({ terminals: z.array(TerminalInfo) }).meta({ id: 'TerminalList' });

/** Names one writer of a session's input, so that its sequence numbers are its own. */
export const WriterId = z
  .string()
  .regex(/^[A-Za-z0-9._~-]{1,64}$/, { error: 'writer must be 1 to 64 letters, digits or . _ ~ -' })
  .meta({ description: 'Names the writer whose sequence numbers seq counts; each client handle picks its own (a random id).' });

export const TerminalInput = z
  .strictObject({
    data: z.string().max(1024 * 1024),
    seq: z
      .int()
      .min(1)
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .meta({
        description:
          "Sequence number of this write among the writer's writes; needs writer. A write whose seq is not above " +
          "the writer's last applied one is a retry: it is not applied again, and it answers as the first did.",
      }),
    writer: WriterId.optional(),
  })
  .meta({ id: 'TerminalInput' });

export const InputResult = z
  .object({
    applied: z
      .boolean()
      .meta({ description: 'False when the write was a retry of one already applied (successfully: a retry of a failed write fails as it did).' }),
    seq: z.int().nullable(),
  })
  .meta({ id: 'InputResult' });

export const TerminalResize = z.strictObject({ rows: Dimension, cols: Dimension }).meta({ id: 'TerminalResize' });

export const Foreground = z
  .object({
    foreground: z
      .object({
        processGroupId: z.int(),
        inputWaiting: z.boolean(),
        inputWaitToken: z.string().optional().meta({ description: 'Names the current input wait; a new wait has a new token.' }),
        readsLines: z
          .boolean()
          .optional()
          .meta({
            description:
              'While inputWaiting, where the platform tells it: whether the terminal reads input by lines (canonical mode), ' +
              'so the waiting read wakes only at a line end or an end of file; in raw mode (a pager, an editor) any byte wakes it.',
          }),
        command: z.string().optional().meta({
          description: "The command name, where the platform tells it: of the program proven to wait for input while inputWaiting, else of the group's leader.",
        }),
      })
      .nullable(),
    outputEnd: z
      .int()
      .min(0)
      .meta({
        description:
          "The terminal output's end offset when the facts were read. A proven input wait is answered only once " +
          'every byte the terminal produced before it is in the output, so a client that has read the output up ' +
          'to outputEnd has everything the waiting program printed.',
      }),
  })
  .meta({ id: 'Foreground', description: 'The foreground process group, or null when none can be resolved.' });

export const Screen = z
  .object({
    offset: z
      .int()
      .min(0)
      .meta({
        description:
          'The output offset the screen reflects: every output byte before it was parsed, none after. Reading the output ' +
          'from here continues the screen with nothing lost or repeated.',
      }),
    complete: z.boolean().meta({
      description:
        "The emulator parsed the terminal's output from its first byte. False when it started after the output ring had dropped " +
        'older bytes (or the terminal was resized more often than the daemon tracks before the emulator caught up): ' +
        'the screen is then what the retained output draws.',
    }),
    rows: z.int().min(1),
    cols: z.int().min(1),
    lines: z.array(z.string()).meta({ description: 'The screen, one string per row from the top, trailing spaces trimmed.' }),
    cursor: z
      .object({ row: z.int().min(0), col: z.int().min(0), visible: z.boolean() })
      .meta({ description: 'Where the cursor is, 0-based from the top left, and whether the program shows it.' }),
    alternate: z.boolean().meta({ description: 'The alternate screen is shown (a full-screen program such as vim or less runs).' }),
    title: z.string().meta({ description: 'The window title the program set last (OSC 0 or 2); empty when none.' }),
  })
  .meta({ id: 'Screen', description: "A terminal's screen as a headless terminal emulator draws it, at an exact output offset." });
export type Screen = z.infer<typeof Screen>;

export const SignalRequest = z.strictObject({ signal: TerminalSignal }).meta({ id: 'SignalRequest' });
export const SignalResult = z.object({ processGroupId: z.int() }).meta({ id: 'SignalResult' });

// Output reads

export const OutputQuery = z.strictObject({
  from: z.int().min(0).max(Number.MAX_SAFE_INTEGER).optional().meta({ description: 'Byte offset to read from; default: the oldest retained byte.' }),
  waitMs: z.int().min(0).max(MAX_WAIT_MS).optional().meta({ description: 'How long to wait for new bytes when there are none yet.' }),
  maxBytes: z.int().min(1).max(MAX_READ_BYTES).optional(),
});

export const OutputRead = z
  .object({
    from: z.int().meta({ description: 'Offset of the first byte of data.' }),
    next: z.int().meta({ description: 'Offset to read from next.' }),
    data: z.string().meta({ description: 'The bytes, base64.' }),
    gap: z.object({ from: z.int(), to: z.int() }).nullable().meta({ description: 'Bytes [from, to) are no longer retained; data starts after them.' }),
    ended: z.boolean().meta({ description: 'The stream ended and next is its end.' }),
  })
  .meta({ id: 'OutputRead' });
export type OutputRead = z.infer<typeof OutputRead>;

// Processes

/** The most one stream of a process may collect in memory (Collect.maxBytes). */
export const MAX_COLLECT_BYTES = 256 * 1024 * 1024;

export const Collect = z
  .strictObject({
    maxBytes: z.int().min(1).max(MAX_COLLECT_BYTES),
    spill: z.strictObject({ maxBytes: z.int().min(1).max(Number.MAX_SAFE_INTEGER) }).optional(),
  })
  .meta({ id: 'Collect', description: 'Bounded collection: a tail of maxBytes, and a spill file of the whole stream while it stays within spill.maxBytes.' });

const OutputMode = z.union([z.literal('pipe'), Collect], {
  error: "must be 'pipe' or { maxBytes, spill? }; 'inherit' has no meaning across the network",
});

export const StdinMode = z.union([z.literal('ignore'), z.literal('pipe'), z.strictObject({ data: z.string().max(64 * 1024 * 1024) })], {
  error: "stdin must be 'ignore', 'pipe' or { data: string }",
});

export const ProcessCreate = z
  .strictObject({
    argv: Argv,
    cwd: CreateCwd,
    env: ProcessEnv.optional(),
    stdio: z
      .strictObject({ stdin: StdinMode.optional(), stdout: OutputMode.optional(), stderr: OutputMode.optional() })
      .optional()
      .meta({ description: "The three dispositions; each one left out is 'pipe'." }),
    graceMs: CreateGraceMs,
    requestId: RequestId.optional(),
    user: CreateUser,
    limits: SessionLimits.optional(),
  })
  .meta({ id: 'ProcessCreate' });
export type ProcessCreate = z.infer<typeof ProcessCreate>;

export const ProcessStreamInfo = z
  .object({
    mode: z.enum(['pipe', 'collect']),
    start: z.int(),
    end: z.int(),
    ended: z.boolean(),
    spillPath: z.string().nullable(),
  })
  .meta({ id: 'ProcessStreamInfo' });

export const ProcessInfo = z
  .object({
    id: SessionId,
    pid: z.int().meta({ description: 'Pid of the tree root; -1 when the spawn failed.' }),
    argv: z.array(z.string()),
    cwd: z.string(),
    status: z.enum(['running', 'exited', 'failed']),
    exit: Outcome.nullable(),
    error: ErrorBody.shape.error.nullable().meta({ description: 'Why the spawn failed.' }),
    treeExited: z.boolean().meta({ description: 'The whole process tree is gone, not just the root.' }),
    stdin: z.enum(['ignore', 'pipe', 'data']),
    stdinOpen: z.boolean(),
    stdout: ProcessStreamInfo.nullable(),
    stderr: ProcessStreamInfo.nullable(),
    createdAt: z.string(),
    exitedAt: z.string().nullable(),
    limits: TerminalInfo.shape.limits,
    usage: TerminalInfo.shape.usage,
  })
  .meta({ id: 'ProcessInfo' });
export type ProcessInfo = z.infer<typeof ProcessInfo>;

export const ProcessList = z.object({ processes: z.array(ProcessInfo) }).meta({ id: 'ProcessList' });

export const StdinWrite = z
  .strictObject({
    data: z.string().max(16 * 1024 * 1024),
    encoding: z.enum(['utf8', 'base64']).optional().meta({ description: 'How data is encoded; default utf8.' }),
    seq: TerminalInput.shape.seq,
    writer: WriterId.optional(),
  })
  .meta({ id: 'StdinWrite' });

export const StreamName = z.enum(['stdout', 'stderr'], { error: 'stream must be stdout or stderr' });

export const CollectedQuery = z.strictObject({ from: z.int().min(0).max(Number.MAX_SAFE_INTEGER) });
export const CollectedRead = z
  .object({ text: z.string(), nextOffset: z.int(), lossy: z.boolean(), spillPath: z.string().optional() })
  .meta({ id: 'CollectedRead', description: "The seam's offset read of a collected stream." });

export const WaitRequest = z
  .strictObject({
    timeoutMs: z.int().min(0).max(MAX_WAIT_MS).meta({ description: 'How long to wait, in milliseconds.' }),
  })
  .meta({ id: 'WaitRequest' });
export const WaitResult = z.object({ treeExited: z.boolean() }).meta({ id: 'WaitResult' });

export const DoneResult = z
  .object({
    settled: z.boolean().meta({ description: 'False when the wait timed out before the end.' }),
    exit: Outcome.nullable(),
    error: ErrorBody.shape.error.nullable(),
    usage: SessionUsage.optional().meta({ description: 'What it used, once settled, where its cell keeps counters (a cgroup).' }),
  })
  .meta({ id: 'DoneResult', description: 'How the process or terminal ended; error when the spawn itself failed.' });

// One-call runs

export const CommandRun = z
  .strictObject({
    argv: Argv.optional().meta({ description: 'The program and its arguments, run as they are; give argv or command, not both.' }),
    command: z
      .string()
      .min(1)
      .max(1024 * 1024)
      .refine(noNul, { error: 'command must not contain a NUL character' })
      .optional()
      .meta({ description: "A command line for the world's shell: /bin/sh -c (cmd.exe /d /s /c on Windows); give argv or command, not both." }),
    cwd: CreateCwd,
    env: ProcessEnv.optional(),
    stdin: z
      .string()
      .max(64 * 1024 * 1024)
      .optional()
      .meta({ description: "Text for the command's stdin, which is closed after it; without it stdin is /dev/null." }),
    timeoutMs: z
      .int()
      .min(1)
      .max(MAX_TIMER_DELAY_MS)
      .optional()
      .meta({ description: 'End the process tree after this long (SIGTERM, SIGKILL after graceMs); the answer says timedOut.' }),
    maxOutputBytes: z
      .int()
      .min(2)
      .max(MAX_RUN_OUTPUT_BYTES)
      .optional()
      .meta({
        description: `Bytes kept of each of stdout and stderr (default ${DEFAULT_RUN_OUTPUT_BYTES}): the first half and the last half; truncated counts the bytes cut between.`,
      }),
    graceMs: CreateGraceMs,
    user: CreateUser,
    limits: SessionLimits.optional(),
  })
  .meta({ id: 'CommandRun' });

export const CommandResult = z
  .object({
    exitCode: z.int().nullable(),
    signal: z.string().nullable(),
    stdout: z.string().meta({ description: 'Stdout as UTF-8 text: all of it, or its head and tail when truncated.stdout bytes were cut between them.' }),
    stderr: z.string(),
    truncated: z
      .object({ stdout: z.int().min(0), stderr: z.int().min(0) })
      .nullable()
      .meta({ description: 'Null when every byte was kept; else the bytes cut from the middle of each stream.' }),
    timedOut: z.boolean().meta({ description: 'timeoutMs passed and the process tree was ended.' }),
    durationMs: z.number(),
    usage: SessionUsage.optional().meta({ description: 'What the command used, where its cell keeps counters (a cgroup).' }),
  })
  .meta({ id: 'CommandResult', description: 'How a run ended, with its output.' });

// Executables

export const ResolveRequest = z.strictObject({ command: z.string().max(4096), env: TerminalEnv.optional() }).meta({ id: 'ResolveRequest' });
export const ResolveResult = z.object({ path: z.string() }).meta({ id: 'ResolveResult' });

// Health

export const Health = z
  .object({
    status: z.literal('ok'),
    version: z.string(),
    protocolVersion: z.int(),
    platform: z.string(),
    arch: z.string(),
    capabilities: z.object({
      terminals: z.boolean(),
      exactInputWait: z
        .boolean()
        .meta({ description: 'Terminals prove input waits from /proc (Linux); elsewhere readiness falls back on prompts and silence.' }),
      signals: z.boolean().meta({
        description:
          'Processes take signals. False on Windows: every signal of a process tree ends it by force ({exitCode: 1, signal: null}), ' +
          "and a terminal's SIGINT is a Ctrl-C typed into its console.",
      }),
      defaultShell: z.enum(['bash', 'pwsh']).meta({ description: 'The dialect of a shell created without one: pwsh on Windows, bash elsewhere.' }),
      processes: z.boolean(),
      websocket: z.boolean(),
      containment: z.enum(['cgroup', 'subreaper', 'job', 'none']).meta({
        description:
          "How sessions are contained. cgroup: each session's processes live in a cgroup of their own, so terminate " +
          'ends everything they started, even what detached (setsid), and a tree is reported gone only when its ' +
          'cgroup is empty. subreaper: no cgroup could be made; orphaned descendants are reparented to the daemon ' +
          "and tracked by identity. job (Windows): each session's processes live in a Job Object of their own, ended " +
          'whole and closed with the daemon. none: a process tree is its process group (Windows: its taskkill /T tree), ' +
          'a terminal its POSIX session.',
      }),
      limits: z
        .object({
          supported: z.array(z.enum(['memoryBytes', 'pids', 'cpu'])),
          unsupported: z.array(z.object({ name: z.enum(['memoryBytes', 'pids', 'cpu']), reason: z.string() })),
          ownerPids: z.int().optional().meta({
            description:
              'The most pids (processes and threads at once) all the sessions of one owner hold together, held by the kernel (--max-owner-pids); absent where no pids controller follows sessions.',
          }),
        })
        .optional()
        .meta({ description: 'Which session limits this host enforces; a create asking for an unsupported one is refused with 400 naming it.' }),
    }),
    daemon: z
      .object({
        startedAt: z.string().meta({ description: 'When the daemon started; a takeover (an upgrade in place) keeps it.' }),
        imageStartedAt: z.string().meta({ description: 'When the build that runs now started: a takeover changes it.' }),
        takeovers: z.int().min(0).meta({ description: 'Upgrades in place (serve --takeover) since the daemon started.' }),
        lastTakeover: z
          .object({
            at: z.string().meta({ description: 'When the previous build stopped reading its sessions.' }),
            pauseMs: z.number().meta({ description: 'From then until this build listened: the pause its clients saw.' }),
            sessions: z.int().min(0).meta({ description: 'The sessions it handed over.' }),
            rolledBack: z
              .object({ reason: z.string().meta({ description: 'Why the new build failed.' }) })
              .optional()
              .meta({
                description:
                  'Present when the new build failed after the exec, before it served, and the build that runs now (the previous one) took the sessions back.',
              }),
          })
          .optional(),
      })
      .meta({ description: 'The daemon and the build of it that runs now.' }),
  })
  .meta({ id: 'Health' });
export type Health = z.infer<typeof Health>;

// Identity

export const Identity = z
  .object({
    owner: z.string().meta({ description: 'The owner the token stands for: whose sessions, shells and files its calls see.' }),
    access: z.enum(['read', 'write']).meta({
      description:
        "What the token may do: write, everything; read (access=read in the token file), list, inspect and watch the owner's sessions and files, " +
        'while every call that would act on them answers READ_ONLY.',
    }),
    minted: z
      .object({
        id: z.string().meta({ description: 'Its id, to revoke it by.' }),
        expiresAt: z.string().meta({ description: 'When it expires: every call after that answers 401.' }),
        session: z.string().optional().meta({ description: 'The one session it acts on, when it is scoped to one.' }),
      })
      .optional()
      .meta({ description: 'Present for a token the daemon minted (signed, expiring, revocable); a token of the token file has none.' }),
  })
  .meta({ id: 'Identity', description: 'Who the token is, and what it may do.' });
export type Identity = z.infer<typeof Identity>;

// Minted tokens

export const TokenId = z.string().meta({
  id: 'TokenId',
  description:
    "A minted token's id: when it expires (milliseconds since the epoch, in base 36), a dash and 24 hex digits. One that names no token of this owner answers 404.",
});

const TokenAccess = z.enum(['read', 'write']).meta({ description: 'What the token may do: read, or write (no more than the token that asks for it).' });
const TokenPort = z
  .int()
  .min(1)
  .max(65535)
  .meta({ description: 'The one port in the world the token reaches (a forward or a preview); it makes no call of the API.' });
const TokenSession = SessionRef.meta({ description: 'The one session (terminal, process or shell) the token acts on.' });

export const TokenCreate = z
  .strictObject({
    access: TokenAccess,
    ttlMs: z.int().min(1).meta({ description: "How long the token lasts, in milliseconds: at most the daemon's --max-token-ttl-ms." }),
    port: TokenPort.optional(),
    session: TokenSession.optional(),
  })
  .meta({ id: 'TokenCreate', description: "A token to mint for the caller's owner: its access, lifetime, and at most one of a port or a session." });

export const TokenInfo = z
  .object({
    id: TokenId,
    access: TokenAccess,
    expiresAt: z.string().meta({ description: 'When it expires (ISO 8601, UTC).' }),
    port: TokenPort.optional(),
    session: TokenSession.optional(),
  })
  .meta({ id: 'TokenInfo', description: 'A minted token, without its secret.' });

export const MintedToken = TokenInfo.extend({
  token: z.string().meta({ description: 'The token itself (ewm1.…), signed by the daemon; it is shown once and never kept.' }),
}).meta({ id: 'MintedToken' });

export const TokenList = z
  .object({
    tokens: z.array(TokenInfo).meta({ description: "The owner's minted tokens that have not expired and were not revoked, soonest to expire first." }),
  })
  .meta({ id: 'TokenList' });

// Shells

export const ShellDialectName = z
  .enum(['bash', 'pwsh'])
  .meta({ description: "The shell language: bash, or PowerShell 7 (pwsh, looked up on the PATH of the shell's environment)." });

export const ShellCreate = z
  .strictObject({
    dialect: ShellDialectName.optional().meta({ description: "The shell language; the daemon's defaultShell (pwsh on Windows, bash elsewhere) when absent." }),
    cwd: CreateCwd,
    env: TerminalEnv.optional(),
    requestId: RequestId.optional(),
    user: CreateUser,
    limits: SessionLimits.optional().meta({ description: "Limits of the shell's terminal session: every command it runs shares them." }),
  })
  .meta({ id: 'ShellCreate' });

export const ShellInfo = z
  .object({
    id: SessionId,
    dialect: ShellDialectName,
    cwd: z.string(),
    terminalId: SessionId.nullable().meta({ description: 'The terminal the shell runs on now (a new one after the shell exited); null between shells.' }),
    state: z.enum(['idle', 'running', 'open', 'closed']).meta({
      description:
        'idle: ready for a run; running: a call is in progress; open: the last run answered waiting_for_input, idle_timeout or wait_limit and awaits send, wait or interrupt; closed.',
    }),
    createdAt: z.string(),
  })
  .meta({ id: 'ShellInfo' });

export const ShellList = z.object({ shells: z.array(ShellInfo) }).meta({ id: 'ShellList' });

/** How long a run may last and how much of its output one answer holds. */
const RunLimits = {
  timeoutMs: z.int().min(1).max(MAX_TIMER_DELAY_MS).optional().meta({ description: 'Interrupt the command (SIGINT) after this long: reason timeout.' }),
  idleTimeoutMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_DELAY_MS)
    .optional()
    .meta({ description: 'Answer idle_timeout after this much silence, leaving the command running.' }),
  waitMs: z
    .int()
    .min(1)
    .max(MAX_TIMER_DELAY_MS)
    .optional()
    .meta({ description: 'Answer wait_limit after this long, whatever the output, leaving the command running.' }),
  maxOutputBytes: z
    .int()
    .min(2)
    .max(64 * 1024 * 1024)
    .optional()
    .meta({ description: 'Output one answer holds at most (default 1 MiB): beyond it the head and tail are kept and a line counts the bytes cut.' }),
};

export const ShellRun = z
  .strictObject({
    command: z
      .string()
      .min(1)
      .max(1024 * 1024),
    ...RunLimits,
    requestId: RequestId.optional().meta({
      description:
        "Makes the run one a caller can ask for again: a caller going away leaves it running instead of interrupting it, and a run with the same requestId (the SDK's resend after a reconnect, a takeover's included) answers that run instead of starting another.",
    }),
  })
  .meta({ id: 'ShellRun' });
/** A send or wait answers within the run's output bound. */
const { maxOutputBytes: _runOnly, ...WaitLimits } = RunLimits;
export const ShellSend = z.strictObject({ input: z.string().max(1024 * 1024), ...WaitLimits }).meta({ id: 'ShellSend' });
export const ShellWait = z.strictObject({ ...WaitLimits }).meta({ id: 'ShellWait' });

export const RunResult = z
  .object({
    output: z.string().meta({ description: 'Output since the previous answer of this run, as text: escape sequences removed, line ends as \n.' }),
    exitCode: z.int().nullable(),
    signal: z.string().nullable(),
    reason: z.enum(['completed', 'waiting_for_input', 'idle_timeout', 'wait_limit', 'timeout', 'canceled', 'shell_exited']),
    durationMs: z.number(),
    truncated: z.boolean(),
    waitingFor: z.object({ processGroupId: z.int(), command: z.string().optional() }).nullable(),
    outputStart: z.int().min(0).meta({ description: "Offset of the output's first byte in the terminal's output stream." }),
    outputEnd: z.int().min(0),
    terminalId: SessionId.nullable().meta({ description: 'The terminal whose output stream the offsets count.' }),
    usage: SessionUsage.extend({
      peakScope: z.enum(['run', 'session']).meta({
        description: "run: peakMemoryBytes is this run's (reset when it started); session: the kernel cannot reset it here, so it is the shell's peak.",
      }),
    })
      .optional()
      .meta({ description: "What the run used so far: cpu and the limits hit over the run, where the shell's cgroup keeps counters." }),
  })
  .meta({ id: 'RunResult' });

/**
 * How many runs a shell keeps for its list, and how much of each run's command and output: at most about
 * 640 Ki characters a shell, of the order of its terminal's ring.
 */
export const SHELL_RUNS_KEPT = 32;
export const SHELL_RUN_OUTPUT_CHARS = 16 * 1024;
export const SHELL_RUN_COMMAND_CHARS = 4 * 1024;

export const ShellRunRecord = z
  .object({
    command: z.string().meta({ description: `The command as run, cut to its first ${SHELL_RUN_COMMAND_CHARS} characters.` }),
    state: z.enum(['running', 'completed', 'waiting_for_input', 'idle_timeout', 'wait_limit', 'timeout', 'canceled', 'shell_exited']).meta({
      description:
        "running: a call on the run is in progress; otherwise the reason of the run's last answer (see RunResult): completed, " +
        'waiting_for_input, idle_timeout and wait_limit (the run is open), timeout and canceled (interrupted), shell_exited.',
    }),
    exitCode: z.int().nullable(),
    signal: z.string().nullable(),
    waitingFor: RunResult.shape.waitingFor,
    output: z.string().meta({
      description: `What the run printed over all its answers, as text (escape sequences and the shell's markers removed); past ${SHELL_RUN_OUTPUT_CHARS} characters only the end is kept.`,
    }),
    truncated: z.boolean().meta({ description: 'Output was cut: by an answer of the run (maxOutputBytes), or here, to its end.' }),
    startedAt: z.string(),
    durationMs: z.number().meta({ description: "From the run's call to its last answer so far." }),
  })
  .meta({ id: 'ShellRunRecord' });

export const ShellHistory = z
  .object({
    runs: z.array(ShellRunRecord).meta({ description: `The shell's runs, oldest first: the last ${SHELL_RUNS_KEPT}.` }),
    dropped: z.int().min(0).meta({ description: 'Earlier runs no longer kept.' }),
  })
  .meta({ id: 'ShellHistory' });

/** A TCP port in the world. */
export const Port = z.int().min(1).max(65535).meta({ description: 'A TCP port on 127.0.0.1 in the world, 1 to 65535.' });

export const ForwardRef = z
  .string()
  .meta({ description: 'A port forward stream, as port.connect numbered it; one that names nothing of this owner answers 404.' });

export const PortConnect = z.strictObject({ port: Port }).meta({ id: 'PortConnect' });
export const Forward = z
  .object({
    id: ForwardRef,
    port: Port,
  })
  .meta({
    id: 'Forward',
    description:
      "A connection to a port in the world, made as the owner's OS user: its bytes from the world are the stream {kind: 'forward', id, stream: 'output'} of the WebSocket, its bytes to the world go in write frames; see the WebSocket protocol.",
  });
export const ForwardShutdown = z
  .strictObject({
    offset: z
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .meta({ description: 'The end of what was sent to the world: its write side is shut once every byte before it is written.' }),
  })
  .meta({ id: 'ForwardShutdown' });
export const ForwardClose = z
  .strictObject({
    reset: z.boolean().default(false).meta({ description: 'Reset the connection (RST) rather than close it.' }),
  })
  .meta({ id: 'ForwardClose' });

export const Empty = z.strictObject({});
export const Ok = z.object({ ok: z.literal(true) }).meta({ id: 'Ok' });

/** A path in the execution world: absolute, or relative to `cwd`. */
export const FsPath = z
  .string()
  .min(1, { error: 'path must be a non-empty string' })
  .max(4096)
  .refine(noNul, { error: 'paths must not contain a NUL character' })
  .meta({ description: 'A path in the execution world: absolute, or relative to cwd.' });

const FsCwd = z
  .string()
  .min(1)
  .max(4096)
  .refine(noNul, { error: 'cwd must not contain a NUL character' })
  .refine((cwd) => cwd.startsWith('/') || /^[A-Za-z]:[\\/]/.test(cwd), { error: 'cwd must be an absolute path' })
  .meta({ description: 'The absolute directory a relative path is resolved against; a relative path without it answers FS_NOT_FOUND.' });

/** Where a filesystem call acts: the path (a target's key, or any path) and, for messages, the path as first asked for. */
const FsPathRef = {
  path: FsPath,
  cwd: FsCwd.optional(),
  displayPath: z
    .string()
    .max(4096)
    .refine(noNul, { error: 'displayPath must not contain a NUL character' })
    .optional()
    .meta({ description: "The path as the caller first asked for it, for messages; the resolved path's own when absent." }),
};

export const FsTarget = z
  .object({
    targetKey: z.string().meta({ description: "Opaque identity: the file's real path in the world. The same file by any path has the same key." }),
    displayPath: z.string().meta({ description: 'The absolute path as asked for, not resolved through links.' }),
  })
  .meta({ id: 'FsTarget' });

export const FsVersion = z.string().max(256).meta({ description: 'Opaque freshness token; compare it, never parse it.' });

export const FsInfo = z
  .object({ version: FsVersion, type: z.enum(['file', 'directory', 'other']), size: z.int().min(0).optional() })
  .meta({ id: 'FsInfo', description: 'What a path leads to, links followed.' });

export const FsPathInfo = z
  .object({ version: FsVersion, type: z.enum(['file', 'directory', 'symlink', 'other']), size: z.int().min(0).optional() })
  .meta({ id: 'FsPathInfo', description: 'The path entry itself: a final link is not followed.' });

export const FsResolve = z
  .strictObject({
    path: FsPath,
    cwd: FsCwd.optional(),
    readTextMaxBytes: z
      .int()
      .min(0)
      .max(MAX_READ_BYTES)
      .optional()
      .meta({ description: "Also answer the file's text when it is a text file of at most this many bytes (a read in the same round trip)." }),
  })
  .meta({ id: 'FsResolve' });

export const FsResolved = z
  .object({
    target: FsTarget,
    info: FsInfo.nullable().meta({ description: 'What the target is at the moment it was resolved; null when nothing is there.' }),
    text: z
      .string()
      .nullable()
      .meta({ description: 'The text read with the same open file as info, when readTextMaxBytes asked for it and the file is text within that size.' }),
  })
  .meta({ id: 'FsResolved' });

export const FsRef = z.strictObject(FsPathRef).meta({ id: 'FsRef' });
export const FsStatResult = z.object({ info: FsInfo.nullable() }).meta({ id: 'FsStatResult' });
export const FsLstat = z.strictObject({ path: FsPath, cwd: FsCwd.optional() }).meta({ id: 'FsLstat' });
export const FsLstatResult = z.object({ info: FsPathInfo.nullable() }).meta({ id: 'FsLstatResult' });
export const FsText = z.object({ text: z.string() }).meta({ id: 'FsText' });

export const FsDirEntry = z
  .object({
    name: z.string(),
    type: z.enum(['file', 'directory', 'other']),
    target: FsTarget,
    version: FsVersion.optional(),
    size: z.int().min(0).optional(),
  })
  .meta({ id: 'FsDirEntry' });
export const FsListing = z.object({ entries: z.array(FsDirEntry) }).meta({ id: 'FsListing' });

export const FsWriteIntent = z
  .discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('createIfAbsent') }),
    z.strictObject({ kind: z.literal('replaceIfVersion'), version: FsVersion }),
  ])
  .meta({ id: 'FsWriteIntent', description: 'createIfAbsent: only when nothing is there; replaceIfVersion: only while the file is at that version.' });

export const FsWrite = z
  .strictObject({ ...FsPathRef, content: z.string(), expected: FsWriteIntent.optional() })
  .meta({ id: 'FsWrite', description: 'Replace the whole file with content, atomically; without expected, unconditionally.' });

export const FsWriteOutcome = z
  .object({
    operation: z.enum(['create', 'update']),
    version: FsVersion,
    before: z.string().nullable().meta({ description: 'The prior text, LF-normalised; null for a create, or when it is not text or too large.' }),
    after: z.string().meta({ description: 'The text written, LF-normalised.' }),
  })
  .meta({ id: 'FsWriteOutcome' });

/** What a write answers on the wire: the text written is the caller's own, so it is not sent back (the SDK rebuilds `after`). */
export const FsWriteResult = FsWriteOutcome.omit({ after: true }).meta({ id: 'FsWriteResult' });

export const FsEdit = z
  .strictObject({
    ...FsPathRef,
    edit: z.strictObject({ oldString: z.string(), newString: z.string(), replaceAll: z.boolean().default(false) }),
    expected: z.strictObject({ version: FsVersion }).optional(),
  })
  .meta({
    id: 'FsEdit',
    description: "Replace literal text (matched with line ends as LF; the file's CRLF style is kept); guarded by a version when expected is given.",
  });

export const FsEditOutcome = z.object({ version: FsVersion, before: z.string(), after: z.string() }).meta({ id: 'FsEditOutcome' });

export const FsMkdir = z
  .strictObject({
    path: FsPath,
    cwd: FsCwd.optional(),
    parents: z.boolean().default(true).meta({ description: 'Make missing parents too, and succeed when the directory is already there (mkdir -p).' }),
  })
  .meta({ id: 'FsMkdir' });
export const FsMkdirResult = z
  .object({ path: z.string().meta({ description: "The directory's real path." }), created: z.boolean() })
  .meta({ id: 'FsMkdirResult' });

export const FsRemove = z
  .strictObject({
    path: FsPath,
    cwd: FsCwd.optional(),
    recursive: z.boolean().default(false).meta({ description: 'Remove a directory with everything in it.' }),
  })
  .meta({ id: 'FsRemove', description: 'Remove the entry at the path; a final link is removed itself, never what it leads to.' });
export const FsRemoveResult = z.object({ removed: z.boolean().meta({ description: 'false when nothing was there.' }) }).meta({ id: 'FsRemoveResult' });

export const FsRename = z
  .strictObject({
    from: FsPath,
    to: FsPath,
    cwd: FsCwd.optional(),
    overwrite: z.boolean().default(false).meta({ description: 'Replace what is at `to` (a file, or an empty directory for a directory).' }),
  })
  .meta({ id: 'FsRename', description: 'Move an entry (a final link itself) to a new path in the same filesystem, atomically.' });
export const FsRenameResult = z.object({ path: z.string().meta({ description: 'The new path.' }) }).meta({ id: 'FsRenameResult' });

const Sha256 = z
  .string()
  .regex(/^[0-9a-f]{64}$/, { error: 'sha256 must be 64 lowercase hexadecimal digits' })
  .meta({ description: 'A SHA-256 digest in lowercase hexadecimal.' });

export const FsDigest = z.strictObject({ path: FsPath, cwd: FsCwd.optional() }).meta({ id: 'FsDigest' });
export const FsDigestResult = z
  .object({ path: z.string(), size: z.int().min(0), sha256: Sha256, version: FsVersion })
  .meta({ id: 'FsDigestResult', description: 'A regular file: its size, SHA-256 and version, of one open file.' });

export const UploadId = z
  .string()
  .meta({ id: 'UploadId', description: 'An upload (u_…); one that names no upload of this owner, whatever its shape, answers 404.' });

export const UploadParams = z.strictObject({ id: UploadId });

export const UploadCreate = z
  .strictObject({
    path: FsPath,
    cwd: FsCwd.optional(),
    overwrite: z.boolean().default(true).meta({ description: 'Replace a file already at the path when the upload completes.' }),
    mode: z
      .int()
      .min(0)
      .max(0o7777)
      .optional()
      .meta({ description: "The new file's permission bits; a replaced file's own are kept without it, a new file gets 0644." }),
  })
  .meta({ id: 'UploadCreate' });

export const Upload = z
  .object({
    id: UploadId,
    path: z.string().meta({ description: 'Where the file is published when the upload completes.' }),
    offset: z.int().min(0).meta({ description: 'The bytes received so far: the offset the next PUT of bytes must start at.' }),
  })
  .meta({ id: 'Upload', description: 'A file being uploaded: its bytes are staged beside the target until it completes.' });

export const UploadComplete = z
  .strictObject({
    size: z.int().min(0).optional().meta({ description: 'Refuse with FS_CHECKSUM_MISMATCH unless this many bytes were received.' }),
    sha256: Sha256.optional().meta({ description: 'Refuse with FS_CHECKSUM_MISMATCH unless the bytes have this digest.' }),
  })
  .meta({ id: 'UploadComplete' });

/** A byte count or offset in a query (the REST adapter turns its digits into a number, as the field says it is one). */
const QueryInt = z.int({ error: 'must be a non-negative integer' }).min(0, { error: 'must be a non-negative integer' }).max(Number.MAX_SAFE_INTEGER);

export const ContentQuery = z.strictObject({
  ...FsPathRef,
  offset: QueryInt.default(0).meta({ description: 'The first byte to send (a resumed download starts where the last one ended).' }),
  maxBytes: QueryInt.optional().meta({ description: 'Refuse with FS_TOO_LARGE, sending nothing, when the file is larger than this.' }),
  version: FsVersion.optional().meta({
    description: 'Refuse with FS_STALE_VERSION, sending nothing, unless the file is at this version (a resumed download of the same file).',
  }),
  digest: z
    .enum(['sha256'])
    .optional()
    .meta({ description: 'With offset 0 (and a file that is not empty): end the answer with the trailer X-Execworld-Sha256, the SHA-256 of the bytes sent.' }),
});

/** Where `PUT /v1/files/uploads/{id}` appends its body. */
/** The file `PUT /v1/files/content` writes, and its guard. */
export const WriteContentQuery = z.strictObject({
  ...FsPathRef,
  ifAbsent: z.boolean().optional().meta({ description: 'Only when nothing is there (createIfAbsent); not with ifVersion.' }),
  ifVersion: FsVersion.optional().meta({ description: 'Only while the file is at this version (replaceIfVersion); not with ifAbsent.' }),
});

export const UploadBytesQuery = z.strictObject({
  offset: QueryInt.meta({ description: "The upload's offset the body starts at; any other answers UPLOAD_OFFSET_MISMATCH." }),
});

/** The directory `GET` and `PUT /v1/files/archive` pack or unpack. */
export const ArchiveQuery = z.strictObject({ path: FsPath, cwd: FsCwd.optional() });

export const ArchiveUnpacked = z
  .object({
    path: z.string().meta({ description: "The directory's real path." }),
    entries: z.int().min(0).meta({ description: 'The entries the archive held.' }),
    warnings: z.array(z.object({ path: z.string(), message: z.string() })).meta({
      description: 'What was refused (a path leaving the directory, a link in the way, a device) or changed (a leading / taken off a path), the first 100.',
    }),
  })
  .meta({ id: 'ArchiveUnpacked' });

export const ListeningPort = z
  .object({
    port: z.number().int().min(1).max(65_535),
    address: z.string().meta({ description: 'The local address it listens on: 0.0.0.0 or :: for every address, 127.0.0.1, ::1, …' }),
    pid: z.number().int().meta({ description: 'A process of the session holding the listening socket.' }),
    session: SessionRef,
    kind: z.enum(['terminal', 'process']).meta({ description: "The session's kind; a shell's ports are its terminal's." }),
  })
  .meta({ id: 'ListeningPort', description: 'A TCP port a process of a session listens on; preview it at /v1/ports/{port}/.' });

export const PortList = z
  .object({
    supported: z
      .boolean()
      .meta({ description: 'False where the daemon cannot read which ports processes listen on (every platform but Linux): ports is then empty.' }),
    ports: z.array(ListeningPort),
  })
  .meta({ id: 'PortList' });
