/**
 * How a new file's content reaches its target, for every write of the
 * daemon (the seam's writes and edits, uploads): staged in a private
 * directory beside the target, on the same filesystem, then put in place in
 * one step.
 *
 * The target's directory may be another user's, who can rename, replace or
 * link anything in it at any moment. So the stage directory is held from the
 * moment it is made (see `takeOwnDirectory`): its file is written, changed,
 * published and removed through it, never by a name in that directory, and
 * the stage is removed without following any link. The most such a user can
 * do is move the stage away, leaving it behind empty.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { link, lstat, mkdir, open, rename, rmdir, type FileHandle } from 'node:fs/promises';
import { takeOwnDirectory, type Anchor } from './anchor.ts';
import { errnoOf } from './fs-error.ts';
import { emptyDirectory } from './remove-tree.ts';

export interface Stage {
  /** The stage's name in the target's directory: `<prefix><uuid>`. */
  readonly name: string;
  /** The stage directory (0700), held: its file is reached through it whatever happens to its name. */
  readonly anchor: Anchor;
  /** Its one file (0600), empty when made, as a path through the anchor. */
  readonly content: string;
}

/** Makes a stage in `directory`, and answers it with its content opened for writing. */
export async function makeStage(directory: Anchor, prefix: string): Promise<Stage & { readonly handle: FileHandle }> {
  const name = `${prefix}${randomUUID()}`;
  await mkdir(directory.child(name), { mode: 0o700 });
  // Refused when what is there by now is not the directory just made: it is left to whoever put it there.
  const anchor = await takeOwnDirectory(directory.child(name));
  const stage = { name, anchor, content: anchor.child('content') };
  try {
    return { ...stage, handle: await open(stage.content, 'wx', 0o600) };
  } catch (error) {
    await removeStage(stage, directory);
    throw error;
  }
}

/**
 * Puts the staged `content` at `destination`: renamed over whatever is
 * there, or, when nothing may be replaced, linked (which the kernel refuses
 * if anything is there). Answers false when it was refused so.
 */
export async function place(content: string, destination: string, replace: boolean): Promise<boolean> {
  if (replace) {
    await rename(content, destination);
    return true;
  }
  try {
    await link(content, destination);
    return true;
  } catch (error) {
    if (errnoOf(error) === 'EEXIST') return false;
    throw error;
  }
}

/**
 * Removes a stage of `directory` and whatever it still holds, following no
 * link: emptied through its anchor, then removed from `directory` only if its
 * name still leads to it there.
 */
export async function removeStage(stage: Stage, directory: Anchor): Promise<void> {
  try {
    await emptyDirectory(stage.anchor.via, stage.anchor.real);
    const held = await stage.anchor.stat();
    const there = await lstat(directory.child(stage.name), { bigint: true }).catch(() => undefined);
    if (there !== undefined && there.dev === held.dev && there.ino === held.ino) await rmdir(directory.child(stage.name)).catch(() => undefined);
  } catch (_error) {
    // What cannot be removed is left: an empty directory at worst.
  } finally {
    await stage.anchor.release();
  }
}
