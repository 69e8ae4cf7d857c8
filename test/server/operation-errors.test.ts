/**
 * Each operation's documented errors are the truth: every error path of every
 * operation is driven over REST against a real daemon, and each answer must
 * carry a code the operation lists (`errors` in the operation table, which the
 * OpenAPI document is made from), with that code's status and the documented
 * shape. Every listed code is driven here, or named below with the reason it
 * cannot be, so a list cannot claim more than the daemon does either.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect as netConnect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { ERROR_CATALOG, OPERATION_LIST, type ErrorCode, type OperationSpec } from '@execworld/sdk/protocol';
import { LocalRuntime } from '@execworld/service';
import { CONNECT_ERRORS } from '../../scripts/openapi.ts';
import { InspectionUnsupportedError, type ProcessIdentity } from '../../service/src/provider/inspect/inspector.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { ALICE, ALICE_READER, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest, type StartDaemon } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

/** Codes no test can bring about, with the reason. */
const UNDRIVEN: Partial<Record<ErrorCode, string>> = {
  CLIENT_TIMEOUT: 'the same for every request: budgets.test.ts drives bodies that never end, http-errors.test.ts maps the headers timeout',
  INTERNAL: 'a fault in the daemon itself',
};

/** A Linux inspector that can be told to lack input-wait and signal support, or to send no signal at all. */
class SwitchableInspector extends LinuxInspector {
  unsupported = false;
  stubborn = false;

  override inputWait(...args: Parameters<LinuxInspector['inputWait']>): ReturnType<LinuxInspector['inputWait']> {
    if (this.unsupported) throw new InspectionUnsupportedError('input-wait inspection is unsupported here');
    return super.inputWait(...args);
  }

  override signalGroup(pgid: number, signal: NodeJS.Signals): void {
    if (this.unsupported) throw new InspectionUnsupportedError('signals are unsupported here');
    super.signalGroup(pgid, signal);
  }

  override signalProcess(identity: ProcessIdentity, signal: NodeJS.Signals): boolean {
    // Pretends the signal went out: the process lives on, as one that cannot be killed.
    return this.stubborn ? true : super.signalProcess(identity, signal);
  }
}

