/**
 * What each operation of the table does. REST routes and WebSocket calls both
 * land here, with parameters already validated against the operation's schema.
 * @module
 */
import { OPERATION_LIST, PROTOCOL_VERSION, type OperationName, type OperationParams, type OperationResult, type OperationSpec } from '@execworld/sdk/protocol';
import {
  MAX_WAIT_MS,
  spawnDefaults,
  terminalDefaults,
  type SubprocessOutputMode,
  type SubprocessSpawnSpec,
  type SubprocessTerminalSpawnSpec,
} from '@execworld/sdk/seam';
import { z } from 'zod';
import type { ImageFacts } from './image.ts';
import type { FsTarget } from '@execworld/sdk/fs';
import type { ExecutionProvider } from '../provider/api.ts';
import type { CallContext } from './call-context.ts';
import { appendUpload, fileContent, packArchive, unpackArchive, wholeUtf8, type ByteReply } from './byte-calls.ts';
import { runOptions } from './sessions/shells.ts';
import { runCommandSession } from './sessions/command-run.ts';
import { scopeRefusal, ServiceError } from './errors.ts';
import { TEXT_ANSWER_COPIES } from './byte-budget.ts';
import { MAX_LIVE_MINTED_PER_OWNER, type MintedInfo } from './minted.ts';
import { listeningPorts } from './ports.ts';
import { readsFreeRoom, waitForBytes, type ByteStream } from './streams.ts';

/** Default and largest slice one output read returns. */
const DEFAULT_READ_BYTES = 1024 * 1024;

/** What a handler answers: its result, or the bytes of a call that answers bytes (whose result no JSON schema describes). */
type Answer<N extends OperationName> = [OperationResult<N>] extends [never] ? ByteReply : OperationResult<N>;
type Handler<N extends OperationName> = (ctx: CallContext, params: OperationParams<N>) => Promise<Answer<N>> | Answer<N>;

function readStream(ctx: CallContext, stream: ByteStream, from: number | undefined, maxBytes: number | undefined) {
  const start = from ?? stream.start;
  if (start > stream.end) throw new ServiceError('INVALID_ARGUMENT', `from ${start} is past the end of the stream (${stream.end})`);
  // A reader asking from an offset has everything before it.
  if (readsFreeRoom(ctx.principal.access)) stream.consumed(start);
  const slice = stream.read(start, maxBytes ?? DEFAULT_READ_BYTES);
  // The bytes, their base64 and the answer serialized, until it is sent.
  ctx.holdAnswer(TEXT_ANSWER_COPIES * slice.data.length);
  return {
    from: slice.from,
    next: slice.next,
    data: slice.data.toString('base64'),
    gap: slice.gap,
    ended: stream.ended && slice.next === stream.end,
  };
}

/**
 * The least a whole-text read sets aside of the answer budget: a file that
 * gives no size (as those of /proc do) is read within it first.
 */
const SMALL_TEXT_BYTES = 64 * 1024;

/**
 * The text of `target`, read whole within what it set aside of the answer
 * budget: its size when asked, so that many reads at once hold no more than
 * the budget, however large the files. A file found larger when read (one that
 * grew, or gave no size) is read once more within the most a read answers.
 */
async function readWholeText(ctx: CallContext, target: FsTarget): Promise<string> {
  const files = ctx.files();
  const size = (await files.stat(target, ctx.signal))?.size ?? 0;
  let within = Math.min(ctx.maxReadTextBytes, Math.max(size, SMALL_TEXT_BYTES));
  ctx.holdAnswer(TEXT_ANSWER_COPIES * within);
  try {
    return await files.readText(target, ctx.signal, within);
  } catch (error) {
    if (within >= ctx.maxReadTextBytes || (error as { code?: unknown }).code !== 'FS_TOO_LARGE') throw error;
    within = ctx.maxReadTextBytes;
    ctx.holdAnswer(TEXT_ANSWER_COPIES * within);
    return await files.readText(target, ctx.signal, within);
  }
}

