/**
 * The files of an owner that runs as another OS user, served by a process of
 * that user: started by the daemon, it loads its code as the daemon's user,
 * then drops to the user's uid and gid with no supplementary groups before it
 * serves a call, so the kernel checks every open, write and rename as that
 * user would make it. It also answers, as the user, what a spawn of the
 * owner's would find (its working directory, its program) and where an
 * executable of the owner's is. The daemon calls it over the IPC channel (see
 * worker-files.ts): plain calls, byte streams pulled a chunk per call, and
 * sinks written a chunk per call, so memory stays bounded both sides.
 * @module
 */
import { PassThrough, Readable } from 'node:stream';
import type { FsTarget, PackSkips } from '@execworld/sdk/fs';
import { ProviderError } from '../errors.ts';
import { hostPlatform } from '../platform/index.ts';
import { launchFailure, resolveExecutable } from '../resolve-executable.ts';
import { FsFailure } from './fs-error.ts';
import { HostFiles } from './host-files.ts';
import type { OpenContent, UploadStage } from '../api.ts';
import type { WorkerFailure, WorkerReply, WorkerRequest } from './worker-protocol.ts';

const files = new HostFiles(JSON.parse(process.env.EXECWORLD_FILE_WORKER_OPTIONS ?? '{}') as ConstructorParameters<typeof HostFiles>[0]);
let nextId = 1;
const contents = new Map<number, OpenContent>();
const streams = new Map<number, AsyncIterator<unknown>>();
const stages = new Map<number, UploadStage>();
const sinks = new Map<number, { readonly input: PassThrough; readonly result: Promise<unknown> }>();
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

/** Pulls a stream a chunk per call. */
function pulled(stream: Readable): number {
  return keep(streams, (stream as AsyncIterable<unknown>)[Symbol.asyncIterator]());
}

