/**
 * The operation table: every call the daemon serves, once. REST routes, the
 * WebSocket call names, the OpenAPI document, the auth test and the SDK client
 * are all derived from it, and so are the semantics of a call: whether it may
 * be resent after a reconnect (`idempotent`), whether it may wait for an
 * event (`waits`) and whether a read-only token may make it (`access`).
 *
 * It is one file on purpose, however many operations it lists (about 400
 * lines today): one place to read every call the daemon serves.
 * @module
 */
import { z } from 'zod';
import { ARCHIVE_PATH, CONTENT_PATH, DIGEST_TRAILER, SIZE_HEADER, SKIPPED_TRAILER, UPLOADS_PATH, VERSION_HEADER } from '../fs/routes.ts';
import { ERROR_CODES, type ErrorCode } from './errors.ts';
import * as s from './schemas.ts';

/**
 * Whether a call may be sent again when the connection broke before its answer
 * came, without its effect changing: the SDK resends only such calls after a
 * reconnect (and fails any other with OUTCOME_UNKNOWN).
 *
 * - `true`: always. Reads and waits; and actions whose repeat is no new action:
 *   terminate (already ending), resize (to the same size), closing stdin (a repeat
 *   is success), delete (a repeat after one that applied answers NOT_FOUND: the
 *   session is gone either way).
 * - `false`: never. A second signal is a second signal.
 * - `{ when: [...fields] }`: only when the params carry every one of these
 *   fields, by which the daemon recognises the repeat: a create's `requestId`
 *   (the repeat answers the session the first one made), an input's `writer`
 *   and `seq` (the repeat is not applied again).
 */
export type Idempotency = boolean | { readonly when: readonly string[] };

/**
 * What a token must be allowed to do to make a call. `read`: it changes
 * nothing of the owner's sessions, files or uploads, and takes nothing from
 * anyone else watching them (lists, gets, output reads and waits, screens,
 * file reads; a read token's reads and acks free no ring room, so they never
 * let a program run past the owner's own readers). `write`: everything else,
 * which a token of `access=read` is refused with READ_ONLY.
 */
export type Access = 'read' | 'write';

/**
 * What a call's JSON body carries, which bounds its size. `control`: ids,
 * paths, sizes, signals and options. `program`: a program to start (its argv
 * and environment, which exec takes up to ARG_MAX, 2 MiB on Linux) or input
 * for one (terminal input, a shell's command or send: at most 1 MiB of text,
 * up to six bytes a character as JSON). `data`: process stdin, a process's
 * stdin data, file text; only the daemon's --max-body-bytes bounds it.
 * `bytes`: not JSON but raw bytes (see {@link ByteCarriage}), streamed to
 * their destination as they arrive, so no size bounds them.
 */
export type BodyKind = 'control' | 'program' | 'data' | 'bytes';

/**
 * The largest body of each kind, in bytes; the daemon's --max-body-bytes
 * caps every one. A body past its call's limit is refused with 413
 * PAYLOAD_TOO_LARGE, before it is read when its Content-Length says so.
 */
export const BODY_LIMITS: Readonly<Record<BodyKind, number>> = {
  control: 64 * 1024,
  program: 8 * 1024 * 1024,
  data: Number.POSITIVE_INFINITY,
  bytes: Number.POSITIVE_INFINITY,
};

/** The media types of the bytes a call carries. */
export type ByteMediaType = 'application/octet-stream' | 'application/x-tar';

/** An answer of bytes, and what comes with them. */
export interface ByteAnswer {
  readonly mediaType: ByteMediaType;
  readonly description: string;
  /** Headers sent before the bytes (lower-case names). */
  readonly headers: Readonly<Record<string, { readonly description: string; readonly schema: z.ZodType }>>;
  /** Trailers sent after the bytes, when the answer is chunked (lower-case names), with what each says. */
  readonly trailers: Readonly<Record<string, string>>;
}

/**
 * A call that carries bytes rather than JSON: its body, its answer or both
 * stream with TCP's flow control, so any size passes in bounded memory. Such
 * calls are made over REST only; the WebSocket carries JSON calls and output
 * streams.
 */
export interface ByteCarriage {
  /** The media type of the body, when the call sends bytes. */
  readonly body?: ByteMediaType;
  /**
   * The body is taken whole before the call acts (a text written in one
   * step): it is held within --max-body-bytes and counted in the budget of
   * held bodies, as a JSON body is. Otherwise it streams, unbounded.
   */
  readonly whole?: boolean;
  /** The answer, when it is bytes rather than the JSON of `result`. */
  readonly answer?: ByteAnswer;
}

