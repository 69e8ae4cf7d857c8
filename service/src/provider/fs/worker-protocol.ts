/**
 * The calls between the daemon and a file worker (file-worker.ts), over
 * Node's IPC channel with its advanced serialization (buffers, bigints and
 * undefined travel as they are).
 *
 * Each call's arguments and answer are derived from the interface the worker
 * serves it for: a view call is an {@link OwnerFiles} method, a transfer call
 * an {@link OwnerTransfer} one, with the owner's root first. What cannot
 * cross the channel crosses as a number the worker holds it by: an open file,
 * a stream pulled a chunk per call, an upload's stage, a sink written a chunk
 * per call. One answer crosses as a handle beside its message: the socket of
 * `connect`, whose descriptor Node passes with SCM_RIGHTS (the advanced
 * serialization carries a handle as the JSON one does). The daemon's side
 * (worker-files.ts) sends only these calls, and
 * the worker's table implements exactly them, both checked by the compiler.
 * @module
 */
import type { Socket } from 'node:net';
import type { PackSkips } from '@execworld/sdk/fs';
import type { OpenContent, OwnerFiles, OwnerTransfer, Unpacked, UploadStage } from '../api.ts';

/** The real path an owner's calls are confined to; all of the world without one. */
type Root = string | undefined;

/**
 * An argument as it crosses the channel. An abort signal cannot (it is an
 * object of the daemon's event loop), nor one inside an options object: a
 * call, once sent, runs to its end in the worker.
 */
type Crossing<T> = T extends AbortSignal ? undefined : T extends object ? ('signal' extends keyof T ? Omit<T, 'signal'> : T) : T;
type Crossed<A extends readonly unknown[]> = { [I in keyof A]: Crossing<A[I]> };

type ViewMethod =
  'resolve' | 'stat' | 'lstat' | 'readText' | 'listDir' | 'writeText' | 'writeBytes' | 'editText' | 'look' | 'readBytes' | 'openContent' | 'streamText';
type TransferMethod = 'mkdir' | 'remove' | 'rename' | 'digest' | 'pack' | 'stageUpload';

/** The arguments of a view call as they cross: the owner's root, then the call's own. */
type ViewArgs<K extends ViewMethod> = [root: Root, ...args: Crossed<Parameters<OwnerFiles[K]>>];
type TransferArgs<K extends TransferMethod> = [root: Root, ...args: Crossed<Parameters<OwnerTransfer[K]>>];
/** A view call served as it is: answered as the view answers it. */
type ViewCall<K extends ViewMethod> = (...args: ViewArgs<K>) => ReturnType<OwnerFiles[K]>;
type TransferCall<K extends TransferMethod> = (...args: TransferArgs<K>) => ReturnType<OwnerTransfer[K]>;

/** The number the worker holds something by until it is closed, ended or done with. */
type Held = number;

/** A chunk of a stream the worker holds: bytes, or text for a text stream. */
export type StreamChunk = Uint8Array | string;

/** What a sink's end answers: an unpack what it made, a stage's append the offset it left. */
export type SinkAnswer = Unpacked | number;

/** A failure as it crosses the channel: its catalog code, its message, and the operating system's errno name when there is one. */
export interface WorkerFailure {
  readonly code: string;
  readonly message: string;
  readonly errno?: string;
}

/** Every call the daemon may make of a worker, with what it answers. */
export interface WorkerCalls {
  /** Drops the worker to the user's uid and gid: the first call, and the only one it takes as root. */
  become(uid: number, gid: number): Promise<void>;

  resolve: ViewCall<'resolve'>;
  stat: ViewCall<'stat'>;
  lstat: ViewCall<'lstat'>;
  readText: ViewCall<'readText'>;
  listDir: ViewCall<'listDir'>;
  writeText: ViewCall<'writeText'>;
  writeBytes: ViewCall<'writeBytes'>;
  editText: ViewCall<'editText'>;
  look: ViewCall<'look'>;
  readBytes: ViewCall<'readBytes'>;
  /** Opens a regular file: the number it is held by, and what it was when opened. */
  openContent(...args: ViewArgs<'openContent'>): Promise<{ readonly id: Held; readonly info: OpenContent['info'] }>;
  /** A stream of an open file's bytes (see {@link OpenContent.stream}), pulled with `next`. */
  contentStream(id: Held, ...args: Parameters<OpenContent['stream']>): Promise<Held>;
  contentClose(id: Held): ReturnType<OpenContent['close']>;
  /** A text file's stream of text, pulled with `next`. */
  streamText(...args: ViewArgs<'streamText'>): Promise<Held>;