const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 300 };
const PROCESS = { argv: ['/bin/sleep', '30'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 300 };
/** Valid bodies and queries, so that only what a scenario breaks is wrong. */
const BODIES: Record<string, Record<string, unknown>> = {
  'executable.resolve': { command: 'sh' },
  'terminal.create': TERMINAL,
  'terminal.input': { data: 'x' },
  'terminal.resize': { rows: 10, cols: 10 },
  'terminal.signal': { signal: 'SIGINT' },
  'process.create': PROCESS,
  'process.stdin': { data: 'x' },
  'process.wait': { timeoutMs: 0 },
  'command.run': { command: 'true' },
  'shell.create': { cwd: '/tmp' },
  'shell.run': { command: 'true' },
  'shell.send': { input: 'x' },
  'shell.wait': {},
  'fs.resolve': { path: '/tmp' },
  'fs.stat': { path: '/tmp' },
  'fs.lstat': { path: '/tmp' },
  'fs.readText': { path: '/etc/hostname' },
  'fs.listDir': { path: '/tmp' },
  'fs.writeText': { path: '/tmp/unused', content: '' },
  'fs.editText': { path: '/tmp/unused', edit: { oldString: 'a', newString: 'b' } },
  'fs.mkdir': { path: '/tmp/unused' },
  'fs.remove': { path: '/tmp/unused-never-made' },
  'fs.rename': { from: '/tmp/unused-a', to: '/tmp/unused-b' },
  'fs.digest': { path: '/etc/hostname' },
  'upload.create': { path: '/tmp/unused' },
  'upload.complete': {},
  'token.create': { access: 'read', ttlMs: 60_000 },
  'port.shutdown': { offset: 0 },
  'port.close': {},
};

/** The filesystem scenarios' directory: a text file, a binary file, a subdirectory, a link loop. */
const files = mkdtempSync(join(tmpdir(), 'operation-errors-'));
const text = join(files, 'text.txt');
const binary = join(files, 'binary.bin');
const subdirectory = join(files, 'sub');
const loop = join(files, 'loop');
writeFileSync(text, 'one two two\n');
writeFileSync(binary, Buffer.from([0x61, 0, 0x62]));
mkdirSync(subdirectory);
writeFileSync(join(subdirectory, 'a'), '');
writeFileSync(join(subdirectory, 'b'), '');
symlinkSync('loop', loop);
/** An owner confined to the subdirectory, and one that runs as another OS user. */
const CONFINED = 'carol-token-0123456789abcdefg';
const owners = [{ owner: 'carol', token: CONFINED, root: subdirectory }];
const QUERIES: Record<string, string> = { 'process.collected': 'from=0' };
/** A server in the world for forwards to reach; its port, and one nothing listens on, are known once it listens. */
const listener = createServer((connection) => connection.on('error', () => undefined).resume());
const ports = { listening: 0, refused: 0 };

/** A forward of alice's to the listening server: its id. */
async function forwardId(): Promise<string> {
  const made = await daemon.request('POST', '/v1/forwards', { body: { port: ports.listening } });
  expect(made.status).toBe(201);
  return made.body.id as string;
}

let daemon: TestDaemon;
/** A daemon over the switchable inspector. */
let limited: TestDaemon;
/** A daemon whose budget for request bodies one slow request holds nearly all of. */
let budgeted: TestDaemon;
let slowBody: Socket;
let inspector: SwitchableInspector;
const ids = { exitedTerminal: '', shell: '', limitedTerminal: '', sleeper: '', closedTerminal: '', stuckTerminal: '', stuckProcess: '' };

/**
 * Sends writes to a program that does not read its input until one is refused
 * (each accepted write waits for the kernel, which never takes it): the answer
 * of the first refused write.
 */
async function pastBacklog(name: string, id: string, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const answers: { status: number; body: any }[] = [];
  for (let index = 0; index < 200; index += 1) {
    // Writes still waiting when the daemon closes fail with the connection: that is not their answer here.
    send(daemon, op(name), id, { body }).then(
      (answer) => answers.push(answer),
      () => undefined,
    );
    const refused = answers.find((answer) => answer.status !== 200);
    if (refused !== undefined) return refused;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await waitFor('a refused write', () => answers.some((answer) => answer.status !== 200));
  return answers.find((answer) => answer.status !== 200)!;
}

const test = daemonTest(() => [{ maxBodyBytes: 256 * 1024 }, { owners }]);
/** A token alice minted for one port. */
let portToken: string;
let sessionToken: string;

test.beforeAll(async ({ daemon: fileDaemon, startFileDaemon }) => {
  daemon = fileDaemon;
  portToken = (await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 3_600_000, port: 8080 } })).body.token;
  sessionToken = (await daemon.request('POST', '/v1/tokens', { body: { access: 'write', ttlMs: 3_600_000, session: 't_none' } })).body.token;
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  ports.listening = (listener.address() as AddressInfo).port;
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  ports.refused = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  BODIES['port.connect'] = { port: ports.refused };
  inspector = new SwitchableInspector();
  limited = await startFileDaemon({}, { runtime: new LocalRuntime({ inspector }) });
  const exited = await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh', '-c', 'exit 0'] } });
  ids.exitedTerminal = exited.body.id;
  await daemon.request('GET', `/v1/terminals/${ids.exitedTerminal}/done?timeoutMs=20000`);
  ids.shell = (await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh'] } })).body.id;
  ids.sleeper = (await daemon.request('POST', '/v1/processes', { body: PROCESS })).body.id;
  ids.limitedTerminal = (await limited.request('POST', '/v1/terminals', { body: TERMINAL })).body.id;
  // A program that closes its terminal and runs on.
  ids.closedTerminal = (
    await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh', '-c', 'trap "" HUP; exec 0<&- 1>&- 2>&-; sleep 30'] } })
  ).body.id;
  await waitFor(
    'the program to close its terminal',
    async () => (await daemon.request('POST', `/v1/terminals/${ids.closedTerminal}/input`, { body: { data: 'x' } })).status === 409,
  );
  // Programs that never read their input: raw mode so the terminal's own queue fills at once.
  ids.stuckTerminal = (
    await daemon.request('POST', '/v1/terminals', { body: { ...TERMINAL, argv: ['/bin/sh', '-c', 'stty raw -echo; exec sleep 30'] } })
  ).body.id;
  ids.stuckProcess = (
    await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' } } })
  ).body.id;
  // 50,000 bytes of a body of 60,000 sent and held, of a budget of 64 KiB: a body of 20,000 bytes more does not fit.
  budgeted = await startFileDaemon({ maxBodyBytes: 64 * 1024, bodyBudgetBytes: 64 * 1024 });
  const { hostname, port } = new URL(budgeted.url);
  slowBody = netConnect(Number(port), hostname);
  await new Promise((resolve) => slowBody.once('connect', resolve));
  slowBody.write(
    `POST /v1/processes/p_unknown0000/stdin HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${ALICE}\r\ncontent-type: application/json\r\ncontent-length: 60000\r\n\r\n`,
  );
  slowBody.write(`{"data":"${'x'.repeat(50_000 - 9)}`);
  await waitFor('the slow body to be held', () => budgeted.daemon.bodies.held >= 50_000);
});
test.afterAll(() => {
  inspector.stubborn = false;
  inspector.unsupported = false;
  slowBody.destroy();
  listener.close();
});
// The daemons a scenario makes for itself are the running test's, closed when it ends if the scenario did not close them.
let startDaemon: StartDaemon;
test.beforeEach(({ startDaemon: start }) => {
  startDaemon = start;
});

interface Scenario {
  readonly what: string;
  readonly code: ErrorCode;
  send(): Promise<{ status: number; body: any }>;
}

function concrete(spec: OperationSpec, id: string): string {
  const path = spec.path.replace('{id}', encodeURIComponent(id)).replace('{stream}', 'stdout');
  const query = QUERIES[spec.name];
  return query === undefined ? path : `${path}?${query}`;
}

