/**
 * Errors at the daemon's edge: one class with a catalog code, and the one
 * mapping from anything thrown inside to what a client sees.
 * @module
 */
import { getSystemErrorMap } from 'node:util';
import { ZodError } from 'zod';
import { RemoteError } from '@execworld/sdk';
import { ERROR_CATALOG, type ErrorBody, type ErrorCode } from '@execworld/sdk/protocol';
import { ShellError, type ShellErrorCode } from '@execworld/sdk/shell';
import { FsFailure, ProviderError, type ProviderErrorCode } from '../provider/api.ts';
import { OffsetOutOfRangeError } from './streams.ts';

export interface ServiceErrorOptions extends ErrorOptions {
  /** The operating system's name for the failure, e.g. ENOENT. */
  readonly errno?: string | undefined;
}

export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly errno: string | undefined;
  constructor(code: ErrorCode, message: string, options?: ServiceErrorOptions) {
    super(message, options);
    this.code = code;
    this.errno = options?.errno;
    this.name = 'ServiceError';
  }

  get status(): number {
    return ERROR_CATALOG[this.code].status;
  }

  /** What the client gets, over REST and the WebSocket alike. */
  body(): ErrorBody['error'] {
    return this.errno === undefined ? { code: this.code, message: this.message } : { code: this.code, message: this.message, errno: this.errno };
  }
}

/*
 * Every family of errors thrown inside the daemon with codes of its own is
 * answered through a table from its codes to the catalog's, looked up only
 * for an error of its class: a code is never read off an error of unknown
 * kind, and one the table lacks (a worker of another version, say) is
 * INTERNAL, never passed on.
 */

/** The provider's codes (ProviderError). */
export const PROVIDER_CODES: Record<ProviderErrorCode, ErrorCode> = {
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  ABORTED: 'INVALID_ARGUMENT',
  CWD_NOT_FOUND: 'CWD_NOT_FOUND',
  EXECUTABLE_NOT_FOUND: 'EXECUTABLE_NOT_FOUND',
  TERMINAL_EXITED: 'TERMINAL_EXITED',
  TERMINAL_CLOSED: 'TERMINAL_CLOSED',
  LIMIT_EXCEEDED: 'LIMIT_EXCEEDED',
  NO_FOREGROUND_GROUP: 'NO_FOREGROUND_GROUP',
  SIGNAL_REFUSED: 'SIGNAL_REFUSED',
  CLEANUP_FAILED: 'CLEANUP_FAILED',
  UNSUPPORTED: 'UNSUPPORTED',
};

/** The file worker's and the files' codes (FsFailure): the seam's FS_* and those of the transfer calls. */
export const FS_CODES: Record<FsFailure['code'], ErrorCode> = {
  FS_NOT_FOUND: 'FS_NOT_FOUND',
  FS_NOT_DIRECTORY: 'FS_NOT_DIRECTORY',
  FS_NOT_TEXT: 'FS_NOT_TEXT',
  FS_NOT_REGULAR_FILE: 'FS_NOT_REGULAR_FILE',
  FS_TOO_LARGE: 'FS_TOO_LARGE',
  FS_PERMISSION_DENIED: 'FS_PERMISSION_DENIED',
  // The seam's, for confining providers of its own; this daemon confines with FS_PERMISSION_DENIED.
  FS_SANDBOX_DENIED: 'FS_PERMISSION_DENIED',
  FS_IO_ERROR: 'FS_IO_ERROR',
  FS_STALE_VERSION: 'FS_STALE_VERSION',
  FS_NOT_OBSERVED: 'FS_NOT_OBSERVED',
  FS_AMBIGUOUS_EDIT: 'FS_AMBIGUOUS_EDIT',
  FS_EDIT_NOT_FOUND: 'FS_EDIT_NOT_FOUND',
  FS_ABORTED: 'FS_ABORTED',
  FS_ALREADY_EXISTS: 'FS_ALREADY_EXISTS',
  FS_NOT_EMPTY: 'FS_NOT_EMPTY',
  FS_CHECKSUM_MISMATCH: 'FS_CHECKSUM_MISMATCH',
  UPLOAD_OFFSET_MISMATCH: 'UPLOAD_OFFSET_MISMATCH',
};

/** The shell engine's codes (ShellError). */
export const SHELL_CODES: Record<ShellErrorCode, ErrorCode> = {
  SHELL_BUSY: 'SHELL_BUSY',
  SHELL_START_FAILED: 'SHELL_START_FAILED',
  // A shell closed under a call (deleted, or its terminal gone) is no longer there to act on.
  CLOSED: 'NOT_FOUND',
  // As the provider's: a start given up because its caller went away.
  ABORTED: 'INVALID_ARGUMENT',
};