async function longPollRead(
  ctx: CallContext,
  stream: ByteStream,
  params: { from?: number | undefined; waitMs?: number | undefined; maxBytes?: number | undefined },
) {
  const from = params.from ?? stream.start;
  if (from > stream.end) throw new ServiceError('INVALID_ARGUMENT', `from ${from} is past the end of the stream (${stream.end})`);
  // Acknowledge before waiting: a ring held full by these very bytes would otherwise keep its program paused.
  if (readsFreeRoom(ctx.principal.access)) stream.consumed(from);
  await waitForBytes(stream, from, params.waitMs ?? 0, ctx.signal);
  return readStream(ctx, stream, from, params.maxBytes);
}

/** Resolves with `promise`'s settlement, or false after `ms`. */
async function within(promise: Promise<unknown>, ms: number | undefined, ctx: CallContext): Promise<boolean> {
  const limit = ms ?? (ctx.unbounded ? undefined : MAX_WAIT_MS);
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      promise.then(() => true),
      ...(limit === undefined ? [] : [new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), limit)))]),
      new Promise<false>((resolve) => {
        onAbort = () => resolve(false);
        ctx.signal.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort !== undefined) ctx.signal.removeEventListener('abort', onAbort);
  }
}

/** A terminal create's wire fields in the seam's shape, what was left out filled in with the world's defaults. */
function terminalSpec(ctx: CallContext, params: OperationParams<'terminal.create'>): SubprocessTerminalSpawnSpec {
  const { argv, cwd, env, rows, cols, graceMs } = params;
  return terminalDefaults({ argv, cwd, rows, cols, graceMs, ...(env === undefined ? {} : { env }) }, () => ctx.registry.defaultCwd(ctx.principal, params.user));
}

type WireOutput = NonNullable<NonNullable<OperationParams<'process.create'>['stdio']>['stdout']>;

/**
 * A process create's wire fields in the seam's shape, what was left out filled
 * in with the world's defaults: a null env entry unsets it, an absent spill is no key.
 */
function processSpec(ctx: CallContext, params: OperationParams<'process.create'>): SubprocessSpawnSpec {
  const output = (mode: WireOutput | undefined): SubprocessOutputMode | undefined =>
    mode === undefined || mode === 'pipe'
      ? mode
      : { maxBytes: mode.maxBytes, ...(mode.spill === undefined ? {} : { spill: { maxBytes: mode.spill.maxBytes } }) };
  const { stdin, stdout, stderr } = params.stdio ?? {};
  return spawnDefaults(
    {
      argv: params.argv,
      cwd: params.cwd,
      stdio: { stdin, stdout: output(stdout), stderr: output(stderr) },
      graceMs: params.graceMs,
      ...(params.env === undefined ? {} : { env: Object.fromEntries(Object.entries(params.env).map(([name, value]) => [name, value ?? undefined])) }),
    },
    () => ctx.registry.defaultCwd(ctx.principal, params.user),
  );
}

/**
 * The target a filesystem call names: its path resolved now (a target's key
 * resolves to itself), with the display path the caller first asked with.
 */
async function targetOf(ctx: CallContext, params: { path: string; cwd?: string | undefined; displayPath?: string | undefined }): Promise<FsTarget> {
  const target = await ctx.files().resolve(params.path, { cwd: params.cwd, signal: ctx.signal });
  return params.displayPath === undefined ? target : { targetKey: target.targetKey, displayPath: params.displayPath };
}

/** Which session limits the runtime enforces, for health; nothing where it cannot say. */
function limitsCapability(runtime: ExecutionProvider): { limits?: OperationResult<'health.get'>['capabilities']['limits'] } {
  const support = runtime.limitSupport?.();
  if (support === undefined) return {};
  return {
    limits: {
      supported: [...support.supported],
      unsupported: support.unsupported.map((entry) => ({ ...entry })),
      ...(support.groupPids === undefined ? {} : { ownerPids: support.groupPids }),
    },
  };
}

/**
 * Refuses `what` (mint, list, revoke) to a minted token: one handed on (to a preview, a job) could otherwise
 * mint a fresh token before its own is revoked, and live on under another id.
 */
