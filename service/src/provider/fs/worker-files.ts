/**
 * The daemon's side of a file worker (file-worker.ts): one process per OS
 * user that owners run as, started at its first call, serving that user's
 * views and transfer calls and making the user's connections to ports
 * (port-connect.ts). A worker that dies fails the calls it had and is
 * started again by the next one.
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Socket } from 'node:net';
import { Readable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type {
  FsDirEntry,
  FsEditOutcome,
  FsEditRequest,
  FsInfo,
  FsPathInfo,
  FsResolveOptions,
  FsTarget,
  FsWriteIntent,
  FsWriteOutcome,
  PackedArchive,
  PackSkips,
} from '@execworld/sdk/fs';
import type { OwnerFiles } from '../api.ts';
import type { ProcessIdentity, ProcessInspector } from '../inspect/inspector.ts';
import { hostPlatform } from '../platform/index.ts';
import { isWithin } from './anchor.ts';
import { checkAborted, FsFailure, type TransferErrorCode } from './fs-error.ts';
import type { FileDigest, OpenContent, OwnerTransfer, Unpacked, UploadStage } from '../api.ts';
import type { SinkAnswer, WorkerAnswer, WorkerArgs, WorkerMethod, WorkerReply, WorkerRequestOf } from './worker-protocol.ts';

const ENTRY = fileURLToPath(new URL('../../../bin/file-worker.js', import.meta.url));
/**
 * Node's flags for a worker: no debugger on SIGUSR1 where Node can be told so (22.14 and later), since the
 * user's programs may signal their worker; file-worker.ts keeps the signal from the debugger on every version.
 */
const WORKER_NODE_FLAGS = process.allowedNodeEnvironmentFlags.has('--disable-sigusr1') ? ['--disable-sigusr1'] : [];

/** A request the worker's channel refused to carry: the worker never had it, so it may be sent again, to another. */
class UnsentRequest extends FsFailure {}

/** A request the worker had, or may have had, when it ended without answering it. */
class LostRequest extends FsFailure {}

/**
 * The calls that change nothing in the world: one lost with its worker (killed
 * from outside while it had the call, or as the call reached it) is made again,
 * once, by a new worker. A call that changes something may have been made
 * before the worker ended, so it fails instead.
 */
const REPEATABLE: ReadonlySet<WorkerMethod> = new Set<WorkerMethod>([
  'resolve',
  'stat',
  'lstat',
  'readText',
  'listDir',
  'look',
  'readBytes',
  'openContent',
  'streamText',
  'digest',
]);

export interface WorkerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** The host's process inspector, made at its first use; null where the platform has none. */
let inspector: ProcessInspector | null | undefined;
function hostInspector(): ProcessInspector | null {
  if (inspector === undefined) {
    try {
      inspector = hostPlatform.createInspector();
    } catch (_error) {
      inspector = null;
    }
  }
  return inspector;
}

/** One worker process of one user, and the calls in flight to it. */
export class FileWorker {
  readonly user: WorkerUser;
  readonly #options: object;
  readonly #started: ((pid: number) => void) | undefined;
  #child: ChildProcess | undefined;
  /** The worker process as the host's inspector tells it; undefined where it cannot. */
  #identity: ProcessIdentity | undefined;
  #ready: Promise<void> | undefined;
  /**
   * The calls in flight, by number: each settles with the worker's answer, taken as its call's (see {@link FileWorker.call}).
   * `sent` once the channel took the request: until then the worker cannot have it.
   */
  readonly #pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void; sent: boolean }>();
  #nextId = 1;
  #closed = false;

  /** @param started - told the pid of each process started for the user (the daemon's containment must know it is none of the sessions'). */
  constructor(user: WorkerUser, options: object, started?: (pid: number) => void) {
    this.user = user;
    this.#options = options;
    this.#started = started;
  }

  /**
   * Calls `method` in the worker with the arguments worker-protocol.ts gives
   * it, answered as it types the answer; its failures come back as the
   * FsFailure they were.
   */
  async call<M extends WorkerMethod>(method: M, ...args: WorkerArgs<M>): Promise<WorkerAnswer<M>> {
    await this.#start();
    const child = this.#child;
    try {
      return await this.#send(method, args);
    } catch (error) {
      if (error instanceof LostRequest && REPEATABLE.has(method) && !this.#closed) {
        await this.#start();
        return await this.#send(method, args);
      }
      if (!(error instanceof UnsentRequest)) throw error;
      // A worker killed from outside whose end was not seen yet (its channel still looked open): the write
      // failed, so the worker never had the call, and a new worker makes it, once.
      if (this.#child === child) {
        child?.kill('SIGKILL');
        this.#failPending('lost its channel');
      }
      await this.#start();
      return await this.#send(method, args);
    }
  }

