/**
 * The byte routes for files, beside the operation table's JSON calls: a
 * file's content streamed from an offset, an upload's bytes appended at its
 * offset, and a directory packed or unpacked as a tar stream. Bodies and
 * answers stream with TCP's flow control: memory stays bounded whatever the
 * size. Each route says its `access`, which the daemon's authentication
 * checks: a read-only token may download and pack, never upload or unpack.
 * @module
 */
import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ARCHIVE_PATH, CONTENT_PATH, DIGEST_TRAILER, SIZE_HEADER, SKIPPED_TRAILER, skippedTrailer, UPLOADS_PATH, VERSION_HEADER } from '@execworld/sdk/fs';
import { schemas, type ErrorCode } from '@execworld/sdk/protocol';
import type { OwnerFiles, OwnerTransfer } from '../provider/api.ts';
import type { z } from 'zod';
import { bodyIsStreamed } from './body-timeouts.ts';
import { describeZodError, ServiceError } from './errors.ts';
import type { UploadRegistry } from './uploads.ts';

/** The media types a byte route's body may have; any body is taken as bytes. */
const BYTE_BODIES = ['application/octet-stream', 'application/x-tar'];

export interface FileRoutesOptions {
  readonly files: (owner: string) => OwnerFiles;
  readonly transfer: (owner: string) => OwnerTransfer;
  readonly uploads: UploadRegistry;
}

/** Aborts when the caller went away before its answer was sent. */
function callerGone(reply: FastifyReply): AbortSignal {
  const aborted = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) aborted.abort();
  });
  return aborted.signal;
}

function parsed<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const result = schema.safeParse(value);
  if (!result.success) throw new ServiceError('INVALID_ARGUMENT', describeZodError(result.error, where));
  return result.data;
}

/** Registers the byte routes in `scope` (whose own content parsers take bodies as streams). */
export function registerFileRoutes(scope: FastifyInstance, options: FileRoutesOptions): void {
  // In this scope only: a byte body reaches its handler as the request stream, unread and unbounded by the JSON body limit,
  // and timed by its pauses rather than its length (a large upload takes as long as it takes).
  scope.addContentTypeParser(BYTE_BODIES, (request, payload, done) => {
    bodyIsStreamed(request.raw);
    done(null, payload);
  });

  scope.route({
    method: 'GET',
    url: CONTENT_PATH,
    config: { access: 'read' },
    handler: async (request, reply) => {
      const { path, cwd, displayPath, offset, maxBytes, version: expected, digest } = parsed(schemas.ContentQuery, request.query, 'query');
      const signal = callerGone(reply);
      const files = options.files(request.owner);
      const resolved = await files.resolve(path, { cwd, signal });
      const content = await files.openContent(displayPath === undefined ? resolved : { ...resolved, displayPath }, signal);
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
      void reply.header('content-type', 'application/octet-stream').header(VERSION_HEADER, version).header(SIZE_HEADER, size);
      if (offset === size) {
        await content.close();
        return reply.send(Buffer.alloc(0));
      }
      // The bytes of the file as it was opened: its size then bounds what is sent, whatever is appended meanwhile.
      const stream = content.stream(offset, size - 1);
      // Sent in full or cut off, the answer's end is the file's.
      reply.raw.once('close', () => {
        stream.destroy();
        void content.close();
      });
      if (digest === undefined || offset !== 0) return reply.header('content-length', size - offset).send(stream);
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
      return reply.trailer(DIGEST_TRAILER, (_reply, _payload, done) => done(null, hash.digest('hex'))).send(hashed);
    },
  });

  scope.route({
    method: 'PUT',
    url: `${UPLOADS_PATH}/:id`,
    config: { access: 'write' },
    handler: async (request, reply) => {
      const body = bodyStream(request.body);
      const { id } = parsed(schemas.UploadParams, request.params, 'path');
      const { offset } = parsed(schemas.UploadBytesQuery, request.query, 'query');
      const answer = await options.uploads.append(request.owner, id, offset, body, callerGone(reply));
      return reply.send(answer);
    },
  });

  scope.route({
    method: 'GET',
    url: ARCHIVE_PATH,
    config: { access: 'read' },
    handler: async (request, reply) => {
      const { path, cwd } = parsed(schemas.ArchiveQuery, request.query, 'query');
      const signal = callerGone(reply);
      const packed = await options.transfer(request.owner).pack(path, { cwd }, signal);
      const stream = await primed(packed.stream);
      // Cut off, the answer's end is the stream's: what it holds open is released.
      reply.raw.once('close', () => stream.destroy());
      // The special files left out are known once the last entry was packed: they come as a trailer (the answer is chunked).
      return reply
        .header('content-type', 'application/x-tar')
        .trailer(SKIPPED_TRAILER, (_reply, _payload, done) => done(null, skippedTrailer(packed.skipped)))
        .send(stream);
    },
  });

  scope.route({
    method: 'PUT',
    url: ARCHIVE_PATH,
    config: { access: 'write' },
    handler: async (request, reply) => {
      const body = bodyStream(request.body);
      let query;
      try {
        query = parsed(schemas.ArchiveQuery, request.query, 'query');
      } catch (error) {
        body.resume();
        throw error;
      }
      const unpacked = await options.transfer(request.owner).unpack(query.path, { cwd: query.cwd }, body, callerGone(reply));
      return reply.send(unpacked);
    },
  });
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

/** The request's body as the byte parser gave it, or a clear refusal of any other body. */
function bodyStream(body: unknown): Readable {
  const stream = body as Readable | undefined;
  if (stream === undefined || typeof stream.pipe !== 'function') {
    const code: ErrorCode = 'UNSUPPORTED_MEDIA_TYPE';
    throw new ServiceError(code, `the body must be bytes (${BYTE_BODIES.join(' or ')})`);
  }
  return stream;
}
