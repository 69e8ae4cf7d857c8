/**
 * Executable lookup in the execution world, as the seam defines it. Which
 * paths are tried is the platform's rule (`platform/`); this checks them.
 * @module
 */
import { accessSync, constants, promises as fs, statSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { ProviderError } from './errors.ts';
import type { Platform } from './platform/platform.ts';
import { cwdError } from './validate.ts';

/** The failure of a command that is neither absolute nor a bare name. */
export function relativeCommandError(command: string): ProviderError {
  return new ProviderError('INVALID_ARGUMENT', `executable ${command} is a relative path; give an absolute path or a bare name`);
}

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    if (!(await fs.stat(path)).isFile()) return false;
    await fs.access(path, constants.X_OK);
    return true;
  } catch (_error) {
    return false;
  }
}

/**
 * Resolves `command` to an executable regular file, trying the platform's candidates in order.
 * @throws {ProviderError} INVALID_ARGUMENT for an empty or relative command,
 *   EXECUTABLE_NOT_FOUND when nothing matches; exactly `signal.reason` when aborted.
 */
export async function resolveExecutable(
  command: string,
  env: Readonly<Record<string, string>>,
  platform: Pick<Platform, 'executableCandidates'>,
  signal?: AbortSignal,
  /** Where a relative PATH entry is taken from. @default this process's working directory */
  cwd?: string,
): Promise<string> {
  if (typeof command !== 'string' || command.length === 0) throw new ProviderError('INVALID_ARGUMENT', 'executable must be non-empty');
  if (command.includes('\0')) throw new ProviderError('INVALID_ARGUMENT', 'executable must not contain a NUL character');
  signal?.throwIfAborted();
  const candidates = platform.executableCandidates(command, env, cwd);
  for (const candidate of candidates) {
    signal?.throwIfAborted();
    const found = await isExecutableFile(candidate);
    signal?.throwIfAborted();
    if (found) return candidate;
  }
  const absolute = candidates.length === 1 && candidates[0] === command;
  throw new ProviderError('EXECUTABLE_NOT_FOUND', absolute ? `executable ${command} is not an executable file` : `executable ${command} was not found on PATH`);
}

/**
 * Why `file` cannot be started in `cwd` by this process's user, as the child
 * will look for them (it changes to `cwd`, then execs `file` on `env`'s PATH),
 * or undefined when it can: asked before a spawn so that a create is refused
 * with the error that says why. For an owner that runs as another user, its
 * worker asks, so the kernel answers as that user.
 */
export function launchFailure(file: string, env: Record<string, string>, cwd: string, platform: Platform): ProviderError | undefined {
  const cwdFailure = cwdError(cwd);
  if (cwdFailure !== undefined) return cwdFailure;
  if (terminalProgramExists(file, env, cwd, platform)) return undefined;
  return new ProviderError('EXECUTABLE_NOT_FOUND', `${file} ${file.includes('/') ? 'is not an executable file' : 'was not found on PATH'}`);
}

/** Whether the terminal's program can be executed the way the child will look it up. */
export function terminalProgramExists(file: string, env: Record<string, string>, cwd: string, platform: Platform): boolean {
  return executablePath(file, env, cwd, platform) !== undefined;
}

/**
 * The executable file `file` names for a child of `env` started in `cwd`, as
 * execvp finds it: a name with a slash from `cwd`, a bare one on the PATH of
 * `env`; undefined where none is.
 */
export function executablePath(file: string, env: Readonly<Record<string, string>>, cwd: string, platform: Platform): string | undefined {
  // The child changes to cwd before it execs, so relative names resolve from there.
  const candidates = file.includes('/') ? [resolvePath(cwd, file)] : platform.executableCandidates(file, env, cwd);
  return candidates.find((candidate) => isExecutableFileSync(candidate));
}

function isExecutableFileSync(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch (_error) {
    return false;
  }
}
