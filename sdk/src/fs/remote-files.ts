/**
 * `RemoteFiles`: the filesystem seam (`ctx.fs`) over a daemon, so that an
 * agent's file tools see the same world its commands run in.
 *
 * Every primitive is one call (REST or WebSocket), and the daemon does the
 * work where the files are: resolution, version checks, atomic writes and
 * edits. Text and bytes of any size stream over plain HTTP with TCP's flow
 * control, so memory stays bounded at both ends.
 *
 * The common read is one round trip: `resolve` also answers what the target
 * is and, for a small text file, its text, read from one open file. The one
 * `stat` and the one `readText` of that target that follow it use that answer,
 * as long as nothing else was sent to the daemon or came from it meanwhile and
 * it is younger than `prefetchMaxAgeMs`; any other call asks again. (A write has to be
 * two: the seam hands `writeText` a target that `resolve` made.)
 * @module
 */
import { posix, win32 } from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { FileSystemError, invalidArgument, isExecworldError } from '../errors.ts';
import { concat } from '../seam/byte-tail.ts';
import type { RemoteRuntime } from '../remote/runtime.ts';
import type {
  FsDirEntry,
  FsEditOutcome,
  FsEditRequest,
  FsErrorCode,
  FsInfo,
  FsPathInfo,
  FsProvider,
  FsResolveOptions,
  FsTarget,
  FsWriteIntent,
  FsWriteOutcome,
} from './types.ts';
import { binaryHead, TextStreamDecoder, toLf, utf8Text } from './text-stream.ts';
import { CONTENT_PATH } from './routes.ts';

export interface RemoteFilesOptions {
  /** The base of relative paths when a call gives none; without one a relative path answers FS_NOT_FOUND. */
  readonly cwd?: string | undefined;
  /** Text files up to this many bytes come back with `resolve`; 0 turns that off. @default 262144 */
  readonly prefetchTextBytes?: number;
  /** How long what `resolve` answered may serve a `stat` or `readText`. @default 20 */
  readonly prefetchMaxAgeMs?: number;
}

/** Texts up to this many UTF-8 bytes are written in a JSON call on the connection; larger ones as bytes over HTTP. */
const WRITE_AS_JSON_BYTES = 64 * 1024;
/** Largest answer of a write sent as bytes: its prior text is at most the daemon's diff basis (10 MiB), JSON-escaped. */
const MAX_WRITE_ANSWER_BYTES = 128 * 1024 * 1024;

interface Prefetched {
  readonly traffic: number;
  readonly at: number;
  readonly displayPath: string;
  readonly info: FsInfo | undefined;
  readonly text: string | null;
  /** Whether a stat was answered from it already. */
  statServed: boolean;
}

function fsError(code: Exclude<FsErrorCode, 'FS_SANDBOX_DENIED'>, message: string): FileSystemError {
  return new FileSystemError(code, message);
}

function aborted(doing: string): FileSystemError {
  return fsError('FS_ABORTED', `${doing}: aborted`);
}

/** `promise`, or FS_ABORTED as soon as `signal` aborts (for reads: what they would answer no longer matters). */
async function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined, doing: string): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) throw aborted(doing);
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_resolve, reject) => {
        onAbort = () => reject(aborted(doing));
        signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}

/** An error of the byte route in the seam's terms: an abort is FS_ABORTED, a cut stream FS_IO_ERROR. */
function streamFailure(error: unknown, doing: string): Error {
  if (isExecworldError(error)) return error;
  if ((error as { name?: unknown } | null)?.name === 'AbortError') return aborted(doing);
  return fsError('FS_IO_ERROR', `cannot ${doing}: ${error instanceof Error ? error.message : String(error)}`);
}

export class RemoteFiles implements FsProvider {
  readonly runtime: RemoteRuntime;
  readonly #cwd: string | undefined;
  readonly #prefetchTextBytes: number;
  readonly #prefetchMaxAgeMs: number;
  /** The last resolve's answer, by target key; one entry, since only the call right after it may use it. */
  #prefetched: { key: string; entry: Prefetched } | undefined;