/** Errors whose class alone says their code. */
const CLASS_CODES: readonly (readonly [abstract new (...args: never[]) => Error, ErrorCode])[] = [
  // A read past the end of a stream: a client's offset beyond what the stream has.
  [OffsetOutOfRangeError, 'INVALID_ARGUMENT'],
];

/** `table`'s catalog code for `code`, INTERNAL for one it does not list. */
function catalogCode<K extends string>(table: Readonly<Record<K, ErrorCode>>, code: string): ErrorCode {
  return Object.hasOwn(table, code) ? table[code as K] : 'INTERNAL';
}

/** A ServiceError of `code` for `error`; its message is kept unless the code is INTERNAL, whose text says nothing of the inside. */
function mappedError(code: ErrorCode, error: Error, errno?: string): ServiceError {
  return new ServiceError(code, code === 'INTERNAL' ? 'internal error' : error.message, { cause: error, errno });
}

/** Names the first invalid field of a zod failure, e.g. `body.rows: Too small`. */
export function describeZodError(error: ZodError, where: string): string {
  const issue = error.issues[0];
  if (issue === undefined) return `${where} is invalid`;
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') return `${where}${path === '' ? '' : `.${path}`} has unknown field(s) ${issue.keys.join(', ')}`;
  return `${where}${path === '' ? '' : `.${path}`}: ${issue.message}`;
}

/** An errno name such as ENOENT or E2BIG, as Node puts it in `error.code`. */
const ERRNO_NAME = /^E[A-Z0-9]+$/;

function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ERRNO_NAME.test(code) ? code : undefined;
}

/**
 * A failure of `child_process.spawn` (reported later, like ENOENT, or thrown at
 * once, like E2BIG) in the catalog's terms, with the errno beside the code.
 */
function spawnFailure(error: NodeJS.ErrnoException, errno: string): ServiceError {
  // Node's text for the errno, e.g. "argument list too long" for E2BIG.
  const text = typeof error.errno === 'number' ? getSystemErrorMap().get(error.errno)?.[1] : undefined;
  // A file without execute permission is not an executable, as terminal.create says of it too.
  const code = errno === 'ENOENT' || errno === 'EACCES' ? 'EXECUTABLE_NOT_FOUND' : 'SPAWN_FAILED';
  return new ServiceError(code, `cannot start ${error.path ?? 'the program'}: ${text ?? 'refused by the operating system'} (${errno})`, {
    cause: error,
    errno,
  });
}

/** What a client sees of an error; anything unknown is INTERNAL. */
export function toServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error instanceof ProviderError) return mappedError(catalogCode(PROVIDER_CODES, error.code), error, errnoOf(error.cause));
  if (error instanceof FsFailure) return mappedError(catalogCode(FS_CODES, error.code), error, error.errno);
  if (error instanceof ShellError) return mappedError(catalogCode(SHELL_CODES, error.code), error);
  // The SDK's own refusal of an argument (the shell engine's, the seam's), already in the catalog's terms.
  if (error instanceof RemoteError) return mappedError(Object.hasOwn(ERROR_CATALOG, error.code) ? error.code : 'INTERNAL', error, error.errno);
  for (const [type, code] of CLASS_CODES) if (error instanceof type) return mappedError(code, error);
  if (error instanceof ZodError) return new ServiceError('INVALID_ARGUMENT', describeZodError(error, 'request'), { cause: error });
  const errno = errnoOf(error);
  if (errno !== undefined && error instanceof Error) {
    const syscall = (error as NodeJS.ErrnoException).syscall ?? '';
    if (syscall.startsWith('spawn')) return spawnFailure(error, errno);
    // The foreground group exited between its lookup and the signal.
    if (syscall === 'kill' && errno === 'ESRCH')
      return new ServiceError('NO_FOREGROUND_GROUP', 'the foreground process group exited before the signal reached it', { cause: error, errno });
  }
  return new ServiceError('INTERNAL', 'internal error', { cause: error });
}

/** The refusal of a call beyond a minted token's scope. */
export function scopeRefusal(message: string): ServiceError {
  return new ServiceError('TOKEN_SCOPE', message);
}

/** The refusal of `what` (an operation, a route) to a token that may only read. */
export function readOnlyRefusal(what: string): ServiceError {
  return new ServiceError('READ_ONLY', `the token may only read: ${what} acts on the owner's sessions or files`);
}
