/**
 * What a handler of the operation table is given beside its parameters: who
 * calls, what the daemon offers it, and how the call arrived. The dispatcher
 * builds one per call.
 * @module
 */
import type { Readable } from 'node:stream';
import type { Access } from '@execworld/sdk/protocol';
import type { OwnerFiles, OwnerTransfer } from '../provider/api.ts';
import type { SessionRegistry } from './sessions/registry.ts';
import type { UploadRegistry } from './uploads.ts';

export interface CallContext {
  readonly owner: string;
  /** What the caller's token may do; a write operation never gets here with `read`. */
  readonly access: Access;
  readonly registry: SessionRegistry;
  /** The world's files as `owner` may see them. */
  readonly files: (owner: string) => OwnerFiles;
  /** The transfer calls (beyond the seam) as `owner` may make them. */
  readonly transfer: (owner: string) => OwnerTransfer;
  readonly uploads: UploadRegistry;
  readonly version: string;
  /** Aborts when the caller went away. */
  readonly signal: AbortSignal;
  /** Whether the call may wait without bound (a WebSocket call). */
  readonly unbounded: boolean;
  /** The bytes of a call that carries them (the table's `bytes.body`), unread; absent for any other. */
  readonly body: Readable | undefined;
}