  constructor(runtime: RemoteRuntime, options: RemoteFilesOptions = {}) {
    this.runtime = runtime;
    this.#cwd = options.cwd;
    this.#prefetchTextBytes = options.prefetchTextBytes ?? 256 * 1024;
    this.#prefetchMaxAgeMs = options.prefetchMaxAgeMs ?? 20;
    if (!Number.isSafeInteger(this.#prefetchTextBytes) || this.#prefetchTextBytes < 0 || this.#prefetchTextBytes > 4 * 1024 * 1024) {
      throw invalidArgument(`prefetchTextBytes must be an integer from 0 to 4 MiB, not ${options.prefetchTextBytes}`);
    }
  }

  async resolve(path: string, options?: FsResolveOptions): Promise<FsTarget> {
    if (options?.signal?.aborted === true) throw aborted('resolve');
    const cwd = options?.cwd ?? this.#cwd;
    const answer = await abortable(
      this.runtime.call('fs.resolve', {
        path,
        ...(cwd === undefined ? {} : { cwd }),
        ...(this.#prefetchTextBytes === 0 ? {} : { readTextMaxBytes: this.#prefetchTextBytes }),
      }),
      options?.signal,
      'resolve',
    );
    this.#prefetched = {
      key: answer.target.targetKey,
      entry: {
        traffic: this.runtime.traffic,
        at: performance.now(),
        displayPath: answer.target.displayPath,
        info: answer.info ?? undefined,
        text: answer.text,
        statServed: false,
      },
    };
    return answer.target;
  }

  /** What the resolve that made `target` answered, if nothing happened since. */
  #fresh(target: FsTarget): Prefetched | undefined {
    const held = this.#prefetched;
    if (held === undefined || held.key !== target.targetKey) return undefined;
    const { entry } = held;
    if (entry.traffic !== this.runtime.traffic || performance.now() - entry.at > this.#prefetchMaxAgeMs || entry.displayPath !== target.displayPath) {
      this.#prefetched = undefined;
      return undefined;
    }
    return entry;
  }

