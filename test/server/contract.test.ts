/**
 * A tour of the operation table with valid calls: each operation, over REST
 * and over the WebSocket, answers with its success status and a result that
 * parses with its result schema. A new operation without an entry here fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { OPERATION_LIST, type OperationSpec } from '@execworld/sdk/protocol';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

let daemon: TestDaemon;
let socket: TestSocket;
/** Minted tokens to revoke, one for each transport's tour. */
const tokenIds: string[] = [];
const ids = { terminal: '', process: '', shell: '', upload: '', spareUpload: '', forward: '' };
/** A server in the world for the forward's calls to connect to. */
const listener = createServer((connection) => connection.on('error', () => undefined).resume());
/** The directory the filesystem calls work in, with a text file whose edit undoes itself. */
const dir = mkdtempSync(join(tmpdir(), 'contract-'));
const file = join(dir, 'notes.txt');
writeFileSync(file, 'alpha\n');
writeFileSync(join(dir, 'moved.txt'), 'moved\n');

const test = daemonTest();

test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
  for (const _transport of ['rest', 'websocket'])
    tokenIds.push((await daemon.request('POST', '/v1/tokens', { body: { access: 'read', ttlMs: 60_000 } })).body.id);
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
});
test.afterAll(() => {
  socket.close();
  listener.close();
  rmSync(dir, { recursive: true, force: true });
});

const TERMINAL = { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 };
const PROCESS = { argv: ['/bin/cat'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: { maxBytes: 1000 } }, graceMs: 500 };

/** Valid parameters per operation, made fresh for each call (creates make new sessions). */
const FIXTURES: Record<string, () => Record<string, unknown>> = {
  'health.get': () => ({}),
  'identity.get': () => ({}),
  'token.create': () => ({ access: 'read', ttlMs: 60_000, session: 't_any' }),
  'token.list': () => ({}),
  'token.revoke': () => ({ id: tokenIds.shift() }),
  'executable.resolve': () => ({ command: 'sh' }),
  'terminal.create': () => TERMINAL,
  'terminal.list': () => ({}),
  'terminal.get': () => ({ id: ids.terminal }),
  'terminal.input': () => ({ id: ids.terminal, data: 'x' }),
  'terminal.resize': () => ({ id: ids.terminal, rows: 30, cols: 90 }),
  'terminal.foreground': () => ({ id: ids.terminal }),
  'terminal.screen': () => ({ id: ids.terminal }),
  'terminal.signal': () => ({ id: ids.terminal, signal: 'SIGTSTP' }),
  'terminal.output': () => ({ id: ids.terminal, from: 0 }),
  'terminal.done': () => ({ id: ids.terminal, timeoutMs: 10 }),
  'terminal.terminate': () => ({ id: ids.terminal }),
  'terminal.delete': () => ({ id: ids.terminal }),
  'process.create': () => PROCESS,
  'process.list': () => ({}),
  'ports.list': () => ({}),
  'process.get': () => ({ id: ids.process }),
  'process.stdin': () => ({ id: ids.process, data: 'x' }),
  'process.closeStdin': () => ({ id: ids.process }),
  'process.output': () => ({ id: ids.process, stream: 'stdout', from: 0 }),
  'process.collected': () => ({ id: ids.process, stream: 'stderr', from: 0 }),
  'process.done': () => ({ id: ids.process, timeoutMs: 10 }),
  'process.wait': () => ({ id: ids.process, timeoutMs: 10 }),
  'process.terminate': () => ({ id: ids.process }),
  'process.delete': () => ({ id: ids.process }),
  'command.run': () => ({ command: 'echo ran', cwd: '/tmp' }),
  'shell.create': () => ({ cwd: '/tmp' }),
  'shell.list': () => ({}),
  'shell.get': () => ({ id: ids.shell }),
  'shell.history': () => ({ id: ids.shell }),
  // Three reads keep the run open for the calls that need one: send answers one, wait finds the next waiting, interrupt ends it.
  'shell.run': () => ({ id: ids.shell, command: 'read a; read b; read c' }),
  'shell.send': () => ({ id: ids.shell, input: 'a\r' }),
  'shell.wait': () => ({ id: ids.shell, idleTimeoutMs: 60_000 }),
  'shell.interrupt': () => ({ id: ids.shell }),
  'shell.delete': () => ({ id: ids.shell }),
  'fs.resolve': () => ({ path: 'notes.txt', cwd: dir, readTextMaxBytes: 1024 }),
  'fs.stat': () => ({ path: file }),
  'fs.lstat': () => ({ path: file }),
  'fs.readText': () => ({ path: file }),
  'fs.listDir': () => ({ path: dir }),
  'fs.writeText': () => ({ path: join(dir, 'written.txt'), content: 'hello\n' }),
  'fs.editText': () => ({ path: file, edit: { oldString: 'alpha', newString: 'alpha', replaceAll: false } }),
  'fs.mkdir': () => ({ path: join(dir, 'made/deeper') }),
  'fs.remove': () => ({ path: join(dir, 'not-there') }),
  // Onto itself: the file stays for the next transport's tour.
  'fs.rename': () => ({ from: join(dir, 'moved.txt'), to: join(dir, 'moved.txt'), overwrite: true }),
  'fs.digest': () => ({ path: file }),
  'upload.create': () => ({ path: join(dir, 'uploaded.bin') }),
  'upload.get': () => ({ id: ids.upload }),
  'upload.complete': () => ({ id: ids.upload, size: 0 }),
  // Another upload than the one completed, begun beside it.
  'upload.delete': () => ({ id: ids.spareUpload }),
  'port.connect': () => ({ port: (listener.address() as AddressInfo).port }),
  'port.shutdown': () => ({ id: ids.forward, offset: 0 }),
  'port.close': () => ({ id: ids.forward }),
};

