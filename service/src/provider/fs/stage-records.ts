/**
 * What an upload leaves on disk until it completes: its stage, beside its
 * target, anywhere in the world. A daemon that is killed cannot discard it,
 * so each stage is recorded in the state directory while it exists
 * (`stages/<daemon pid>-<stage name>.json`: its directory's real path, its
 * name, and the directory's device and inode), and a daemon that starts
 * removes the stages of dead daemons' records.
 *
 * The stage's directory may be another user's by then, who may have moved
 * the stage away and put anything, a link included, at its name. So a stage
 * is removed only when what its name leads to is the very directory recorded
 * (device and inode, opened without following a link) and still has the
 * owner recorded, and it is emptied through its descriptor, following no link
 * (see remove-tree.ts).
 *
 * What a stage is comes from its owner's transfer: for a mapped owner, its
 * file worker, a process of the user's, which the user's programs may have
 * taken over. The daemon (root) takes nothing of that answer on trust: it
 * records a stage only by a name a stage has (one entry, `.execworld-upload-`
 * and a UUID) and only once it has seen, itself, that the name leads to a
 * directory of the owner's user with the device and inode said. A forged
 * answer so names nothing but a directory the user could remove anyway.
 * @module
 */
import { closeSync, constants, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { lstat, open, rmdir } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { errnoOf, FsFailure } from './fs-error.ts';
import { emptyDirectory } from './remove-tree.ts';
import type { OwnerTransfer, StageIdentity, UploadStage } from '../api.ts';
import { O_PATH, PROC_FD } from './anchor.ts';

/** What a sweep of stages did: the stages removed, and those left with why. */
export interface StageSweep {
  readonly removed: string[];
  readonly left: { stage: string; reason: string }[];
}

/** The names makeStage gives a stage (staging.ts): one entry, and nothing else is ever recorded. */
const STAGE_NAME = /^\.execworld-upload-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A stage as recorded: its identity, and the user id that owns it. */
interface StageRecord extends StageIdentity {
  readonly uid: number;
}

export class StageRecords {
  readonly #directory: string;

  /** @param directory - where records are kept (`<state>/stages`), made 0700 when missing. */
  constructor(directory: string) {
    this.#directory = directory;
  }

  /**
   * Records a stage of `uid`'s until {@link forget}, once it has seen that the stage is one: its name a
   * stage's, and what the name leads to in its directory (not followed if a link) a directory of `uid`'s
   * with the device and inode said. Undefined `uid`: a stage the daemon made itself, whose owner is whoever
   * the filesystem says (a mount may give its files one owner), recorded as it is. Nothing is recorded
   * where it could not be removed safely (no /proc).
   * @throws {FsFailure} FS_IO_ERROR when the stage is not what `stage` says.
   */
  record(stage: StageIdentity, uid: number | undefined): void {
    if (!PROC_FD) return;
    const refused = (why: string): FsFailure =>
      new FsFailure('FS_IO_ERROR', `the upload's stage is not what its owner's transfer said (${why}): it is not recorded`);
    if (!STAGE_NAME.test(stage.name)) throw refused("not a stage's name");
    if (!isAbsolute(stage.directory) || !/^\d+$/.test(stage.dev) || !/^\d+$/.test(stage.ino)) throw refused('not a directory, device and inode');
    let parent: number;
    try {
      parent = openSync(stage.directory, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (error) {
      throw refused(errnoOf(error) ?? 'its directory cannot be opened');
    }
    let owner: number;
    try {
      const info = lstatSync(`/proc/self/fd/${parent}/${stage.name}`, { bigint: true });
      if (!info.isDirectory() || String(info.dev) !== stage.dev || String(info.ino) !== stage.ino) throw refused('another entry is at its name');
      if (uid !== undefined && info.uid !== BigInt(uid)) throw refused(`its directory is not the owner's user's, uid ${uid}`);
      owner = Number(info.uid);
    } catch (error) {
      throw error instanceof FsFailure ? error : refused(errnoOf(error) ?? 'nothing is at its name');
    } finally {
      closeSync(parent);
    }
    const record: StageRecord = { directory: stage.directory, name: stage.name, dev: stage.dev, ino: stage.ino, uid: owner };
    mkdirSync(this.#directory, { recursive: true, mode: 0o700 });
    writeFileSync(this.#fileOf(stage), JSON.stringify(record), { mode: 0o600 });
  }

  forget(stage: StageIdentity): void {
    if (!PROC_FD) return;
    rmSync(this.#fileOf(stage), { force: true });
  }

  /**
   * Removes the stages recorded by daemons that no longer run, and their
   * records; answers the stages removed, and those left with why.
   */
  sweep(isAlive: (pid: number) => boolean): Promise<StageSweep> {
    return this.#sweep((pid) => !isAlive(pid));
  }

  /**
   * After a takeover: removes the stages this process recorded in its
   * previous image that the new one did not adopt (`adopted`, by stage name),
   * and their records. Those were a mapped owner's, whose worker ended with
   * the previous image. The records are listed at the call, so an upload
   * begun after it is never taken for one of them.
   */
  sweepUnadopted(adopted: ReadonlySet<string>): Promise<StageSweep> {
    const own = String(process.pid);
    return this.#sweep((pid, name) => String(pid) === own && !adopted.has(name));
  }

  /** Removes the stages of the records `chosen` picks (by the pid and the stage name of each), listed now. */
  async #sweep(chosen: (pid: number, name: string) => boolean): Promise<StageSweep> {
    const report = { removed: [] as string[], left: [] as { stage: string; reason: string }[] };
    let names: string[];
    try {
      names = readdirSync(this.#directory);
    } catch (_error) {
      return report;
    }
    const picked = names.filter((name) => {
      const match = /^(\d+)-(.+)\.json$/.exec(name);
      return match !== null && chosen(Number(match[1]), match[2]!);
    });
    for (const name of picked) {
      const file = join(this.#directory, name);
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch (_error) {
        // Forgotten meanwhile: its stage was published or discarded.
        continue;
      }
      const stage = parseRecord(text);
      if (stage !== undefined) {
        const shown = join(stage.directory, stage.name);
        const reason = await removeRecordedStage(stage);
        if (reason === undefined) report.removed.push(shown);
        else report.left.push({ stage: shown, reason });
      }
      rmSync(file, { force: true });
    }
    return report;
  }

  #fileOf(stage: StageIdentity): string {
    return join(this.#directory, `${process.pid}-${stage.name}.json`);
  }
}

function parseRecord(text: string): StageRecord | undefined {
  try {
    const value = JSON.parse(text) as Partial<StageRecord>;
    const fields = [value.directory, value.name, value.dev, value.ino];
    if (!fields.every((field) => typeof field === 'string' && field !== '')) return undefined;
    // A name is a stage's, one entry: nothing of the record may lead elsewhere. A record without its owner's
    // uid was written by a daemon that did not check the stage: what it names is left.
    if (!STAGE_NAME.test(value.name!) || !Number.isSafeInteger(value.uid) || value.uid! < 0) return undefined;
    return value as StageRecord;
  } catch (_error) {
    return undefined;
  }
}

/** Removes the recorded stage if its name still leads to it, still its owner's; answers why not otherwise (undefined: removed, or already gone). */
async function removeRecordedStage(stage: StageRecord): Promise<string | undefined> {
  let parent;
  try {
    parent = await open(stage.directory, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (error) {
    return errnoOf(error) === 'ENOENT' ? undefined : (errnoOf(error) ?? (error as Error).message);
  }
  try {
    const at = `/proc/self/fd/${parent.fd}/${stage.name}`;
    let held;
    try {
      held = await open(at, O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    } catch (error) {
      return errnoOf(error) === 'ENOENT' ? undefined : 'something else is at its name';
    }
    try {
      const info = await held.stat({ bigint: true });
      if (String(info.dev) !== stage.dev || String(info.ino) !== stage.ino) return 'something else is at its name';
      if (info.uid !== BigInt(stage.uid)) return `its owner is no longer the one recorded (uid ${stage.uid})`;
      const leftovers = await emptyDirectory(`/proc/self/fd/${held.fd}`, join(stage.directory, stage.name));
      if (leftovers.length > 0) return `${leftovers[0]!.path}: ${leftovers[0]!.reason}`;
      const there = await lstat(at, { bigint: true });
      if (there.dev === info.dev && there.ino === info.ino) await rmdir(at);
      return undefined;
    } finally {
      await held.close();
    }
  } catch (error) {
    return errnoOf(error) ?? (error as Error).message;
  } finally {
    await parent.close();
  }
}

/**
 * `transfer`, with each upload's stage recorded in `records` from its start until it is published or discarded:
 * a stage of `uid`'s (the owner's user, whose process, its worker, makes its stages), or none, refused and
 * discarded; `uid` undefined for a transfer of the daemon's own (see {@link StageRecords.record}).
 */
export function recordingStages(transfer: OwnerTransfer, records: StageRecords, uid: number | undefined): OwnerTransfer {
  return {
    mkdir: (path, options, signal) => transfer.mkdir(path, options, signal),
    remove: (path, options, signal) => transfer.remove(path, options, signal),
    rename: (from, to, options, signal) => transfer.rename(from, to, options, signal),
    digest: (path, options, signal) => transfer.digest(path, options, signal),
    pack: (path, options, signal) => transfer.pack(path, options, signal),
    unpack: (path, options, body, signal) => transfer.unpack(path, options, body, signal),
    async stageUpload(path, options): Promise<UploadStage> {
      const stage = await transfer.stageUpload(path, options);
      try {
        records.record(stage.identity, uid);
      } catch (error) {
        // Not recorded, so not kept: its transfer is asked to discard it.
        await stage.discard().catch(() => undefined);
        throw error;
      }
      return recorded(stage, records);
    },
    // Its record is the previous image's, under the pid the exec kept: it stays as it was.
    ...(transfer.adoptUpload === undefined ? {} : { adoptUpload: (record) => recorded(transfer.adoptUpload!(record), records) }),
  };
}

/** `stage`, whose record in `records` is forgotten once it is published or discarded. */
function recorded(stage: UploadStage, records: StageRecords): UploadStage {
  return {
    path: stage.path,
    identity: stage.identity,
    offset: () => stage.offset(),
    append: (offset, body, signal) => stage.append(offset, body, signal),
    async complete(expected) {
      const digest = await stage.complete(expected);
      // Published: nothing of it is left to remove.
      records.forget(stage.identity);
      return digest;
    },
    async discard() {
      await stage.discard();
      records.forget(stage.identity);
    },
    handOver: () => stage.handOver?.(),
  };
}