  /** The next chunk of a stream; undefined at its end, after which the stream is forgotten. */
  next(id: Held): Promise<StreamChunk | undefined>;
  /** Closes a stream, ended or not. */
  streamClose(id: Held): Promise<void>;

  mkdir: TransferCall<'mkdir'>;
  remove: TransferCall<'remove'>;
  rename: TransferCall<'rename'>;
  digest: TransferCall<'digest'>;
  /** A directory's tar stream, pulled with `next`; what it left out is asked for at its end with `packSkipped`. */
  pack(...args: TransferArgs<'pack'>): Promise<Held>;
  packSkipped(id: Held): Promise<PackSkips>;
  /** A sink the tar stream is written into (see {@link OwnerTransfer.unpack}); its end answers what was unpacked. */
  unpack(root: Root, path: Parameters<OwnerTransfer['unpack']>[0], options: Parameters<OwnerTransfer['unpack']>[1]): Promise<Held>;
  /** An upload's stage: the number it is held by, and where its bytes wait. */
  stageUpload(...args: TransferArgs<'stageUpload'>): Promise<{ readonly id: Held } & Pick<UploadStage, 'path' | 'identity'>>;
  stageOffset(id: Held): ReturnType<UploadStage['offset']>;
  /** A sink the bytes at `offset` are written into (see {@link UploadStage.append}); its end answers the offset they left. */
  stageAppend(id: Held, offset: Parameters<UploadStage['append']>[0]): Promise<Held>;
  stageComplete(id: Held, ...args: Parameters<UploadStage['complete']>): ReturnType<UploadStage['complete']>;
  stageDiscard(id: Held): ReturnType<UploadStage['discard']>;

  /** Writes a chunk into a sink; fails when what consumes the sink failed. */
  sinkWrite(id: Held, chunk: Uint8Array): Promise<void>;
  /** Ends a sink, answering what its consumer made of it. */
  sinkEnd(id: Held): Promise<SinkAnswer>;
  /** Cuts a sink off, as a connection that closed. */
  sinkAbort(id: Held): Promise<void>;

  /** Why a spawn of `file` in `cwd` would fail as the user, or undefined when it would start. */
  launchCheck(file: string, env: Record<string, string>, cwd: string): Promise<WorkerFailure | undefined>;
  /** Where `command` is on the user's PATH, or why it cannot be found. */
  resolveExecutable(command: string, env: Record<string, string>): Promise<{ readonly path: string } | { readonly failure: WorkerFailure }>;

  /**
   * A TCP connection to 127.0.0.1:`port` made as the user (see
   * port-connect.ts), paused: its socket is sent as the reply's handle, and a
   * failure carries the errno.
   */
  connect(port: number): Promise<Socket>;
}

export type WorkerMethod = keyof WorkerCalls;
export type WorkerArgs<M extends WorkerMethod> = Parameters<WorkerCalls[M]>;
export type WorkerAnswer<M extends WorkerMethod> = Awaited<ReturnType<WorkerCalls[M]>>;

/** The worker's implementation of every call: each may answer at once or later. */
export type WorkerTable = { readonly [M in WorkerMethod]: (...args: WorkerArgs<M>) => WorkerAnswer<M> | Promise<WorkerAnswer<M>> };

/** One call as it crosses to the worker. */
export type WorkerRequestOf<M extends WorkerMethod> = { readonly id: number; readonly method: M; readonly args: WorkerArgs<M> };
export type WorkerRequest = { [M in WorkerMethod]: WorkerRequestOf<M> }[WorkerMethod];

export type WorkerReply =
  { readonly id: number; readonly ok: true; readonly value: unknown } | { readonly id: number; readonly ok: false; readonly error: WorkerFailure };
