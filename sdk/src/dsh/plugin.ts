/**
 * A cordis plugin that registers any execworld runtime as the DeepSeek
 * harness's `ctx.subprocess`. Loaded in place of
 * `@deepseek-ai/dsh-subprocess-local`, it moves every persistent shell, PTY
 * and command of the harness onto that runtime.
 *
 * The `@deepseek-ai` packages are peer dependencies of this entry only.
 * @module @execworld/sdk/dsh
 */
import type { Context } from '@deepseek-ai/cordis';
import { SubprocessRuntime as DshSubprocessRuntime } from '@deepseek-ai/dsh-subprocess';
import type { SubprocessHandle, SubprocessRuntime, SubprocessSpawnSpec, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '../seam/types.ts';
import { RemoteRuntime, type ConnectOptions } from '../remote/runtime.ts';

/** A runtime the plugin can own: it is disposed when the plugin unloads. */
export interface OwnedRuntime extends SubprocessRuntime {
  dispose?(): Promise<void>;
}

/** The class of a `ctx.subprocess` plugin whose config is `C`. */
export type SubprocessPlugin<C> = new (ctx: Context, config: C) => DshSubprocessRuntime & { readonly runtime: OwnedRuntime };

/**
 * Builds a `ctx.subprocess` plugin over the runtime `create` makes from the
 * plugin's config. Unloading the plugin disposes the runtime, which terminates
 * and joins everything it still owns.
 * @param label - names the teardown effect in cordis diagnostics.
 */
export function createSubprocessPlugin<C>(label: string, create: (config: C) => OwnedRuntime): SubprocessPlugin<C> {
  return class ExecworldSubprocess extends DshSubprocessRuntime {
    readonly runtime: OwnedRuntime;

    constructor(ctx: Context, config: C) {
      super(ctx);
      const runtime = create(config);
      this.runtime = runtime;
      ctx.effect(() => () => runtime.dispose?.(), `${label} teardown`);
    }

    resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<string> {
      return this.runtime.resolveExecutable(command, env, signal);
    }

    spawn(spec: SubprocessSpawnSpec): SubprocessHandle {
      return this.runtime.spawn(spec);
    }

    spawnTerminal(spec: SubprocessTerminalSpawnSpec): Promise<SubprocessTerminalHandle> {
      return this.runtime.spawnTerminal(spec);
    }
  };
}

/** Config of the remote plugin: the daemon's URL and the connect options. */
export interface RemoteSubprocessConfig extends ConnectOptions {
  readonly url: string;
}

/**
 * The DeepSeek harness plugin over a daemon: `ctx.plugin(RemoteSubprocess, { url, token })`
 * registers `ctx.subprocess`, and every shell, PTY and command of the harness
 * runs in the daemon's execution world.
 */
export const RemoteSubprocess = createSubprocessPlugin<RemoteSubprocessConfig>(
  'execworld remote subprocess',
  ({ url, ...options }) => new RemoteRuntime(url, options),
);

export default RemoteSubprocess;
