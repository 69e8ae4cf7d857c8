/**
 * The messages between the daemon and a file worker (file-worker.ts), over
 * Node's IPC channel with its advanced serialization (buffers, bigints and
 * undefined travel as they are).
 * @module
 */

export interface WorkerRequest {
  readonly id: number;
  readonly method: string;
  readonly args: readonly unknown[];
}

/** A failure as it crosses the channel: its catalog code, its message, and the operating system's errno name when there is one. */
export interface WorkerFailure {
  readonly code: string;
  readonly message: string;
  readonly errno?: string;
}

export type WorkerReply =
  { readonly id: number; readonly ok: true; readonly value: unknown } | { readonly id: number; readonly ok: false; readonly error: WorkerFailure };