/** Sends a valid request of `spec` to `target`, with `id` and whatever `change` alters. */
function send(
  target: TestDaemon,
  spec: OperationSpec,
  id: string,
  change: { body?: Record<string, unknown>; query?: string; token?: string | null; headers?: Record<string, string>; raw?: string } = {},
): Promise<{ status: number; body: any }> {
  let path = concrete(spec, id);
  if (change.query !== undefined) path += `${path.includes('?') ? '&' : '?'}${change.query}`;
  const options: Parameters<TestDaemon['request']>[2] = {
    ...(change.token === undefined ? {} : { token: change.token }),
    ...(change.headers === undefined ? {} : { headers: change.headers }),
  };
  if (change.raw !== undefined) return target.request(spec.method, path, { ...options, raw: change.raw });
  if (spec.method === 'POST') return target.request(spec.method, path, { ...options, body: change.body ?? BODIES[spec.name] ?? {} });
  return target.request(spec.method, path, options);
}

const op = (name: string): OperationSpec => OPERATION_LIST.find((spec) => spec.name === name)!;

/** What any request of the operation's shape can meet. */
function shapeScenarios(spec: OperationSpec): Scenario[] {
  const unknown = spec.path.includes('/terminals/') ? 't_unknown0000' : 'p_unknown0000';
  const scenarios: Scenario[] = [
    {
      what: 'a malformed request',
      code: 'INVALID_ARGUMENT',
      send: () =>
        spec.method === 'POST' ? send(daemon, spec, unknown, { body: { ...BODIES[spec.name], bogus: 1 } }) : send(daemon, spec, unknown, { query: 'bogus=1' }),
    },
    { what: 'headers past 16 KiB', code: 'HEADERS_TOO_LARGE', send: () => send(daemon, spec, unknown, { headers: { 'x-padding': 'p'.repeat(20_000) } }) },
  ];
  if (spec.auth) {
    scenarios.push({ what: 'no token', code: 'UNAUTHORIZED', send: () => send(daemon, spec, unknown, { token: null }) });
    if (spec.name.startsWith('port.') && spec.path.includes('{id}')) {
      // A minted token of one port makes its forwards' calls, and a forward that is not there is not found; a token
      // of one session makes none of them.
      scenarios.push({ what: 'a token of one session', code: 'TOKEN_SCOPE', send: () => send(daemon, spec, unknown, { token: sessionToken }) });
    } else {
      // A minted write token of one port makes no call at all but a forward to its port (8080, not the one asked).
      scenarios.push({ what: 'a token of one port', code: 'TOKEN_SCOPE', send: () => send(daemon, spec, unknown, { token: portToken }) });
    }
  }
  // Refused before anything is looked up: the id names nothing, and the reader learns nothing of it.
  if (spec.auth && spec.access === 'write') {
    scenarios.push({ what: 'a read-only token', code: 'READ_ONLY', send: () => send(daemon, spec, unknown, { token: ALICE_READER }) });
  }
  if (spec.path.includes('{id}')) {
    scenarios.push({ what: 'an unknown id', code: 'NOT_FOUND', send: () => send(daemon, spec, unknown) });
    scenarios.push({ what: 'a malformed id', code: 'NOT_FOUND', send: () => send(daemon, spec, 'xyz') });
    scenarios.push({ what: 'an id past 100 characters', code: 'URI_TOO_LONG', send: () => send(daemon, spec, `t_${'x'.repeat(200)}`) });
  }
  if (spec.method !== 'GET') {
    scenarios.push({
      what: 'a body past the limit',
      code: 'PAYLOAD_TOO_LARGE',
      send: () => send(daemon, spec, unknown, { raw: JSON.stringify({ pad: 'x'.repeat(300 * 1024) }), headers: { 'content-type': 'application/json' } }),
    });
    scenarios.push({
      what: "a body while the daemon's budget for bodies is held by others",
      code: 'LIMIT_EXCEEDED',
      send: () => send(budgeted, spec, unknown, { raw: JSON.stringify({ pad: 'x'.repeat(20_000) }), headers: { 'content-type': 'application/json' } }),
    });
    scenarios.push({
      what: 'a body that is not JSON',
      code: 'UNSUPPORTED_MEDIA_TYPE',
      send: () => send(daemon, spec, unknown, { raw: 'x', headers: { 'content-type': 'text/plain' } }),
    });
  }
  return scenarios;
}

/** A daemon that holds one running session of `kind` and allows no more. */
async function fullDaemon(kind: 'terminal' | 'process'): Promise<TestDaemon> {
  const full = await startDaemon({ maxSessionsPerOwner: 1 });
  const created =
    kind === 'terminal' ? await full.request('POST', '/v1/terminals', { body: TERMINAL }) : await full.request('POST', '/v1/processes', { body: PROCESS });
  expect(created.status).toBe(201);
  return full;
}

/** Runs `send` against a daemon made for it, then closes that daemon. */
async function against(
  make: () => Promise<TestDaemon>,
  sendTo: (target: TestDaemon) => Promise<{ status: number; body: any }>,
): Promise<{ status: number; body: any }> {
  const target = await make();
  try {
    return await sendTo(target);
  } finally {
    await target.close();
  }
}

