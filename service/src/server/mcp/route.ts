/**
 * The MCP adapter of the dispatcher: the daemon serves the Model Context
 * Protocol over Streamable HTTP at `/mcp`, with the token of any other
 * request (Authorization: Bearer, or X-Execworld-Token) and its Origin
 * checked as a WebSocket upgrade's is (app.ts). Each tool call becomes calls
 * of the operation table made through the one dispatcher (tools.ts).
 *
 * Stateless: each POST is answered by a server made for it, and no MCP
 * session is kept between requests. Everything an agent continues with lives
 * in the daemon already (a shell, a terminal, an output offset) and its id is
 * in the tool's answer, so an MCP session would only be a second thing to
 * bound and expire, and a client that reconnects (or an `execworld mcp`
 * bridge that restarts) would lose it. What bounds a request is what bounds
 * any other: the JSON body limit and the budget of all bodies; a call waits at
 * most the wait the caller asked for (shell tools: 30 s unless told).
 *
 * The one state the server keeps is MCP's tasks (tasks.ts): a call of a long
 * tool made with `task` is answered at once and runs on in the daemon's board
 * of tasks, which every request's server reads for its principal.
 * @module
 */
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  type CallToolResult,
  type CreateTaskResult,
  type ServerCapabilities,
  type Tool as ToolDescriptor,
} from '@modelcontextprotocol/sdk/types.js';
import type { Access } from '@execworld/sdk/protocol';
import type { Principal } from '../auth.ts';
import type { BodyBudget } from '../body-budget.ts';
import type { Caller, Dispatcher } from '../dispatch.ts';
import { readOnlyRefusal, ServiceError, toServiceError } from '../errors.ts';
import { McpTasks, protocolError } from './tasks.ts';
import { accessOf, jsonSchema, toolError, TOOLS, TOOLS_BY_NAME, type OperationCall, type Tool } from './tools.ts';

export const MCP_PATH = '/mcp';

export interface McpOptions {
  readonly dispatcher: Dispatcher;
  readonly bodies: BodyBudget;
  /** The daemon's --max-body-bytes, which caps an MCP request's body as any other. */
  readonly maxBodyBytes: number;
  readonly version: string;
  readonly log: Logger;
}

const INSTRUCTIONS =
  'execworld runs commands, terminals and files in an execution world. shell_run answers with proof: exited (exit code), ' +
  'waiting_for_input (which program waits, and its prompt), running (at your wait limit) or timed_out, with a handle; continue with ' +
  'shell_send, shell_wait, shell_interrupt or output_read instead of running a command again. Edit files with the version file_read gives.';

/** The tools a token of each access sees: a read-only token only the tools that read. */
const LISTS: Record<Access, ToolDescriptor[]> = { read: [], write: [] };
for (const tool of TOOLS) {
  const descriptor: ToolDescriptor = {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: jsonSchema(tool.input, 'input') as ToolDescriptor['inputSchema'],
    outputSchema: jsonSchema(tool.output, 'output') as ToolDescriptor['outputSchema'],
    annotations: { readOnlyHint: accessOf(tool) === 'read', openWorldHint: false },
    // A tool that can wait long may be called as a task; the others answer at once and are not (the default, forbidden).
    ...(tool.tasks ? { execution: { taskSupport: 'optional' } } : {}),
  };
  LISTS.write.push(descriptor);
  if (accessOf(tool) === 'read') LISTS.read.push(descriptor);
}

/** Aborts when the caller went away: the response closed before it was sent. */
function callerGone(reply: FastifyReply): AbortSignal {
  const aborted = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableEnded) aborted.abort();
  });
  return aborted.signal;
}

/**
 * What the server of a token of `access` offers: its tools, and tasks as far as it honours them. A write
 * token's calls of the long tools may be tasks, which it lists and cancels; a read token's tools take no
 * task, and it lists and fetches its owner's tasks but cancels none.
 */
function capabilitiesOf(access: Access): ServerCapabilities {
  const tools = { listChanged: false };
  if (access === 'read') return { tools, tasks: { list: {} } };
  return { tools, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } };
}

/**
 * Calls `done` once the response to the request of `reply` is sent, or its
 * connection gone: what a tool's calls set aside for the answer (a file's
 * text) is held until then, as for the other transports' answers.
 */
function whenSent(reply: FastifyReply): (done: () => void) => void {
  return (done) => {
    if (reply.raw.closed) done();
    else reply.raw.once('close', done);
  };
}

/**
 * Calls `tool` with `args` for `principal`, through the dispatcher, until `signal` aborts; refusals are tool
 * errors. `whenAnswered`: when its answer is sent (a task's, kept on the board, is given back as it returns).
 */
