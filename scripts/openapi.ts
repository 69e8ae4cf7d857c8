/**
 * The OpenAPI 3.1 document of the daemon, made from the operation table and
 * the zod schemas. A build-time generator, not part of the SDK: `npm run
 * gen:openapi` writes it to `openapi/`; a test fails when the committed copy
 * is stale.
 * @module
 */
import { z } from 'zod';
import {
  ClientMessage,
  DATA_HEADER_BYTES,
  ERROR_CATALOG,
  ErrorBody,
  OPERATION_LIST,
  PROTOCOL_VERSION,
  ServerMessage,
  StreamRef,
  SubscribeParams,
  SubscribeResult,
  WS_SUBPROTOCOL,
  WS_TOKEN_PROTOCOL_PREFIX,
  type ErrorCode,
  type OperationSpec,
} from '@execworld/sdk/protocol';

type Json = Record<string, unknown>;

const componentUri = (id: string): string => `#/components/schemas/${id}`;

function idOf(schema: z.ZodType): string | undefined {
  return (z.globalRegistry.get(schema) as { id?: string } | undefined)?.id;
}

function withoutDialect(schema: Json): Json {
  const { $schema: _schema, $id: _id, ...rest } = schema;
  return rest;
}

/** A schema inline, or a reference to its component when it has an id. */
function schemaOf(schema: z.ZodType): Json {
  const id = idOf(schema);
  if (id !== undefined) return { $ref: componentUri(id) };
  return withoutDialect(z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }));
}

/**
 * The error codes of `GET /v1/connect`: a refused token or origin, a handshake
 * ws refuses, a plain GET, and what any request can get.
 */
export const CONNECT_ERRORS: readonly ErrorCode[] = [
  'INVALID_ARGUMENT',
  'UNAUTHORIZED',
  'FORBIDDEN_ORIGIN',
  'INTERNAL',
  'HEADERS_TOO_LARGE',
  'CLIENT_TIMEOUT',
  'UPGRADE_REQUIRED',
];

/** The error response of one group of codes of a status, named by its codes, kept once in components.responses. */
function errorResponse(group: readonly ErrorCode[]): Json {
  return {
    description: group.map((code) => `${code}: ${ERROR_CATALOG[code].description}`).join('\n\n'),
    content: {
      'application/json': {
        schema: {
          allOf: [{ $ref: componentUri('Error') }, { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: group } } } } }],
        },
      },
    },
  };
}

/** One response per status among `codes`, each allowing only its codes; the responses themselves go into `shared`. */
function errorResponses(codes: readonly ErrorCode[], shared: Map<string, Json>): Json {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ERROR_CATALOG[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Json = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const name = group.join('.');
    if (!shared.has(name)) shared.set(name, errorResponse(group));
    responses[String(status)] = { $ref: `#/components/responses/${name}` };
  }
  return responses;
}

function operationObject(spec: OperationSpec, shared: Map<string, Json>): Json {
  const parameters: Json[] = Object.entries(spec.params).map(([name, schema]) => ({
    name,
    in: 'path',
    required: true,
    schema: schemaOf(schema),
  }));
  const shape = spec.input.shape as Record<string, z.ZodType>;
  // A POST's fields are its JSON body; any other method's (a PUT of bytes too) are its query.
  if (spec.method !== 'POST') {
    for (const [name, field] of Object.entries(shape)) {
      const optional = field instanceof z.ZodOptional || field instanceof z.ZodDefault;
      const inner = optional ? (field as z.ZodOptional<z.ZodType>).unwrap() : field;
      const json = schemaOf(inner);
      const { description, ...schema } = json as Json & { description?: string };
      parameters.push({ name, in: 'query', required: !optional, ...(description === undefined ? {} : { description }), schema });
    }
  }
  const answer = spec.bytes?.answer;
  const success: Json =
    answer === undefined
      ? { description: spec.summary, content: { 'application/json': { schema: schemaOf(spec.result) } } }
      : {
          description: answer.description,
          ...(Object.keys(answer.headers).length === 0
            ? {}
            : {
                headers: Object.fromEntries(
                  Object.entries(answer.headers).map(([name, header]) => [
                    headerName(name),
                    { description: header.description, schema: schemaOf(header.schema) },
                  ]),
                ),
              }),
          content: { [answer.mediaType]: bytesOf(answer.mediaType) },
        };
  const responses: Json = { [String(spec.status)]: success, ...errorResponses(spec.errors, shared) };
  const byteBody = spec.bytes?.body;
  const requestBody =
    byteBody !== undefined
      ? { required: true, content: { [byteBody]: bytesOf(byteBody) } }
      : spec.method === 'POST' && Object.keys(shape).length > 0
        ? { required: true, content: { 'application/json': { schema: schemaOf(spec.input) } } }
        : undefined;
  const transports =
    spec.bytes === undefined
      ? `Also available on the WebSocket as the call \`${spec.name}\`.`
      : 'Made over REST only: it carries bytes, streamed with flow control, not JSON.';
  const trailers = Object.entries(answer?.trailers ?? {}).map(([name, text]) => `Trailer \`${headerName(name)}\`: ${text}`);
  return {
    operationId: spec.name,
    summary: spec.summary,
    description: [spec.description, ...trailers, transports].filter((part) => part !== undefined).join('\n\n'),
    tags: [TAGS[spec.name.split('.')[0]!] ?? spec.name.split('.')[0]],
    ...(spec.auth ? {} : { security: [] }),
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(requestBody === undefined ? {} : { requestBody }),
    responses,
  };
}

