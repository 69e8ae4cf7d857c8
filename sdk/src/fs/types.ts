/**
 * The filesystem seam's vocabulary: targets, versions, metadata, write
 * intents, edits and their outcomes, and the error codes. These shapes are
 * structurally the ones of `@deepseek-ai/dsh-fs@0.1.0-rc.8` (`ctx.fs`), less
 * the brands, so the SDK's remote provider serves that seam without the SDK
 * depending on it; `FsProvider` lists the twelve primitives.
 *
 * Target keys and versions are opaque: a consumer compares them and hands them
 * back, never parses them.
 * @module
 */

/** A path resolved to a stable identity: the same file by any path has the same `targetKey`. */
export interface FsTarget {
  /** Opaque identity for stale guards and lookups; the daemon's is the file's real path in the world. */
  readonly targetKey: string;
  /** The absolute path as asked for (not resolved through links), for messages and people. */
  readonly displayPath: string;
}

/** What `stat` says of a target (it follows links). */
export interface FsInfo {
  /** Opaque freshness token: it changes whenever the content or identity of the target does. */
  readonly version: string;
  readonly type: 'file' | 'directory' | 'other';
  /** Bytes of a regular file (and the entry's size for other kinds). */
  readonly size?: number | undefined;
}

/** What `lstat` says of a path entry, without following a final link. */
export interface FsPathInfo {
  readonly version: string;
  readonly type: 'file' | 'directory' | 'symlink' | 'other';
  readonly size?: number | undefined;
}

/** One child of a listed directory. */
export interface FsDirEntry {
  readonly name: string;
  /** What the child is once links are followed; `other` for a broken link or a vanished child. */
  readonly type: 'file' | 'directory' | 'other';
  readonly target: FsTarget;
  readonly version?: string | undefined;
  /** Only for regular files. */
  readonly size?: number | undefined;
}

/** A guard on a write: create only what is absent, or replace only the version seen. */
export type FsWriteIntent = { readonly kind: 'createIfAbsent' } | { readonly kind: 'replaceIfVersion'; readonly version: string };

export interface FsWriteOutcome {
  readonly operation: 'create' | 'update';
  readonly version: string;
  /** The text before, LF-normalised; null for a create, or when the prior content is not text or too large to return. */
  readonly before: string | null;
  /** The text written, LF-normalised. */
  readonly after: string;
}

/** A literal replacement; matching is done on LF-normalised text. */
export interface FsEditRequest {
  readonly oldString: string;
  readonly newString: string;
  readonly replaceAll: boolean;
}

export interface FsEditOutcome {
  readonly version: string;
  /** LF-normalised text before and after the edit. */
  readonly before: string;
  readonly after: string;
}

/** The codes every filesystem failure carries, as the seam names them. */
export const FS_ERROR_CODES = [
  'FS_NOT_FOUND',
  'FS_NOT_DIRECTORY',
  'FS_NOT_TEXT',
  'FS_NOT_REGULAR_FILE',
  'FS_TOO_LARGE',
  'FS_PERMISSION_DENIED',
  'FS_SANDBOX_DENIED',
  'FS_IO_ERROR',
  'FS_STALE_VERSION',
  'FS_NOT_OBSERVED',
  'FS_AMBIGUOUS_EDIT',
  'FS_EDIT_NOT_FOUND',
  'FS_ABORTED',
] as const;

export type FsErrorCode = (typeof FS_ERROR_CODES)[number];

/** Whether `code` is one of the seam's filesystem codes. */
export function isFsErrorCode(code: unknown): code is FsErrorCode {
  return typeof code === 'string' && (FS_ERROR_CODES as readonly string[]).includes(code);
}

/** Options of `resolve`: the base of a relative path, and cancellation. */
export interface FsResolveOptions {
  readonly cwd?: string | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** The twelve primitives of the filesystem seam (`ctx.fs`), as a provider offers them. */
export interface FsProvider {
  resolve(path: string, options?: FsResolveOptions): Promise<FsTarget>;
  /** The absolute path a process in the world opens for `target`. */
  processPath(target: FsTarget): string;
  /** The `file:` URI of `target`, in the world's platform syntax. */
  fileUrl(target: FsTarget): string;
  /** Whether `child` is `parent` or lies under it. */
  contains(parent: FsTarget, child: FsTarget): boolean;
  stat(target: FsTarget, signal?: AbortSignal): Promise<FsInfo | undefined>;
  lstat(path: string, options?: { cwd?: string | undefined }, signal?: AbortSignal): Promise<FsPathInfo | undefined>;
  readText(target: FsTarget, signal?: AbortSignal): Promise<string>;
  streamText(target: FsTarget, signal?: AbortSignal): Promise<AsyncIterable<string>>;
  readBytes(target: FsTarget, signal: AbortSignal | undefined, maxBytes: number): Promise<Uint8Array>;
  listDir(target: FsTarget, signal?: AbortSignal): Promise<FsDirEntry[]>;
  writeText(target: FsTarget, content: string, expected?: FsWriteIntent, signal?: AbortSignal): Promise<FsWriteOutcome>;
  editText(target: FsTarget, edit: FsEditRequest, expected?: { version: string }, signal?: AbortSignal): Promise<FsEditOutcome>;
}
