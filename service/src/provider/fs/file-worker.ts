/**
 * The files of an owner that runs as another OS user, served by a process of
 * that user: started by the daemon, it loads its code as the daemon's user,
 * then drops to the user's uid and gid with no supplementary groups before it
 * serves a call, so the kernel checks every open, write and rename as that
 * user would make it. It also answers, as the user, what a spawn of the
 * owner's would find (its working directory, its program) and where an
 * executable of the owner's is, and makes the user's TCP connections to ports
 * in the world (see port-connect.ts). The daemon calls it over the IPC channel (see
 * worker-files.ts): plain calls, byte streams pulled a chunk per call, and
 * sinks written a chunk per call, so memory stays bounded both sides.
 * @module
 */
import { connect, Socket } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import type { PackSkips } from '@execworld/sdk/fs';
import { ProviderError } from '../errors.ts';
import { hostPlatform } from '../platform/index.ts';
import { launchFailure, resolveExecutable } from '../resolve-executable.ts';
import { FsFailure } from './fs-error.ts';
import { makeNonDumpable } from '../posix/libc.ts';
import { HostFiles } from './host-files.ts';
import type { OpenContent, UploadStage } from '../api.ts';
import type {
  SinkAnswer,
  StreamChunk,
  WorkerAnswer,
  WorkerFailure,
  WorkerMethod,
  WorkerReply,
  WorkerRequest,
  WorkerRequestOf,
  WorkerTable,
} from './worker-protocol.ts';

// Node opens its debugger on SIGUSR1, to any process that may signal this one: once this process is the user,
// the user's own programs. Through it they could run code here and answer the daemon, which is root, whatever
// they like. A listener of its own keeps the signal from the debugger (the daemon also starts a worker with
// --disable-sigusr1 where Node has it).
process.on('SIGUSR1', () => {});

const files = new HostFiles(JSON.parse(process.env.EXECWORLD_FILE_WORKER_OPTIONS ?? '{}') as ConstructorParameters<typeof HostFiles>[0]);
let nextId = 1;
const contents = new Map<number, OpenContent>();
const streams = new Map<number, AsyncIterator<StreamChunk>>();
const stages = new Map<number, UploadStage>();
const sinks = new Map<number, { readonly input: PassThrough; readonly result: Promise<SinkAnswer> }>();
/** The special files each pack stream left out, by its stream's number: asked for at its end, dropped with a stream closed early. */
const packSkips = new Map<number, PackSkips>();

function keep<T>(table: Map<number, T>, value: T): number {
  const id = nextId++;
  table.set(id, value);
  return id;
}

function held<T>(table: Map<number, T>, id: number): T {
  const value = table.get(id);
  if (value === undefined) throw new FsFailure('FS_IO_ERROR', `the file worker holds nothing numbered ${id}`);
  return value;
}

/** Pulls a stream a chunk per call: bytes, or text from a stream of text. */
function pulled(stream: Readable): number {
  return keep(streams, (stream as AsyncIterable<StreamChunk>)[Symbol.asyncIterator]());
}

/** A sink the daemon writes a chunk per call into, whose end answers what `consume` made of it. */
function sink(consume: (input: Readable) => Promise<SinkAnswer>): number {
  const input = new PassThrough();
  const result = consume(input);
  // Read when the daemon ends the sink; never an unhandled rejection meanwhile.
  result.catch(() => undefined);
  return keep(sinks, { input, result });
}

/** A provider error as it crosses the channel, with the errno of its cause. */
function failure(error: ProviderError): WorkerFailure {
  const errno = (error.cause as { code?: unknown } | undefined)?.code;
  return { code: error.code, message: error.message, ...(typeof errno === 'string' ? { errno } : {}) };
}

/** Drops to the user: no supplementary groups, then the gid, then the uid (after which none of it can be undone). */
function become(uid: number, gid: number): void {
  try {
    if (process.setgroups === undefined || process.setgid === undefined || process.setuid === undefined) throw new Error('this platform cannot change users');
    // Once before the drop too: the C library's binding is loaded while the daemon's user may still read it.
    makeNonDumpable();
    process.setgroups([]);
    process.setgid(gid);
    process.setuid(uid);
    // A change of ids makes a process dumpable as fs.suid_dumpable says: made non-dumpable again whatever it
    // says, so that the user's programs can neither trace this process nor read its memory.
    makeNonDumpable();
  } catch (error) {
    throw new FsFailure('FS_IO_ERROR', `cannot become the owner's user: ${(error as Error).message}`);
  }
}

const view = (root: string | undefined) => files.view({ root });
const transfer = (root: string | undefined) => files.transfer({ root });

/**
 * Every call the daemon may make, as worker-protocol.ts types it: a view or
 * transfer call takes the owner's root first, then the arguments of the
 * interface's method it serves.
 */
