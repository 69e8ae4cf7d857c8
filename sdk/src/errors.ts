/**
 * The SDK's errors. Every one has a stable `code` and keeps what caused it as
 * `cause`. Prefer `error.code` over `instanceof`: two copies of the SDK in one
 * process have two sets of classes, and {@link isExecworldError} works across
 * them.
 * @module
 */
import { ERROR_CATALOG, type ErrorCode } from './protocol/errors.ts';

const BRAND = Symbol.for('execworld.error');

/** Codes of failures on the client's side of the wire. */
export type ClientErrorCode =
  /** The daemon could not be reached, or refused the connection. */
  | 'CONNECTION_FAILED'
  /** The connection broke and could not be re-established within the reconnect deadline. */
  | 'CONNECTION_LOST'
  /** The connection broke while a call that is not safe to repeat was in flight; it may or may not have taken effect. */
  | 'OUTCOME_UNKNOWN'
  /** A call got no answer within its timeout. */
  | 'REQUEST_TIMEOUT'
  /** The daemon speaks another protocol version. */
  | 'PROTOCOL_MISMATCH'
  /** The runtime was closed. */
  | 'CLOSED'
  /** The caller's signal aborted the call. */
  | 'ABORTED';

export class ExecworldError extends Error {
  readonly code: ErrorCode | ClientErrorCode;
  constructor(code: ErrorCode | ClientErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = 'ExecworldError';
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/** True for any execworld error, from any copy of the SDK. */
export function isExecworldError(value: unknown): value is ExecworldError {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

export interface RemoteErrorOptions extends ErrorOptions {
  /** The operating system's name for the failure (ENOENT, E2BIG, ...), when the daemon reported one. */
  readonly errno?: string | undefined;
}

/** A failure the daemon reported, with its code and HTTP status. */
export class RemoteError extends ExecworldError {
  declare readonly code: ErrorCode;
  readonly status: number | undefined;
  /** The operating system's name for the failure, e.g. ENOENT for a program that is not there. */
  readonly errno: string | undefined;
  constructor(code: ErrorCode, message: string, status?: number, options?: RemoteErrorOptions) {
    super(code, message, options);
    this.status = status;
    this.errno = options?.errno;
    this.name = 'RemoteError';
  }
}

/** The request was not valid (400, 408, 413, 414, 415, 426, 431). */
export class InvalidRequestError extends RemoteError {
  override name = 'InvalidRequestError';
}
/** The token was refused (401), or may not do this (403: a browser origin not allowed, a read-only token's action, a user its owner may not run as). */
export class AuthError extends RemoteError {
  override name = 'AuthError';
}
/** No such terminal or process for this owner, or no such route (404). */
export class NotFoundError extends RemoteError {
  override name = 'NotFoundError';
}
/** The terminal or process is not in a state that allows this (409). */
export class StateError extends RemoteError {
  override name = 'StateError';
}
/** The program or its working directory is missing, or the spawn failed (422). */
export class SpawnError extends RemoteError {
  override name = 'SpawnError';
}
/** A daemon limit was reached (429). */
export class LimitError extends RemoteError {
  override name = 'LimitError';
}
/** The daemon could not do it (5xx). */
export class DaemonError extends RemoteError {
  override name = 'DaemonError';
}

/** A filesystem operation failed; `code` is the seam's FS_* code. */
export class FileSystemError extends RemoteError {
  override name = 'FileSystemError';
}

/** Failures of the connection itself. */
export class ConnectionError extends ExecworldError {
  declare readonly code: ClientErrorCode;
  constructor(code: ClientErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.name = 'ConnectionError';
  }
}

type RemoteErrorClass = new (code: ErrorCode, message: string, status?: number, options?: RemoteErrorOptions) => RemoteError;

/** The one table from daemon codes to classes. */
export const REMOTE_ERROR_CLASSES: Record<ErrorCode, RemoteErrorClass> = {
  INVALID_ARGUMENT: InvalidRequestError,
  PAYLOAD_TOO_LARGE: InvalidRequestError,
  UNSUPPORTED_MEDIA_TYPE: InvalidRequestError,
  UNAUTHORIZED: AuthError,
  FORBIDDEN_ORIGIN: AuthError,
  NOT_FOUND: NotFoundError,
  TERMINAL_EXITED: StateError,
  TERMINAL_CLOSED: StateError,
  PROCESS_EXITED: StateError,
  NO_FOREGROUND_GROUP: StateError,
  SIGNAL_REFUSED: StateError,
  STREAM_NOT_AVAILABLE: StateError,
  SHELL_BUSY: StateError,
  SHELL_START_FAILED: SpawnError,
  CWD_NOT_FOUND: SpawnError,
  EXECUTABLE_NOT_FOUND: SpawnError,
  SPAWN_FAILED: SpawnError,
  LIMIT_EXCEEDED: LimitError,
  CLEANUP_FAILED: DaemonError,
  UNSUPPORTED: DaemonError,
  SHUTTING_DOWN: DaemonError,
  INTERNAL: DaemonError,
  URI_TOO_LONG: InvalidRequestError,
  HEADERS_TOO_LARGE: InvalidRequestError,
  CLIENT_TIMEOUT: InvalidRequestError,
  UPGRADE_REQUIRED: InvalidRequestError,
  FS_NOT_FOUND: FileSystemError,
  FS_NOT_DIRECTORY: FileSystemError,
  FS_NOT_REGULAR_FILE: FileSystemError,
  FS_NOT_TEXT: FileSystemError,
  FS_TOO_LARGE: FileSystemError,
  FS_PERMISSION_DENIED: FileSystemError,
  FS_IO_ERROR: FileSystemError,
  FS_STALE_VERSION: FileSystemError,
  FS_NOT_OBSERVED: FileSystemError,
  FS_AMBIGUOUS_EDIT: FileSystemError,
  FS_EDIT_NOT_FOUND: FileSystemError,
  FS_ABORTED: FileSystemError,
  FS_ALREADY_EXISTS: FileSystemError,
  FS_NOT_EMPTY: FileSystemError,
  FS_CHECKSUM_MISMATCH: FileSystemError,
  UPLOAD_OFFSET_MISMATCH: StateError,
  READ_ONLY: AuthError,
  USER_NOT_ALLOWED: AuthError,
  TOKEN_SCOPE: AuthError,
  PORT_NOT_LISTENING: DaemonError,
};

/**
 * The error of an argument the SDK refuses before anything is sent: the class
 * the catalog's INVALID_ARGUMENT maps to, so a call refused here and one the
 * daemon refuses raise the same class and code. `status` is undefined: no
 * daemon answered.
 */
export function invalidArgument(message: string, options?: ErrorOptions): RemoteError {
  return new REMOTE_ERROR_CLASSES.INVALID_ARGUMENT('INVALID_ARGUMENT', message, undefined, options);
}

/** The error for a daemon answer `{ code, message, errno? }`. */
export function remoteError(error: { code: string; message: string; errno?: string | undefined }, status?: number): RemoteError {
  const code = (Object.hasOwn(REMOTE_ERROR_CLASSES, error.code) ? error.code : 'INTERNAL') as ErrorCode;
  return new REMOTE_ERROR_CLASSES[code](code, error.message, status ?? ERROR_CATALOG[code].status, { errno: error.errno });
}