  #path(): typeof posix {
    return this.runtime.platform === 'win32' ? win32 : posix;
  }

  processPath(target: FsTarget): string {
    return target.targetKey;
  }

  fileUrl(target: FsTarget): string {
    return pathToFileURL(target.targetKey, { windows: this.runtime.platform === 'win32' }).href;
  }

  contains(parent: FsTarget, child: FsTarget): boolean {
    const path = this.#path();
    const between = path.relative(parent.targetKey, child.targetKey);
    return between === '' || (between !== '..' && !between.startsWith(`..${path.sep}`) && !path.isAbsolute(between));
  }

  async stat(target: FsTarget, signal?: AbortSignal): Promise<FsInfo | undefined> {
    if (signal?.aborted === true) throw aborted('stat');
    const fresh = this.#fresh(target);
    if (fresh !== undefined && !fresh.statServed) {
      // Once: a later stat asks again, and only the read may follow from this answer.
      fresh.statServed = true;
      return fresh.info;
    }
    this.#prefetched = undefined;
    const answer = await abortable(this.runtime.call('fs.stat', this.#ref(target)), signal, 'stat');
    return answer.info ?? undefined;
  }

  async lstat(path: string, options?: { cwd?: string | undefined }, signal?: AbortSignal): Promise<FsPathInfo | undefined> {
    if (signal?.aborted === true) throw aborted('lstat');
    const cwd = options?.cwd ?? this.#cwd;
    const answer = await abortable(this.runtime.call('fs.lstat', { path, ...(cwd === undefined ? {} : { cwd }) }), signal, 'lstat');
    return answer.info ?? undefined;
  }

  async readText(target: FsTarget, signal?: AbortSignal): Promise<string> {
    if (signal?.aborted === true) throw aborted('read');
    const fresh = this.#fresh(target);
    if (fresh?.text !== undefined && fresh.text !== null) {
      this.#prefetched = undefined;
      return fresh.text;
    }
    // A file known to be larger than a prefetch comes as bytes over HTTP: as JSON it would be escaped, framed
    // and parsed whole on both sides. The stream applies the same text rule.
    if (fresh?.info?.type === 'file' && (fresh.info.size ?? 0) > this.#prefetchTextBytes) {
      this.#prefetched = undefined;
      return await this.#wholeText(target, signal);
    }
    try {
      return (await abortable(this.runtime.call('fs.readText', this.#ref(target)), signal, 'read')).text;
    } catch (error) {
      // Larger than one answer may hold: the same text, streamed.
      if ((error as { code?: unknown }).code !== 'FS_TOO_LARGE') throw error;
      return await this.#wholeText(target, signal);
    }
  }

  /** The whole file as text, from its bytes: checked and decoded once they are all here, each in one native pass. */
  async #wholeText(target: FsTarget, signal: AbortSignal | undefined): Promise<string> {
    const doing = `read "${target.displayPath}"`;
    const bytes = await this.readBytes(target, signal, Number.MAX_SAFE_INTEGER);
    if (binaryHead(bytes)) throw fsError('FS_NOT_TEXT', `cannot ${doing}: a binary file (NUL byte)`);
    const text = utf8Text(bytes);
    if (text === undefined) throw fsError('FS_NOT_TEXT', `cannot ${doing}: not UTF-8 text`);
    return text;
  }

  streamText(target: FsTarget, signal?: AbortSignal): Promise<AsyncIterable<string>> {
    // The stream opens at its first read, where a missing file or an abort is reported.
    return Promise.resolve(this.#textChunks(target, signal));
  }

  async *#textChunks(target: FsTarget, signal: AbortSignal | undefined): AsyncGenerator<string> {
    const doing = `read "${target.displayPath}"`;
    if (signal?.aborted === true) throw aborted('read');
    const decoder = new TextStreamDecoder((reason) =>
      fsError('FS_NOT_TEXT', `cannot ${doing}: ${reason === 'binary' ? 'a binary file (NUL byte)' : 'not UTF-8 text'}`),
    );
    try {
      const response = await this.runtime.http.get(CONTENT_PATH, { path: target.targetKey, displayPath: target.displayPath }, signal);
      try {
        for await (const chunk of response as AsyncIterable<Buffer>) {
          yield decoder.decode(chunk);
        }
        if (!response.complete) throw fsError('FS_IO_ERROR', `cannot ${doing}: the daemon's answer ended early`);
        yield decoder.decode();
      } finally {
        response.destroy();
      }
    } catch (error) {
      throw streamFailure(error, doing);
    }
  }

  async readBytes(target: FsTarget, signal: AbortSignal | undefined, maxBytes: number): Promise<Uint8Array> {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw invalidArgument(`maxBytes must be a non-negative integer, not ${maxBytes}`);
    const doing = `read "${target.displayPath}"`;
    if (signal?.aborted === true) throw aborted('read');
    try {
      const response = await this.runtime.http.get(CONTENT_PATH, { path: target.targetKey, displayPath: target.displayPath, maxBytes }, signal);
      try {
        // A length the daemon declared (a plain read) is the array's from the start: each chunk is copied into it
        // as it arrives, while the next is on its way, rather than all of them at the end.
        const declared = Number(response.headers['content-length'] ?? Number.NaN);
        const whole = Number.isSafeInteger(declared) && declared >= 0 && declared <= maxBytes ? new Uint8Array(declared) : undefined;
        const chunks: Buffer[] = [];
        let length = 0;
        for await (const chunk of response as AsyncIterable<Buffer>) {
          if (length + chunk.length > maxBytes) throw fsError('FS_TOO_LARGE', `cannot ${doing}: the content is more than the ${maxBytes}-byte limit`);
          // Node's parser ends the body at the declared length: a chunk past it cannot come.
          if (whole !== undefined) whole.set(chunk, length);
          else chunks.push(chunk);
          length += chunk.length;
        }
        if (!response.complete) throw fsError('FS_IO_ERROR', `cannot ${doing}: the daemon's answer ended early`);
        // One copy, into an array of its own (never a view of the socket's read buffers).
        return whole ?? concat(chunks, true);
      } finally {
        response.destroy();
      }
    } catch (error) {
      throw streamFailure(error, doing);
    }
  }

  async listDir(target: FsTarget, signal?: AbortSignal): Promise<FsDirEntry[]> {
    if (signal?.aborted === true) throw aborted('list');
    return (await abortable(this.runtime.call('fs.listDir', this.#ref(target)), signal, 'list')).entries;
  }

  async writeText(target: FsTarget, content: string, expected?: FsWriteIntent, signal?: AbortSignal): Promise<FsWriteOutcome> {
    // Once sent, a write is not abandoned: an abort then could not say whether it took effect.
    if (signal?.aborted === true) throw aborted('write');
    // The daemon does not send the text back: `after` is what was sent, with line ends as LF.
    const after = toLf(content);
    const bytes = Buffer.byteLength(content, 'utf8');
    if (bytes <= WRITE_AS_JSON_BYTES) {
      const written = await this.runtime.call('fs.writeText', { ...this.#ref(target), content, ...(expected === undefined ? {} : { expected }) });
      return { ...written, after };
    }
    // A large text goes as its bytes over HTTP: as JSON it would be escaped, framed, masked and parsed whole.
    const written = await this.runtime.http.json<Omit<FsWriteOutcome, 'after'>>(
      'PUT',
      CONTENT_PATH,
      {
        ...this.#ref(target),
        ...(expected?.kind === 'createIfAbsent' ? { ifAbsent: 'true' } : {}),
        ...(expected?.kind === 'replaceIfVersion' ? { ifVersion: expected.version } : {}),
      },
      // The answer holds the prior text (the diff's basis): up to about as large as what was sent, escaped.
      { body: Readable.from([Buffer.from(content, 'utf8')]), maxBytes: MAX_WRITE_ANSWER_BYTES },
    );
    return { ...written, after };
  }

  async editText(target: FsTarget, edit: FsEditRequest, expected?: { version: string }, signal?: AbortSignal): Promise<FsEditOutcome> {
    if (signal?.aborted === true) throw aborted('edit');
    const { oldString, newString, replaceAll } = edit;
    return this.runtime.call('fs.editText', {
      ...this.#ref(target),
      edit: { oldString, newString, replaceAll },
      ...(expected === undefined ? {} : { expected }),
    });
  }

  #ref(target: FsTarget): { path: string; displayPath: string } {
    return { path: target.targetKey, displayPath: target.displayPath };
  }
}
