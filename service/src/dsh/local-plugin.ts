/**
 * The DeepSeek harness plugin over this host's `LocalRuntime`:
 * `ctx.plugin(LocalSubprocess, {})` registers `ctx.subprocess`.
 * @module @execworld/service/dsh
 */
import { createSubprocessPlugin } from '@execworld/sdk/dsh';
import { LocalRuntime, type LocalRuntimeOptions } from '../provider/local-runtime.ts';

export const LocalSubprocess = createSubprocessPlugin<LocalRuntimeOptions | undefined>(
  'execworld local subprocess',
  (config) => new LocalRuntime(config ?? {}),
);

export default LocalSubprocess;