async function shuttingDown(): Promise<TestDaemon> {
  const target = await startDaemon();
  await target.daemon.registry.shutdown();
  return target;
}

/** What any filesystem call meets: a path that is not there, one outside the owner's root, a link loop. */
function fsScenarios(name: string, body: Record<string, unknown>): Scenario[] {
  const call = (change: Record<string, unknown>, token?: string) =>
    send(daemon, op(name), '', { body: { ...body, ...change }, ...(token === undefined ? {} : { token }) });
  return [
    { what: 'a relative path without a cwd', code: 'FS_NOT_FOUND', send: () => call({ path: 'relative/path' }) },
    { what: "a path outside the owner's root", code: 'FS_PERMISSION_DENIED', send: () => call({ path: text }, CONFINED) },
    { what: 'a link loop', code: 'FS_IO_ERROR', send: () => call({ path: join(loop, 'x') }) },
  ];
}

/** Begins an empty upload to `path`, runs `meanwhile`, then completes it with `expected`. */
async function completing(path: string, meanwhile: () => void, expected: Record<string, unknown> = {}, overwrite = true) {
  const created = await daemon.request('POST', '/v1/files/uploads', { body: { path, overwrite } });
  expect(created.status).toBe(201);
  meanwhile();
  return send(daemon, op('upload.complete'), created.body.id as string, { body: expected });
}

/** A daemon whose filesystem bounds are tiny. */
const tinyBounds = () => startDaemon({ maxReadTextBytes: 4, maxListEntries: 1 });

