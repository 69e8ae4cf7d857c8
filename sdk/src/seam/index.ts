/**
 * The subprocess seam: its types, and the rules both sides of it keep (the
 * environment, the checks of a spawn spec, the limits, disposal), the
 * defaults of a spawn left unspecified, and the one-call run built on spawn.
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
export { MAX_TERMINAL_SIZE, MAX_TIMER_DELAY_MS, MAX_WAIT_MS, TERMINAL_SIGNALS } from './limits.ts';
export { abortReasonText, assertCwdString, assertEnvironment, assertGraceMs, assertPositiveInteger, assertProgram } from './validate.ts';
export type { InvalidArgument } from './validate.ts';
export { endAll, retryableOnce, settleAll } from './teardown.ts';
export { DEFAULT_GRACE_MS, DEFAULT_STDIO, spawnDefaults, terminalDefaults } from './defaults.ts';
export type { RunAsRequest, SpawnRequest, TerminalSpawnRequest } from './defaults.ts';
export { assertRunOptions, commandArgv, DEFAULT_RUN_OUTPUT_BYTES, finishRun, MAX_RUN_OUTPUT_BYTES, OutputCapture, runCommand, runningHandle } from './run.ts';
export type { CommandResult, RunCommandOptions, RunningProcess } from './run.ts';
export type { AskingUsageMeter, LimitsRequest, RunUsage, SessionLimits, SessionUsage, UsageMeter, UsageMetering, UsageReporting } from './usage.ts';
