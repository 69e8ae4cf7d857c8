/**
 * A process the operating system will not start is refused at create, as a
 * terminal is: 422 with a catalog code and the errno beside it, no session,
 * no slot taken. Over the SDK the seam's shape holds: the handle comes at once
 * and `done` rejects with the mapped class.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connect, SpawnError, type RemoteRuntime } from '@execworld/sdk';
import { LocalRuntime } from '@execworld/service';
import { InspectionUnsupportedError } from '../../service/src/provider/inspect/inspector.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const PROCESS = { argv: ['/bin/true'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: { maxBytes: 100 } }, graceMs: 500 };
/** One argument past the kernel's MAX_ARG_STRLEN (128 KiB with its NUL), which the schema still admits. */
const TOO_LONG_ARG = 'x'.repeat(128 * 1024);

let daemon: TestDaemon;
let runtime: RemoteRuntime;
let notExecutable: string;
const test = daemonTest();

test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  runtime = await connect(daemon.url, { token: ALICE });
  notExecutable = join(mkdtempSync(join(tmpdir(), 'execworld-noexec-')), 'script');
  writeFileSync(notExecutable, '#!/bin/sh\necho hi\n');
  chmodSync(notExecutable, 0o644);
});
test.afterAll(async () => {
  await runtime.dispose();
});

describe('process.create refuses a spawn the operating system refused', () => {
  it.each<[string, Record<string, unknown>, string, string]>([
    ['a missing program', { argv: ['/definitely/missing/program'] }, 'EXECUTABLE_NOT_FOUND', 'ENOENT'],
    ['a program not on PATH', { argv: ['definitely-missing-tool'] }, 'EXECUTABLE_NOT_FOUND', 'ENOENT'],
    ['a missing cwd', { cwd: '/definitely/missing/dir' }, 'CWD_NOT_FOUND', 'ENOENT'],
    ['arguments too large for exec', { argv: ['/bin/true', TOO_LONG_ARG] }, 'SPAWN_FAILED', 'E2BIG'],
  ])('answers %s with 422, its code and its errno', async (_name, fields, code, errno) => {
    const response = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, ...fields } });
    expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(422);
    expect(response.body).toEqual({ error: { code, errno, message: expect.stringContaining(errno) } });
  });

  test('answers a file without execute permission as not an executable, like terminal.create', async () => {
    const process = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, argv: [notExecutable] } });
    expect(process.status).toBe(422);
    expect(process.body.error).toMatchObject({ code: 'EXECUTABLE_NOT_FOUND', errno: 'EACCES' });
    const terminal = await daemon.request('POST', '/v1/terminals', { body: { argv: [notExecutable], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 } });
    expect(terminal.status).toBe(422);
    expect(terminal.body.error.code).toBe('EXECUTABLE_NOT_FOUND');
  });

  test('gives the code and errno over the WebSocket too', async () => {
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    socket.send({ t: 'call', id: 1, op: 'process.create', params: { ...PROCESS, argv: ['/definitely/missing/program'] } });
    const reply = await socket.until('the error', () => socket.messages.find((message) => message.t === 'error' && message.id === 1));
    expect(reply).toMatchObject({ error: { code: 'EXECUTABLE_NOT_FOUND', errno: 'ENOENT' } });
    socket.close();
  });

  test('takes no session slot and leaves no session for a refused spawn', async ({ startDaemon }) => {
    const tight = await startDaemon({ maxSessionsPerOwner: 1 });
    for (let attempt = 0; attempt < 3; attempt += 1) {
      expect((await tight.request('POST', '/v1/processes', { body: { ...PROCESS, argv: ['/definitely/missing/program'] } })).status).toBe(422);
    }
    expect((await tight.request('GET', '/v1/processes')).body.processes).toEqual([]);
    const running = await tight.request('POST', '/v1/processes', { body: { ...PROCESS, argv: ['/bin/sleep', '30'] } });
    expect(running.status).toBe(201);
    expect(running.body.status).toBe('running');
    expect((await tight.request('POST', '/v1/processes', { body: PROCESS })).body.error.code).toBe('LIMIT_EXCEEDED');
    await tight.request('DELETE', `/v1/processes/${running.body.id}`);
  });

  test('keeps a retried create with the same requestId free to succeed after a refusal', async () => {
    const requestId = 'retry-after-refusal';
    const refused = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, cwd: '/definitely/missing/dir', requestId } });
    expect(refused.status).toBe(422);
    const accepted = await daemon.request('POST', '/v1/processes', { body: { ...PROCESS, requestId } });
    expect(accepted.status).toBe(201);
  });
});

describe('RemoteRuntime.spawn over a refused spawn', () => {
  test('returns the handle at once and rejects done with a SpawnError carrying the code and errno', async () => {
    const handle = runtime.spawn({
      argv: ['/definitely/missing/program'],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 500,
    });
    expect(handle.pid).toBe(-1);
    const error = await handle.done.catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(SpawnError);
    expect(error).toMatchObject({ code: 'EXECUTABLE_NOT_FOUND', errno: 'ENOENT', status: 422 });
    await expect(handle.waitForExit()).resolves.toBe(true);
    expect(handle.pid).toBe(-1);
  });

  test('rejects done with SPAWN_FAILED for E2BIG, never a 500', async () => {
    const handle = runtime.spawn({ argv: ['/bin/true', TOO_LONG_ARG], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 500 });
    await expect(handle.done).rejects.toMatchObject({ name: 'SpawnError', code: 'SPAWN_FAILED', errno: 'E2BIG' });
  });
});

describe('an inspection this host cannot do', () => {
  /** A Linux inspector that cannot prove input waits, as a platform without that inspection. */
  class NoInputWaitInspector extends LinuxInspector {
    override inputWait(): never {
      throw new InspectionUnsupportedError('input-wait inspection is unsupported here');
    }
  }

  test('answers terminal.foreground with 501 UNSUPPORTED', async ({ startDaemon }) => {
    const local = new LocalRuntime({ inspector: new NoInputWaitInspector() });
    const limited = await startDaemon({}, { runtime: local });
    const terminal = await limited.request('POST', '/v1/terminals', { body: { argv: ['/bin/cat'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 } });
    expect(terminal.status).toBe(201);
    const foreground = await limited.request('GET', `/v1/terminals/${terminal.body.id}/foreground`);
    expect(foreground.status).toBe(501);
    expect(foreground.body).toEqual({ error: { code: 'UNSUPPORTED', message: 'input-wait inspection is unsupported here' } });
  });
});