/** What each operation's own work can answer. */
const OWN: Record<string, Scenario[]> = {
  'fs.resolve': fsScenarios('fs.resolve', { path: text }),
  'fs.stat': fsScenarios('fs.stat', { path: text }),
  'fs.lstat': fsScenarios('fs.lstat', { path: text }),
  'fs.readText': [
    ...fsScenarios('fs.readText', { path: text }),
    { what: 'a directory', code: 'FS_NOT_REGULAR_FILE', send: () => send(daemon, op('fs.readText'), '', { body: { path: files } }) },
    { what: 'a binary file', code: 'FS_NOT_TEXT', send: () => send(daemon, op('fs.readText'), '', { body: { path: binary } }) },
    {
      what: 'a file past the whole-read bound',
      code: 'FS_TOO_LARGE',
      send: () => against(tinyBounds, (tiny) => send(tiny, op('fs.readText'), '', { body: { path: text } })),
    },
  ],
  'fs.listDir': [
    ...fsScenarios('fs.listDir', { path: files }),
    { what: 'a file', code: 'FS_NOT_DIRECTORY', send: () => send(daemon, op('fs.listDir'), '', { body: { path: text } }) },
    {
      what: 'more entries than a listing answers',
      code: 'FS_TOO_LARGE',
      send: () => against(tinyBounds, (tiny) => send(tiny, op('fs.listDir'), '', { body: { path: subdirectory } })),
    },
  ],
  'fs.writeText': [
    ...fsScenarios('fs.writeText', { path: join(files, 'new.txt'), content: 'x' }),
    { what: 'a directory', code: 'FS_NOT_REGULAR_FILE', send: () => send(daemon, op('fs.writeText'), '', { body: { path: subdirectory, content: 'x' } }) },
    {
      what: "a version that is not the file's",
      code: 'FS_STALE_VERSION',
      send: () => send(daemon, op('fs.writeText'), '', { body: { path: text, content: 'x', expected: { kind: 'replaceIfVersion', version: 'old' } } }),
    },
    {
      what: 'a create of a file that exists',
      code: 'FS_NOT_OBSERVED',
      send: () => send(daemon, op('fs.writeText'), '', { body: { path: text, content: 'x', expected: { kind: 'createIfAbsent' } } }),
    },
  ],
  'fs.editText': [
    ...fsScenarios('fs.editText', { path: text, edit: { oldString: 'one', newString: 'one' } }),
    {
      what: 'a directory',
      code: 'FS_NOT_REGULAR_FILE',
      send: () => send(daemon, op('fs.editText'), '', { body: { path: subdirectory, edit: { oldString: 'a', newString: 'b' } } }),
    },
    {
      what: 'a binary file',
      code: 'FS_NOT_TEXT',
      send: () => send(daemon, op('fs.editText'), '', { body: { path: binary, edit: { oldString: 'a', newString: 'b' } } }),
    },
    {
      what: 'a missing file',
      code: 'FS_STALE_VERSION',
      send: () => send(daemon, op('fs.editText'), '', { body: { path: join(files, 'missing'), edit: { oldString: 'a', newString: 'b' } } }),
    },
    {
      what: 'a file past the whole-read bound',
      code: 'FS_TOO_LARGE',
      send: () => against(tinyBounds, (tiny) => send(tiny, op('fs.editText'), '', { body: { path: text, edit: { oldString: 'one', newString: 'uno' } } })),
    },
    {
      what: 'text that occurs twice',
      code: 'FS_AMBIGUOUS_EDIT',
      send: () => send(daemon, op('fs.editText'), '', { body: { path: text, edit: { oldString: 'two', newString: 'three' } } }),
    },
    {
      what: 'text that does not occur',
      code: 'FS_EDIT_NOT_FOUND',
      send: () => send(daemon, op('fs.editText'), '', { body: { path: text, edit: { oldString: 'zzz', newString: 'y' } } }),
    },
  ],
  'fs.mkdir': [
    ...fsScenarios('fs.mkdir', { path: join(files, 'made') }),
    { what: 'a file at the path', code: 'FS_ALREADY_EXISTS', send: () => send(daemon, op('fs.mkdir'), '', { body: { path: text } }) },
  ],
  'fs.remove': [
    ...fsScenarios('fs.remove', { path: join(files, 'never-made') }),
    { what: 'a directory with entries, not recursive', code: 'FS_NOT_EMPTY', send: () => send(daemon, op('fs.remove'), '', { body: { path: subdirectory } }) },
  ],
  'fs.rename': [
    ...fsScenarios('fs.rename', { path: undefined, from: text, to: join(files, 'renamed') }).map((scenario) => ({
      ...scenario,
      // The scenarios break `path`; a rename's is `from`.
      send: () => {
        const broken: Record<string, Record<string, unknown>> = {
          FS_NOT_FOUND: { from: 'relative/path', to: join(files, 'renamed') },
          FS_PERMISSION_DENIED: { from: join(subdirectory, 'a'), to: text },
          FS_IO_ERROR: { from: join(loop, 'x'), to: join(files, 'renamed') },
        };
        const token = scenario.code === 'FS_PERMISSION_DENIED' ? CONFINED : undefined;
        return send(daemon, op('fs.rename'), '', { body: broken[scenario.code]!, ...(token === undefined ? {} : { token }) });
      },
    })),
    { what: 'something at the new path', code: 'FS_ALREADY_EXISTS', send: () => send(daemon, op('fs.rename'), '', { body: { from: binary, to: text } }) },
    {
      what: 'a directory onto one with entries',
      code: 'FS_NOT_EMPTY',
      send: async () => {
        const empty = mkdtempSync(join(files, 'empty-'));
        return send(daemon, op('fs.rename'), '', { body: { from: empty, to: subdirectory, overwrite: true } });
      },
    },
  ],
  'port.connect': [
    {
      what: 'a read-only token',
      code: 'READ_ONLY',
      send: () => send(daemon, op('port.connect'), '', { body: { port: ports.listening }, token: ALICE_READER }),
    },
    {
      what: 'an owner at its bound of forwards',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => startDaemon({ maxForwardsPerOwner: 1 }),
          async (full) => {
            expect((await full.request('POST', '/v1/forwards', { body: { port: ports.listening } })).status).toBe(201);
            return send(full, op('port.connect'), '', { body: { port: ports.listening } });
          },
        ),
    },
    { what: 'a daemon shutting down', code: 'SHUTTING_DOWN', send: () => against(shuttingDown, (closing) => send(closing, op('port.connect'), '')) },
    { what: 'a port nothing listens on', code: 'PORT_REFUSED', send: () => send(daemon, op('port.connect'), '') },
  ],
  'port.shutdown': [
    {
      what: "a read-only token on the owner's forward",
      code: 'READ_ONLY',
      send: async () => send(daemon, op('port.shutdown'), await forwardId(), { token: ALICE_READER }),
    },
  ],
  'port.close': [
    {
      what: "a read-only token on the owner's forward",
      code: 'READ_ONLY',
      send: async () => send(daemon, op('port.close'), await forwardId(), { token: ALICE_READER }),
    },
  ],
  'fs.digest': [
    ...fsScenarios('fs.digest', { path: text }),
    { what: 'a directory', code: 'FS_NOT_REGULAR_FILE', send: () => send(daemon, op('fs.digest'), '', { body: { path: subdirectory } }) },
  ],
  'upload.create': [
    ...fsScenarios('upload.create', { path: join(files, 'uploaded') }),
    { what: 'a directory at the path', code: 'FS_NOT_REGULAR_FILE', send: () => send(daemon, op('upload.create'), '', { body: { path: subdirectory } }) },
    {
      what: 'a file at the path, overwrite false',
      code: 'FS_ALREADY_EXISTS',
      send: () => send(daemon, op('upload.create'), '', { body: { path: text, overwrite: false } }),
    },
    {
      what: 'an owner at its bound of open uploads',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => startDaemon({ maxUploadsPerOwner: 1 }),
          async (full) => {
            expect((await full.request('POST', '/v1/files/uploads', { body: { path: join(files, 'first') } })).status).toBe(201);
            return send(full, op('upload.create'), '', { body: { path: join(files, 'second') } });
          },
        ),
    },
  ],
  'upload.complete': [
    { what: 'bytes of another size than said', code: 'FS_CHECKSUM_MISMATCH', send: () => completing(join(files, 'sized'), () => undefined, { size: 1 }) },
    {
      what: 'its directory removed meanwhile',
      code: 'FS_NOT_FOUND',
      send: () => {
        const directory = mkdtempSync(join(files, 'gone-'));
        return completing(join(directory, 'file'), () => rmSync(directory, { recursive: true, force: true }));
      },
    },
    {
      what: 'a directory put at the path meanwhile',
      code: 'FS_NOT_REGULAR_FILE',
      send: () => completing(join(files, 'became-directory'), () => mkdirSync(join(files, 'became-directory'))),
    },
    {
      what: 'a file put at the path meanwhile, overwrite false',
      code: 'FS_ALREADY_EXISTS',
      send: () => completing(join(files, 'became-file'), () => writeFileSync(join(files, 'became-file'), 'first'), {}, false),
    },
  ],
  'executable.resolve': [
    {
      what: 'a missing program',
      code: 'EXECUTABLE_NOT_FOUND',
      send: () => send(daemon, op('executable.resolve'), '', { body: { command: '/definitely/missing' } }),
    },
  ],
  'terminal.create': [
    {
      what: 'a missing cwd',
      code: 'CWD_NOT_FOUND',
      send: () => send(daemon, op('terminal.create'), '', { body: { ...TERMINAL, cwd: '/definitely/missing' } }),
    },
    {
      what: 'a missing program',
      code: 'EXECUTABLE_NOT_FOUND',
      send: () => send(daemon, op('terminal.create'), '', { body: { ...TERMINAL, argv: ['/definitely/missing'] } }),
    },
    {
      what: 'the owner at its limit',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => fullDaemon('process'),
          (full) => send(full, op('terminal.create'), ''),
        ),
    },
    { what: 'a daemon shutting down', code: 'SHUTTING_DOWN', send: () => against(shuttingDown, (closing) => send(closing, op('terminal.create'), '')) },
    {
      what: 'a platform without terminals',
      code: 'UNSUPPORTED',
      send: () =>
        against(
          () => startDaemon({}, { runtime: new LocalRuntime({ platform: 'win32' }) }),
          (windows) => send(windows, op('terminal.create'), ''),
        ),
    },
  ],
  'terminal.input': [
    { what: 'an exited terminal', code: 'TERMINAL_EXITED', send: () => send(daemon, op('terminal.input'), ids.exitedTerminal) },
    { what: 'a terminal its program closed', code: 'TERMINAL_CLOSED', send: () => send(daemon, op('terminal.input'), ids.closedTerminal) },
    {
      what: 'input past the backlog of a program that does not read',
      code: 'LIMIT_EXCEEDED',
      send: () => pastBacklog('terminal.input', ids.stuckTerminal, { data: 'x'.repeat(64 * 1024) }),
    },
  ],
  'terminal.resize': [
    { what: 'an exited terminal', code: 'TERMINAL_EXITED', send: () => send(daemon, op('terminal.resize'), ids.exitedTerminal) },
    { what: 'a terminal its program closed', code: 'TERMINAL_CLOSED', send: () => send(daemon, op('terminal.resize'), ids.closedTerminal) },
  ],
  'terminal.foreground': [
    {
      what: 'a host without input-wait inspection',
      code: 'UNSUPPORTED',
      send: async () => {
        inspector.unsupported = true;
        try {
          return await send(limited, op('terminal.foreground'), ids.limitedTerminal);
        } finally {
          inspector.unsupported = false;
        }
      },
    },
  ],
  'terminal.screen': [
    {
      what: 'a terminal with more cells than a screen holds',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => startDaemon({ screenMaxCells: TERMINAL.rows * TERMINAL.cols - 1 }),
          async (small) => send(small, op('terminal.screen'), (await small.request('POST', '/v1/terminals', { body: TERMINAL })).body.id),
        ),
    },
  ],
  'terminal.signal': [
    { what: 'an exited terminal', code: 'NO_FOREGROUND_GROUP', send: () => send(daemon, op('terminal.signal'), ids.exitedTerminal) },
    {
      what: "SIGKILL to the terminal's shell",
      code: 'SIGNAL_REFUSED',
      send: () => send(daemon, op('terminal.signal'), ids.shell, { body: { signal: 'SIGKILL' } }),
    },
    {
      what: 'a host without signals',
      code: 'UNSUPPORTED',
      send: async () => {
        inspector.unsupported = true;
        try {
          return await send(limited, op('terminal.signal'), ids.limitedTerminal);
        } finally {
          inspector.unsupported = false;
        }
      },
    },
  ],
  'terminal.terminate': [{ what: 'a terminal that survives its cleanup', code: 'CLEANUP_FAILED', send: () => stubbornly(op('terminal.terminate')) }],
  'terminal.delete': [{ what: 'a terminal that survives its cleanup', code: 'CLEANUP_FAILED', send: () => stubbornly(op('terminal.delete')) }],
  'process.create': [
    { what: 'a missing cwd', code: 'CWD_NOT_FOUND', send: () => send(daemon, op('process.create'), '', { body: { ...PROCESS, cwd: '/definitely/missing' } }) },
    {
      what: 'a missing program',
      code: 'EXECUTABLE_NOT_FOUND',
      send: () => send(daemon, op('process.create'), '', { body: { ...PROCESS, argv: ['/definitely/missing'] } }),
    },
    {
      what: 'arguments too large for exec',
      code: 'SPAWN_FAILED',
      send: () => send(daemon, op('process.create'), '', { body: { ...PROCESS, argv: ['/bin/true', 'x'.repeat(128 * 1024)] } }),
    },
    {
      what: 'the owner at its limit',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => fullDaemon('terminal'),
          (full) => send(full, op('process.create'), ''),
        ),
    },
    { what: 'a daemon shutting down', code: 'SHUTTING_DOWN', send: () => against(shuttingDown, (closing) => send(closing, op('process.create'), '')) },
  ],
  'command.run': [
    {
      what: 'a missing cwd',
      code: 'CWD_NOT_FOUND',
      send: () => send(daemon, op('command.run'), '', { body: { command: 'true', cwd: '/definitely/missing' } }),
    },
    { what: 'neither argv nor command', code: 'INVALID_ARGUMENT', send: () => send(daemon, op('command.run'), '', { body: { cwd: '/tmp' } }) },
    { what: 'both argv and command', code: 'INVALID_ARGUMENT', send: () => send(daemon, op('command.run'), '', { body: { command: 'true', argv: ['true'] } }) },
    { what: 'a missing program', code: 'EXECUTABLE_NOT_FOUND', send: () => send(daemon, op('command.run'), '', { body: { argv: ['/definitely/missing'] } }) },
    {
      what: 'arguments too large for exec',
      code: 'SPAWN_FAILED',
      send: () => send(daemon, op('command.run'), '', { body: { argv: ['/bin/true', 'x'.repeat(128 * 1024)] } }),
    },
    {
      what: 'the owner at its limit',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => fullDaemon('process'),
          (full) => send(full, op('command.run'), ''),
        ),
    },
    { what: 'a daemon shutting down', code: 'SHUTTING_DOWN', send: () => against(shuttingDown, (closing) => send(closing, op('command.run'), '')) },
  ],
  'process.stdin': [
    { what: 'stdin that is not a pipe', code: 'PROCESS_EXITED', send: () => send(daemon, op('process.stdin'), ids.sleeper) },
    {
      what: 'input past the backlog of a program that does not read',
      code: 'LIMIT_EXCEEDED',
      send: () => pastBacklog('process.stdin', ids.stuckProcess, { data: 'x'.repeat(64 * 1024) }),
    },
  ],
  'process.closeStdin': [{ what: 'stdin that is not a pipe', code: 'PROCESS_EXITED', send: () => send(daemon, op('process.closeStdin'), ids.sleeper) }],
  'process.collected': [
    { what: 'a stream that is not collected', code: 'STREAM_NOT_AVAILABLE', send: () => send(daemon, op('process.collected'), ids.sleeper) },
  ],
};

