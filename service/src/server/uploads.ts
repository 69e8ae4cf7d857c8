/**
 * The daemon's uploads: each one's staged bytes, its owner, and its turn.
 * Calls on one upload run one at a time, so its offset, once answered, is
 * where the next bytes go: a sender whose connection was cut asks for it
 * after the cut's bytes were taken, and resumes there. An upload its owner
 * did not write to (create, append, complete) for the idle time is
 * discarded; asking for its offset is no use of it, so a read-only token
 * that watches an upload cannot keep it alive. Each owner has a bounded number.
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { FileDigest, FileProvider, OwnerTransfer, UploadStage, UploadStageRecord } from '../provider/api.ts';
import { ServiceError } from './errors.ts';

export interface UploadView {
  readonly id: string;
  readonly path: string;
  readonly offset: number;
}

interface Entry {
  readonly owner: string;
  /** The root the owner's files are confined to, whose transfer a takeover's next image adopts the stage with. */
  readonly root: string | undefined;
  readonly stage: UploadStage;
  /** The end of the last call queued on this upload. */
  turn: Promise<unknown>;
  idle: NodeJS.Timeout | undefined;
  /** When a write on it last ended (or began, while one runs). */
  lastUsed: number;
}

export interface UploadRegistryOptions {
  /** Uploads one owner may have open at once. */
  readonly maxPerOwner: number;
  /** An upload untouched this long is discarded. */
  readonly idleMs: number;
}

/** An upload as the previous image of the daemon held it (a takeover); its bytes are on disk, its stage held by descriptors the exec kept. */
export interface UploadRecord {
  readonly id: string;
  readonly owner: string;
  readonly root?: string | undefined;
  readonly stage: UploadStageRecord;
}

export class UploadRegistry {
  readonly #entries = new Map<string, Entry>();
  readonly #options: UploadRegistryOptions;
  #closed = false;

  constructor(options: UploadRegistryOptions) {
    this.#options = options;
  }

