/**
 * Checks shared by every entry point of the provider, so a bad spec fails
 * before any work with a message naming the field.
 * @module
 */
import { statSync } from 'node:fs';
import { ProviderError } from './errors.ts';

/** Node's largest timer delay, 2^31-1 ms. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

export function assertProgram(argv: unknown, message: string): asserts argv is readonly [string, ...string[]] {
  if (!Array.isArray(argv) || typeof argv[0] !== 'string' || argv[0].length === 0) {
    throw new ProviderError('INVALID_ARGUMENT', message);
  }
  argv.forEach((arg: unknown, index) => {
    if (typeof arg !== 'string') throw new ProviderError('INVALID_ARGUMENT', `argv[${index}] must be a string`);
    if (arg.includes('\0')) throw new ProviderError('INVALID_ARGUMENT', `argv[${index}] must not contain a NUL character`);
  });
}

export function assertGraceMs(graceMs: unknown): asserts graceMs is number {
  if (typeof graceMs !== 'number' || !Number.isFinite(graceMs) || graceMs <= 0 || graceMs > MAX_TIMER_DELAY_MS) {
    throw new ProviderError(
      'INVALID_ARGUMENT',
      `graceMs must be a positive finite number no greater than ${MAX_TIMER_DELAY_MS}, got ${String(graceMs)}`,
    );
  }
}

export function assertCwdString(cwd: unknown): asserts cwd is string {
  if (typeof cwd !== 'string' || cwd.length === 0) throw new ProviderError('INVALID_ARGUMENT', 'cwd must be a non-empty string');
  if (cwd.includes('\0')) throw new ProviderError('INVALID_ARGUMENT', 'cwd must not contain a NUL character');
}

export function assertPositiveInteger(name: string, value: unknown, max = Number.MAX_SAFE_INTEGER): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw new ProviderError('INVALID_ARGUMENT', `${name} must be a positive integer no greater than ${max}, got ${String(value)}`);
  }
}

/** The reason text of an aborted signal, `aborted` when it has none. */
export function abortReasonText(signal: { reason?: unknown }): string {
  const reason = signal.reason;
  if (reason === undefined || reason === null) return 'aborted';
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'object' || typeof reason === 'function' || typeof reason === 'symbol') return Object.prototype.toString.call(reason);
  return `${reason as string | number | boolean | bigint}`;
}

/** A spawn-level failure for a working directory that is not a directory. */
export function cwdError(cwd: string): ProviderError | undefined {
  try {
    if (statSync(cwd).isDirectory()) return undefined;
    return new ProviderError('CWD_NOT_FOUND', `cwd ${cwd} cannot be used (ENOTDIR)`);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'ENOENT';
    return new ProviderError('CWD_NOT_FOUND', `cwd ${cwd} cannot be used (${code})`, { cause: error });
  }
}
