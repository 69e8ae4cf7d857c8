/**
 * Cordis plugins for the DeepSeek harness. `RemoteWorld` registers a
 * daemon's world as both `ctx.subprocess` and `ctx.fs`: loaded in place of
 * `@deepseek-ai/dsh-subprocess-local` and `@deepseek-ai/dsh-fs-local`, it
 * moves every shell, PTY, command and file tool of the harness into that
 * world, over one connection. `RemoteSubprocess` and `RemoteFileSystem`
 * register one of the two.
 *
 * The `@deepseek-ai` packages are peer dependencies of this entry only.
 * @module @execworld/sdk/dsh
 */
import type { Context } from '@deepseek-ai/cordis';
import { SubprocessRuntime as DshSubprocessRuntime } from '@deepseek-ai/dsh-subprocess';
import type { SubprocessHandle, SubprocessRuntime, SubprocessSpawnSpec, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '../seam/types.ts';
import { RemoteRuntime, type ConnectOptions } from '../remote/runtime.ts';
import { RemoteFiles, type RemoteFilesOptions } from '../fs/remote-files.ts';
import { createFileSystemPlugin } from './fs-plugin.ts';

export { createFileSystemPlugin, type FileSystemPlugin } from './fs-plugin.ts';

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

/** Config of the remote filesystem plugin: the daemon's URL, the connect options, and the filesystem's own. */
export interface RemoteFileSystemConfig extends ConnectOptions, RemoteFilesOptions {
  readonly url: string;
}

function split(config: RemoteFileSystemConfig): { url: string; connect: ConnectOptions; files: RemoteFilesOptions } {
  const { url, cwd, prefetchTextBytes, prefetchMaxAgeMs, ...connect } = config;
  return {
    url,
    connect,
    files: { cwd, ...(prefetchTextBytes === undefined ? {} : { prefetchTextBytes }), ...(prefetchMaxAgeMs === undefined ? {} : { prefetchMaxAgeMs }) },
  };
}

/** `ctx.plugin(RemoteFileSystem, { url, token })` registers `ctx.fs` over the daemon's files, on a connection of its own. */
export const RemoteFileSystem = createFileSystemPlugin<RemoteFileSystemConfig>('execworld remote fs', (config) => {
  const { url, connect, files } = split(config);
  const runtime = new RemoteRuntime(url, connect);
  return { files: new RemoteFiles(runtime, files), dispose: () => runtime.dispose() };
});

/** Config of {@link RemoteWorld}: the daemon, and which of the two seams to register. */
export interface RemoteWorldConfig extends RemoteFileSystemConfig {
  /** Register `ctx.subprocess`. @default true */
  readonly subprocess?: boolean;
  /** Register `ctx.fs`. @default true */
  readonly fs?: boolean;
}

/**
 * `ctx.plugin(RemoteWorld, { url, token })` registers both `ctx.subprocess`
 * and `ctx.fs` over one connection to the daemon, so a file the agent writes
 * is the file its commands see. Unloading it ends what it started.
 */
export const RemoteWorld = {
  name: 'execworld-remote-world',
  async apply(ctx: Context, config: RemoteWorldConfig): Promise<void> {
    const { subprocess = true, fs = true, ...rest } = config;
    const { url, connect, files } = split(rest);
    const runtime = new RemoteRuntime(url, connect);
    ctx.effect(() => () => runtime.dispose(), 'execworld remote world teardown');
    if (subprocess) {
      const shared: OwnedRuntime = {
        resolveExecutable: (command, env, signal) => runtime.resolveExecutable(command, env, signal),
        spawn: (spec) => runtime.spawn(spec),
        spawnTerminal: (spec) => runtime.spawnTerminal(spec),
      };
      await ctx.plugin(
        createSubprocessPlugin('execworld remote world subprocess', () => shared),
        {},
      );
    }
    if (fs)
      await ctx.plugin(
        createFileSystemPlugin('execworld remote world fs', () => ({ files: new RemoteFiles(runtime, files) })),
        {},
      );
  },
};

export default RemoteSubprocess;
