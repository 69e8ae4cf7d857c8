/**
 * The calls of the table that carry bytes rather than JSON (see the table's
 * `bytes`): a file's content streamed from an offset, an upload's bytes
 * appended at its offset, and a directory packed or unpacked as a tar stream.
 * Bodies and answers stream with TCP's flow control: memory stays bounded
 * whatever the size. A call that answers bytes answers a {@link ByteReply},
 * which the REST adapter sends with the table's media type.
 * @module
 */
import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import { DIGEST_TRAILER, SIZE_HEADER, SKIPPED_TRAILER, skippedTrailer, VERSION_HEADER } from '@execworld/sdk/fs';
import type { OperationParams, OperationResult } from '@execworld/sdk/protocol';
import { ServiceError } from './errors.ts';
import type { CallContext } from './call-context.ts';

/** An answer of bytes: what the table's `bytes.answer` describes. */
export class ByteReply {
  readonly body: Readable | Buffer;
  /** Headers beside the media type. */
  readonly headers: Readonly<Record<string, string | number>>;
  /** Trailers, each computed once the body was sent (the answer is then chunked). */
  readonly trailers: Readonly<Record<string, () => string>>;
  /** Called when the answer's connection closes, sent in full or cut off: what the body holds open is released. */
  readonly onClose: (() => void) | undefined;

  constructor(
    body: Readable | Buffer,
    options: { headers?: Record<string, string | number>; trailers?: Record<string, () => string>; onClose?: () => void } = {},
  ) {
    this.body = body;
    this.headers = options.headers ?? {};
    this.trailers = options.trailers ?? {};
    this.onClose = options.onClose;
  }
}

/** The byte body of a call that carries one, as the REST adapter gave it. */
function bodyOf(ctx: CallContext): Readable {
  if (ctx.body === undefined) throw new ServiceError('UNSUPPORTED_MEDIA_TYPE', 'the call carries bytes: send them as the body of its REST request');
  return ctx.body;
}

/**
 * The body of a call that takes it whole (the table's `bytes.whole`), checked
 * to be UTF-8 text and kept as its bytes (a byte-order mark too): decoded,
 * a large text would only be encoded again to be written. The REST adapter
 * bounds it by --max-body-bytes and counts it in the budget of held bodies.
 * @throws {ServiceError} FS_NOT_TEXT when the bytes are not UTF-8
 */
export async function wholeUtf8(ctx: CallContext): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of bodyOf(ctx) as AsyncIterable<Buffer>) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  if (!isUtf8(bytes)) throw new ServiceError('FS_NOT_TEXT', 'the body is not UTF-8 text');
  return bytes;
}

/** `GET /v1/files/content`: a file's bytes from an offset, to the end it had when opened. */
export async function fileContent(ctx: CallContext, params: OperationParams<'files.content'>): Promise<ByteReply> {
  const { path, cwd, displayPath, offset, maxBytes, version: expected, digest } = params;
  const files = ctx.files();
  const resolved = await files.resolve(path, { cwd, signal: ctx.signal });
  const content = await files.openContent(displayPath === undefined ? resolved : { ...resolved, displayPath }, ctx.signal);
  const { size, version } = content.info;
  const shown = displayPath ?? resolved.displayPath;
  try {
    if (expected !== undefined && expected !== version) throw new ServiceError('FS_STALE_VERSION', `"${shown}" changed since version ${expected}`);
    if (maxBytes !== undefined && size > maxBytes) {
      throw new ServiceError('FS_TOO_LARGE', `cannot read "${shown}": ${size} bytes is more than the ${maxBytes}-byte limit`);
    }
    if (offset > size) throw new ServiceError('INVALID_ARGUMENT', `offset ${offset} is past the end of the file (${size} bytes)`);
  } catch (error) {
    await content.close();
    throw error;
  }
  const headers = { [VERSION_HEADER]: version, [SIZE_HEADER]: size };
  if (offset === size) {
    await content.close();
    return new ByteReply(Buffer.alloc(0), { headers });
  }
  // The bytes of the file as it was opened: its size then bounds what is sent, whatever is appended meanwhile.
  const stream = content.stream(offset, size - 1);
  // Sent in full or cut off, the answer's end is the file's.
  const onClose = (): void => {
    stream.destroy();
    void content.close();
  };
  if (digest === undefined || offset !== 0) return new ByteReply(stream, { headers: { ...headers, 'content-length': size - offset }, onClose });
  // The whole file, hashed as it is sent: the digest comes as a trailer (the answer is chunked), with no second read.
  const hash = createHash('sha256');
  const hashed = stream.pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        done(null, chunk);
      },
    }),
  );
  stream.once('error', (error) => hashed.destroy(error));
  return new ByteReply(hashed, { headers, trailers: { [DIGEST_TRAILER]: () => hash.digest('hex') }, onClose });
}

/** `PUT /v1/files/uploads/{id}`: the body appended to the upload at its offset. */
export function appendUpload(ctx: CallContext, params: OperationParams<'upload.bytes'>) {
  return ctx.uploads.append(ctx.principal.owner, params.id, params.offset, bodyOf(ctx), ctx.signal);
}

/** `GET /v1/files/archive`: a directory as a tar stream, with the special files it left out as a trailer. */
export async function packArchive(ctx: CallContext, params: OperationParams<'archive.pack'>): Promise<ByteReply> {
  const packed = await ctx.transfer().pack(params.path, { cwd: params.cwd }, ctx.signal);
  const stream = await primed(packed.stream);
  // The special files left out are known once the last entry was packed: they come as a trailer (the answer is chunked).
  return new ByteReply(stream, { trailers: { [SKIPPED_TRAILER]: () => skippedTrailer(packed.skipped) }, onClose: () => stream.destroy() });
}

/** `PUT /v1/files/archive`: the body's tar stream unpacked into a directory. */
export async function unpackArchive(ctx: CallContext, params: OperationParams<'archive.unpack'>): Promise<OperationResult<'archive.unpack'>> {
  const unpacked = await ctx.transfer().unpack(params.path, { cwd: params.cwd }, bodyOf(ctx), ctx.signal);
  return { ...unpacked, warnings: [...unpacked.warnings] };
}

/**
 * `stream`, once its first chunk came: a failure before any byte (a pack
 * that met a replaced directory at once) is the request's error, answered
 * in the catalog's shape with its code; one after it cuts the answer.
 */
async function primed(stream: Readable): Promise<Readable> {
  const iterator = (stream as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
  const first = await iterator.next();
  return Readable.from(
    (async function* () {
      try {
        if (first.done === true) return;
        yield first.value;
        for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) yield next.value;
      } finally {
        await iterator.return?.();
      }
    })(),
    { objectMode: false },
  );
}
