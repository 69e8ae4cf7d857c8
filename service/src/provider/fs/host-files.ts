/**
 * The files of this host, as the daemon hands them to its owners: one view
 * per root, all sharing one table of write turns, so that writers of one file
 * take turns whichever owner they write for. An owner that runs as another OS
 * user is served by a worker process of that user (worker-files.ts), so the
 * kernel checks its calls as that user's.
 * @module
 */
import type { FileProvider, OwnerFiles, OwnerTransfer } from '../api.ts';
import { DaemonSecrets, PathGuard, type SecretPaths } from './anchor.ts';
import { WorldTransfer } from './transfer.ts';
import { recordingStages, type StageRecords } from './stage-records.ts';
import { UserWorkers, WorkerTransfer, WorkerView, type WorkerUser } from './worker-files.ts';
import { WorldFiles, type WorldFilesOptions } from './world-files.ts';
import { LargeReads } from './large-reads.ts';
import { MutationLocks } from './mutation-locks.ts';

export type HostFilesOptions = Omit<WorldFilesOptions, 'root' | 'locks' | 'cwd' | 'secrets'> & {
  /** The daemon's own files and directories, which no owner's call reaches (plain data: workers are started with it). */
  readonly secrets?: SecretPaths | undefined;
};

/** Whose view: confined to `root`, and run as `runAs` when that is another user than the daemon's. */
export interface ViewOptions {
  readonly root?: string | undefined;
  readonly runAs?: WorkerUser | undefined;
}

export class HostFiles implements FileProvider {
  readonly #locks = new MutationLocks();
  readonly #largeReads = new LargeReads();
  readonly #views = new Map<string, WorldFiles>();
  readonly #transfers = new Map<string, OwnerTransfer>();
  readonly #workers: UserWorkers;
  readonly #workerViews = new Map<string, WorkerView>();
  readonly #options: HostFilesOptions;
  readonly #secrets: DaemonSecrets | undefined;
  readonly #records: StageRecords | undefined;

  /**
   * @param workers - the workers of the users owners run as, when they are
   *   shared with the provider; made here (with `options`) otherwise.
   * @param records - where the daemon records upload stages, so that a later
   *   start removes those a killed daemon left.
   */
  constructor(options: HostFilesOptions = {}, workers: UserWorkers = new UserWorkers(options), records?: StageRecords) {
    this.#options = options;
    this.#records = records;
    this.#secrets = options.secrets === undefined ? undefined : new DaemonSecrets(options.secrets);
    this.#workers = workers;
  }

  view(options: ViewOptions = {}): OwnerFiles {
    const worker = this.#workers.of(options.runAs);
    if (worker !== undefined) {
      const key = `${worker.user.uid}:${worker.user.gid}:${options.root ?? ''}`;
      let view = this.#workerViews.get(key);
      if (view === undefined) {
        view = new WorkerView(worker, options.root === undefined ? undefined : new PathGuard(options.root).root);
        this.#workerViews.set(key, view);
      }
      return view;
    }
    const key = options.root ?? '';
    let view = this.#views.get(key);
    if (view === undefined) {
      view = new WorldFiles({ ...this.#options, root: options.root, locks: this.#locks, largeReads: this.#largeReads, secrets: this.#secrets });
      this.#views.set(key, view);
    }
    return view;
  }

  transfer(options: ViewOptions = {}): OwnerTransfer {
    const worker = this.#workers.of(options.runAs);
    const key = worker === undefined ? (options.root ?? '') : `${worker.user.uid}:${worker.user.gid}:${options.root ?? ''}`;
    let transfer = this.#transfers.get(key);
    if (transfer === undefined) {
      if (worker !== undefined) transfer = new WorkerTransfer(worker, options.root);
      else {
        const guard = new PathGuard(options.root, this.#secrets);
        transfer = new WorldTransfer(guard, guard.root, this.#locks);
      }
      // A worker's stages must be its user's: the worker is a process of the user's, and what it says is checked.
      if (this.#records !== undefined) transfer = recordingStages(transfer, this.#records, worker?.user.uid);
      this.#transfers.set(key, transfer);
    }
    return transfer;
  }

  /** Ends every worker. */
  close(): Promise<void> {
    return this.#workers.close();
  }
}
