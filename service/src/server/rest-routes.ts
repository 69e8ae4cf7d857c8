/**
 * The REST adapter of the dispatcher: one route per operation of the table,
 * at its method and path. A route turns its request into a call (the path's
 * parameters with the JSON body's fields, or with the query's), hands it to
 * the dispatcher, and sends the answer: JSON, or for a call that answers bytes
 * the bytes with the table's media type, headers and trailers. A call that
 * carries bytes gets its body unread, as a stream.
 * @module
 */
import { Transform, type Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BODY_LIMITS, OPERATION_LIST, type OperationSpec } from '@execworld/sdk/protocol';
import { bodyIsStreamed } from './body-timeouts.ts';
import type { BodyBudget } from './body-budget.ts';
import { ByteReply } from './byte-calls.ts';
import type { Caller, Dispatcher } from './dispatch.ts';
import { ServiceError } from './errors.ts';

export interface RestRoutesOptions {
  readonly dispatcher: Dispatcher;
  /** The budget of the JSON bodies all requests hold. */
  readonly bodies: BodyBudget;
  /** The daemon's --max-body-bytes, which caps every JSON body. */
  readonly maxBodyBytes: number;
}

/** What a field of a query is once its text is read: query strings carry text only. */
type QueryKind = 'number' | 'boolean' | 'string';

/** The kind of a schema's values, through optional, default and nullable wrappers. */
function kindOf(schema: z.ZodType): QueryKind {
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodDefault || schema instanceof z.ZodNullable) {
    return kindOf(schema.unwrap() as z.ZodType);
  }
  if (schema instanceof z.ZodNumber) return 'number';
  if (schema instanceof z.ZodBoolean) return 'boolean';
  return 'string';
}

/**
 * Reads a query's text as its fields' schemas say: digits become a number
 * only where the field is a number, `true`/`false` a boolean only where it is
 * a boolean, so a path named `123` stays a path. Anything else is left as
 * text for the schema to refuse.
 */
function queryReader(spec: OperationSpec): (query: Record<string, unknown>) => Record<string, unknown> {
  const kinds = new Map(Object.entries(spec.input.shape).map(([name, field]) => [name, kindOf(field as z.ZodType)]));
  return (query) => {
    const typed: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(query)) {
      const kind = kinds.get(key);
      if (typeof value === 'string' && kind === 'number' && /^-?\d{1,16}$/.test(value)) typed[key] = Number(value);
      else if (kind === 'boolean' && (value === 'true' || value === 'false')) typed[key] = value === 'true';
      else typed[key] = value;
    }
    return typed;
  };
}

/** Aborts when the caller went away: the response closed before it was sent. (A request's own 'close' only means its body was read.) */
function callerGone(reply: FastifyReply): AbortSignal {
  const aborted = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) aborted.abort();
  });
  return aborted.signal;
}

/** The request's body as the byte parser gave it, or a clear refusal of any other body. */
function byteBody(request: FastifyRequest, spec: OperationSpec): Readable {
  const stream = request.body as Readable | undefined;
  if (stream === undefined || stream === null || typeof stream.pipe !== 'function') {
    throw new ServiceError('UNSUPPORTED_MEDIA_TYPE', `the body must be bytes (${spec.bytes?.body ?? 'application/octet-stream'})`);
  }
  return stream;
}

function sendBytes(reply: FastifyReply, spec: OperationSpec, answer: ByteReply): FastifyReply {
  if (answer.onClose !== undefined) reply.raw.once('close', answer.onClose);
  void reply.code(spec.status).header('content-type', spec.bytes!.answer!.mediaType);
  for (const [name, value] of Object.entries(answer.headers)) void reply.header(name, value);
  for (const [name, value] of Object.entries(answer.trailers)) void reply.trailer(name, (_reply, _payload, done) => done(null, value()));
  return reply.send(answer.body);
}

/**
 * A body taken whole, bounded as a JSON body is: past `limit` bytes (said in
 * advance by its length, or counted as it comes) it is refused with 413.
 */
