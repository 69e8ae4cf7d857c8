/**
 * @execworld/sdk: the subprocess seam, and a remote runtime that implements it
 * over an execworld daemon.
 * @module @execworld/sdk
 */
export { DSH_ENV_PREFIX, SENSITIVE_ENV_PATTERN, mergeEnvironment, scrubEnvironment } from './seam/index.ts';
export type {
  CommandResult,
  LimitsRequest,
  RunUsage,
  SessionLimits,
  SessionUsage,
  UsageReporting,
  RunCommandOptions,
  SpawnRequest,
  SubprocessHandle,
  SubprocessOutcome,
  SubprocessRuntime,
  SubprocessSpawnSpec,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSignal,
  SubprocessTerminalSpawnSpec,
  TerminalSpawnRequest,
} from './seam/index.ts';
export { connect, DEFAULT_CONNECT_OPTIONS, RemoteRuntime } from './remote/runtime.ts';
export { localToken, localTokenFile } from './token-file.ts';
export { SANDBOX_ROUTER_PORT, sandboxRouter } from './remote/headers.ts';
export type { TokenHeader } from './remote/headers.ts';
export type { CertificateAuthority } from './remote/reach.ts';
export type { ConnectOptions, RemoteTerminalOptions } from './remote/runtime.ts';
export { RemoteProcess } from './remote/process.ts';
export { RemoteTerminal } from './remote/terminal.ts';
export type { RemoteTerminalForeground, TerminalScreen } from './remote/terminal.ts';
export type { Logger } from './remote/connection.ts';
export {
  AuthError,
  ConnectionError,
  DaemonError,
  ExecworldError,
  FileSystemError,
  InvalidRequestError,
  isExecworldError,
  LimitError,
  NotFoundError,
  REMOTE_ERROR_CLASSES,
  RemoteError,
  SpawnError,
  StateError,
} from './errors.ts';
export type { ClientErrorCode } from './errors.ts';