export interface OperationSpec {
  /** Call name on the WebSocket, e.g. `terminal.create`. */
  readonly name: string;
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** REST path with `{param}` segments. */
  readonly path: string;
  readonly summary: string;
  /** What the summary leaves out, for the OpenAPI document. */
  readonly description: string | undefined;
  /** Path parameters and their schemas, in path order. */
  readonly params: Readonly<Record<string, z.ZodType>>;
  /** Query (GET) or body (POST) fields. */
  readonly input: z.ZodObject;
  readonly result: z.ZodType;
  /** HTTP status of success. */
  readonly status: 200 | 201;
  /** False only for health. */
  readonly auth: boolean;
  /** Whether a read-only token may make the call; see {@link Access}. */
  readonly access: Access;
  /** What its body carries, which bounds its size; see {@link BODY_LIMITS}. */
  readonly body: BodyKind;
  /**
   * Every error code the operation can answer over REST, in catalog order:
   * the ones its own work can give and the ones any request of its shape can
   * get (a bad token, an unknown id, a body too large, headers past Node's limit).
   */
  readonly errors: readonly ErrorCode[];
  /** Whether the call may be resent after a reconnect; see {@link Idempotency}. */
  readonly idempotent: Idempotency;
  /**
   * Whether the call may wait for an event (a long poll, a done or wait, a
   * terminate that answers once nothing runs, a PATH lookup): on the WebSocket
   * the daemon stops waiting when its caller's connection closes (and counts it
   * against the calls one connection may have in flight); the SDK gives it no
   * request timeout.
   */
  readonly waits: boolean;
  /** For a call that carries bytes, what they are; such a call is made over REST only. */
  readonly bytes: ByteCarriage | undefined;
}

/** Whether a call of `spec` with `params` may be resent after a reconnect without changing its effect. */
export function isIdempotentCall(spec: Pick<OperationSpec, 'idempotent'>, params: Readonly<Record<string, unknown>>): boolean {
  const rule = spec.idempotent;
  if (typeof rule === 'boolean') return rule;
  return rule.when.every((field) => params[field] !== undefined);
}

/** Any request can be malformed, have headers past Node's limit or too slow, or meet a fault. */
const EVERY_REQUEST = ['INVALID_ARGUMENT', 'HEADERS_TOO_LARGE', 'CLIENT_TIMEOUT', 'INTERNAL'] as const satisfies readonly ErrorCode[];