const METHODS: WorkerTable = {
  become,
  resolve: (root, ...args) => view(root).resolve(...args),
  stat: (root, ...args) => view(root).stat(...args),
  lstat: (root, ...args) => view(root).lstat(...args),
  readText: (root, ...args) => view(root).readText(...args),
  listDir: (root, ...args) => view(root).listDir(...args),
  writeText: (root, ...args) => view(root).writeText(...args),
  writeBytes: (root, ...args) => view(root).writeBytes(...args),
  editText: (root, ...args) => view(root).editText(...args),
  look: (root, ...args) => view(root).look(...args),
  readBytes: (root, ...args) => view(root).readBytes(...args),
  openContent: async (root, ...args) => {
    const content = await view(root).openContent(...args);
    return { id: keep(contents, content), info: content.info };
  },
  contentStream: (id, start, end) => pulled(held(contents, id).stream(start, end)),
  contentClose: async (id) => {
    await contents.get(id)?.close();
    contents.delete(id);
  },
  streamText: async (root, ...args) => pulled(Readable.from(await view(root).streamText(...args))),
  next: async (id) => {
    const step = await held(streams, id).next();
    if (step.done !== true) return step.value;
    streams.delete(id);
    return undefined;
  },
  streamClose: async (id) => {
    const stream = streams.get(id);
    streams.delete(id);
    // A stream that had not ended was cut off: nobody will ask what it skipped.
    if (stream !== undefined) packSkips.delete(id);
    await stream?.return?.();
  },
  mkdir: (root, ...args) => transfer(root).mkdir(...args),
  remove: (root, ...args) => transfer(root).remove(...args),
  rename: (root, ...args) => transfer(root).rename(...args),
  digest: (root, ...args) => transfer(root).digest(...args),
  pack: async (root, ...args) => {
    const packed = await transfer(root).pack(...args);
    const id = pulled(packed.stream);
    packSkips.set(id, packed.skipped);
    return id;
  },
  packSkipped: (id) => {
    const skipped = held(packSkips, id);
    packSkips.delete(id);
    return skipped;
  },
  unpack: (root, path, options) => sink((input) => transfer(root).unpack(path, options, input)),
  stageUpload: async (root, ...args) => {
    const stage = await transfer(root).stageUpload(...args);
    return { id: keep(stages, stage), path: stage.path, identity: stage.identity };
  },
  stageOffset: (id) => held(stages, id).offset(),
  stageAppend: (id, offset) => sink((input) => held(stages, id).append(offset, input, undefined)),
  stageComplete: (id, expected) => held(stages, id).complete(expected),
  stageDiscard: async (id) => {
    await stages.get(id)?.discard();
    stages.delete(id);
  },
  launchCheck: (file, env, cwd) => {
    const found = launchFailure(file, env, cwd, hostPlatform);
    return found === undefined ? undefined : failure(found);
  },
  resolveExecutable: async (command, env) => {
    try {
      return { path: await resolveExecutable(command, env, hostPlatform) };
    } catch (error) {
      if (error instanceof ProviderError) return { failure: failure(error) };
      throw error;
    }
  },
  connect: (port) =>
    new Promise((resolve, reject) => {
      // Made here, after the drop: the socket is stamped with the user's uid, which travels with its descriptor.
      const socket = connect({ host: '127.0.0.1', port });
      // Not a byte is read here: a server that speaks first (a banner) is read by the daemon, from the first byte.
      socket.pause();
      socket.once('connect', () => {
        socket.removeAllListeners('error');
        resolve(socket);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => reject(new FsFailure('FS_IO_ERROR', error.message, { errno: error.code ?? 'EIO' })));
    }),
  sinkWrite: (id, chunk) => {
    const { input, result } = held(sinks, id);
    // A consumer that failed (an offset that is not the upload's, a directory that is not one) fails the write, which would wait for it forever.
    return Promise.race([
      new Promise<void>((resolve, reject) => input.write(chunk, (error) => (error ? reject(error) : resolve()))),
      result.then(() => undefined),
    ]);
  },
  sinkEnd: async (id) => {
    const { input, result } = held(sinks, id);
    sinks.delete(id);
    input.end();
    return await result;
  },
  sinkAbort: async (id) => {
    const entry = sinks.get(id);
    sinks.delete(id);
    // Cut off, as a connection that closed: what arrived before is kept by whoever consumed it.
    entry?.input.destroy();
    await entry?.result.catch(() => undefined);
  },
};

/** Runs one call; `M` ties the method it names to the arguments it carries. */
function invoke<M extends WorkerMethod>(request: WorkerRequestOf<M>): WorkerAnswer<M> | Promise<WorkerAnswer<M>> {
  const method: WorkerTable[M] = METHODS[request.method];
  return method(...request.args);
}

function reply(message: WorkerReply, handle?: Socket): void {
  process.send!(message, handle);
}

process.on('message', (message: WorkerRequest) => {
  void (async () => {
    try {
      if (!Object.hasOwn(METHODS, message.method)) throw new FsFailure('FS_IO_ERROR', `the file worker has no call ${String(message.method)}`);
      // Only the first call, which drops to the user, is taken as root.
      if (message.method !== 'become' && process.getuid?.() === 0) throw new FsFailure('FS_IO_ERROR', 'the file worker still runs as root');
      const value = await invoke(message);
      // A socket crosses as the reply's handle, not its value; this process's descriptor closes once it is sent.
      if (value instanceof Socket) reply({ id: message.id, ok: true, value: undefined }, value);
      else reply({ id: message.id, ok: true, value });
    } catch (error) {
      const failure = error instanceof FsFailure ? error : undefined;
      reply({
        id: message.id,
        ok: false,
        error: {
          code: failure?.code ?? 'FS_IO_ERROR',
          message: error instanceof Error ? error.message : String(error),
          ...(failure?.errno === undefined ? {} : { errno: failure.errno }),
        },
      });
    }
  })();
});
// The daemon gone, this process has nobody to serve.
process.on('disconnect', () => process.exit(0));