/** A sink the daemon writes a chunk per call into, whose end answers what `consume` made of it. */
function sink(consume: (input: Readable) => Promise<unknown>): number {
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

const view = (root: string | undefined) => files.view({ root });
const transfer = (root: string | undefined) => files.transfer({ root });

/** Every call the daemon may make: the owner's root first where a view is involved. */
// The arguments are the daemon's own, checked by its callers: each method names their types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const METHODS: Record<string, (...args: any[]) => unknown> = {
  resolve: (root: string | undefined, path: string, cwd: string | undefined) => view(root).resolve(path, { cwd }),
  stat: (root: string | undefined, target: FsTarget) => view(root).stat(target),
  lstat: (root: string | undefined, path: string, cwd: string | undefined) => view(root).lstat(path, { cwd }),
  readText: (root: string | undefined, target: FsTarget) => view(root).readText(target),
  listDir: (root: string | undefined, target: FsTarget) => view(root).listDir(target),
  writeText: (root: string | undefined, target: FsTarget, content: string, expected: unknown) => view(root).writeText(target, content, expected as never),
  editText: (root: string | undefined, target: FsTarget, edit: never, expected: never) => view(root).editText(target, edit, expected),
  look: (root: string | undefined, target: FsTarget, textMaxBytes: number | undefined) => view(root).look(target, textMaxBytes),
  openContent: async (root: string | undefined, target: FsTarget) => {
    const content = await view(root).openContent(target);
    return { id: keep(contents, content), info: content.info };
  },
  contentStream: (id: number, start: number, end: number | undefined) => pulled(held(contents, id).stream(start, end)),
  contentClose: async (id: number) => {
    await contents.get(id)?.close();
    contents.delete(id);
  },
  next: async (id: number) => {
    const step = await held(streams, id).next();
    if (step.done === true) streams.delete(id);
    return step.done === true ? null : step.value;
  },
  streamText: async (root: string | undefined, target: FsTarget) => pulled(Readable.from(await view(root).streamText(target))),
  readBytes: (root: string | undefined, target: FsTarget, maxBytes: number) => view(root).readBytes(target, undefined, maxBytes),
  streamClose: async (id: number) => {
    const stream = streams.get(id);
    streams.delete(id);
    // A stream that had not ended was cut off: nobody will ask what it skipped.
    if (stream !== undefined) packSkips.delete(id);
    await stream?.return?.();
  },
  mkdir: (root: string | undefined, path: string, options: never) => transfer(root).mkdir(path, options),
  remove: (root: string | undefined, path: string, options: never) => transfer(root).remove(path, options),
  rename: (root: string | undefined, from: string, to: string, options: never) => transfer(root).rename(from, to, options),
  digest: (root: string | undefined, path: string, options: never) => transfer(root).digest(path, options),
  pack: async (root: string | undefined, path: string, options: never) => {
    const packed = await transfer(root).pack(path, options);
    const id = pulled(packed.stream);
    packSkips.set(id, packed.skipped);
    return id;
  },
  packSkipped: (id: number) => {
    const skipped = held(packSkips, id);
    packSkips.delete(id);
    return skipped;
  },
  unpack: (root: string | undefined, path: string, options: never) => sink((input) => transfer(root).unpack(path, options, input)),
  stageUpload: async (root: string | undefined, path: string, options: never) => {
    const stage = await transfer(root).stageUpload(path, options);
    return { id: keep(stages, stage), path: stage.path, identity: stage.identity };
  },
  stageOffset: (id: number) => held(stages, id).offset(),
  stageAppend: (id: number, offset: number) => sink((input) => held(stages, id).append(offset, input, undefined)),
  stageComplete: (id: number, expected: never) => held(stages, id).complete(expected),
  stageDiscard: async (id: number) => {
    await stages.get(id)?.discard();
    stages.delete(id);
  },
  launchCheck: (file: string, env: Record<string, string>, cwd: string) => {
    const found = launchFailure(file, env, cwd, hostPlatform);
    return found === undefined ? null : failure(found);
  },
  resolveExecutable: async (command: string, env: Record<string, string>) => {
    try {
      return { path: await resolveExecutable(command, env, hostPlatform) };
    } catch (error) {
      if (error instanceof ProviderError) return { failure: failure(error) };
      throw error;
    }
  },
  sinkWrite: (id: number, chunk: Uint8Array) => {
    const { input, result } = held(sinks, id);
    // A consumer that failed (an offset that is not the upload's, a directory that is not one) fails the write, which would wait for it forever.
    return Promise.race([
      new Promise<void>((resolve, reject) => input.write(chunk, (error) => (error ? reject(error) : resolve()))),
      result.then(() => undefined),
    ]);
  },
  sinkEnd: async (id: number) => {
    const { input, result } = held(sinks, id);
    sinks.delete(id);
    input.end();
    return await result;
  },
  sinkAbort: async (id: number) => {
    const entry = sinks.get(id);
    sinks.delete(id);
    // Cut off, as a connection that closed: what arrived before is kept by whoever consumed it.
    entry?.input.destroy();
    await entry?.result.catch(() => undefined);
  },
};

function reply(message: WorkerReply): void {
  process.send!(message);
}

/** Drops to the user: no supplementary groups, then the gid, then the uid (after which none of it can be undone). */
function become(uid: number, gid: number): void {
  if (process.setgroups === undefined || process.setgid === undefined || process.setuid === undefined) throw new Error('this platform cannot change users');
  process.setgroups([]);
  process.setgid(gid);
  process.setuid(uid);
}

process.on('message', (message: WorkerRequest) => {
  if (message.method === 'become') {
    try {
      become(message.args[0] as number, message.args[1] as number);
      reply({ id: message.id, ok: true, value: null });
    } catch (error) {
      reply({ id: message.id, ok: false, error: { code: 'FS_IO_ERROR', message: `cannot become the owner's user: ${(error as Error).message}` } });
    }
    return;
  }
  const method = METHODS[message.method];
  void (async () => {
    try {
      if (method === undefined) throw new FsFailure('FS_IO_ERROR', `the file worker has no call ${message.method}`);
      if (process.getuid?.() === 0) throw new FsFailure('FS_IO_ERROR', 'the file worker still runs as root');
      reply({ id: message.id, ok: true, value: (await method(...message.args)) ?? null });
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
