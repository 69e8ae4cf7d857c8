/**
 * The environment rules of the seam: which ambient entries a child inherits,
 * and how explicit entries are merged onto them. Pure functions over plain
 * records, so the daemon, the local provider and tests share one definition.
 * @module
 */
import { DSH_ENV_PREFIX } from './types.ts';

/**
 * Names that look like credentials. Matched as a case-insensitive substring of
 * the name. It has no `g` flag on purpose: a global regex keeps state between
 * `test` calls.
 */
export const SENSITIVE_ENV_PATTERN = /KEY|PASSWORD|SECRET|TOKEN/i;

/** True when an ambient entry of this name must not reach a child implicitly. */
export function isScrubbedName(name: string): boolean {
  return SENSITIVE_ENV_PATTERN.test(name) || name.toUpperCase().startsWith(DSH_ENV_PREFIX);
}

/**
 * The ambient environment minus credential-shaped names and minus every
 * `DSH_*` name (compared upper-cased, since Windows names ignore case).
 * PATH, HOME, locale, proxies and TERM survive.
 * @param ambient - the environment to scrub, usually `process.env`.
 * @returns a fresh record.
 */
export function scrubEnvironment(ambient: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(ambient)) {
    if (value !== undefined && !isScrubbedName(name)) env[name] = value;
  }
  return env;
}

/**
 * Applies explicit entries to a base environment. A string sets the entry, and
 * `undefined` or `null` removes it (a tombstone). With `caseInsensitive` (Windows)
 * every existing key of the same upper-cased name is removed first and the
 * explicit key keeps its own casing, so inherited `PATH` plus explicit `Path`
 * leaves exactly one key, `Path`.
 * @param base - the scrubbed ambient environment; not modified.
 * @param explicit - the caller's entries, applied in order.
 * @param caseInsensitive - whether names ignore case (Windows).
 * @returns a fresh record.
 */
export function mergeEnvironment(
  base: Readonly<Record<string, string>>,
  explicit: Readonly<Record<string, string | null | undefined>> | undefined,
  caseInsensitive: boolean,
): Record<string, string> {
  const env: Record<string, string> = { ...base };
  if (explicit === undefined) return env;
  for (const [name, value] of Object.entries(explicit)) {
    if (caseInsensitive) {
      const upper = name.toUpperCase();
      for (const key of Object.keys(env)) if (key.toUpperCase() === upper) delete env[key];
    } else {
      delete env[name];
    }
    if (typeof value === 'string') env[name] = value;
  }
  return env;
}

/**
 * Looks up a variable the way the platform does: exactly on POSIX; on Windows an
 * exact key wins, otherwise the first key that matches ignoring case.
 */
export function lookupEnvironment(env: Readonly<Record<string, string>>, name: string, caseInsensitive: boolean): string | undefined {
  if (Object.hasOwn(env, name)) return env[name];
  if (!caseInsensitive) return undefined;
  const upper = name.toUpperCase();
  for (const [key, value] of Object.entries(env)) if (key.toUpperCase() === upper) return value;
  return undefined;
}