/** Operations whose name's prefix is not their tag: the files' calls beyond the seam's. */
const TAGS: Record<string, string> = { files: 'fs', archive: 'fs', upload: 'fs' };

/** `x-execworld-size` as the documents spell it: X-Execworld-Size. */
function headerName(name: string): string {
  return name.replace(/(^|-)([a-z])/g, (_match, dash: string, letter: string) => `${dash}${letter.toUpperCase()}`);
}

function bytesOf(mediaType: string): Json {
  return { schema: { type: 'string', contentMediaType: mediaType } };
}

const WEBSOCKET_DESCRIPTION = `One multiplexed WebSocket per client (subprotocol \`${WS_SUBPROTOCOL}\`, which the client must offer).
Authenticate with \`Authorization: Bearer <token>\`, or, from a browser, by also offering the subprotocol
\`${WS_TOKEN_PROTOCOL_PREFIX}<base64url(token)>\`. A browser's Origin must be in the allowed origins, or be the daemon's own
(its scheme and the request's Host: a page the daemon serves). A read-only token (access=read) connects, subscribes and makes
the calls of read operations; a call of any other operation answers READ_ONLY.

Text messages are JSON; their schemas (ClientMessage, ServerMessage, SubscribeParams, SubscribeResult) are in
\`websocket.schema.json\` beside this document:

- \`{"t":"call","id":1,"op":"terminal.create","params":{...}}\` calls any operation of this document that carries no
  bytes by its operationId; params are its path parameters and body or query fields in one object. The answer is
  \`{"t":"result","id":1,"result":...}\` or \`{"t":"error","id":1,"error":{"code","message"}}\`, with the codes the operation
  lists over REST, plus NOT_FOUND for an unknown operation and LIMIT_EXCEEDED when too many calls are in flight on the
  connection. Calls may wait without bound (for example \`terminal.done\`); closing the socket cancels them.
- \`{"t":"subscribe","id":2,"params":SubscribeParams}\` streams a terminal's output or a process's stdout/stderr
  from a byte offset; the result (SubscribeResult) names the subscription and reports a gap when the offset is
  older than the retained output.
- \`{"t":"ack","sub":1,"offset":N}\` says the client has every byte before N. The daemon never has more than the
  subscription's window of bytes sent beyond the last ack, and a stream nobody acknowledges fills its ring and
  pauses its program: flow control reaches the child.
- \`{"t":"unsubscribe","id":3,"sub":1}\` stops a subscription.

The daemon sends stream bytes as binary frames of a ${DATA_HEADER_BYTES}-byte header and the payload: byte 0 is 1 (data),
bytes 1-4 the subscription id (uint32 big-endian), bytes 5-12 the byte offset of the payload's first byte
(uint64 big-endian). Frame boundaries mean nothing: a frame holds up to 64 KiB, and output that streams in bulk
is gathered for up to 1 ms into fewer, larger frames. \`{"t":"end","sub","offset"}\` follows the last frame of a stream that ended;
\`{"t":"gap","sub","from","to"}\` reports bytes a collected stream dropped before they could be sent.
The daemon pings every heartbeat interval and drops a peer that misses two. Closing the socket only detaches:
terminals and processes run on, and a later connection resumes from any retained offset.`;