  /** Ends the worker; calls in flight fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const child = this.#child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  #start(): Promise<void> {
    if (this.#closed) return Promise.reject(new FsFailure('FS_IO_ERROR', 'the daemon is shutting down'));
    if (this.#ready !== undefined && this.#child?.connected === true && this.#alive()) return this.#ready;
    if (this.#child !== undefined) {
      // A worker whose channel closed, or which ended (killed, say), before its exit was seen is done with:
      // this call starts another. A killed process ends at once, while its other threads (the loader's, V8's)
      // may keep its channel open a moment: a request written then would be taken by the channel and never read.
      this.#child.kill('SIGKILL');
      this.#failPending('lost its channel');
    }
    const child = spawn(process.execPath, [...WORKER_NODE_FLAGS, ENTRY], {
      // Nowhere of the daemon's: relative lookups (a PATH entry of ".") start from /.
      cwd: '/',
      // Its stdout stays out of the daemon's log stream; what it says on stderr (a crash) reaches the daemon's.
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      serialization: 'advanced',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', EXECWORLD_FILE_WORKER_OPTIONS: JSON.stringify(this.#options) },
    });
    this.#child = child;
    this.#identity = child.pid === undefined ? undefined : hostInspector()?.identity(child.pid);
    if (child.pid !== undefined) this.#started?.(child.pid);
    child.on('message', (message: WorkerReply, handle: unknown) => {
      const pending = this.#pending.get(message.id);
      if (pending === undefined) {
        // A connection nobody waits for any more is closed, not leaked.
        if (handle instanceof Socket) handle.destroy();
        return;
      }
      this.#pending.delete(message.id);
      // A connect call's socket arrives as the message's handle (see worker-protocol.ts).
      if (message.ok) pending.resolve(handle instanceof Socket ? handle : message.value);
      else pending.reject(new FsFailure(message.error.code as TransferErrorCode, message.error.message, { errno: message.error.errno }));
    });
    const gone = (why: string): void => {
      if (this.#child !== child) return;
      this.#failPending(why);
    };
    child.once('error', (error) => gone(`could not run: ${error.message}`));
    child.once('exit', (code, signal) => gone(`exited (${signal ?? code})`));
    child.once('disconnect', () => gone('lost its channel'));
    const ready = this.#send('become', [this.user.uid, this.user.gid]).then(
      () => undefined,
      (error: unknown) => {
        // A worker that could not become the user serves nobody: the next call starts another.
        child.kill('SIGKILL');
        throw error;
      },
    );
    this.#ready = ready;
    ready.catch(() => undefined);
    return ready;
  }

  /** Whether the worker's process has not ended, as far as the host's inspector tells. */
  #alive(): boolean {
    const identity = this.#identity;
    return identity === undefined || (hostInspector()?.isAlive(identity) ?? true);
  }

  /**
   * Forgets the worker, failing every call it had. A call whose request the
   * channel had not yet taken (its end was seen before the write's) fails as
   * unsent, so that {@link call} makes it again with a new worker.
   */
  #failPending(why: string): void {
    this.#child = undefined;
    this.#ready = undefined;
    for (const [id, pending] of this.#pending) {
      this.#pending.delete(id);
      const message = `the file worker of user ${this.user.name} ${why}`;
      pending.reject(pending.sent ? new LostRequest('FS_IO_ERROR', message) : new UnsentRequest('FS_IO_ERROR', message));
    }
  }

  #send<M extends WorkerMethod>(method: M, args: WorkerArgs<M>): Promise<WorkerAnswer<M>> {
    const child = this.#child;
    if (child === undefined || !child.connected)
      return Promise.reject(new FsFailure('FS_IO_ERROR', `the file worker of user ${this.user.name} is not running`));
    const id = this.#nextId++;
    return new Promise<WorkerAnswer<M>>((resolve, reject) => {
      // The worker answers with its table's implementation of `method`, which is checked against the same
      // WorkerCalls (file-worker.ts): what comes off the channel is that call's answer.
      const pending = { resolve: (value: unknown) => resolve(value as WorkerAnswer<M>), reject, sent: false };
      this.#pending.set(id, pending);
      const request: WorkerRequestOf<M> = { id, method, args };
      child.send(request, (error) => {
        if (error === null) pending.sent = true;
        if (error === null || !this.#pending.has(id)) return;
        this.#pending.delete(id);
        reject(new UnsentRequest('FS_IO_ERROR', `cannot reach the file worker of user ${this.user.name}: ${error.message}`));
      });
    });
  }
}