async function runTool(
  options: McpOptions,
  principal: Principal,
  tool: Tool,
  args: Record<string, unknown>,
  signal: AbortSignal,
  whenAnswered?: (done: () => void) => void,
): Promise<CallToolResult> {
  const { dispatcher } = options;
  const caller: Caller = { principal, transport: 'mcp', signal, unbounded: false, where: 'arguments', ...(whenAnswered === undefined ? {} : { whenAnswered }) };
  const call: OperationCall = (operation, params) => dispatcher.call(dispatcher.operation(operation), caller, params);
  try {
    const result = await tool.run(call, args);
    return { content: [{ type: 'text', text: result.text }], structuredContent: result.structured };
  } catch (error) {
    const refusal = toServiceError(error);
    if (refusal.code === 'INTERNAL') options.log.error({ err: refusal.cause ?? error, tool: tool.name }, 'MCP tool failed');
    return toolError(refusal);
  }
}

/** The MCP server that answers one request of `principal`'s token; its tasks are the daemon's board as the principal sees it. */
function serverFor(options: McpOptions, tasks: McpTasks, principal: Principal, gone: AbortSignal, answered: (done: () => void) => void): Server {
  const { access } = principal;
  const server = new Server(
    { name: 'execworld', version: options.version },
    { capabilities: capabilitiesOf(access), instructions: INSTRUCTIONS, taskStore: tasks.storeFor(principal) },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: LISTS[access] }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult | CreateTaskResult> => {
    const { name, arguments: args, task } = request.params;
    const tool = TOOLS_BY_NAME.get(name);
    if (task !== undefined) {
      // The spec's answer to a task asked of a tool that takes none (execution.taskSupport forbidden, or no such tool).
      if (tool?.tasks !== true) {
        const refusal =
          tool === undefined
            ? new ServiceError('NOT_FOUND', `no tool ${name}: tools/list names them`)
            : new ServiceError('INVALID_ARGUMENT', `the tool ${name} takes no task: call it without one`);
        throw protocolError(ErrorCode.MethodNotFound, refusal);
      }
      // The task's work outlives this request: it stops when the task is cancelled or dropped, not when the client goes.
      return { task: tasks.start(principal, task.ttl, (signal) => runTool(options, principal, tool, args ?? {}, signal)) };
    }
    if (tool === undefined) return toolError(new ServiceError('NOT_FOUND', `no tool ${name}: tools/list names them`));
    // Refused before any of its calls, so that a write tool of several calls does none of them for a reader.
    if (access === 'read' && accessOf(tool) === 'write') return toolError(readOnlyRefusal(`the tool ${name}`));
    return runTool(options, principal, tool, args ?? {}, AbortSignal.any([gone, extra.signal]), answered);
  });
  return server;
}

/**
 * `body` without the `task` of its tools/call messages. A read token's server declares no task creation, and
 * the spec has a server process such a request as if no task was asked; the SDK would refuse it instead.
 */
function withoutTasks(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(withoutTasks);
  if (typeof body !== 'object' || body === null) return body;
  const message = body as { method?: unknown; params?: unknown };
  if (message.method !== 'tools/call' || typeof message.params !== 'object' || message.params === null || !('task' in message.params)) return body;
  const { task: _task, ...params } = message.params as Record<string, unknown>;
  return { ...message, params };
}

/** Registers `/mcp` in `scope` (where every request is authenticated). */
export function registerMcp(scope: FastifyInstance, options: McpOptions): void {
  // One board of tasks for the daemon, read by every request's server. The shutdown drops its tasks first:
  // their commands are interrupted as a cancel interrupts them, before the sessions are ended (onClose).
  const tasks = new McpTasks();
  scope.addHook('preClose', () => tasks.close());
  scope.route({
    // POST carries the calls; GET (a stream of the server's own requests) and DELETE (a session's end) are
    // answered 405 by the transport, as a stateless server answers them.
    method: ['POST', 'GET', 'DELETE'],
    url: MCP_PATH,
    // A read token's requests pass: its tools are the read tools, and the dispatcher refuses it any write.
    config: { access: 'read', checkOrigin: true },
    bodyLimit: options.maxBodyBytes,
    preParsing: (request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (error: null, payload: Readable) => void) =>
      done(null, options.bodies.meter(request, reply, payload)),
    handler: async (request, reply) => {
      const gone = callerGone(reply);
      const server = serverFor(options, tasks, request.principal, gone, whenSent(reply));
      // No session: a server and its transport answer this request and are closed with its response.
      const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true });
      reply.raw.once('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      reply.hijack();
      await transport.handleRequest(request.raw, reply.raw, request.principal.access === 'read' ? withoutTasks(request.body) : request.body);
    },
  });
}