/** Runs the operations in table order, so a session exists before it is used and ends last. */
/** The JSON calls: those that carry bytes are made over REST only, and files.test.ts and transfer-routes.test.ts make them. */
const CALLS = OPERATION_LIST.filter((spec) => spec.bytes === undefined);
const ORDER = [...CALLS].sort((a, b) => rank(a) - rank(b));
function rank(spec: OperationSpec): number {
  if (spec.name.endsWith('.create')) return 0;
  if (spec.name.endsWith('.closeStdin')) return 2;
  if (spec.name.endsWith('.terminate')) return 3;
  if (spec.name.endsWith('.delete')) return 4;
  return 1;
}

function restCall(spec: OperationSpec, params: Record<string, unknown>) {
  let path = spec.path;
  const rest: Record<string, unknown> = { ...params };
  for (const name of Object.keys(spec.params)) {
    path = path.replace(`{${name}}`, String(rest[name]));
    delete rest[name];
  }
  if (spec.method === 'GET') {
    const query = new URLSearchParams(Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, String(value)])));
    return daemon.request('GET', `${path}${query.size > 0 ? `?${query.toString()}` : ''}`);
  }
  return daemon.request(spec.method, path, spec.method === 'POST' ? { body: rest } : {});
}

describe('operation contract', () => {
  test('has a valid call for every operation', () => {
    expect(Object.keys(FIXTURES).sort()).toEqual(CALLS.map((spec) => spec.name).sort());
  });

  test.each(['rest', 'websocket'] as const)('answers every operation over %s with its result schema', async (transport) => {
    for (const spec of ORDER) {
      const params = FIXTURES[spec.name]!();
      let result: unknown;
      if (transport === 'rest') {
        const response = await restCall(spec, params);
        expect(response.status, `${spec.name}: ${JSON.stringify(response.body)}`).toBe(spec.status);
        result = response.body;
      } else {
        result = await socket.call(spec.name, params).catch((error: Error) => {
          throw new Error(`${spec.name}: ${error.message}`);
        });
      }
      const parsed = spec.result.safeParse(result);
      expect(parsed.success, `${spec.name} result ${JSON.stringify(result)}`).toBe(true);
      if (spec.name === 'terminal.create') ids.terminal = (result as { id: string }).id;
      if (spec.name === 'process.create') ids.process = (result as { id: string }).id;
      if (spec.name === 'shell.create') ids.shell = (result as { id: string }).id;
      if (spec.name === 'port.connect') ids.forward = (result as { id: string }).id;
      if (spec.name === 'upload.create') {
        ids.upload = (result as { id: string }).id;
        ids.spareUpload = (await daemon.request('POST', '/v1/files/uploads', { body: { path: join(dir, 'spare.bin') } })).body.id;
      }
    }
  });

  test('refuses over the WebSocket each call that carries bytes, naming its REST route', async () => {
    const bytes = OPERATION_LIST.filter((spec) => spec.bytes !== undefined);
    expect(bytes.map((spec) => spec.name).sort()).toEqual(['archive.pack', 'archive.unpack', 'files.content', 'files.write', 'upload.bytes']);
    for (const spec of bytes) {
      const refused = await socket.call(spec.name, { path: dir, id: 'u_x', offset: 0 }).then(
        () => undefined,
        (error: Error & { code?: string }) => `${error.code}: ${error.message}`,
      );
      expect(refused, spec.name).toContain(`INVALID_ARGUMENT: ${spec.name} carries bytes: it is made over REST only, as ${spec.method} ${spec.path}`);
    }
  });
});
