/**
 * What a handler of the operation table is given beside its parameters: who
 * calls, what the daemon offers it, and how the call arrived. The dispatcher
 * builds one per call.
 * @module
 */
import type { DaemonImage } from './image.ts';
import type { Readable } from 'node:stream';
import type { OwnerFiles, OwnerTransfer } from '../provider/api.ts';
import type { Principal } from './auth.ts';
import type { TokenMinter } from './minted.ts';
import type { SessionRegistry } from './sessions/registry.ts';
import type { UploadRegistry } from './uploads.ts';
import type { ForwardLink, ForwardTable } from './forwards.ts';

/** The transports calls arrive on, as metrics label them. */
export type Transport = 'rest' | 'websocket' | 'mcp';

export interface CallContext {
  /** Who calls, as its token was resolved: its owner, what it may do (a write operation never gets here with `read`), its OS user and root. */
  readonly principal: Principal;
  readonly registry: SessionRegistry;
  /** The world's files as the caller may see them: confined to its root, served as its OS user. */
  readonly files: () => OwnerFiles;
  /** The transfer calls (beyond the seam) as the caller may make them. */
  readonly transfer: () => OwnerTransfer;
  readonly uploads: UploadRegistry;
  /** The daemon's minted tokens: minting, listing and revoking them. */
  readonly minter: TokenMinter;
  /** The longest lifetime of a token an owner mints (--max-token-ttl-ms). */
  readonly maxTokenTtlMs: number;
  /** The owners' port forwards. */
  readonly forwards: ForwardTable;
  /** The WebSocket the call came on, which takes up the forwards it makes; undefined over REST and MCP. */
  readonly link: ForwardLink | undefined;
  readonly version: string;
  /** This image of the daemon: its start, and the last takeover. */
  readonly image: DaemonImage;
  /** Aborts when the caller went away. */
  readonly signal: AbortSignal;
  /** Whether the call may wait without bound (a WebSocket call). */
  readonly unbounded: boolean;
  /** The bytes of a call that carries them (the table's `bytes.body`), unread; absent for any other. */
  readonly body: Readable | undefined;
  /**
   * Sets aside `bytes` of the answer budget (--answer-budget-bytes) for what
   * this call holds to answer: all it holds so far, so a call takes more, or
   * gives back what it set aside and did not need. Held until the answer is
   * sent. Past the budget, or the owner's share of it, it takes nothing. An
   * answer larger than the share takes the share.
   * @throws {ServiceError} LIMIT_EXCEEDED, naming the budget
   */
  readonly holdAnswer: (bytes: number) => void;
  /** The largest file a whole-text read answers (--max-read-text-bytes). */
  readonly maxReadTextBytes: number;
}