/** A shell whose start runs PROMPT_COMMAND from its environment first: it exits once `flag` exists. */
function flaggedShell(flag: string): Record<string, unknown> {
  return { cwd: '/tmp', env: { PROMPT_COMMAND: `[ -e ${flag} ] && exit 7` } };
}

/** A new shell of alice's on the main daemon. */
async function newShell(body: Record<string, unknown> = { cwd: '/tmp' }): Promise<string> {
  const created = await daemon.request('POST', '/v1/shells', { body });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

/** A shell call made while another call on the same shell is in progress. */
async function whileBusy(name: string, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const id = await newShell();
  const running = daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'sleep 30' } });
  await waitFor('the run to be in progress', async () => (await daemon.request('GET', `/v1/shells/${id}`)).body.state === 'running');
  try {
    return await send(daemon, op(name), id, { body });
  } finally {
    await daemon.request('DELETE', `/v1/shells/${id}`);
    await running;
  }
}

/** A shell whose next start fails as `make` says, after its first shell exited. */
async function restartFails(prepare: (id: string) => Promise<void>, body: Record<string, unknown> = { cwd: '/tmp' }, target = daemon) {
  const created = await target.request('POST', '/v1/shells', { body });
  expect(created.status).toBe(201);
  await prepare(created.body.id as string);
  return send(target, op('shell.run'), created.body.id as string);
}

