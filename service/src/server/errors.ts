/**
 * Errors at the daemon's edge: one class with a catalog code, and the one
 * mapping from anything thrown inside to what a client sees.
 * @module
 */
import { getSystemErrorMap } from 'node:util';
import { ZodError } from 'zod';
import { ERROR_CATALOG, type ErrorBody, type ErrorCode } from '@execworld/sdk/protocol';
import { FsFailure, ProviderError, type ProviderErrorCode } from '../provider/api.ts';

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

const PROVIDER_CODES: Record<ProviderErrorCode, ErrorCode> = {
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
  if (error instanceof ProviderError) return new ServiceError(PROVIDER_CODES[error.code], error.message, { cause: error, errno: errnoOf(error.cause) });
  // FS_SANDBOX_DENIED is the seam's, for confining providers of its own; this daemon confines with FS_PERMISSION_DENIED.
  if (error instanceof FsFailure)
    return new ServiceError(error.code === 'FS_SANDBOX_DENIED' ? 'FS_PERMISSION_DENIED' : error.code, error.message, { cause: error, errno: error.errno });
  if (error instanceof ZodError) return new ServiceError('INVALID_ARGUMENT', describeZodError(error, 'request'), { cause: error });
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'INVALID_ARGUMENT' && error instanceof Error) return new ServiceError('INVALID_ARGUMENT', error.message, { cause: error });
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

/** The refusal of `what` (an operation, a route) to a token that may only read. */
export function readOnlyRefusal(what: string): ServiceError {
  return new ServiceError('READ_ONLY', `the token may only read: ${what} acts on the owner's sessions or files`);
}
