/**
 * The filesystem's failures: one error class carrying a seam code
 * (`FS_NOT_FOUND`, `FS_STALE_VERSION`, ...), and the mapping from the
 * operating system's errno to those codes.
 * @module
 */
import type { FsErrorCode } from '@execworld/sdk/fs';

/** The codes of the transfer calls beyond the seam (mkdir, remove, rename, uploads). */
export type TransferErrorCode = 'FS_ALREADY_EXISTS' | 'FS_NOT_EMPTY' | 'FS_CHECKSUM_MISMATCH' | 'UPLOAD_OFFSET_MISMATCH';

export class FsFailure extends Error {
  override readonly name = 'FsFailure';
  readonly code: FsErrorCode | TransferErrorCode;
  /** The operating system's name for the failure, when it gave one. */
  readonly errno: string | undefined;

  constructor(code: FsErrorCode | TransferErrorCode, message: string, options?: { cause?: unknown; errno?: string | undefined }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.errno = options?.errno;
  }
}

/** The errno of a Node system error, if `error` is one. */
export function errnoOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) ? code : undefined;
}

/** A seam failure for what the operating system answered while `doing` (e.g. `read "/a/b"`). */
export function fromSystemError(error: unknown, doing: string): FsFailure {
  if (error instanceof FsFailure) return error;
  if ((error as { name?: unknown } | null)?.name === 'AbortError') return new FsFailure('FS_ABORTED', `${doing}: aborted`);
  const errno = errnoOf(error);
  const detail = error instanceof Error ? error.message : String(error);
  switch (errno) {
    case 'ENOENT':
    case 'ENOTDIR':
      return new FsFailure('FS_NOT_FOUND', `cannot ${doing}: not found`, { cause: error, errno });
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new FsFailure('FS_PERMISSION_DENIED', `cannot ${doing}: permission denied (${errno})`, { cause: error, errno });
    case 'EISDIR':
      return new FsFailure('FS_NOT_REGULAR_FILE', `cannot ${doing}: not a regular file`, { cause: error, errno });
    default:
      return new FsFailure('FS_IO_ERROR', `cannot ${doing}: ${detail}`, { cause: error, errno });
  }
}

/** Throws FS_ABORTED when `signal` has aborted. */
export function checkAborted(signal: AbortSignal | undefined, doing: string): void {
  if (signal?.aborted === true) throw new FsFailure('FS_ABORTED', `${doing}: aborted`);
}
