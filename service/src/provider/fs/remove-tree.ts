/**
 * Removing a directory tree that somebody else may be changing meanwhile (a
 * dead daemon's spill directory whose user still runs, an upload's stage in a
 * directory another user controls), without ever following a link.
 *
 * A recursive remove by name (`rm -rf`, Node's `rm`) looks at an entry, sees
 * a directory, then lists and empties it by its name: a directory swapped
 * for a link between the two steps leads the remove into wherever the link
 * points, with the remover's privileges. Here each directory is opened with
 * `O_NOFOLLOW` (a link there is refused, and is then unlinked as the entry it
 * is), and everything inside it is named through `/proc/self/fd/<fd>`, the
 * directory that was opened, whatever its name now leads to. Unlinking and
 * removing an entry never follow it either.
 * @module
 */
import { constants } from 'node:fs';
import { open, readdir, rm, rmdir, unlink } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { errnoOf } from './fs-error.ts';
import { PROC_FD } from './anchor.ts';

/** Deeper than this, a tree is left where it is: nothing the daemon makes is, and each level holds a descriptor. */
const MAX_DEPTH = 64;

/** What a removal left behind, and why: empty when everything went. */
export type Leftovers = { readonly path: string; readonly reason: string }[];

/**
 * Removes `path` (a file, a link or a directory tree) without following any
 * link. Where there is no `/proc` (not Linux) it removes by name, which only
 * the daemon's own directories are given to there.
 */
export async function removeTree(path: string): Promise<Leftovers> {
  if (!PROC_FD) {
    await rm(path, { recursive: true, force: true });
    return [];
  }
  let parent;
  try {
    parent = await open(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return [];
    return [{ path, reason: errnoOf(error) ?? (error as Error).message }];
  }
  try {
    const leftovers: Leftovers = [];
    await removeEntry(`/proc/self/fd/${parent.fd}`, basename(path), path, 0, leftovers);
    return leftovers;
  } finally {
    await parent.close();
  }
}

/**
 * Removes what the directory held by `via` (a `/proc/self/fd/<fd>` path)
 * holds, never following a link; the directory itself stays.
 * @param shown - the directory's path, for the leftovers.
 */
export async function emptyDirectory(via: string, shown: string): Promise<Leftovers> {
  const leftovers: Leftovers = [];
  await emptyInto(via, shown, 0, leftovers);
  return leftovers;
}

async function removeEntry(parentVia: string, name: string, shown: string, depth: number, leftovers: Leftovers): Promise<void> {
  const at = `${parentVia}/${name}`;
  let directory;
  try {
    directory = await open(at, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === 'ENOENT') return;
    // Not a directory (a file, a device), or a link (ELOOP): the entry itself goes.
    if (errno === 'ENOTDIR' || errno === 'ELOOP') await unlinkEntry(at, shown, leftovers);
    else leftovers.push({ path: shown, reason: errno ?? (error as Error).message });
    return;
  }
  try {
    if (depth >= MAX_DEPTH) {
      leftovers.push({ path: shown, reason: `deeper than ${MAX_DEPTH} directories` });
      return;
    }
    await emptyInto(`/proc/self/fd/${directory.fd}`, shown, depth, leftovers);
  } finally {
    await directory.close();
  }
  try {
    // A link swapped in for the directory meanwhile is no directory: rmdir refuses it and follows nothing.
    await rmdir(at);
  } catch (error) {
    if (errnoOf(error) !== 'ENOENT') leftovers.push({ path: shown, reason: errnoOf(error) ?? (error as Error).message });
  }
}

async function emptyInto(via: string, shown: string, depth: number, leftovers: Leftovers): Promise<void> {
  let names: string[];
  try {
    names = await readdir(via);
  } catch (error) {
    leftovers.push({ path: shown, reason: errnoOf(error) ?? (error as Error).message });
    return;
  }
  for (const name of names) await removeEntry(via, name, `${shown}/${name}`, depth + 1, leftovers);
}

async function unlinkEntry(at: string, shown: string, leftovers: Leftovers): Promise<void> {
  try {
    await unlink(at);
  } catch (error) {
    const errno = errnoOf(error);
    // EISDIR: a directory swapped in after the open said otherwise; it is left, not followed.
    if (errno !== 'ENOENT') leftovers.push({ path: shown, reason: errno ?? (error as Error).message });
  }
}