/** The codes any request with this method, path, auth and access can get, whatever the operation does. */
function requestErrors(method: OperationSpec['method'], path: string, auth: boolean, access: Access, body: BodyKind): ErrorCode[] {
  const codes: ErrorCode[] = [...EVERY_REQUEST];
  // A minted token may lapse (UNAUTHORIZED) or be scoped to one session or one port, which no call of another reaches.
  if (auth) codes.push('UNAUTHORIZED', 'TOKEN_SCOPE');
  if (auth && access === 'write') codes.push('READ_ONLY');
  // An id that names nothing of this owner, or a segment past the router's limit.
  if (path.includes('{')) codes.push('NOT_FOUND', 'URI_TOO_LONG');
  // fastify reads a body on POST and DELETE (the DELETE routes ignore it, but it must parse), within its
  // call's limit and the daemon's budget for the bodies of all requests.
  // Bytes stream where they go, neither parsed nor held: only their media type can be wrong.
  if (body === 'bytes') codes.push('UNSUPPORTED_MEDIA_TYPE');
  else if (method !== 'GET') codes.push('PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'LIMIT_EXCEEDED');
  return codes;
}

/** `codes` without repeats, in the catalog's order, so documents and tests read the same. */
function catalogOrder(codes: readonly ErrorCode[], order: readonly ErrorCode[]): ErrorCode[] {
  return order.filter((code) => codes.includes(code));
}

const id = { id: s.SessionRef };
/**
 * What any filesystem call can answer: the path is not there or not reachable,
 * or the system failed; and UNSUPPORTED for an owner that runs as another OS
 * user. (A call whose caller went away stops with FS_ABORTED, which nobody is
 * there to get.)
 */
const FS_READ_ERRORS = ['FS_NOT_FOUND', 'FS_PERMISSION_DENIED', 'FS_IO_ERROR'] as const satisfies readonly ErrorCode[];
const stream = { id: s.SessionRef, stream: s.StreamName };
/** What packing or unpacking a directory can meet. */
const ARCHIVE_ERRORS = ['FS_NOT_FOUND', 'FS_NOT_DIRECTORY', 'FS_PERMISSION_DENIED', 'FS_IO_ERROR'] as const satisfies readonly ErrorCode[];
/** The result of a call that answers bytes (see {@link ByteAnswer}), which no JSON schema describes. */
const BYTES = z.never();

function op<
  const Name extends string,
  Input extends z.ZodObject,
  Result extends z.ZodType,
  Params extends Record<string, z.ZodType>,
  Bytes extends ByteCarriage | undefined = undefined,
>(spec: {
  name: Name;
  method: OperationSpec['method'];
  path: string;
  summary: string;
  description?: string;
  params?: Params;
  input?: Input;
  result: Result;
  status?: 200 | 201;
  auth?: boolean;
  /** The codes the operation's own work can answer; the request's are added. */
  errors?: readonly ErrorCode[];
  /** Said of every operation: no default. Conditional idempotency names fields of the input. */
  idempotent: boolean | { readonly when: readonly (keyof Input['shape'] & string)[] };
  waits: boolean;
  /** Said of every operation: no default, so a new one is never writable by a read token by omission. */
  access: Access;
  /** What its body carries. @default 'control', or 'bytes' when `bytes.body` says their media type */
  body?: BodyKind;
  bytes?: Bytes;
}) {
  const auth = spec.auth ?? true;
  const body = spec.body ?? (spec.bytes?.body === undefined ? 'control' : 'bytes');
  return {
    name: spec.name,
    method: spec.method,
    path: spec.path,
    summary: spec.summary,
    description: spec.description,
    params: (spec.params ?? {}) as Params,
    input: (spec.input ?? s.Empty) as Input,
    result: spec.result,
    status: spec.status ?? 200,
    auth,
    errors: catalogOrder([...requestErrors(spec.method, spec.path, auth, spec.access, body), ...(spec.errors ?? [])], ERROR_CODES),
    idempotent: spec.idempotent,
    waits: spec.waits,
    access: spec.access,
    body,
    bytes: spec.bytes as Bytes,
  } satisfies OperationSpec;
}

export const OPERATIONS = {
  'health.get': op({
    name: 'health.get',
    method: 'GET',
    path: '/v1/health',
    summary: 'Daemon status, version and capabilities',
    result: s.Health,
    auth: false,
    idempotent: true,
    waits: false,
    access: 'read',
  }),

  'identity.get': op({
    name: 'identity.get',
    method: 'GET',
    path: '/v1/identity',
    summary: "The owner the token stands for, and whether it may act on the owner's sessions or only read them",
    result: s.Identity,
    idempotent: true,
    waits: false,
    access: 'read',
  }),

  'token.create': op({
    name: 'token.create',
    method: 'POST',
    path: '/v1/tokens',
    summary: 'Mint a lesser token for the owner: signed, expiring, revocable, perhaps scoped to one session or one port',
    description:
      "The token has no more access than the caller's and lasts at most --max-token-ttl-ms. Only a token of the token file mints: a minted token is " +
      'refused (TOKEN_SCOPE), so that one handed on cannot outlive its own revocation by minting others.',
    input: s.TokenCreate,
    result: s.MintedToken,
    status: 201,
    errors: ['LIMIT_EXCEEDED'],
    idempotent: false,
    waits: false,
    access: 'write',
  }),
  'token.list': op({
    name: 'token.list',
    method: 'GET',
    path: '/v1/tokens',
    summary: "List the owner's minted tokens that are still good",
    result: s.TokenList,
    idempotent: true,
    waits: false,
    access: 'write',
  }),
  'token.revoke': op({
    name: 'token.revoke',
    method: 'DELETE',
    path: '/v1/tokens/{id}',
    summary: 'Revoke a minted token of the owner: every call with it is refused, and its connections close, within a second',
    params: { id: s.TokenId },
    result: s.Ok,
    idempotent: true,
    waits: false,
    access: 'write',
  }),

  'executable.resolve': op({
    name: 'executable.resolve',
    method: 'POST',
    path: '/v1/executables/resolve',
    summary: 'Resolve a command to an executable path',
    input: s.ResolveRequest,
    result: s.ResolveResult,
    errors: ['EXECUTABLE_NOT_FOUND'],
    idempotent: true,
    waits: true,
    access: 'read',
    body: 'program',
  }),

  'terminal.create': op({
    name: 'terminal.create',
    method: 'POST',
    path: '/v1/terminals',
    summary: 'Start a process on a new terminal',
    input: s.TerminalCreate,
    result: s.TerminalInfo,
    status: 201,
    errors: ['CWD_NOT_FOUND', 'EXECUTABLE_NOT_FOUND', 'LIMIT_EXCEEDED', 'SHUTTING_DOWN', 'UNSUPPORTED'],
    idempotent: { when: ['requestId'] },
    waits: false,
    access: 'write',
    body: 'program',
  }),
  'terminal.list': op({
    name: 'terminal.list',
    method: 'GET',
    path: '/v1/terminals',
    summary: "List the owner's terminals",
    result: s.TerminalList,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'terminal.get': op({
    name: 'terminal.get',
    method: 'GET',
    path: '/v1/terminals/{id}',
    summary: 'One terminal',
    params: id,
    result: s.TerminalInfo,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'terminal.input': op({
    name: 'terminal.input',
    method: 'POST',
    path: '/v1/terminals/{id}/input',
    summary: "Write to a terminal's input",
    params: id,
    input: s.TerminalInput,
    result: s.InputResult,
    errors: ['TERMINAL_EXITED', 'TERMINAL_CLOSED', 'LIMIT_EXCEEDED'],
    idempotent: { when: ['writer', 'seq'] },
    waits: false,
    access: 'write',
    body: 'program',
  }),
  'terminal.resize': op({
    name: 'terminal.resize',
    method: 'POST',
    path: '/v1/terminals/{id}/resize',
    summary: 'Resize a terminal',
    description: "The answer is the terminal's facts without `usage`, whose cgroup reads would delay it (terminal.get has it).",
    params: id,
    input: s.TerminalResize,
    result: s.TerminalInfo,
    errors: ['TERMINAL_EXITED', 'TERMINAL_CLOSED'],
    idempotent: true,
    waits: false,
    access: 'write',
  }),
  'terminal.foreground': op({
    name: 'terminal.foreground',
    method: 'GET',
    path: '/v1/terminals/{id}/foreground',
    summary: 'The foreground process group and whether it waits for input',
    params: id,
    result: s.Foreground,
    errors: ['UNSUPPORTED'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'terminal.screen': op({
    name: 'terminal.screen',
    method: 'GET',
    path: '/v1/terminals/{id}/screen',
    summary: "The terminal's screen: text rows, cursor, alternate screen and title, at an exact output offset",
    params: id,
    result: s.Screen,
    errors: ['LIMIT_EXCEEDED'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'terminal.signal': op({
    name: 'terminal.signal',
    method: 'POST',
    path: '/v1/terminals/{id}/signal',
    summary: 'Signal the foreground process group',
    params: id,
    input: s.SignalRequest,
    result: s.SignalResult,
    errors: ['NO_FOREGROUND_GROUP', 'SIGNAL_REFUSED', 'UNSUPPORTED'],
    idempotent: false,
    waits: false,
    access: 'write',
  }),
  'terminal.output': op({
    name: 'terminal.output',
    method: 'GET',
    path: '/v1/terminals/{id}/output',
    summary: "Read a terminal's output from a byte offset (long poll)",
    params: id,
    input: s.OutputQuery,
    result: s.OutputRead,
    idempotent: true,
    waits: true,
    access: 'read',
  }),
  'terminal.done': op({
    name: 'terminal.done',
    method: 'GET',
    path: '/v1/terminals/{id}/done',
    summary: 'How the terminal ended (long poll)',
    params: id,
    input: s.WaitRequest.partial(),
    result: s.DoneResult,
    idempotent: true,
    waits: true,
    access: 'read',
  }),
  'terminal.terminate': op({
    name: 'terminal.terminate',
    method: 'POST',
    path: '/v1/terminals/{id}/terminate',
    summary: 'End the terminal session; answers once nothing of it runs',
    params: id,
    result: s.TerminalInfo,
    errors: ['CLEANUP_FAILED'],
    idempotent: true,
    waits: true,
    access: 'write',
  }),
  'terminal.delete': op({
    name: 'terminal.delete',
    method: 'DELETE',
    path: '/v1/terminals/{id}',
    summary: 'Terminate the terminal if needed and forget it',
    params: id,
    result: s.Ok,
    errors: ['CLEANUP_FAILED'],
    idempotent: true,
    waits: true,
    access: 'write',
  }),

  'process.create': op({
    name: 'process.create',
    method: 'POST',
    path: '/v1/processes',
    summary: 'Start a managed process tree',
    input: s.ProcessCreate,
    result: s.ProcessInfo,
    status: 201,
    errors: ['CWD_NOT_FOUND', 'EXECUTABLE_NOT_FOUND', 'SPAWN_FAILED', 'LIMIT_EXCEEDED', 'SHUTTING_DOWN'],
    idempotent: { when: ['requestId'] },
    waits: false,
    access: 'write',
    body: 'data',
  }),
  'process.list': op({
    name: 'process.list',
    method: 'GET',
    path: '/v1/processes',
    summary: "List the owner's processes",
    result: s.ProcessList,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'process.get': op({
    name: 'process.get',
    method: 'GET',
    path: '/v1/processes/{id}',
    summary: 'One process',
    params: id,
    result: s.ProcessInfo,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'process.stdin': op({
    name: 'process.stdin',
    method: 'POST',
    path: '/v1/processes/{id}/stdin',
    summary: "Write to a process's stdin pipe",
    params: id,
    input: s.StdinWrite,
    result: s.InputResult,
    errors: ['PROCESS_EXITED', 'LIMIT_EXCEEDED'],
    idempotent: { when: ['writer', 'seq'] },
    waits: false,
    access: 'write',
    body: 'data',
  }),
  'process.closeStdin': op({
    name: 'process.closeStdin',
    method: 'POST',
    path: '/v1/processes/{id}/stdin/close',
    summary: "Close a process's stdin pipe",
    params: id,
    result: s.Ok,
    errors: ['PROCESS_EXITED'],
    idempotent: true,
    waits: false,
    access: 'write',
  }),
  'process.output': op({
    name: 'process.output',
    method: 'GET',
    path: '/v1/processes/{id}/output/{stream}',
    summary: 'Read stdout or stderr bytes from an offset (long poll)',
    params: stream,
    input: s.OutputQuery,
    result: s.OutputRead,
    idempotent: true,
    waits: true,
    access: 'read',
  }),
  'process.collected': op({
    name: 'process.collected',
    method: 'GET',
    path: '/v1/processes/{id}/collected/{stream}',
    summary: "The seam's offset read of a collected stream",
    params: stream,
    input: s.CollectedQuery,
    result: s.CollectedRead,
    errors: ['STREAM_NOT_AVAILABLE'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'process.done': op({
    name: 'process.done',
    method: 'GET',
    path: '/v1/processes/{id}/done',
    summary: 'How the process ended (long poll)',
    params: id,
    input: s.WaitRequest.partial(),
    result: s.DoneResult,
    idempotent: true,
    waits: true,
    access: 'read',
  }),
  'process.wait': op({
    name: 'process.wait',
    method: 'POST',
    path: '/v1/processes/{id}/wait',
    summary: 'Wait until the whole process tree is gone',
    params: id,
    input: s.WaitRequest,
    result: s.WaitResult,
    idempotent: true,
    waits: true,
    access: 'read',
  }),
  'process.terminate': op({
    name: 'process.terminate',
    method: 'POST',
    path: '/v1/processes/{id}/terminate',
    summary: 'SIGTERM the tree now, SIGKILL after its grace',
    params: id,
    result: s.ProcessInfo,
    idempotent: true,
    waits: false,
    access: 'write',
  }),
  'process.delete': op({
    name: 'process.delete',
    method: 'DELETE',
    path: '/v1/processes/{id}',
    summary: 'Terminate the process tree if needed and forget it',
    params: id,
    result: s.Ok,
    idempotent: true,
    waits: true,
    access: 'write',
  }),

  'command.run': op({
    name: 'command.run',
    method: 'POST',
    path: '/v1/run',
    summary:
      'Run a command to completion as a process session (listed while it runs) and answer its exit, bounded output and duration; ' +
      'a caller that goes away ends it, and what it leaves running is ended with it',
    input: s.CommandRun,
    result: s.CommandResult,
    errors: ['CWD_NOT_FOUND', 'EXECUTABLE_NOT_FOUND', 'SPAWN_FAILED', 'LIMIT_EXCEEDED', 'SHUTTING_DOWN'],
    idempotent: false,
    waits: true,
    access: 'write',
    body: 'data',
  }),

  'shell.create': op({
    name: 'shell.create',
    method: 'POST',
    path: '/v1/shells',
    summary: 'Start a persistent shell; answers once it is ready',
    input: s.ShellCreate,
    result: s.ShellInfo,
    status: 201,
    errors: ['CWD_NOT_FOUND', 'EXECUTABLE_NOT_FOUND', 'SHELL_START_FAILED', 'LIMIT_EXCEEDED', 'SHUTTING_DOWN', 'UNSUPPORTED'],
    idempotent: { when: ['requestId'] },
    waits: true,
    access: 'write',
    body: 'program',
  }),
  'shell.list': op({
    name: 'shell.list',
    method: 'GET',
    path: '/v1/shells',
    summary: "List the owner's shells",
    result: s.ShellList,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'shell.get': op({
    name: 'shell.get',
    method: 'GET',
    path: '/v1/shells/{id}',
    summary: 'One shell',
    params: id,
    result: s.ShellInfo,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  // A read: it takes no answer from the run's caller and holds nothing. It is how a watcher follows a shell
  // without its terminal's raw stream, where the engine's markers are.
  'shell.history': op({
    name: 'shell.history',
    method: 'GET',
    path: '/v1/shells/{id}/history',
    summary: "The shell's recent runs: each command, its state or outcome, and its output as text",
    params: id,
    result: s.ShellHistory,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'shell.run': op({
    name: 'shell.run',
    method: 'POST',
    path: '/v1/shells/{id}/run',
    summary: 'Run a command in the shell; answers when it completed, waits for input, went idle, timed out, or the shell exited',
    params: id,
    input: s.ShellRun,
    result: s.RunResult,
    // A run after the shell exited starts a fresh one, which can fail as a create does.
    errors: ['SHELL_BUSY', 'CWD_NOT_FOUND', 'SHELL_START_FAILED', 'LIMIT_EXCEEDED'],
    // Asked again with its requestId, a run is answered, not started again.
    idempotent: { when: ['requestId'] },
    waits: true,
    access: 'write',
    body: 'program',
  }),
  'shell.send': op({
    name: 'shell.send',
    method: 'POST',
    path: '/v1/shells/{id}/send',
    summary: "Write input to the open run's program (a reply to its prompt) and wait as run does",
    params: id,
    input: s.ShellSend,
    result: s.RunResult,
    errors: ['SHELL_BUSY'],
    idempotent: false,
    waits: true,
    access: 'write',
    body: 'program',
  }),
  // A write although it changes nothing by itself: it holds the shell (another call answers SHELL_BUSY meanwhile),
  // takes the open run's answer, which nobody gets again, and interrupts the run (SIGINT) when its timeout passes
  // or its caller goes away. A reader follows a run through the shell's terminal output instead.
  'shell.wait': op({
    name: 'shell.wait',
    method: 'POST',
    path: '/v1/shells/{id}/wait',
    summary: 'Wait on for the open run',
    params: id,
    input: s.ShellWait,
    result: s.RunResult,
    errors: ['SHELL_BUSY'],
    idempotent: false,
    waits: true,
    access: 'write',
  }),
  'shell.interrupt': op({
    name: 'shell.interrupt',
    method: 'POST',
    path: '/v1/shells/{id}/interrupt',
    summary: "Interrupt the run's program (SIGINT), the open run's or one another call waits for, and answer how it ended",
    params: id,
    result: s.RunResult,
    idempotent: false,
    waits: true,
    access: 'write',
  }),
  'shell.delete': op({
    name: 'shell.delete',
    method: 'DELETE',
    path: '/v1/shells/{id}',
    summary: 'End the shell, its terminals and everything it runs, and forget them',
    params: id,
    result: s.Ok,
    errors: ['CLEANUP_FAILED'],
    idempotent: true,
    waits: true,
    access: 'write',
  }),

  'fs.resolve': op({
    name: 'fs.resolve',
    method: 'POST',
    path: '/v1/fs/resolve',
    summary: "Resolve a path to its target (the file's real path) and say what is there; with readTextMaxBytes, read a small text file in the same call",
    input: s.FsResolve,
    result: s.FsResolved,
    errors: FS_READ_ERRORS,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'fs.stat': op({
    name: 'fs.stat',
    method: 'POST',
    path: '/v1/fs/stat',
    summary: 'What a path leads to (links followed): version, type and size; info is null when nothing is there',
    input: s.FsRef,
    result: s.FsStatResult,
    errors: FS_READ_ERRORS,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'fs.lstat': op({
    name: 'fs.lstat',
    method: 'POST',
    path: '/v1/fs/lstat',
    summary: 'The path entry itself, a final link not followed; info is null when there is none',
    input: s.FsLstat,
    result: s.FsLstatResult,
    errors: FS_READ_ERRORS,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'fs.readText': op({
    name: 'fs.readText',
    method: 'POST',
    path: '/v1/fs/read-text',
    summary: 'A whole UTF-8 text file (GET /v1/files/content streams a file of any size)',
    input: s.FsRef,
    result: s.FsText,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE', 'FS_NOT_TEXT', 'FS_TOO_LARGE'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'fs.listDir': op({
    name: 'fs.listDir',
    method: 'POST',
    path: '/v1/fs/list',
    summary: "A directory's entries in name order, with their targets and metadata, never their content",
    input: s.FsRef,
    result: s.FsListing,
    errors: [...FS_READ_ERRORS, 'FS_NOT_DIRECTORY', 'FS_TOO_LARGE'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'fs.writeText': op({
    name: 'fs.writeText',
    method: 'POST',
    path: '/v1/fs/write-text',
    summary: 'Replace or create a whole text file atomically, optionally guarded by createIfAbsent or a version',
    input: s.FsWrite,
    result: s.FsWriteResult,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE', 'FS_STALE_VERSION', 'FS_NOT_OBSERVED'],
    // A resent guarded create would refuse the file its first sending made.
    idempotent: false,
    waits: false,
    access: 'write',
    body: 'data',
  }),
  'fs.editText': op({
    name: 'fs.editText',
    method: 'POST',
    path: '/v1/fs/edit-text',
    summary: 'Replace literal text in a text file atomically, optionally guarded by a version',
    input: s.FsEdit,
    result: s.FsEditOutcome,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE', 'FS_NOT_TEXT', 'FS_TOO_LARGE', 'FS_STALE_VERSION', 'FS_AMBIGUOUS_EDIT', 'FS_EDIT_NOT_FOUND'],
    idempotent: false,
    waits: false,
    access: 'write',
    body: 'data',
  }),
  'fs.mkdir': op({
    name: 'fs.mkdir',
    method: 'POST',
    path: '/v1/fs/mkdir',
    summary: 'Make a directory (with its missing parents unless parents is false)',
    input: s.FsMkdir,
    result: s.FsMkdirResult,
    errors: [...FS_READ_ERRORS, 'FS_ALREADY_EXISTS'],
    // Without parents a repeat finds the directory its first sending made.
    idempotent: { when: ['parents'] },
    waits: false,
    access: 'write',
  }),
  'fs.remove': op({
    name: 'fs.remove',
    method: 'POST',
    path: '/v1/fs/remove',
    summary: 'Remove a file, a link or (recursive) a directory tree; nothing there is success with removed: false',
    input: s.FsRemove,
    result: s.FsRemoveResult,
    errors: [...FS_READ_ERRORS, 'FS_NOT_EMPTY'],
    idempotent: true,
    waits: false,
    access: 'write',
  }),
  'fs.rename': op({
    name: 'fs.rename',
    method: 'POST',
    path: '/v1/fs/rename',
    summary: 'Move an entry to a new path in the same filesystem, atomically; never replaces anything unless overwrite is set',
    input: s.FsRename,
    result: s.FsRenameResult,
    errors: [...FS_READ_ERRORS, 'FS_ALREADY_EXISTS', 'FS_NOT_EMPTY'],
    idempotent: false,
    waits: false,
    access: 'write',
  }),
  'fs.digest': op({
    name: 'fs.digest',
    method: 'POST',
    path: '/v1/fs/digest',
    summary: "A regular file's size, SHA-256 and version, read from one open file",
    input: s.FsDigest,
    result: s.FsDigestResult,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'upload.create': op({
    name: 'upload.create',
    method: 'POST',
    path: '/v1/files/uploads',
    summary: 'Begin uploading a file of any size: send its bytes with PUT /v1/files/uploads/{id}?offset=N, resume after a cut at the offset, then complete',
    input: s.UploadCreate,
    result: s.Upload,
    status: 201,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE', 'FS_ALREADY_EXISTS', 'LIMIT_EXCEEDED'],
    idempotent: false,
    waits: false,
    access: 'write',
  }),
  'upload.get': op({
    name: 'upload.get',
    method: 'GET',
    path: '/v1/files/uploads/{id}',
    summary: "An upload's offset, once every PUT of bytes still being received has ended: where a resumed upload goes on",
    params: { id: s.UploadId },
    result: s.Upload,
    idempotent: true,
    waits: true,
    access: 'read',
  }),
  'upload.complete': op({
    name: 'upload.complete',
    method: 'POST',
    path: '/v1/files/uploads/{id}/complete',
    summary: 'Check the bytes received against the size and SHA-256 given, and publish them at the path atomically',
    params: { id: s.UploadId },
    input: s.UploadComplete,
    result: s.FsDigestResult,
    // What the publication meets: its directory gone, a directory or (without overwrite) a file put at the path meanwhile.
    errors: ['FS_NOT_FOUND', 'FS_NOT_REGULAR_FILE', 'FS_ALREADY_EXISTS', 'FS_CHECKSUM_MISMATCH'],
    idempotent: false,
    waits: false,
    access: 'write',
  }),
  'upload.delete': op({
    name: 'upload.delete',
    method: 'DELETE',
    path: '/v1/files/uploads/{id}',
    summary: 'Abandon an upload and discard its bytes',
    params: { id: s.UploadId },
    result: s.Ok,
    idempotent: true,
    waits: false,
    access: 'write',
  }),
  'upload.bytes': op({
    name: 'upload.bytes',
    method: 'PUT',
    path: `${UPLOADS_PATH}/{id}`,
    summary: 'Append bytes to an upload at its offset',
    description:
      "The body's bytes are written at `offset`, which must be the upload's offset (UPLOAD_OFFSET_MISMATCH otherwise). " +
      'What arrives before a connection is cut is kept: ask `GET /v1/files/uploads/{id}` for the offset and send the rest from there. ' +
      'Send a large file in several requests, each within the request timeout.',
    params: { id: s.UploadId },
    input: s.UploadBytesQuery,
    result: s.Upload,
    // Its staged bytes gone behind the daemon's back, or a disk that fails.
    errors: ['UPLOAD_OFFSET_MISMATCH', 'FS_NOT_FOUND', 'FS_IO_ERROR'],
    idempotent: false,
    waits: false,
    access: 'write',
    bytes: { body: 'application/octet-stream' },
  }),
  'files.content': op({
    name: 'files.content',
    method: 'GET',
    path: CONTENT_PATH,
    summary: "A file's bytes, streamed from an offset",
    description:
      'The raw bytes of a regular file, from `offset` to the end it had when opened, whatever is appended or replaces it meanwhile. ' +
      "The answer carries the file's size and version in `X-Execworld-Size` and `X-Execworld-Version`; a download that was cut resumes " +
      'with `offset` set to the bytes it has (compare the version to know it is the same file).',
    input: s.ContentQuery,
    result: BYTES,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE', 'FS_TOO_LARGE', 'FS_STALE_VERSION'],
    idempotent: true,
    waits: false,
    access: 'read',
    bytes: {
      answer: {
        mediaType: 'application/octet-stream',
        description: 'The bytes',
        headers: {
          [SIZE_HEADER]: { description: "The file's size when it was opened.", schema: z.int().min(0) },
          [VERSION_HEADER]: { description: "The file's version when it was opened.", schema: s.FsVersion },
        },
        trailers: { [DIGEST_TRAILER]: 'With `digest=sha256` and offset 0: the SHA-256 of the bytes sent, in hex.' },
      },
    },
  }),
  'files.write': op({
    name: 'files.write',
    method: 'PUT',
    path: CONTENT_PATH,
    summary: 'Replace or create a whole text file atomically from the bytes of the body',
    description:
      'The same write as `POST /v1/fs/write-text`, with the text sent as its UTF-8 bytes rather than a JSON string: nothing to ' +
      'escape or parse, so large texts cost what their bytes cost. The body is held whole (within --max-body-bytes) and must be ' +
      'UTF-8 (FS_NOT_TEXT otherwise); `ifAbsent` or `ifVersion` guard it as `expected` does.',
    input: s.WriteContentQuery,
    result: s.FsWriteResult,
    errors: [...FS_READ_ERRORS, 'FS_NOT_REGULAR_FILE', 'FS_STALE_VERSION', 'FS_NOT_OBSERVED', 'FS_NOT_TEXT', 'PAYLOAD_TOO_LARGE', 'LIMIT_EXCEEDED'],
    idempotent: false,
    waits: false,
    access: 'write',
    bytes: { body: 'application/octet-stream', whole: true },
  }),
  'archive.pack': op({
    name: 'archive.pack',
    method: 'GET',
    path: ARCHIVE_PATH,
    summary: 'A directory as a tar stream',
    description:
      'Its entries relative to it, links stored as links (never followed), modes and empty directories kept, owners left out. ' +
      'Special files (sockets, FIFOs, devices) have no bytes to copy: they are left out, and the chunked answer ends with the trailer ' +
      '`X-Execworld-Skipped`, `{"count":N,"entries":[{"path","kind"},…]}` in ASCII JSON, counting every one and naming as many as fit in 8 KiB.',
    input: s.ArchiveQuery,
    result: BYTES,
    errors: ARCHIVE_ERRORS,
    idempotent: true,
    waits: false,
    access: 'read',
    bytes: {
      answer: {
        mediaType: 'application/x-tar',
        description: 'The archive',
        headers: {},
        trailers: { [SKIPPED_TRAILER]: 'The special files left out, as `{"count":N,"entries":[{"path","kind"},…]}` in ASCII JSON.' },
      },
    },
  }),
  'archive.unpack': op({
    name: 'archive.unpack',
    method: 'PUT',
    path: ARCHIVE_PATH,
    summary: 'Unpack a tar stream into a directory (made when missing)',
    description:
      'Entries that would leave the directory (`..`, a link in the way, a hard link out of it) and devices are refused and listed in `warnings`; ' +
      'symbolic links are made last, with their targets as archived. Owners are not taken from the archive.',
    input: s.ArchiveQuery,
    result: s.ArchiveUnpacked,
    errors: ARCHIVE_ERRORS,
    idempotent: false,
    waits: false,
    access: 'write',
    bytes: { body: 'application/x-tar' },
  }),
  'port.connect': op({
    name: 'port.connect',
    method: 'POST',
    path: '/v1/forwards',
    summary: "Connect to a port in the world as the owner's OS user, for a port forward over the WebSocket",
    description:
      "The connection's bytes travel on the WebSocket (see its protocol): a forward no WebSocket takes up is reset after the daemon's --forward-grace-ms. " +
      'A token scoped to a port may connect to that port only; any other token needs write access.',
    input: s.PortConnect,
    result: s.Forward,
    status: 201,
    errors: ['READ_ONLY', 'LIMIT_EXCEEDED', 'SHUTTING_DOWN', 'PORT_REFUSED'],
    idempotent: false,
    waits: false,
    access: 'read',
  }),
  'port.shutdown': op({
    name: 'port.shutdown',
    method: 'POST',
    path: '/v1/forwards/{id}/shutdown',
    summary: "Shut the forward's direction to the world (a FIN) once every byte before offset is written",
    params: { id: s.ForwardRef },
    input: s.ForwardShutdown,
    result: s.Ok,
    errors: ['READ_ONLY'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'port.close': op({
    name: 'port.close',
    method: 'POST',
    path: '/v1/forwards/{id}/close',
    summary: 'End a forward: close its connection in the world, or reset it',
    params: { id: s.ForwardRef },
    input: s.ForwardClose,
    result: s.Ok,
    errors: ['READ_ONLY'],
    idempotent: true,
    waits: false,
    access: 'read',
  }),
  'ports.list': op({
    name: 'ports.list',
    method: 'GET',
    path: '/v1/ports',
    summary: "The TCP ports the owner's running sessions listen on",
    description:
      "Read from the kernel's socket tables (/proc/net/tcp and tcp6, LISTEN rows) mapped to the sessions' processes through their descriptors; " +
      'Linux only (elsewhere `supported` is false). Each port is reached at /v1/ports/{port}/ (a preview).',
    result: s.PortList,
    idempotent: true,
    waits: false,
    access: 'read',
  }),
} as const;

export type Operations = typeof OPERATIONS;
export type OperationName = keyof Operations;
/** The operations a WebSocket carries: every one but those that carry bytes, which are made over REST only. */
export type CallName = { [N in OperationName]: Operations[N]['bytes'] extends undefined ? N : never }[OperationName];
/** An operation's parameters as its handler gets them: validated, defaults filled in. */
export type OperationParams<N extends OperationName> = { [K in keyof Operations[N]['params']]: z.infer<Operations[N]['params'][K]> } & z.infer<
  Operations[N]['input']
>;
/** An operation's parameters as a caller sends them: fields with a default may be left out. */
export type OperationInput<N extends OperationName> = { [K in keyof Operations[N]['params']]: z.input<Operations[N]['params'][K]> } & z.input<
  Operations[N]['input']
>;
export type OperationResult<N extends OperationName> = z.infer<Operations[N]['result']>;

export const OPERATION_LIST: readonly OperationSpec[] = Object.values(OPERATIONS);
