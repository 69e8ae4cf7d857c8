/**
 * Persistent shells over any seam runtime: run a command, get its output and
 * exact exit status; cwd, variables and functions persist between runs.
 * @module @execworld/sdk/shell
 */
export { PersistentShell, RunDetachedError, ShellError, type ShellEngineSnapshot, type ShellErrorCode, type ShellOptions } from './persistent-shell.ts';
export type { RunOptions, RunReason, RunResult } from './types.ts';
export type { ShellDialect } from './dialect.ts';
export { bash, quoteForBash } from './bash.ts';
export { pwsh, quoteForPwsh } from './pwsh.ts';
export { renderTerminalText } from './render.ts';
