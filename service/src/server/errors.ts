/**
 * Errors at the daemon's edge: one class with a catalog code, and the one
 * mapping from anything thrown inside to what a client sees.
 * @module
 */
import { ZodError } from 'zod';
import { ERROR_CATALOG, type ErrorCode } from '@execworld/sdk/protocol';
import { ProviderError, type ProviderErrorCode } from '../provider/errors.ts';

export class ServiceError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = 'ServiceError';
  }

  get status(): number {
    return ERROR_CATALOG[this.code].status;
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

/** What a client sees of an error; anything unknown is INTERNAL. */
export function toServiceError(error: unknown): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error instanceof ProviderError) return new ServiceError(PROVIDER_CODES[error.code], error.message, { cause: error });
  if (error instanceof ZodError) return new ServiceError('INVALID_ARGUMENT', describeZodError(error, 'request'), { cause: error });
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'INVALID_ARGUMENT' && error instanceof Error) return new ServiceError('INVALID_ARGUMENT', error.message, { cause: error });
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code) && error instanceof Error) {
    return new ServiceError(code === 'ENOENT' ? 'EXECUTABLE_NOT_FOUND' : 'SPAWN_FAILED', error.message, { cause: error });
  }
  return new ServiceError('INTERNAL', 'internal error', { cause: error });
}
