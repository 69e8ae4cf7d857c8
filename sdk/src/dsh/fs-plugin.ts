/**
 * The DeepSeek harness's filesystem seam (`ctx.fs`) over any execworld
 * filesystem provider, and over a daemon: loaded in place of
 * `@deepseek-ai/dsh-fs-local`, the agent's read, write and edit tools work on
 * the files of the world its commands run in.
 *
 * Failures reach the harness as `FsError`s of `@deepseek-ai/dsh-fs` with the
 * seam's codes, which its tool registry reports on its results.
 * @module
 */
import type { Context } from '@deepseek-ai/cordis';
import { FileSystem as DshFileSystem, FsError } from '@deepseek-ai/dsh-fs';
import { isFsErrorCode, type FsProvider } from '../fs/types.ts';

type Dsh = DshFileSystem;

/** `error` as the seam's FsError when it carries a filesystem code; anything else as it is. */
function asFsError(error: unknown): unknown {
  if (error instanceof FsError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (!isFsErrorCode(code)) return error;
  return new FsError((error as Error).message, code, { cause: error });
}

async function seam<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asFsError(error);
  }
}

/** The class of a `ctx.fs` plugin whose config is `C`. */
export type FileSystemPlugin<C> = new (ctx: Context, config: C) => DshFileSystem & { readonly files: FsProvider };

/**
 * Builds a `ctx.fs` plugin over the provider `create` makes from the
 * plugin's config; `dispose`, when given, runs as the plugin unloads.
 */
export function createFileSystemPlugin<C>(label: string, create: (config: C) => { files: FsProvider; dispose?: () => Promise<void> }): FileSystemPlugin<C> {
  return class ExecworldFileSystem extends DshFileSystem {
    readonly files: FsProvider;

    constructor(ctx: Context, config: C) {
      super(ctx);
      const made = create(config);
      this.files = made.files;
      if (made.dispose !== undefined) ctx.effect(() => () => made.dispose?.(), `${label} teardown`);
    }

    resolve(path: string, opts?: { cwd?: string; signal?: AbortSignal }): ReturnType<Dsh['resolve']> {
      return seam(() => this.files.resolve(path, opts)) as ReturnType<Dsh['resolve']>;
    }

    processPath(target: Parameters<Dsh['processPath']>[0]): string {
      return this.files.processPath(target);
    }

    fileUrl(target: Parameters<Dsh['fileUrl']>[0]): string {
      return this.files.fileUrl(target);
    }

    contains(parent: Parameters<Dsh['contains']>[0], child: Parameters<Dsh['contains']>[1]): boolean {
      return this.files.contains(parent, child);
    }

    stat(...[target, signal]: Parameters<Dsh['stat']>): ReturnType<Dsh['stat']> {
      return seam(() => this.files.stat(target, signal)) as ReturnType<Dsh['stat']>;
    }

    lstat(...[path, opts, signal]: Parameters<Dsh['lstat']>): ReturnType<Dsh['lstat']> {
      return seam(() => this.files.lstat(path, opts, signal)) as ReturnType<Dsh['lstat']>;
    }

    readText(...[target, signal]: Parameters<Dsh['readText']>): Promise<string> {
      return seam(() => this.files.readText(target, signal));
    }

    async streamText(...[target, signal]: Parameters<Dsh['streamText']>): Promise<AsyncIterable<string>> {
      const chunks = await seam(() => this.files.streamText(target, signal));
      return (async function* translated() {
        try {
          yield* chunks;
        } catch (error) {
          throw asFsError(error);
        }
      })();
    }

    readBytes(...[target, signal, maxBytes]: Parameters<Dsh['readBytes']>): Promise<Uint8Array> {
      return seam(() => this.files.readBytes(target, signal, maxBytes));
    }

    listDir(...[target, signal]: Parameters<Dsh['listDir']>): ReturnType<Dsh['listDir']> {
      return seam(() => this.files.listDir(target, signal)) as ReturnType<Dsh['listDir']>;
    }

    writeText(...[target, content, expected, signal]: Parameters<Dsh['writeText']>): ReturnType<Dsh['writeText']> {
      return seam(() => this.files.writeText(target, content, expected, signal)) as ReturnType<Dsh['writeText']>;
    }

    editText(...[target, edit, expected, signal]: Parameters<Dsh['editText']>): ReturnType<Dsh['editText']> {
      return seam(() => this.files.editText(target, edit, expected, signal)) as ReturnType<Dsh['editText']>;
    }
  };
}