/**
 * The workers of a daemon, one per OS user (uid and gid) its owners run as,
 * each started at its first call: shared by the files (every filesystem call
 * of such an owner), the provider (the checks a spawn makes as the user) and
 * the connections to ports (port-connect.ts, which the daemon binds to these).
 */
export class UserWorkers {
  readonly #options: object;
  readonly #started: ((pid: number) => void) | undefined;
  readonly #workers = new Map<string, FileWorker>();

  /**
   * @param options - what every worker is started with (its HostFiles options).
   * @param started - told the pid of every worker process as it starts.
   */
  constructor(options: object = {}, started?: (pid: number) => void) {
    this.#options = options;
    this.#started = started;
  }

  /** The worker of `user`; undefined when `user` is this process's own, which needs none. */
  of(user: WorkerUser | undefined): FileWorker | undefined {
    if (user === undefined || (user.uid === process.getuid?.() && user.gid === process.getgid?.())) return undefined;
    const key = `${user.uid}:${user.gid}`;
    let worker = this.#workers.get(key);
    if (worker === undefined) {
      worker = new FileWorker(user, this.#options, this.#started);
      this.#workers.set(key, worker);
    }
    return worker;
  }

  /** Ends every worker. */
  async close(): Promise<void> {
    const workers = [...this.#workers.values()];
    this.#workers.clear();
    await Promise.all(workers.map((worker) => worker.close()));
  }
}

/**
 * A stream of the worker's, pulled a chunk per call: the next chunk is asked
 * for only when this one was read. `open` is the worker's stream, or opens it
 * at the first read; one that is open is closed in the worker however this
 * stream ends. `beforeEnd` runs once the worker's stream is done, before this
 * one ends.
 */
function pulledStream(worker: FileWorker, open: number | (() => Promise<number>), objectMode = false, beforeEnd?: (id: number) => Promise<void>): Readable {
  let id = typeof open === 'number' ? open : undefined;
  return new Readable({
    objectMode,
    read() {
      void (async () => {
        try {
          id ??= await (open as () => Promise<number>)();
          const chunk = await worker.call('next', id);
          if (chunk === undefined) await beforeEnd?.(id);
          this.push(chunk ?? null);
        } catch (error) {
          this.destroy(error as Error);
        }
      })();
    },
    destroy(error, callback) {
      if (id === undefined) callback(error);
      else
        worker.call('streamClose', id).then(
          () => callback(error),
          () => callback(error),
        );
    },
  });
}

/**
 * Writes `body` into one of the worker's sinks a chunk at a time, and answers
 * what its end made of it; a body cut off aborts the sink and answers nothing.
 */
async function intoSink(worker: FileWorker, sinkId: number, body: Readable): Promise<SinkAnswer | undefined> {
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) await worker.call('sinkWrite', sinkId, chunk);
  } catch (error) {
    await worker.call('sinkAbort', sinkId).catch(() => undefined);
    // As the worker answers a cut: what arrived is kept, and the caller learns the rest from the offset.
    if ((error as { code?: unknown }).code === 'ECONNRESET' || (error as { code?: unknown }).code === 'ERR_STREAM_PREMATURE_CLOSE') {
      return undefined;
    }
    throw error;
  }
  return await worker.call('sinkEnd', sinkId);
}

/** One owner's view of the world's files, served by the worker of the user the owner runs as. */
export class WorkerView implements OwnerFiles {
  readonly root: string | undefined;
  readonly #worker: FileWorker;

  constructor(worker: FileWorker, root: string | undefined) {
    this.#worker = worker;
    this.root = root;
  }

  resolve(path: string, options?: FsResolveOptions): Promise<FsTarget> {
    checkAborted(options?.signal, 'resolve');
    return this.#worker.call('resolve', this.root, path, { cwd: options?.cwd });
  }

  processPath(target: FsTarget): string {
    return target.targetKey;
  }

  fileUrl(target: FsTarget): string {
    return pathToFileURL(target.targetKey).href;
  }

  contains(parent: FsTarget, child: FsTarget): boolean {
    return isWithin(parent.targetKey, child.targetKey);
  }

  stat(target: FsTarget): Promise<FsInfo | undefined> {
    return this.#worker.call('stat', this.root, target);
  }

  lstat(path: string, options?: { cwd?: string | undefined }): Promise<FsPathInfo | undefined> {
    return this.#worker.call('lstat', this.root, path, { cwd: options?.cwd });
  }

  readText(target: FsTarget, _signal?: AbortSignal, maxBytes?: number): Promise<string> {
    return this.#worker.call('readText', this.root, target, undefined, maxBytes);
  }

