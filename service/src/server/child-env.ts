/**
 * The environment the daemon's children start from. The daemon's own
 * environment holds what started it (a CI runner's tokens, a database URL, an
 * agent socket), and the seam's scrub of credential-shaped names lets many of
 * those through (`DATABASE_URL`, `GITHUB_PAT`, `SSH_AUTH_SOCK`, proxy URLs with
 * passwords). So, as sshd resets the environment of a login, children start
 * from an allowlist of names, plus what each request sets; the `passEnv`
 * setting widens it. The local provider's scrub still applies on top.
 * @module
 */
import { delimiter } from 'node:path';

/** Names children get from the daemon's environment by default. `*` ends a prefix. */
export const DEFAULT_PASS_ENV: readonly string[] = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'LC_*', 'TERM', 'TZ', 'TMPDIR'];

/**
 * The entries of `ambient` whose names `patterns` allow: an exact name, a
 * prefix ending in `*`, or `*` alone for every entry.
 */
export function allowedEnvironment(ambient: Readonly<Record<string, string | undefined>>, patterns: readonly string[]): Record<string, string> {
  const exact = new Set(patterns.filter((pattern) => !pattern.endsWith('*')));
  const prefixes = patterns.filter((pattern) => pattern.endsWith('*')).map((pattern) => pattern.slice(0, -1));
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(ambient)) {
    if (value === undefined) continue;
    if (exact.has(name) || prefixes.some((prefix) => name.startsWith(prefix))) env[name] = value;
  }
  if (env.PATH !== undefined && startedByNpm(ambient)) env.PATH = withoutNpmScriptPath(env.PATH);
  return env;
}

/** Whether npm ran the daemon as a script (`npm start`, `npm exec`): npm marks its scripts' environment so. */
export function startedByNpm(ambient: Readonly<Record<string, string | undefined>>): boolean {
  return ambient.npm_lifecycle_event !== undefined || Object.keys(ambient).some((name) => name.startsWith('npm_config_'));
}

/**
 * `path` without the directories npm puts before a script's PATH: every
 * `node_modules/.bin` from the package up to the root, and its own
 * `node-gyp-bin`. They are the daemon's tools, not the world's: a program run
 * in the world would otherwise find the daemon's dev dependencies (tsc, vite,
 * eslint) first, and npm's node-gyp shim, as if they were installed there.
 */
export function withoutNpmScriptPath(path: string, separator: string = delimiter): string {
  return path
    .split(separator)
    .filter((entry) => !/(^|[\\/])node_modules[\\/]\.bin[\\/]?$/.test(entry) && !/(^|[\\/])node-gyp-bin[\\/]?$/.test(entry))
    .join(separator);
}
