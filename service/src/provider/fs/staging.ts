/**
 * How a new file's content reaches its target, for every write of the
 * daemon (the seam's writes and edits, uploads): staged in a private
 * directory beside the target, on the same filesystem, then put in place in
 * one step.
 * @module
 */
import { randomUUID } from 'node:crypto';
import { link, mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import type { Anchor } from './anchor.ts';
import { errnoOf } from './fs-error.ts';

export interface Stage {
  /** The private directory (0700), named `<prefix><uuid>` in the target's directory. */
  readonly directory: string;
  /** Its one file (0600), empty when made. */
  readonly content: string;
}

/** Makes a stage in `directory`, and answers it with its content opened for writing. */
export async function makeStage(directory: Anchor, prefix: string): Promise<Stage & { readonly handle: FileHandle }> {
  const stage = directory.child(`${prefix}${randomUUID()}`);
  await mkdir(stage, { mode: 0o700 });
  try {
    const content = `${stage}/content`;
    const handle = await open(content, 'wx', 0o600);
    return { directory: stage, content, handle };
  } catch (error) {
    await removeStage(stage);
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

/** Removes a stage and whatever it still holds. */
export async function removeStage(stage: string): Promise<void> {
  await rm(stage, { recursive: true, force: true }).catch(() => undefined);
}