  async create(
    owner: string,
    transfer: OwnerTransfer,
    params: { path: string; cwd?: string | undefined; overwrite: boolean; mode?: number | undefined },
    root?: string,
  ): Promise<UploadView> {
    if (this.#closed) throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    const open = [...this.#entries.values()].filter((entry) => entry.owner === owner).length;
    if (open >= this.#options.maxPerOwner) {
      throw new ServiceError('LIMIT_EXCEEDED', `uploads per owner: ${open} are open (--max-uploads ${this.#options.maxPerOwner}); complete or delete one`);
    }
    const stage = await transfer.stageUpload(params.path, params);
    if (this.#closed) {
      await stage.discard();
      throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    }
    const id = `u_${randomBytes(16).toString('base64url')}`;
    const entry: Entry = { owner, root, stage, turn: Promise.resolve(), idle: undefined, lastUsed: Date.now() };
    this.#entries.set(id, entry);
    this.#touch(id, entry);
    return { id, path: stage.path, offset: 0 };
  }

  /**
   * For a takeover: the uploads the next image of the daemon can go on with,
   * each stage's descriptors among it (see {@link UploadStage.handOver}).
   * Bytes an append was receiving at the exec are kept as far as they reached
   * the file; the sender reads the offset back and resumes, as after any cut.
   * An upload whose stage cannot be handed over (an owner's that runs as
   * another user, staged by that user's worker) is not kept: its sender gets
   * NOT_FOUND and begins again. Nothing is changed here.
   */
  takeoverRecords(): UploadRecord[] {
    const records: UploadRecord[] = [];
    for (const [id, entry] of this.#entries) {
      const stage = entry.stage.handOver?.();
      if (stage !== undefined) records.push({ id, owner: entry.owner, ...(entry.root === undefined ? {} : { root: entry.root }), stage });
    }
    return records;
  }

  /** Takes the uploads the previous image handed over, each on its owner's transfer; each idles from now. */
  adopt(records: readonly UploadRecord[], files: FileProvider): void {
    for (const record of records) {
      const transfer = files.transfer({ root: record.root });
      if (transfer.adoptUpload === undefined) continue;
      const entry: Entry = {
        owner: record.owner,
        root: record.root,
        stage: transfer.adoptUpload(record.stage),
        turn: Promise.resolve(),
        idle: undefined,
        lastUsed: Date.now(),
      };
      this.#entries.set(record.id, entry);
      this.#touch(record.id, entry);
    }
  }

  /** The upload's offset once every call before this one ended. */
  get(owner: string, id: string): Promise<UploadView> {
    // A read: it neither counts as use nor puts off the idle expiry (a read-only token may ask).
    return this.#inTurn(owner, id, async (entry) => ({ id, path: entry.stage.path, offset: await entry.stage.offset() }), { uses: false });
  }

  append(owner: string, id: string, offset: number, body: Readable, signal: AbortSignal): Promise<UploadView> {
    return this.#inTurn(owner, id, async (entry) => ({ id, path: entry.stage.path, offset: await entry.stage.append(offset, body, signal) }), { body });
  }

  complete(owner: string, id: string, expected: { size?: number | undefined; sha256?: string | undefined }): Promise<FileDigest> {
    return this.#inTurn(owner, id, async (entry) => {
      const digest = await entry.stage.complete(expected);
      this.#forget(id, entry);
      return digest;
    });
  }

  delete(owner: string, id: string): Promise<void> {
    return this.#inTurn(owner, id, async (entry) => {
      this.#forget(id, entry);
      await entry.stage.discard();
    });
  }

  /** Discards every upload; later creates answer SHUTTING_DOWN. */
  async shutdown(): Promise<void> {
    this.#closed = true;
    const entries = [...this.#entries];
    for (const [id, entry] of entries) this.#forget(id, entry);
    await Promise.all(entries.map(([, entry]) => entry.turn.then(() => entry.stage.discard())));
  }

  /** How many uploads are open, for tests and metrics. */
  get size(): number {
    return this.#entries.size;
  }

  #entry(owner: string, id: string): Entry {
    const entry = this.#entries.get(id);
    // Another owner's upload is not found either: nothing is told about it.
    if (entry === undefined || entry.owner !== owner) throw new ServiceError('NOT_FOUND', `no upload ${id}`);
    return entry;
  }

  /**
   * Runs `work` once every call before it on the upload ended. `uses` (the
   * default): the call is a write of the owner's, which keeps the upload from
   * its idle expiry; a read is not.
   */
  async #inTurn<T>(owner: string, id: string, work: (entry: Entry) => Promise<T>, options: { body?: Readable; uses?: boolean } = {}): Promise<T> {
    const { body, uses = true } = options;
    let entry: Entry;
    try {
      entry = this.#entry(owner, id);
    } catch (error) {
      // A body nobody will read is drained, so the connection can answer.
      body?.resume();
      throw error;
    }
    const run = entry.turn.then(async () => {
      if (this.#entries.get(id) !== entry) {
        body?.resume();
        throw new ServiceError('NOT_FOUND', `no upload ${id}`);
      }
      if (uses) entry.lastUsed = Date.now();
      try {
        return await work(entry);
      } finally {
        if (uses && this.#entries.get(id) === entry) this.#touch(id, entry);
      }
    });
    entry.turn = run.catch(() => undefined);
    return run;
  }

  #touch(id: string, entry: Entry): void {
    entry.lastUsed = Date.now();
    if (entry.idle !== undefined) clearTimeout(entry.idle);
    entry.idle = setTimeout(() => {
      // Queued behind a call that is still receiving bytes, the expiry finds the upload used since and lets it be.
      const expire = entry.turn.then(async () => {
        if (this.#entries.get(id) !== entry || Date.now() - entry.lastUsed < this.#options.idleMs) return;
        this.#forget(id, entry);
        await entry.stage.discard();
      });
      entry.turn = expire.catch(() => undefined);
    }, this.#options.idleMs);
    entry.idle.unref();
  }

  #forget(id: string, entry: Entry): void {
    if (entry.idle !== undefined) clearTimeout(entry.idle);
    entry.idle = undefined;
    if (this.#entries.get(id) === entry) this.#entries.delete(id);
  }
}