/** Schemas of the WebSocket messages only; they live in websocket.schema.json, not among the REST components. */
const WEBSOCKET_SCHEMAS = [ClientMessage, ServerMessage, SubscribeParams, SubscribeResult, StreamRef];

/** Every schema with an id, as JSON Schema, with references made by `uri`. */
function registeredSchemas(uri: (id: string) => string): Record<string, Json> {
  void ErrorBody;
  const converted = z.toJSONSchema(z.globalRegistry, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any', uri }) as {
    schemas: Record<string, Json>;
  };
  return Object.fromEntries(
    Object.entries(converted.schemas)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([id, schema]) => [id, withoutDialect(schema)]),
  );
}

/** The JSON Schema of the WebSocket messages of `GET /v1/connect`. */
export function buildWebSocketSchema(): Json {
  const all = registeredSchemas((id) => `#/$defs/${id}`);
  const wanted = new Set(WEBSOCKET_SCHEMAS.map((schema) => idOf(schema)!));
  // Keep the message schemas and whatever they refer to.
  const keep = new Set<string>();
  const visit = (id: string): void => {
    if (keep.has(id) || all[id] === undefined) return;
    keep.add(id);
    for (const match of JSON.stringify(all[id]).matchAll(/"#\/\$defs\/([A-Za-z0-9]+)"/g)) visit(match[1]!);
  };
  for (const id of wanted) visit(id);
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'https://execworld.dev/schemas/websocket.schema.json',
    title: 'execworld WebSocket messages',
    description: `Messages of GET /v1/connect, protocol version ${PROTOCOL_VERSION}. Text messages are JSON; stream bytes are binary data frames (see openapi.json, operation connect).`,
    $defs: Object.fromEntries([...keep].sort().map((id) => [id, all[id]!])),
  };
}

export function buildOpenApiDocument(version: string): Json {
  const websocketOnly = new Set(WEBSOCKET_SCHEMAS.map((schema) => idOf(schema)));
  const schemas = Object.fromEntries(Object.entries(registeredSchemas(componentUri)).filter(([id]) => !websocketOnly.has(id)));
  const paths: Record<string, Json> = {};
  const responses = new Map<string, Json>();
  for (const spec of OPERATION_LIST) {
    const path = (paths[spec.path] ??= {});
    path[spec.method.toLowerCase()] = operationObject(spec, responses);
  }
  paths['/v1/connect'] = {
    get: {
      operationId: 'connect',
      summary: 'The multiplexed WebSocket',
      description: WEBSOCKET_DESCRIPTION,
      tags: ['websocket'],
      parameters: [
        { name: 'Upgrade', in: 'header', required: true, schema: { const: 'websocket' } },
        { name: 'Sec-WebSocket-Protocol', in: 'header', required: true, schema: { type: 'string' }, description: `Must offer ${WS_SUBPROTOCOL}.` },
      ],
      responses: {
        '101': { description: 'Switching protocols' },
        ...errorResponses(CONNECT_ERRORS, responses),
      },
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'execworld',
      version,
      summary: 'Processes and interactive terminals of an execution world, over HTTP and WebSocket.',
      description: `Wire protocol version ${PROTOCOL_VERSION}. Every answer that is not a success is an Error with a stable code.`,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: 'http://127.0.0.1:7878', description: 'a local daemon on its default address' }],
    security: [{ bearer: [] }],
    tags: [
      { name: 'health', description: 'Status and capabilities' },
      { name: 'identity', description: 'Who the token is, and what it may do' },
      { name: 'executable', description: 'Executable lookup' },
      { name: 'terminal', description: 'Processes on terminals' },
      { name: 'process', description: 'Managed process trees' },
      { name: 'shell', description: 'Persistent shells' },
      { name: 'fs', description: 'Files of the execution world' },
      { name: 'websocket', description: 'The multiplexed connection' },
    ],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A token from the daemon token file.' } },
      schemas,
      responses: Object.fromEntries([...responses].sort(([a], [b]) => a.localeCompare(b))),
    },
  };
}