Object.assign(OWN, {
  'shell.create': [
    { what: 'a missing cwd', code: 'CWD_NOT_FOUND', send: () => send(daemon, op('shell.create'), '', { body: { cwd: '/definitely/missing' } }) },
    {
      what: 'a pwsh shell without pwsh on its PATH',
      code: 'EXECUTABLE_NOT_FOUND',
      send: () => send(daemon, op('shell.create'), '', { body: { cwd: '/tmp', dialect: 'pwsh', env: { PATH: '/definitely/missing' } } }),
    },
    {
      what: 'a shell that exits while starting',
      code: 'SHELL_START_FAILED',
      send: () => send(daemon, op('shell.create'), '', { body: flaggedShell('/') }),
    },
    {
      what: 'the owner at its limit',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => fullDaemon('process'),
          (full) => send(full, op('shell.create'), ''),
        ),
    },
    { what: 'a daemon shutting down', code: 'SHUTTING_DOWN', send: () => against(shuttingDown, (closing) => send(closing, op('shell.create'), '')) },
    {
      what: 'a platform without terminals',
      code: 'UNSUPPORTED',
      send: () =>
        against(
          () => startDaemon({}, { runtime: new LocalRuntime({ platform: 'win32' }) }),
          (windows) => send(windows, op('shell.create'), ''),
        ),
    },
  ],
  'shell.run': [
    {
      what: 'a run while a program of the last one waits for input',
      code: 'SHELL_BUSY',
      send: async () => {
        const id = await newShell();
        await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: 'read line' } });
        return send(daemon, op('shell.run'), id);
      },
    },
    {
      what: 'a run whose fresh shell finds its cwd gone',
      code: 'CWD_NOT_FOUND',
      send: () => {
        const cwd = mkdtempSync(join(tmpdir(), 'execworld-shell-cwd-'));
        return restartFails(
          async (id) => void (await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: `cd / && rmdir ${cwd} && exit 0` } })),
          { cwd },
        );
      },
    },
    {
      what: 'a run whose fresh shell exits while starting',
      code: 'SHELL_START_FAILED',
      send: () => {
        const flag = join(mkdtempSync(join(tmpdir(), 'execworld-shell-flag-')), 'flag');
        return restartFails(
          async (id) => void (await daemon.request('POST', `/v1/shells/${id}/run`, { body: { command: `touch ${flag}; exit 0` } })),
          flaggedShell(flag),
        );
      },
    },
    {
      what: 'a run whose fresh shell finds the owner at its limit',
      code: 'LIMIT_EXCEEDED',
      send: () =>
        against(
          () => startDaemon({ maxSessionsPerOwner: 2 }),
          (full) =>
            restartFails(
              async (id) => {
                await full.request('POST', `/v1/shells/${id}/run`, { body: { command: 'exit 0' } });
                await waitFor('the exited shell to free its slot', async () => (await full.request('POST', '/v1/processes', { body: PROCESS })).status === 201);
                expect((await full.request('POST', '/v1/processes', { body: PROCESS })).status).toBe(201);
              },
              { cwd: '/tmp' },
              full,
            ),
        ),
    },
  ],
  'shell.send': [{ what: 'a send while a run is in progress', code: 'SHELL_BUSY', send: () => whileBusy('shell.send', { input: 'x' }) }],
  'shell.wait': [{ what: 'a wait while a run is in progress', code: 'SHELL_BUSY', send: () => whileBusy('shell.wait', {}) }],
  'shell.delete': [
    {
      what: 'a shell whose terminal survives its cleanup',
      code: 'CLEANUP_FAILED',
      send: async () => {
        const created = await limited.request('POST', '/v1/shells', { body: { cwd: '/tmp' } });
        expect(created.status).toBe(201);
        inspector.stubborn = true;
        try {
          return await send(limited, op('shell.delete'), created.body.id as string);
        } finally {
          inspector.stubborn = false;
          expect((await limited.request('DELETE', `/v1/shells/${created.body.id}`)).status).toBe(200);
        }
      },
    },
  ],
} satisfies Record<string, Scenario[]>);

