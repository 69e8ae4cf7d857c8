/**
 * An upload's stage is recorded by the daemon, as root, from what its owner's
 * transfer says of it, and a later daemon removes what the record names. A
 * mapped owner's transfer is its file worker, a process of the user's: the
 * daemon takes nothing of its answer on trust. Here the transfer answers as a
 * worker the user took over would (its answer forged), and the record must
 * refuse to name anything but a stage directory of that user's, by a stage's
 * name, with the device and inode it says; and a sweep must leave a stage
 * whose owner is no longer the one recorded.
 */
import { randomUUID } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { OwnerTransfer, StageIdentity, UploadStage } from '../../service/src/provider/api.ts';
import { recordingStages, StageRecords } from '../../service/src/provider/fs/stage-records.ts';
import { isCi } from '../helpers/tools.ts';

/** A user id no account has: the stage's owner, as a mapped owner's worker would make it. */
const USER = 54_321;
const OTHER = 54_322;
const asRoot = process.getuid?.() === 0;

const scratch = mkdtempSync(join(tmpdir(), 'ew-stage-records-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A transfer whose stageUpload answers `identity`, and which counts the discards it is asked for. */
function forging(identity: StageIdentity): { transfer: OwnerTransfer; discards: () => number } {
  let discards = 0;
  const refused = (): never => {
    throw new Error('not asked of this transfer');
  };
  const stage: UploadStage = {
    path: join(identity.directory, 'target'),
    identity,
    offset: () => Promise.resolve(0),
    append: () => Promise.resolve(0),
    complete: refused,
    discard: () => {
      discards += 1;
      return Promise.resolve();
    },
  };
  return {
    transfer: {
      mkdir: refused,
      remove: refused,
      rename: refused,
      digest: refused,
      pack: refused,
      unpack: refused,
      stageUpload: () => Promise.resolve(stage),
    },
    discards: () => discards,
  };
}

/** A directory named as a stage is, owned by `uid`, and its identity. */
function stageOf(uid: number, directory = mkdtempSync(join(scratch, 'target-'))): StageIdentity {
  const name = `.execworld-upload-${randomUUID()}`;
  mkdirSync(join(directory, name), { mode: 0o700 });
  writeFileSync(join(directory, name, 'content'), 'partial');
  chownSync(join(directory, name, 'content'), uid, uid);
  chownSync(join(directory, name), uid, uid);
  const info = statSync(join(directory, name), { bigint: true });
  return { directory, name, dev: String(info.dev), ino: String(info.ino) };
}

// Stages of another uid are made with chown, as root; CI runs as root, so there a run that is not fails instead of skipping.
describe.skipIf(!asRoot && !isCi())("a stage's record, from a transfer that may lie (a mapped owner's worker)", () => {
  const recordsIn = (): { records: StageRecords; directory: string } => {
    const directory = join(mkdtempSync(join(scratch, 'state-')), 'stages');
    return { records: new StageRecords(directory), directory };
  };

  it("is refused for a name that leads out of the stage's directory, and the stage is discarded", async () => {
    const { records, directory } = recordsIn();
    const honest = stageOf(USER);
    const escape = join(scratch, 'escaped');
    for (const name of [`x/${'../'.repeat(12)}${escape.slice(1)}`, '..', '.', 'content', `.execworld-upload-${randomUUID()}/..`]) {
      const { transfer, discards } = forging({ ...honest, name });
      await expect(recordingStages(transfer, records, USER).stageUpload('target', { overwrite: true })).rejects.toThrow(/stage/);
      expect(discards()).toBe(1);
    }
    expect(existsSync(`${escape}.json`)).toBe(false);
    expect(existsSync(directory) ? readdirSync(directory) : []).toEqual([]);
  });

  it("is refused for a directory that is not the user's, or not the one it names, however it is named", async () => {
    const { records, directory } = recordsIn();
    // A directory of root's (or another user's) that the user could stat: root would empty and remove it later.
    for (const identity of [stageOf(0), stageOf(OTHER)]) {
      const { transfer, discards } = forging(identity);
      await expect(recordingStages(transfer, records, USER).stageUpload('target', { overwrite: true })).rejects.toThrow(/stage/);
      expect(discards()).toBe(1);
    }
    // The user's own stage, said to be another directory (its device and inode another's).
    const theirs = stageOf(USER);
    const elsewhere = statSync(scratch, { bigint: true });
    const { transfer } = forging({ ...theirs, dev: String(elsewhere.dev), ino: String(elsewhere.ino) });
    await expect(recordingStages(transfer, records, USER).stageUpload('target', { overwrite: true })).rejects.toThrow(/stage/);
    expect(existsSync(directory) ? readdirSync(directory) : []).toEqual([]);
  });

  it("records the user's own stage with its owner, which a sweep removes only while it is still the user's", async () => {
    const { records, directory } = recordsIn();
    const kept = stageOf(USER);
    const changed = stageOf(USER);
    for (const identity of [kept, changed]) {
      const { transfer } = forging(identity);
      await recordingStages(transfer, records, USER).stageUpload('target', { overwrite: true });
    }
    const written = readdirSync(directory).map((name) => JSON.parse(readFileSync(join(directory, name), 'utf8')) as { uid?: number });
    expect(written.map((record) => record.uid)).toEqual([USER, USER]);
    // Its owner changed meanwhile (the directory is not the user's now): the sweep leaves it, saying why.
    chownSync(join(changed.directory, changed.name), OTHER, OTHER);
    const sweep = await records.sweep(() => false);
    expect(sweep.removed).toEqual([join(kept.directory, kept.name)]);
    expect(sweep.left).toEqual([{ stage: join(changed.directory, changed.name), reason: expect.stringMatching(/owner/) as string }]);
    expect(existsSync(join(kept.directory, kept.name))).toBe(false);
    expect(readdirSync(join(changed.directory, changed.name))).toEqual(['content']);
    expect(readdirSync(directory)).toEqual([]);
  });

  it('leaves a stage a record names without its owner (written by a daemon that did not check it)', async () => {
    const { records, directory } = recordsIn();
    const stage = stageOf(USER);
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    writeFileSync(join(directory, `1-${stage.name}.json`), JSON.stringify(stage));
    const sweep = await records.sweep(() => false);
    expect(sweep.removed).toEqual([]);
    expect(existsSync(join(stage.directory, stage.name))).toBe(true);
    expect(readdirSync(directory)).toEqual([]);
  });
});
