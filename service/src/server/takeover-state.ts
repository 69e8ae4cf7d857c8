/**
 * What a daemon hands to its next image in a takeover (see
 * `docs/lifecycle.md`): its listening socket's descriptor and, per terminal,
 * what rebuilds the session on the descriptors and children the exec keeps.
 * It is written to a 0600 file in the state directory, read by the
 * rehearsal (`serve --takeover-check`) and then by the new image, which
 * removes it once it adopted everything.
 * @module
 */
import { closeSync, constants, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { schemas } from '@execworld/sdk/protocol';
import type { RingStream } from './streams.ts';

/** The layout of the state file a daemon writes; a new image refuses one it cannot read (the rehearsal says so, and the old one serves on). */
export const TAKEOVER_STATE_VERSION = 2;
/** The layouts this build reads: 1 held terminals only (its daemons refused a takeover while a process or a shell was held). */
const READABLE_VERSIONS: readonly number[] = [1, 2];

/** The largest state file read: rings are bounded, and so is the number of sessions an owner may hold. */
const MAX_STATE_BYTES = 1024 * 1024 * 1024;

const Limits = z.record(z.string(), z.number()).optional();

const Writer = z.object({ writer: z.string(), last: z.number().int(), recent: z.array(z.number().int()) });

const Exit = z.object({
  exitCode: z.number().int().nullable(),
  signal: z
    .string()
    .regex(/^SIG[A-Z0-9]+$/)
    .nullable() as unknown as z.ZodType<NodeJS.Signals | null>,
});

/** An output ring as a takeover keeps it: the retained bytes (base64) from `start`, and how far readers had read. */
const Ring = z.object({ start: z.number().int().nonnegative(), consumed: z.number().int().nonnegative(), data: z.string() });

/** A terminal session as the previous image held it. */
const TerminalRecord = z.object({
  id: z.string().regex(/^t_[\w-]+$/),
  owner: z.string(),
  createdAt: z.string(),
  argv: z.array(z.string()),
  cwd: z.string(),
  rows: z.number().int().positive(),
  cols: z.number().int().positive(),
  answerQueries: z.boolean(),
  limits: Limits,
  /** Its output ring. */
  ring: Ring,
  writers: z.array(Writer),
  /** Running: what the provider adopts it from (its child, its master descriptor, its cell). */
  terminal: z
    .object({
      pid: z.number().int().positive(),
      fd: z.number().int().min(3),
      device: z.string(),
      graceMs: z.number().int().nonnegative(),
      cellKey: z.string(),
      cellPath: z.string().optional(),
    })
    .optional(),
  /** Ended, its facts retained: how it ended, and when. */
  ended: z.object({ exit: Exit, exitedAt: z.string(), finishedAt: z.string() }).optional(),
});

/** An upload under way: its bytes are on disk, its target's directory and its stage held by descriptors the exec keeps. */
const UploadRecord = z.object({
  id: z.string().regex(/^u_[\w-]+$/),
  owner: z.string(),
  root: z.string().optional(),
  stage: z.object({
    path: z.string(),
    identity: z.object({ directory: z.string(), name: z.string(), dev: z.string(), ino: z.string() }),
    directory: z.object({ fd: z.number().int().min(3), real: z.string() }),
    name: z.string().min(1),
    stage: z.object({ name: z.string().min(1), fd: z.number().int().min(3), real: z.string() }),
    overwrite: z.boolean(),
    mode: z.number().int().nonnegative().optional(),
  }),
});

/** A managed process as the previous image held it. */
const ProcessRecord = z.object({
  id: z.string().regex(/^p_[\w-]+$/),
  owner: z.string(),
  createdAt: z.string(),
  argv: z.array(z.string()),
  cwd: z.string(),
  /** Its program's pid, running or not. */
  pid: z.number().int(),
  stdio: z.object({ stdin: z.enum(['ignore', 'pipe', 'data']), stdout: z.enum(['pipe', 'inherit']), stderr: z.enum(['pipe', 'inherit']) }),
  graceMs: z.number().int().nonnegative(),
  limits: Limits,
  /** The rings of the piped streams. */
  rings: z.object({ stdout: Ring.optional(), stderr: Ring.optional() }),
  writers: z.array(Writer),
  /** A command.run's: its caller went away with the previous image, so the command ends (as it would had the caller gone). */
  endsWithCaller: z.boolean(),
  /** Running: its child, the descriptors of its pipes still open (a closed one is absent), its cell. */
  process: z
    .object({
      pid: z.number().int().positive(),
      stdin: z.number().int().min(3).optional(),
      stdout: z.number().int().min(3).optional(),
      stderr: z.number().int().min(3).optional(),
      cellKey: z.string(),
      cellPath: z.string().optional(),
    })
    .optional(),
  /** Ended, its facts retained: how it ended, and when. */
  ended: z.object({ exit: Exit, exitedAt: z.string(), finishedAt: z.string() }).optional(),
});

/** The state of a shell's engine (see PersistentShell.takeoverSnapshot): its session, and the run still open with its capture. */
const ShellEngine = z.object({
  session: z
    .object({
      nonce: z.string(),
      offset: z.number().int().nonnegative(),
      atPrompt: z.boolean(),
      answeredAtPrompt: z.boolean(),
      answered: z.boolean(),
      broken: z.boolean(),
      tail: z.string(),
    })
    .optional(),
  run: z
    .object({
      capture: z.object({
        runNonce: z.string(),
        sessionNonce: z.string(),
        maxBytes: z.number().int().positive(),
        rows: z.number().int().positive().optional(),
        state: z.enum(['seek-start', 'start-line', 'body', 'ended']),
        pending: z.string(),
        pendingAt: z.number().int().nonnegative(),
        head: z.string(),
        tail: z.string(),
        cut: z.number().int().nonnegative(),
        outputStart: z.number().int().nonnegative(),
        lineEnd: z.object({ status: z.number().int(), cutShort: z.boolean() }).optional(),
        carry: z.object({ bytes: z.string(), text: z.string() }),
      }),
      waitToken: z.string().optional(),
      answeredWait: z.string().optional(),
    })
    .optional(),
});

/** A persistent shell as the previous image held it: its terminal goes over among the terminals, by id. */
const ShellRecord = z.object({
  id: z.string().regex(/^s_[\w-]+$/),
  owner: z.string(),
  /** What its terminals are made as: the owner's access, the OS user it is mapped to, its root. */
  principal: z.object({
    access: z.enum(['read', 'write']),
    runAs: z.object({ name: z.string(), uid: z.number().int(), gid: z.number().int(), home: z.string(), shell: z.string() }).optional(),
    root: z.string().optional(),
  }),
  createdAt: z.string(),
  spec: z.object({
    dialect: z.enum(['bash', 'pwsh']),
    cwd: z.string(),
    env: z.record(z.string(), z.string()).optional(),
    user: z.string().optional(),
    limits: Limits,
  }),
  shellPath: z.string().optional(),
  terminalId: z.string().nullable(),
  terminalIds: z.array(z.string()),
  runs: z.array(schemas.ShellRunRecord),
  dropped: z.number().int().nonnegative(),
  /** The run last started with a requestId, and its last answer (see ShellRegistry.run). */
  request: z.object({ requestId: z.string(), answer: schemas.RunResult.optional() }).optional(),
  engine: ShellEngine,
});

export const TakeoverState = z.object({
  version: z.union([z.literal(1), z.literal(2)]),
  /** The daemon's pid, which the exec keeps. */
  pid: z.number().int().positive(),
  /** When the previous image stopped reading its sessions (ms since the epoch). */
  handedOverAt: z.number(),
  /** When the daemon started (ms since the epoch), which every image after a takeover reports as its start. */
  startedAt: z.number().optional(),
  /** How many takeovers this daemon went through before this one. */
  takeovers: z.number().int().nonnegative(),
  /** The listening socket's descriptor. */
  listenFd: z.number().int().min(3),
  terminals: z.array(TerminalRecord),
  processes: z.array(ProcessRecord).default([]),
  shells: z.array(ShellRecord).default([]),
  /** Uploads under way (absent: none, or a previous image that handed over none). */
  uploads: z.array(UploadRecord).optional(),
  /**
   * The build that wrote this state, for a new image that fails before it
   * serves to give everything back to (see `docs/lifecycle.md`): how it is
   * run, and the state versions it reads. Absent from builds without rollback.
   */
  previous: z.object({ argv: z.array(z.string()).min(1), reads: z.array(z.number().int()) }).optional(),
  /** Set by a new image that gave this state back: which build failed, and why. The build that takes it back never rolls back again. */
  rollback: z.object({ entry: z.string(), reason: z.string() }).optional(),
});

export type TakeoverState = z.infer<typeof TakeoverState>;
export type TerminalRecord = z.infer<typeof TerminalRecord>;
export type ProcessRecord = z.infer<typeof ProcessRecord>;
export type ShellRecord = z.infer<typeof ShellRecord>;
export type RingRecord = z.infer<typeof Ring>;

/** What a takeover keeps of `ring`: every byte it retains, and how far its readers had read. */
export function ringRecord(ring: RingStream): RingRecord {
  const held = ring.read(ring.start, ring.end - ring.start);
  return { start: held.from, consumed: ring.consumedTo, data: held.data.toString('base64') };
}

/** Makes the empty `ring` hold what {@link ringRecord} kept. */
export function restoreRing(ring: RingStream, record: RingRecord): void {
  ring.restore(record.start, Buffer.from(record.data, 'base64'), record.consumed);
}

/** A state file that cannot be taken, with the reason in an operator's words. */
export class TakeoverStateError extends Error {
  override name = 'TakeoverStateError';
}

/** A takeover the daemon cannot make now (a session it cannot hand over), in an operator's words. */
export class TakeoverRefusedError extends Error {
  override name = 'TakeoverRefusedError';
}

/** The state file of the daemon `pid` in `stateDir`. */
export function takeoverStatePath(stateDir: string, pid = process.pid): string {
  return join(stateDir, `takeover-${pid}.json`);
}

/** Writes `state` to its file, 0600, whole or not at all (a temporary file renamed). */
export function writeTakeoverState(stateDir: string, state: TakeoverState): string {
  return writeStateFile(takeoverStatePath(stateDir, state.pid), state);
}

/**
 * Marks the state file at `path` given back by the build at `entry`, which
 * failed for `reason`: the file as it was read, every field kept (a previous
 * build may know fields this one does not), with `rollback` set.
 * @throws when it cannot be read or written (the caller has nothing else to give back then).
 */
export function markRolledBack(path: string, entry: string, reason: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  let text: string;
  try {
    text = readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
  const value = JSON.parse(text) as Record<string, unknown>;
  return writeStateFile(path, { ...value, rollback: { entry, reason } });
}

/** The state versions this build reads. */
export function readableVersions(): number[] {
  return [...READABLE_VERSIONS];
}

function writeStateFile(path: string, state: object): string {
  const temporary = `${path}.tmp`;
  rmSync(temporary, { force: true });
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    const bytes = Buffer.from(JSON.stringify(state), 'utf8');
    for (let written = 0; written < bytes.length;) written += writeSync(fd, bytes, written);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, path);
  return path;
}

/**
 * The state in the file at `path`.
 * @throws {TakeoverStateError} naming what is wrong with it: unreadable, too large, not JSON, another version, a bad field.
 */
export function readTakeoverState(path: string): TakeoverState {
  let text: string;
  try {
    const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      text = readFileSync(fd, 'utf8');
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    throw new TakeoverStateError(`cannot read the takeover state ${path}: ${(error as Error).message}`);
  }
  if (text.length > MAX_STATE_BYTES) throw new TakeoverStateError(`the takeover state ${path} is larger than ${MAX_STATE_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (_error) {
    throw new TakeoverStateError(`the takeover state ${path} is not JSON`);
  }
  const version = (value as { version?: unknown } | null)?.version;
  if (typeof version !== 'number' || !READABLE_VERSIONS.includes(version))
    throw new TakeoverStateError(`the takeover state ${path} is of version ${String(version)}; this build reads versions ${READABLE_VERSIONS.join(' and ')}`);
  const parsed = TakeoverState.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TakeoverStateError(`the takeover state ${path} is not valid: ${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}
