/**
 * Errors of the local provider. Each carries a stable `code`; messages may
 * change, codes do not. Errors from the operating system keep their own
 * `code` (ENOENT, EACCES) and arrive as `cause` when wrapped.
 * @module
 */

export type ProviderErrorCode =
  /** A spec field is missing, of the wrong type or out of range. */
  | 'INVALID_ARGUMENT'
  /** The caller's abort signal fired. */
  | 'ABORTED'
  /** The working directory does not exist or is not a directory. */
  | 'CWD_NOT_FOUND'
  /** The program is not an executable file, or not on PATH. */
  | 'EXECUTABLE_NOT_FOUND'
  /** The terminal's top-level process has exited. */
  | 'TERMINAL_EXITED'
  /** The terminal's master is closed (its program closed the terminal) though the program may run on. */
  | 'TERMINAL_CLOSED'
  /** A configured bound was reached, e.g. input waiting for a program that does not read. */
  | 'LIMIT_EXCEEDED'
  /** The terminal has no foreground process group to act on. */
  | 'NO_FOREGROUND_GROUP'
  /** The signal would end the terminal's own shell; terminate the terminal instead. */
  | 'SIGNAL_REFUSED'
  /** Processes of a terminal session survived its cleanup. */
  | 'CLEANUP_FAILED'
  /** The platform cannot do this. */
  | 'UNSUPPORTED';

export class ProviderError extends Error {
  readonly code: ProviderErrorCode;
  constructor(code: ProviderErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = 'ProviderError';
  }
}

/** Thrown when processes of a terminal session outlive its cleanup. */
export class CleanupError extends ProviderError {
  readonly survivors: readonly number[];
  constructor(message: string, survivors: readonly number[]) {
    super('CLEANUP_FAILED', message);
    this.survivors = survivors;
    this.name = 'CleanupError';
  }
}
