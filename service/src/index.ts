/**
 * @execworld/service: the execworld daemon and the local subprocess provider.
 * @module @execworld/service
 */
export { LocalRuntime } from './provider/local-runtime.ts';
export type { LocalRuntimeOptions } from './provider/local-runtime.ts';
export { LocalTerminal } from './provider/posix/terminal.ts';
export { TERMINAL_SIGNALS } from './provider/host-terminal.ts';
export type { HostTerminal } from './provider/host-terminal.ts';
export type { TerminalForeground } from './provider/host-terminal.ts';
export { ManagedProcess } from './provider/process.ts';
export type { SpawnHooks } from './provider/process.ts';
export { CleanupError, ProviderError } from './provider/errors.ts';
export type { ProviderErrorCode } from './provider/errors.ts';
export { selectContainment } from './provider/platform/index.ts';
export type { Containment, ContainmentChoice, ContainmentMode, SessionCell } from './provider/containment/index.ts';
