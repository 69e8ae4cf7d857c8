/**
 * Unpacking a directory's tar stream, the one way both ends do it: tar's own
 * protections for files, directories and hard links (a path with `..`, a
 * link in the way, a hard link out of the directory are refused), owners
 * never taken from the archive, and symbolic links made last, with their
 * targets exactly as archived (an absolute one stays absolute), through a
 * maker the caller confines. Made last, no link can be in the way of an
 * entry of the same archive.
 * @module
 */
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';

/** The most warnings an unpack lists. */
const MAX_WARNINGS = 100;

/** What an unpacked archive did: its entries, and what was refused or changed in them, with why. */
export interface ArchiveResult {
  readonly entries: number;
  readonly warnings: readonly { readonly path: string; readonly message: string }[];
}

/** Makes the symbolic link `path` (relative to the directory, checked to stay in it) pointing at `target`. */
export type LinkMaker = (path: string, target: string) => Promise<void>;

/** How an unpack may be narrowed. */
export interface UnpackOptions {
  readonly signal?: AbortSignal | undefined;
  /** The permission bits an entry may carry (an unpacker that is root takes no setuid, setgid or sticky bit: 0o777). @default 0o7777 */
  readonly modeBits?: number;
  /** Why the entry `path` (relative to the directory), or the file a hard link `linkpath` names, may not be unpacked; undefined when it may. */
  readonly refuse?: (path: string, linkpath: string | undefined) => string | undefined;
}

/** Unpacks the tar stream `body` into the directory `cwd` (which must exist); symbolic links are made at the end by `makeLink`. */
export async function unpackArchive(body: Readable, cwd: string, makeLink: LinkMaker, options: UnpackOptions = {}): Promise<ArchiveResult> {
  const { signal, modeBits = 0o7777, refuse } = options;
  let entries = 0;
  const warnings: { path: string; message: string }[] = [];
  const warn = (path: string, message: string): void => {
    if (warnings.length < MAX_WARNINGS) warnings.push({ path, message });
  };
  const links: { path: string; target: string }[] = [];
  const extract = tar.extract({
    cwd,
    preserveOwner: false,
    filter: (path, entry) => {
      const header = entry as { type?: unknown; mode?: number; linkpath?: string };
      const refused = refuse?.(path, header.type === 'Link' ? header.linkpath : undefined);
      if (refused !== undefined) {
        warn(path, refused);
        return false;
      }
      if (typeof header.mode === 'number') header.mode &= modeBits;
      if (header.type !== 'SymbolicLink') return true;
      links.push({ path, target: (entry as { linkpath?: string }).linkpath ?? '' });
      return false;
    },
    onReadEntry: () => {
      entries += 1;
    },
    onwarn: (_code, message, data) => {
      const path = (data as { entry?: { path?: unknown } } | undefined)?.entry?.path ?? (data as { path?: unknown } | undefined)?.path;
      warn(typeof path === 'string' ? path : '', message);
    },
  }) as unknown as NodeJS.WritableStream;
  await pipeline(body, extract, signal === undefined ? {} : { signal });
  for (const { path, target } of links) {
    const normal = posix.normalize(path).replace(/\/+$/, '');
    if (posix.isAbsolute(normal) || normal === '.' || normal === '..' || normal.startsWith('../') || target === '' || target.includes('\0')) {
      warn(path, 'a link whose path leaves the directory, or with no target, is not made');
      continue;
    }
    try {
      await makeLink(normal, target);
    } catch (error) {
      warn(path, `the link was not made: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  // Links are set aside before tar reads them as entries.
  return { entries: entries + links.length, warnings };
}
