/**
 * @execworld/service: the execworld daemon and the local subprocess provider.
 * @module @execworld/service
 */
export { LocalRuntime } from './provider/local-runtime.ts';
export type { LocalRuntimeOptions } from './provider/local-runtime.ts';
export { LocalTerminal, TERMINAL_SIGNALS } from './provider/terminal.ts';
export type { HostTerminal } from './provider/terminal.ts';
export type { TerminalForeground } from './provider/terminal.ts';
export { ManagedProcess } from './provider/process.ts';
export type { SpawnHooks } from './provider/process.ts';
export { CleanupError, ProviderError } from './provider/errors.ts';
export type { ProviderErrorCode } from './provider/errors.ts';
export { selectContainment } from './provider/containment/index.ts';
export type { Containment, ContainmentChoice, ContainmentMode, SessionCell } from './provider/containment/index.ts';