/** Terminate or delete a terminal whose processes ignore every signal, then let them go. */
async function stubbornly(spec: OperationSpec): Promise<{ status: number; body: any }> {
  const created = await limited.request('POST', '/v1/terminals', { body: TERMINAL });
  inspector.stubborn = true;
  try {
    return await send(limited, spec, created.body.id);
  } finally {
    inspector.stubborn = false;
    expect((await limited.request('DELETE', `/v1/terminals/${created.body.id}`)).status).toBe(200);
  }
}

describe('documented errors', () => {
  // The calls that carry bytes have their codes brought about with bodies of bytes, in files.test.ts and transfer-routes.test.ts.
  const calls = OPERATION_LIST.filter((spec) => spec.bytes === undefined);
  test.each(calls.map((spec) => [spec.name, spec] as const))('%s answers only codes it documents, and each of them', async (_name, spec) => {
    const driven = new Set<ErrorCode>();
    for (const scenario of [...shapeScenarios(spec), ...(OWN[spec.name] ?? [])]) {
      const answer = await scenario.send();
      const context = `${spec.name}, ${scenario.what}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`;
      const code = answer.body?.error?.code as ErrorCode;
      expect(spec.errors, context).toContain(code);
      expect(answer.status, context).toBe(ERROR_CATALOG[code].status);
      expect(answer.body, context).toEqual({
        error: { code, message: expect.any(String), ...(answer.body.error.errno === undefined ? {} : { errno: expect.stringMatching(/^E[A-Z0-9]+$/) }) },
      });
      expect(code, context).toBe(scenario.code);
      driven.add(code);
    }
    const claimedOnly = spec.errors.filter((code) => !driven.has(code) && UNDRIVEN[code] === undefined);
    expect(claimedOnly, `${spec.name} documents codes no scenario brings about`).toEqual([]);
  });

  test('documents GET /v1/connect with the codes it answers', () => {
    expect(CONNECT_ERRORS).toEqual(expect.arrayContaining(['UNAUTHORIZED', 'FORBIDDEN_ORIGIN', 'UPGRADE_REQUIRED', 'INVALID_ARGUMENT']));
  });
});