function boundedBody(request: FastifyRequest, payload: Readable, limit: number): Readable {
  const tooLarge = (): ServiceError =>
    new ServiceError('PAYLOAD_TOO_LARGE', `the request body is larger than ${limit} bytes, the most this call takes (--max-body-bytes)`);
  const length = Number(request.headers['content-length']);
  let seen = 0;
  const bounded = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > limit) done(tooLarge());
      else done(null, chunk);
    },
  });
  if (Number.isFinite(length) && length > limit) {
    bounded.destroy(tooLarge());
    return bounded;
  }
  payload.once('error', (error) => bounded.destroy(error));
  bounded.once('error', () => payload.unpipe(bounded));
  return payload.pipe(bounded);
}

/** The media types a call that carries bytes may send them as; any such body is taken as bytes. */
const BYTE_BODIES = ['application/octet-stream', 'application/x-tar'];

/** Registers a route for every operation: JSON calls in `scope`, calls that carry bytes in a scope of their own. */
export function registerRestRoutes(scope: FastifyInstance, options: RestRoutesOptions): void {
  const { dispatcher, bodies } = options;
  const route = (target: FastifyInstance, spec: OperationSpec): void => {
    const operation = dispatcher.operation(spec.name);
    const readQuery = queryReader(spec);
    const bytesIn = spec.body === 'bytes';
    const jsonBody = spec.method === 'POST' && !bytesIn;
    const wholeBytes = bytesIn && spec.bytes?.whole === true;
    target.route({
      method: spec.method,
      url: spec.path.replace(/\{(\w+)\}/g, ':$1'),
      config: { auth: spec.auth, access: spec.access },
      ...(bytesIn
        ? wholeBytes
          ? {
              // Held whole before the call acts: within --max-body-bytes, and counted in the budget of all bodies.
              preParsing: (request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (error: null, payload: Readable) => void) =>
                done(null, boundedBody(request, bodies.meter(request, reply, payload), options.maxBodyBytes)),
            }
          : {}
        : {
            // A JSON body is read whole before it is validated: at most what the call carries, within the budget of all bodies.
            bodyLimit: Math.min(BODY_LIMITS[spec.body], options.maxBodyBytes),
            preParsing: (request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (error: null, payload: Readable) => void) =>
              done(null, bodies.meter(request, reply, payload)),
          }),
      handler: async (request, reply) => {
        const body = bytesIn ? byteBody(request, spec) : undefined;
        try {
          const input = jsonBody ? (request.body ?? {}) : readQuery(request.query as Record<string, unknown>);
          if (typeof input !== 'object' || input === null || Array.isArray(input))
            throw new ServiceError('INVALID_ARGUMENT', 'the request body must be a JSON object');
          const caller: Caller = {
            principal: request.principal,
            transport: 'rest',
            signal: callerGone(reply),
            unbounded: false,
            where: jsonBody ? 'body' : 'query',
            body,
            // What the answer set aside is held until its response closed: sent, or its connection gone.
            whenAnswered: (done) => {
              if (reply.raw.closed) done();
              else reply.raw.once('close', done);
            },
          };
          const result = await dispatcher.call(operation, caller, { ...(request.params as object), ...input });
          if (result instanceof ByteReply) return sendBytes(reply, spec, result);
          return reply.code(spec.status).send(result);
        } catch (error) {
          // Bytes the call never took are read and dropped, so the refusal reaches a client still sending them.
          body?.resume();
          throw error;
        }
      },
    });
  };
  for (const spec of OPERATION_LIST) if (spec.body !== 'bytes') route(scope, spec);
  void scope.register((inner, _options, done) => {
    // In this scope only: a byte body reaches its handler as the request stream, unread and unbounded by the JSON body limit,
    // and timed by its pauses rather than its length (a large upload takes as long as it takes).
    inner.addContentTypeParser(BYTE_BODIES, (request, payload, parsed) => {
      bodyIsStreamed(request.raw);
      parsed(null, payload);
    });
    for (const spec of OPERATION_LIST) if (spec.body === 'bytes') route(inner, spec);
    done();
  });
}
