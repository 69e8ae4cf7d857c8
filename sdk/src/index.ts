/**
 * @execworld/sdk: the subprocess seam shared by every execworld runtime.
 * @module @execworld/sdk
 */
export { DSH_ENV_PREFIX, SENSITIVE_ENV_PATTERN, mergeEnvironment, scrubEnvironment } from './seam/index.ts';
export type {
  SubprocessHandle,
  SubprocessOutcome,
  SubprocessRuntime,
  SubprocessSpawnSpec,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSignal,
  SubprocessTerminalSpawnSpec,
} from './seam/index.ts';