function mintsTokens(ctx: CallContext, what: string): void {
  if (ctx.principal.minted !== undefined) throw scopeRefusal(`a minted token may not ${what} tokens: only a token of the token file does`);
}

/** A minted token as the wire says it. */
function wireToken(claims: Pick<MintedInfo, 'id' | 'access' | 'expiresAt'> & { readonly port?: number | undefined; readonly session?: string | undefined }): {
  id: string;
  access: 'read' | 'write';
  expiresAt: string;
  port?: number;
  session?: string;
} {
  return {
    id: claims.id,
    access: claims.access,
    expiresAt: new Date(claims.expiresAt).toISOString(),
    ...(claims.port === undefined ? {} : { port: claims.port }),
    ...(claims.session === undefined ? {} : { session: claims.session }),
  };
}

/** The daemon's start and its last takeover, as health tells them. */
function daemonFacts(image: ImageFacts): OperationResult<'health.get'>['daemon'] {
  const { lastTakeover } = image;
  return {
    startedAt: new Date(image.startedAt).toISOString(),
    imageStartedAt: new Date(image.imageStartedAt).toISOString(),
    takeovers: image.takeovers,
    ...(lastTakeover === undefined
      ? {}
      : {
          lastTakeover: {
            at: new Date(lastTakeover.at).toISOString(),
            pauseMs: lastTakeover.pauseMs,
            sessions: lastTakeover.sessions,
            ...(lastTakeover.rolledBack === undefined ? {} : { rolledBack: { reason: lastTakeover.rolledBack.reason } }),
          },
        }),
  };
}

