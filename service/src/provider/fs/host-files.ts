/**
 * The files of this host, as the daemon hands them to its owners: one view
 * per root, all sharing one table of write turns, so that writers of one file
 * take turns whichever owner they write for.
 * @module
 */
import type { FileProvider, OwnerFiles, OwnerTransfer } from '../api.ts';
import { PathGuard } from './anchor.ts';
import { WorldTransfer } from './transfer.ts';
import { MutationLocks, WorldFiles, type WorldFilesOptions } from './world-files.ts';

export class HostFiles implements FileProvider {
  readonly #locks = new MutationLocks();
  readonly #views = new Map<string, WorldFiles>();
  readonly #transfers = new Map<string, WorldTransfer>();
  readonly #options: Omit<WorldFilesOptions, 'root' | 'locks' | 'cwd'>;

  constructor(options: Omit<WorldFilesOptions, 'root' | 'locks' | 'cwd'> = {}) {
    this.#options = options;
  }

  view(options: { readonly root?: string | undefined } = {}): OwnerFiles {
    const key = options.root ?? '';
    let view = this.#views.get(key);
    if (view === undefined) {
      view = new WorldFiles({ ...this.#options, root: options.root, locks: this.#locks });
      this.#views.set(key, view);
    }
    return view;
  }

  transfer(options: { readonly root?: string | undefined } = {}): OwnerTransfer {
    const key = options.root ?? '';
    let transfer = this.#transfers.get(key);
    if (transfer === undefined) {
      const guard = new PathGuard(options.root);
      transfer = new WorldTransfer(guard, guard.root, this.#locks);
      this.#transfers.set(key, transfer);
    }
    return transfer;
  }
}
