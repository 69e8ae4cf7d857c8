/**
 * The subprocess seam: its types and its environment rules.
 * @module @execworld/sdk/seam
 */
export { DSH_ENV_PREFIX } from './types.ts';
export type {
  CollectedOutput,
  DshEnvironment,
  DshEnvironmentKey,
  SubprocessCollect,
  SubprocessCollectedOutputs,
  SubprocessHandle,
  SubprocessOutcome,
  SubprocessOutputMode,
  SubprocessOutputRead,
  SubprocessOutputReader,
  SubprocessRuntime,
  SubprocessSpawnSpec,
  SubprocessStdinMode,
  SubprocessStdio,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSignal,
  SubprocessTerminalSpawnSpec,
} from './types.ts';
export { SENSITIVE_ENV_PATTERN, isScrubbedName, lookupEnvironment, mergeEnvironment, scrubEnvironment } from './env.ts';
export { ByteTail } from './byte-tail.ts';
