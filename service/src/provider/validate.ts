/**
 * Checks shared by every entry point of the provider, so a bad spec fails
 * before any work with a message naming the field. The checks themselves are
 * the seam's (`@execworld/sdk/seam`), the same the remote runtime runs.
 * @module
 */
import { accessSync, constants, statSync } from 'node:fs';
import * as seam from '@execworld/sdk/seam';
import { ProviderError } from './errors.ts';

// The rules are the seam's (shared with the remote runtime); the provider throws them as ProviderError.
const invalid: seam.InvalidArgument = (message) => new ProviderError('INVALID_ARGUMENT', message);

export function assertProgram(argv: unknown, message: string): asserts argv is readonly [string, ...string[]] {
  seam.assertProgram(argv, message, invalid);
}

export function assertGraceMs(graceMs: unknown): asserts graceMs is number {
  seam.assertGraceMs(graceMs, invalid);
}

export function assertCwdString(cwd: unknown): asserts cwd is string {
  seam.assertCwdString(cwd, invalid);
}

export function assertPositiveInteger(name: string, value: unknown, max = Number.MAX_SAFE_INTEGER): asserts value is number {
  seam.assertPositiveInteger(name, value, max, invalid);
}

export function assertEnvironment(env: unknown): void {
  seam.assertEnvironment(env, invalid);
}

export { abortReasonText } from '@execworld/sdk/seam';

/**
 * A spawn-level failure for a working directory this process could not
 * change to: missing, not a directory, or not searchable by its user.
 */
export function cwdError(cwd: string): ProviderError | undefined {
  try {
    if (!statSync(cwd).isDirectory()) return new ProviderError('CWD_NOT_FOUND', `cwd ${cwd} cannot be used (ENOTDIR)`, { cause: errnoError('ENOTDIR') });
    accessSync(cwd, constants.X_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'ENOENT';
    return new ProviderError('CWD_NOT_FOUND', `cwd ${cwd} cannot be used (${code})`, { cause: error });
  }
}

function errnoError(code: string): Error {
  return Object.assign(new Error(code), { code });
}
