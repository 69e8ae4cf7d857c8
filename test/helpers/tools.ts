/**
 * Programs a test needs that are not part of the project (pwsh, tmux, …).
 * Where the program is installed the tests run. Where it is missing they are
 * skipped with the reason in their title, unless CI is set: CI installs every
 * such program (.ci/run), so there a missing one fails the tests instead of
 * letting them pass unseen.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

export interface RequiredTool {
  readonly name: string;
  /** The absolute path of the program, or undefined when it is missing. */
  readonly path: string | undefined;
  /** True when the tests should be skipped: the program is missing and CI is not set. */
  readonly skip: boolean;
  /** Appended to a suite's title: empty when the program is there, else why it is skipped or will fail. */
  readonly note: string;
  /** The path; throws, failing the test, when the program is missing (which only happens in a test that runs with CI set). */
  require(): string;
}

/** Whether `env` says this is a CI run: CI set to anything but empty, `false` or `0`. */
export function isCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env.CI;
  return value !== undefined && value !== '' && value !== 'false' && value !== '0';
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch (_error) {
    return false;
  }
}

/** `name` on PATH (as `command -v` finds it), else the first executable of `candidates`; undefined when neither has it. */
export function findTool(name: string, candidates: readonly string[] = [], env: NodeJS.ProcessEnv = process.env): string | undefined {
  const found = spawnSync('/bin/sh', ['-c', 'command -v "$1"', 'sh', name], { env, encoding: 'utf8' });
  const onPath = found.status === 0 ? found.stdout.trim() : '';
  if (onPath.startsWith('/')) return onPath;
  return candidates.find(executable);
}

/**
 * The program `name`, looked up once: on PATH, then at `candidates` (where an
 * installer puts it without putting it on PATH).
 * @param installedBy - where the reason tells a developer to look, e.g. "CONTRIBUTING.md's development notes".
 */
export function requiredTool(name: string, options: { candidates?: readonly string[]; installedBy?: string; env?: NodeJS.ProcessEnv } = {}): RequiredTool {
  const env = options.env ?? process.env;
  const path = findTool(name, options.candidates ?? [], env);
  const where = ['PATH', ...(options.candidates ?? [])].join(', ');
  const reason = `${name} not found (looked on ${where})${options.installedBy === undefined ? '' : `; see ${options.installedBy}`}`;
  const ci = isCi(env);
  return {
    name,
    path,
    skip: path === undefined && !ci,
    note: path !== undefined ? '' : ci ? ` (fails: ${reason}, and CI is set)` : ` (skipped: ${reason})`,
    require() {
      if (path === undefined) throw new Error(`${reason}${ci ? '; CI is set, and .ci/run installs it' : ''}`);
      return path;
    },
  };
}