  streamText(target: FsTarget): Promise<AsyncIterable<string>> {
    return Promise.resolve(pulledStream(this.#worker, () => this.#worker.call('streamText', this.root, target), true) as AsyncIterable<string>);
  }

  readBytes(target: FsTarget, _signal: AbortSignal | undefined, maxBytes: number): Promise<Uint8Array> {
    return this.#worker.call('readBytes', this.root, target, undefined, maxBytes);
  }

  listDir(target: FsTarget): Promise<FsDirEntry[]> {
    return this.#worker.call('listDir', this.root, target);
  }

  writeText(target: FsTarget, content: string, expected?: FsWriteIntent): Promise<FsWriteOutcome> {
    return this.#worker.call('writeText', this.root, target, content, expected);
  }

  writeBytes(target: FsTarget, bytes: Uint8Array, expected?: FsWriteIntent): Promise<Omit<FsWriteOutcome, 'after'>> {
    return this.#worker.call('writeBytes', this.root, target, bytes, expected);
  }

  editText(target: FsTarget, edit: FsEditRequest, expected?: { version: string }): Promise<FsEditOutcome> {
    return this.#worker.call('editText', this.root, target, edit, expected);
  }

  look(target: FsTarget, textMaxBytes: number | undefined): Promise<{ info: FsInfo | undefined; text: string | null }> {
    return this.#worker.call('look', this.root, target, textMaxBytes);
  }

  async openContent(target: FsTarget): Promise<OpenContent> {
    const { id, info } = await this.#worker.call('openContent', this.root, target);
    let closed: Promise<void> | undefined;
    return {
      info,
      stream: (start, end) => pulledStream(this.#worker, () => this.#worker.call('contentStream', id, start, end)),
      close: () => (closed ??= this.#worker.call('contentClose', id).catch(() => undefined)),
    };
  }
}

/** One owner's transfer calls, served by the worker of the user the owner runs as. */
export class WorkerTransfer implements OwnerTransfer {
  readonly #worker: FileWorker;
  readonly #root: string | undefined;

  constructor(worker: FileWorker, root: string | undefined) {
    this.#worker = worker;
    this.#root = root;
  }

  mkdir(path: string, options: { cwd?: string | undefined; parents: boolean }): Promise<{ path: string; created: boolean }> {
    return this.#worker.call('mkdir', this.#root, path, options);
  }

  remove(path: string, options: { cwd?: string | undefined; recursive: boolean }): Promise<{ removed: boolean }> {
    return this.#worker.call('remove', this.#root, path, options);
  }

  rename(from: string, to: string, options: { cwd?: string | undefined; overwrite: boolean }): Promise<{ path: string }> {
    return this.#worker.call('rename', this.#root, from, to, options);
  }

  digest(path: string, options: { cwd?: string | undefined }): Promise<FileDigest> {
    return this.#worker.call('digest', this.#root, path, options);
  }

  async stageUpload(path: string, options: { cwd?: string | undefined; overwrite: boolean; mode?: number | undefined }): Promise<UploadStage> {
    const worker = this.#worker;
    const staged = await worker.call('stageUpload', this.#root, path, options);
    return {
      path: staged.path,
      identity: staged.identity,
      offset: () => worker.call('stageOffset', staged.id),
      append: async (offset, body) => {
        const sink = await worker.call('stageAppend', staged.id, offset);
        // The append answers the offset it left; a body cut off answers nothing, and the offset is asked for.
        const left = await intoSink(worker, sink, body);
        return typeof left === 'number' ? left : worker.call('stageOffset', staged.id);
      },
      complete: (expected) => worker.call('stageComplete', staged.id, expected),
      discard: () => worker.call('stageDiscard', staged.id),
    };
  }

  async pack(path: string, options: { cwd?: string | undefined }): Promise<PackedArchive> {
    const worker = this.#worker;
    const id = await worker.call('pack', this.#root, path, options);
    const skipped: PackSkips = { count: 0, entries: [] };
    // What the worker's pack left out is complete at its end: asked for then, before this stream ends.
    const stream = pulledStream(worker, id, false, async () => {
      const answer = await worker.call('packSkipped', id);
      skipped.count = answer.count;
      skipped.entries.push(...answer.entries);
    });
    return { stream, skipped };
  }

  async unpack(path: string, options: { cwd?: string | undefined }, body: Readable): Promise<Unpacked> {
    const sink = await this.#worker.call('unpack', this.#root, path, options);
    const unpacked = await intoSink(this.#worker, sink, body);
    // A body cut off unpacked what arrived: a failure, as the daemon's own unpack of a cut body is.
    if (unpacked === undefined || typeof unpacked === 'number') throw new FsFailure('FS_IO_ERROR', `cannot unpack into "${path}": the body was cut off`);
    return unpacked;
  }
}
