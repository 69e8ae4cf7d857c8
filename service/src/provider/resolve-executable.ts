/**
 * Executable lookup in the execution world, as the seam defines it.
 * @module
 */
import { constants, promises as fs } from 'node:fs';
import { delimiter as posixDelimiter, isAbsolute, resolve, win32 } from 'node:path';
import { lookupEnvironment } from '@execworld/sdk/seam';
import { ProviderError } from './errors.ts';

const DEFAULT_PATHEXT = '.COM;.EXE;.BAT;.CMD';

/**
 * The paths to try for `command`, in order. PATH entries are resolved against
 * the host process's working directory, so an empty entry means that directory.
 * On Windows, a name without an extension is tried with each PATHEXT extension.
 */
export function executableCandidates(
  command: string,
  env: Readonly<Record<string, string>>,
  platform: NodeJS.Platform,
  cwd: string = process.cwd(),
): string[] {
  const windows = platform === 'win32';
  const absolute = windows ? win32.isAbsolute(command) : isAbsolute(command);
  if (absolute) return [command];
  const separator = windows ? /[\\/]/ : /\//;
  if (separator.test(command)) {
    throw new ProviderError('INVALID_ARGUMENT', `executable ${command} is a relative path; give an absolute path or a bare name`);
  }
  const path = lookupEnvironment(env, 'PATH', windows) ?? '';
  const directories = path.split(windows ? win32.delimiter : posixDelimiter);
  const extensions = windows && win32.extname(command) === '' ? (lookupEnvironment(env, 'PATHEXT', true) ?? DEFAULT_PATHEXT).split(';').filter(Boolean) : [''];
  const join = (directory: string, name: string): string => (windows ? win32.resolve(cwd, directory, name) : resolve(cwd, directory, name));
  return directories.flatMap((directory) => extensions.map((extension) => join(directory, command + extension)));
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
 * Resolves `command` to an executable regular file.
 * @throws {ProviderError} INVALID_ARGUMENT for an empty or relative command,
 *   EXECUTABLE_NOT_FOUND when nothing matches; exactly `signal.reason` when aborted.
 */
export async function resolveExecutable(
  command: string,
  env: Readonly<Record<string, string>>,
  platform: NodeJS.Platform,
  signal?: AbortSignal,
): Promise<string> {
  if (typeof command !== 'string' || command.length === 0) throw new ProviderError('INVALID_ARGUMENT', 'executable must be non-empty');
  if (command.includes('\0')) throw new ProviderError('INVALID_ARGUMENT', 'executable must not contain a NUL character');
  signal?.throwIfAborted();
  const candidates = executableCandidates(command, env, platform);
  for (const candidate of candidates) {
    signal?.throwIfAborted();
    const found = await isExecutableFile(candidate);
    signal?.throwIfAborted();
    if (found) return candidate;
  }
  const absolute = candidates.length === 1 && candidates[0] === command;
  throw new ProviderError(
    'EXECUTABLE_NOT_FOUND',
    absolute ? `executable ${command} is not an executable file` : `executable ${command} was not found on PATH`,
  );
}