export const HANDLERS: { [N in OperationName]: Handler<N> } = {
  'health.get': (ctx) => {
    const { platform, terminals, exactInputWait, containment, signals } = ctx.registry.runtime.capabilities;
    return {
      status: 'ok',
      version: ctx.version,
      protocolVersion: PROTOCOL_VERSION,
      platform,
      arch: process.arch,
      capabilities: {
        terminals,
        exactInputWait,
        processes: true,
        websocket: true,
        containment,
        signals,
        defaultShell: ctx.registry.runtime.shells.dialect,
        ...limitsCapability(ctx.registry.runtime),
      },
      daemon: daemonFacts(ctx.image.facts),
    };
  },

  'identity.get': (ctx) => {
    const { owner, access, minted } = ctx.principal;
    if (minted === undefined) return { owner, access };
    // A port-scoped token makes no call of the API: only a session's may be here.
    const scope = minted.session === undefined ? {} : { session: minted.session };
    return { owner, access, minted: { id: minted.id, expiresAt: new Date(minted.expiresAt).toISOString(), ...scope } };
  },

  'token.create': (ctx, params) => {
    mintsTokens(ctx, 'mint');
    if (params.port !== undefined && params.session !== undefined)
      throw new ServiceError('INVALID_ARGUMENT', 'port and session: a token is scoped to one port or one session, not both');
    if (params.ttlMs > ctx.maxTokenTtlMs)
      throw new ServiceError('INVALID_ARGUMENT', `ttlMs ${params.ttlMs} is longer than the daemon's --max-token-ttl-ms, ${ctx.maxTokenTtlMs}`);
    if (ctx.minter.liveOf(ctx.principal.owner) >= MAX_LIVE_MINTED_PER_OWNER)
      throw new ServiceError('LIMIT_EXCEEDED', `owner ${ctx.principal.owner} already has ${MAX_LIVE_MINTED_PER_OWNER} minted tokens that are good (the limit)`);
    // The access asked for is checked by the schema; the dispatcher let only a write token get here, so it is never more.
    const { token, claims } = ctx.minter.mint({
      owner: ctx.principal.owner,
      access: params.access,
      ttlMs: params.ttlMs,
      port: params.port,
      session: params.session,
    });
    return { token, ...wireToken(claims) };
  },
  'token.list': (ctx) => {
    mintsTokens(ctx, 'list');
    return { tokens: ctx.minter.list(ctx.principal.owner).map(wireToken) };
  },
  'token.revoke': (ctx, params) => {
    mintsTokens(ctx, 'revoke');
    if (!ctx.minter.owns(ctx.principal.owner, params.id))
      throw new ServiceError('NOT_FOUND', `no good token of owner ${ctx.principal.owner} has id ${params.id}`);
    ctx.minter.revoke(params.id);
    return { ok: true as const };
  },

  'executable.resolve': async (ctx, params) => ({
    path: await ctx.registry.resolveExecutable(ctx.principal, params.command, params.env, ctx.signal),
  }),

  'terminal.create': async (ctx, params) => (await ctx.registry.createTerminal(ctx.principal, terminalSpec(ctx, params), params)).info(),
  'terminal.list': (ctx) => ({ terminals: ctx.registry.list(ctx.principal.owner, 'terminal').map((session) => session.info()) }),
  'terminal.get': (ctx, params) => ctx.registry.get(ctx.principal.owner, params.id, 'terminal').info(),
  'terminal.input': async (ctx, params) => {
    const applied = await ctx.registry.get(ctx.principal.owner, params.id, 'terminal').input(params.data, params.writer, params.seq);
    return { applied, seq: params.seq ?? null };
  },
  'terminal.resize': (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'terminal');
    session.resize(params.rows, params.cols);
    // On the interactive path: the answer leaves out the usage, which reading the session's cgroups would delay.
    return session.info({ usage: false });
  },
  'terminal.foreground': async (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'terminal');
    const facts = await session.handle.inspectForeground();
    // Read after the facts: a proven wait was reported only once the output before it reached the ring.
    return { foreground: facts ?? null, outputEnd: session.output.end };
  },
  'terminal.screen': (ctx, params) => ctx.registry.get(ctx.principal.owner, params.id, 'terminal').screen.snapshot(),
  'terminal.signal': async (ctx, params) => ({
    processGroupId: await ctx.registry.get(ctx.principal.owner, params.id, 'terminal').handle.signalForeground(params.signal),
  }),
  'terminal.output': (ctx, params) => longPollRead(ctx, ctx.registry.get(ctx.principal.owner, params.id, 'terminal').output, params),
  'terminal.done': async (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'terminal');
    const settled = await within(session.handle.done, params.timeoutMs, ctx);
    const usage = settled ? session.handle.usage?.() : undefined;
    return { settled, exit: session.exit ?? null, error: null, ...(usage === undefined ? {} : { usage }) };
  },
  'terminal.terminate': async (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'terminal');
    await ctx.registry.terminate(session);
    return session.info();
  },
  'terminal.delete': async (ctx, params) => {
    await ctx.registry.delete(ctx.principal.owner, params.id, 'terminal');
    return { ok: true };
  },

  'process.create': async (ctx, params) => (await ctx.registry.createProcess(ctx.principal, processSpec(ctx, params), params)).info(),
  'ports.list': (ctx) => listeningPorts(ctx.registry, ctx.principal.owner),
  'process.list': (ctx) => ({ processes: ctx.registry.list(ctx.principal.owner, 'process').map((session) => session.info()) }),
  'process.get': (ctx, params) => ctx.registry.get(ctx.principal.owner, params.id, 'process').info(),
  'process.stdin': async (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'process');
    const applied = await session.writeStdin(Buffer.from(params.data, params.encoding ?? 'utf8'), params.writer, params.seq);
    return { applied, seq: params.seq ?? null };
  },
  'process.closeStdin': (ctx, params) => {
    ctx.registry.get(ctx.principal.owner, params.id, 'process').closeStdin();
    return { ok: true };
  },
  'process.output': (ctx, params) => longPollRead(ctx, ctx.registry.get(ctx.principal.owner, params.id, 'process').stream(params.stream), params),
  'process.collected': (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'process');
    const reader = session.handle.collected[params.stream];
    if (reader === undefined) throw new ServiceError('STREAM_NOT_AVAILABLE', `${params.stream} was not spawned in collect mode`);
    const read = reader.readFrom(params.from);
    ctx.holdAnswer(TEXT_ANSWER_COPIES * read.text.length);
    return read;
  },
  'process.done': async (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'process');
    // The session recorded the outcome in its own earlier callback on the same promise.
    const settled = await within(
      session.handle.done.catch(() => undefined),
      params.timeoutMs,
      ctx,
    );
    const done = settled && (session.exit !== undefined || session.failure !== undefined);
    const usage = done ? session.handle.usage?.() : undefined;
    return { settled: done, exit: session.exit ?? null, error: session.failure ?? null, ...(usage === undefined ? {} : { usage }) };
  },
  'process.wait': async (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'process');
    return { treeExited: await within(session.handle.waitForExit(), params.timeoutMs, ctx) };
  },
  'process.terminate': (ctx, params) => {
    const session = ctx.registry.get(ctx.principal.owner, params.id, 'process');
    session.handle.terminate();
    return session.info();
  },
  'process.delete': async (ctx, params) => {
    await ctx.registry.delete(ctx.principal.owner, params.id, 'process');
    return { ok: true };
  },

  'command.run': (ctx, params) => runCommandSession(ctx.registry, ctx.principal, params, ctx.signal),

  'shell.create': async (ctx, params) => {
    const { env, requestId, user, limits } = params;
    // Refused here, before a shell starts, when the owner may not run as `user` or past a ceiling.
    ctx.registry.runAs(ctx.principal, user);
    ctx.registry.sessionLimits(limits);
    const cwd = params.cwd ?? ctx.registry.defaultCwd(ctx.principal, user);
    const dialect = params.dialect ?? ctx.registry.runtime.shells.dialect;
    const spec = { dialect, cwd, ...(env === undefined ? {} : { env }), ...(user === undefined ? {} : { user }), ...(limits === undefined ? {} : { limits }) };
    return (await ctx.registry.shells.create(ctx.principal, spec, requestId)).info();
  },
  'shell.list': (ctx) => ({ shells: ctx.registry.shells.list(ctx.principal.owner).map((entry) => entry.info()) }),
  'shell.get': (ctx, params) => ctx.registry.shells.get(ctx.principal.owner, params.id).info(),
  'shell.history': (ctx, params) => {
    const entry = ctx.registry.shells.get(ctx.principal.owner, params.id);
    return { runs: entry.runs, dropped: entry.dropped };
  },
  'shell.run': (ctx, params) => ctx.registry.shells.run(ctx.principal.owner, params.id, params, ctx.signal),
  'shell.send': (ctx, params) =>
    ctx.registry.shells.call(ctx.principal.owner, params.id, undefined, (shell) => shell.send(params.input, runOptions(params, ctx.signal))),
  'shell.wait': (ctx, params) => ctx.registry.shells.call(ctx.principal.owner, params.id, undefined, (shell) => shell.wait(runOptions(params, ctx.signal))),
  'shell.interrupt': (ctx, params) => ctx.registry.shells.call(ctx.principal.owner, params.id, undefined, (shell) => shell.interrupt()),
  'shell.delete': async (ctx, params) => {
    await ctx.registry.shells.delete(ctx.principal.owner, params.id);
    return { ok: true };
  },

  'fs.resolve': async (ctx, params) => {
    const files = ctx.files();
    const target = await files.resolve(params.path, { cwd: params.cwd, signal: ctx.signal });
    // A text asked for is set aside at the most it may be, then at what it was.
    if (params.readTextMaxBytes !== undefined) ctx.holdAnswer(TEXT_ANSWER_COPIES * Math.min(params.readTextMaxBytes, ctx.maxReadTextBytes));
    const { info, text } = await files.look(target, params.readTextMaxBytes, ctx.signal);
    ctx.holdAnswer(TEXT_ANSWER_COPIES * (text?.length ?? 0));
    return { target, info: info ?? null, text };
  },
  'fs.stat': async (ctx, params) => ({ info: (await ctx.files().stat(await targetOf(ctx, params), ctx.signal)) ?? null }),
  'fs.lstat': async (ctx, params) => ({ info: (await ctx.files().lstat(params.path, { cwd: params.cwd }, ctx.signal)) ?? null }),
  'fs.readText': async (ctx, params) => ({ text: await readWholeText(ctx, await targetOf(ctx, params)) }),
  'fs.listDir': async (ctx, params) => ({ entries: await ctx.files().listDir(await targetOf(ctx, params), ctx.signal) }),
  'fs.writeText': async (ctx, params) => {
    // The text written is the caller's own: it is not sent back.
    const { after: _after, ...written } = await ctx.files().writeText(await targetOf(ctx, params), params.content, params.expected, ctx.signal);
    return written;
  },
  'fs.editText': async (ctx, params) => {
    const files = ctx.files();
    const target = await targetOf(ctx, params);
    // The text before and after the edit, set aside at the file's size as it is now.
    ctx.holdAnswer(TEXT_ANSWER_COPIES * Math.min(ctx.maxReadTextBytes, (await files.stat(target, ctx.signal))?.size ?? 0));
    return files.editText(target, params.edit, params.expected, ctx.signal);
  },
  'fs.mkdir': (ctx, params) => ctx.transfer().mkdir(params.path, params, ctx.signal),
  'fs.remove': (ctx, params) => ctx.transfer().remove(params.path, params, ctx.signal),
  'fs.rename': (ctx, params) => ctx.transfer().rename(params.from, params.to, params, ctx.signal),
  'fs.digest': (ctx, params) => ctx.transfer().digest(params.path, params, ctx.signal),
  'upload.create': (ctx, params) => ctx.uploads.create(ctx.principal.owner, ctx.transfer(), params, ctx.principal.root),
  'port.connect': (ctx, params) => {
    if (ctx.registry.shuttingDown) throw new ServiceError('SHUTTING_DOWN', 'the daemon is shutting down');
    return ctx.forwards.connect(ctx.principal, params.port, ctx.link);
  },
  'port.shutdown': (ctx, params) => {
    ctx.forwards.get(ctx.principal, params.id).shutdown(params.offset);
    return { ok: true as const };
  },
  'port.close': (ctx, params) => {
    ctx.forwards.get(ctx.principal, params.id).close(params.reset);
    return { ok: true as const };
  },
  'upload.get': (ctx, params) => ctx.uploads.get(ctx.principal.owner, params.id),
  'upload.complete': (ctx, params) => ctx.uploads.complete(ctx.principal.owner, params.id, params),
  'upload.delete': async (ctx, params) => {
    await ctx.uploads.delete(ctx.principal.owner, params.id);
    return { ok: true as const };
  },
  'upload.bytes': appendUpload,
  'files.content': fileContent,
  'files.write': async (ctx, params) => {
    if (params.ifAbsent === true && params.ifVersion !== undefined) throw new ServiceError('INVALID_ARGUMENT', 'give ifAbsent or ifVersion, not both');
    const bytes = await wholeUtf8(ctx);
    const expected =
      params.ifAbsent === true
        ? ({ kind: 'createIfAbsent' } as const)
        : params.ifVersion === undefined
          ? undefined
          : ({ kind: 'replaceIfVersion', version: params.ifVersion } as const);
    return ctx.files().writeBytes(await targetOf(ctx, params), bytes, expected, ctx.signal);
  },
  'archive.pack': packArchive,
  'archive.unpack': unpackArchive,
};

/** An operation with the schema that validates its merged parameters. */
export interface BoundOperation {
  readonly spec: OperationSpec;
  readonly schema: z.ZodObject;
  readonly handler: (ctx: CallContext, params: Record<string, unknown>) => Promise<unknown>;
}

export const BOUND_OPERATIONS: ReadonlyMap<string, BoundOperation> = new Map(
  OPERATION_LIST.map((spec) => {
    const schema = z.strictObject({ ...spec.params, ...spec.input.shape });
    const handler = HANDLERS[spec.name as OperationName] as (ctx: CallContext, params: Record<string, unknown>) => unknown;
    // A synchronous throw becomes a rejection like any other, without a deferral on the hot path.
    const call = (ctx: CallContext, params: Record<string, unknown>): Promise<unknown> => {
      try {
        return Promise.resolve(handler(ctx, params));
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    };
    return [spec.name, { spec, schema, handler: call }];
  }),
);
