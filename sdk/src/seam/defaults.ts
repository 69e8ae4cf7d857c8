/**
 * What a spawn or a terminal takes when the caller leaves a field out. The
 * seam's own specs (`SubprocessSpawnSpec`, `SubprocessTerminalSpawnSpec`)
 * stay fully specified, as `@deepseek-ai/dsh-subprocess` has them; the
 * execworld runtimes also take the shorter requests below and fill them in
 * here, each side once: the daemon for what reaches it, a local runtime for
 * its own host. The working directory is each side's own to choose (the
 * daemon: the owner's home for an owner mapped to an OS user, else its
 * `--default-cwd`, else its own working directory; a local runtime: its
 * process's working directory), so it is an argument.
 * @module
 */
import { DEFAULT_GRACE_MS } from './limits.ts';
import type { SubprocessSpawnSpec, SubprocessStdio, SubprocessTerminalSpawnSpec } from './types.ts';
import type { LimitsRequest } from './usage.ts';

export { DEFAULT_GRACE_MS };

/**
 * The OS user a program runs as, named as docker's `--user` names one: a user
 * name or a numeric uid (no `name:group`). A daemon extension, beyond the
 * seam's specs: the daemon runs the program as that user where its owner may
 * (see docs/api.md); a local runtime only as its own process's user.
 */
export interface RunAsRequest {
  /** @default the owner's OS user on a daemon (its token file's user=, else the daemon's); a local runtime's own */
  user?: string | undefined;
}

/** Stdio of a spawn created without it (each entry on its own): three pipes, as Node's `child_process.spawn` has them. */
export const DEFAULT_STDIO: Readonly<SubprocessStdio> = Object.freeze({ stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' });

/** A spawn spec whose `cwd`, `stdio` (or any of its entries) and `graceMs` may be left out. */
export type SpawnRequest = Omit<SubprocessSpawnSpec, 'cwd' | 'stdio' | 'graceMs'> & {
  /** @default the world's (see the module's notes) */
  cwd?: string | undefined;
  /** @default {@link DEFAULT_STDIO}, entry by entry */
  stdio?: { [K in keyof SubprocessStdio]?: SubprocessStdio[K] | undefined } | undefined;
  /** @default {@link DEFAULT_GRACE_MS} */
  graceMs?: number | undefined;
} & RunAsRequest &
  LimitsRequest;

/** A terminal spec whose `cwd` and `graceMs` may be left out. */
export type TerminalSpawnRequest = Omit<SubprocessTerminalSpawnSpec, 'cwd' | 'graceMs'> & {
  /** @default the world's (see the module's notes) */
  cwd?: string | undefined;
  /** @default {@link DEFAULT_GRACE_MS} */
  graceMs?: number | undefined;
} & RunAsRequest &
  LimitsRequest;

/** `spec` with its stdio entries and grace filled in, and its cwd, when it has none, from `cwd()`. */
export function spawnDefaults(spec: SpawnRequest, cwd: () => string): SubprocessSpawnSpec;
/** `spec` with its stdio entries and grace filled in; its cwd as given, for the other side to fill in. */
export function spawnDefaults(spec: SpawnRequest): Omit<SubprocessSpawnSpec, 'cwd'> & { cwd?: string | undefined } & RunAsRequest & LimitsRequest;
export function spawnDefaults(
  spec: SpawnRequest,
  cwd?: () => string,
): Omit<SubprocessSpawnSpec, 'cwd'> & { cwd?: string | undefined } & RunAsRequest & LimitsRequest {
  const given = spec.stdio ?? {};
  const stdio: SubprocessStdio = {
    stdin: given.stdin ?? DEFAULT_STDIO.stdin,
    stdout: given.stdout ?? DEFAULT_STDIO.stdout,
    stderr: given.stderr ?? DEFAULT_STDIO.stderr,
  };
  return { ...spec, stdio, graceMs: spec.graceMs ?? DEFAULT_GRACE_MS, cwd: spec.cwd ?? cwd?.() };
}

/** `spec` with its grace filled in, and its cwd, when it has none, from `cwd()`. */
export function terminalDefaults(spec: TerminalSpawnRequest, cwd: () => string): SubprocessTerminalSpawnSpec;
/** `spec` with its grace filled in; its cwd as given, for the other side to fill in. */
export function terminalDefaults(
  spec: TerminalSpawnRequest,
): Omit<SubprocessTerminalSpawnSpec, 'cwd'> & { cwd?: string | undefined } & RunAsRequest & LimitsRequest;
export function terminalDefaults(
  spec: TerminalSpawnRequest,
  cwd?: () => string,
): Omit<SubprocessTerminalSpawnSpec, 'cwd'> & { cwd?: string | undefined } & RunAsRequest & LimitsRequest {
  return { ...spec, graceMs: spec.graceMs ?? DEFAULT_GRACE_MS, cwd: spec.cwd ?? cwd?.() };
}
