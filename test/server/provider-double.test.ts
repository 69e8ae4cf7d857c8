/**
 * The daemon over the in-memory provider: everything `server/` does goes
 * through the provider interface, so a provider with no process behind it
 * serves the whole API, and the daemon's own logic (the bounded sweep of a
 * session whose cleanup fails) is driven where no real host could fail on demand.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect } from 'vitest';
import type { Principal } from '../../service/src/server/auth.ts';
import { DEFAULT_CONFIG } from '../../service/src/server/config.ts';
import { SessionRegistry, type SessionLimits } from '../../service/src/server/sessions/registry.ts';
import { type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { MemoryProvider } from '../helpers/memory-provider.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest();

/** The test's daemon, which its startDaemon fixture closes. */
let daemon: TestDaemon | undefined;

const terminalSpec = { argv: ['memsh'], cwd: '/', rows: 24, cols: 80, graceMs: 1000 };

async function readAll(path: string, until: (text: string) => boolean): Promise<string> {
  let text = '';
  await waitFor(`output at ${path}`, async () => {
    const read = (await daemon!.request('GET', `${path}?from=0`)).body;
    text = Buffer.from(read.data as string, 'base64').toString('utf8');
    return until(text);
  });
  return text;
}

describe('the daemon over the in-memory provider', () => {
  test('reports the provider’s platform and capabilities on /v1/health', async ({ startDaemon }) => {
    daemon = await startDaemon({}, { runtime: new MemoryProvider({ platform: 'win32', terminals: false, exactInputWait: false, containment: 'none' }) });
    const health = await daemon.request('GET', '/v1/health', { token: null });
    expect(health.body).toMatchObject({ platform: 'win32', capabilities: { terminals: false, exactInputWait: false, containment: 'none', processes: true } });
    const refused = await daemon.request('POST', '/v1/terminals', { body: terminalSpec });
    expect(refused.status).toBe(501);
    expect(refused.body.error.code).toBe('UNSUPPORTED');
  });

  test('runs a terminal: input, output, foreground, resize, signal and exit code', async ({ startDaemon }) => {
    const provider = new MemoryProvider();
    daemon = await startDaemon({}, { runtime: provider });
    const created = await daemon.request('POST', '/v1/terminals', { body: terminalSpec });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const terminal = provider.terminals[0]!;
    expect(terminal.spec).toMatchObject({ argv: ['memsh'], cwd: '/', rows: 24, cols: 80, graceMs: 1000 });
    expect(terminal.spec).not.toHaveProperty('requestId');

    expect((await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'hello\r' } })).body).toMatchObject({ applied: true });
    await readAll(`/v1/terminals/${id}/output`, (text) => text.includes('hello\r\n'));
    expect((await daemon.request('GET', `/v1/terminals/${id}/foreground`)).body.foreground).toEqual({ processGroupId: terminal.pid, inputWaiting: true });

    expect((await daemon.request('POST', `/v1/terminals/${id}/resize`, { body: { rows: 40, cols: 120 } })).body).toMatchObject({ rows: 40, cols: 120 });
    expect(terminal.size).toEqual({ cols: 120, rows: 40 });

    expect((await daemon.request('POST', `/v1/terminals/${id}/signal`, { body: { signal: 'SIGINT' } })).body).toEqual({ processGroupId: terminal.pid });
    await readAll(`/v1/terminals/${id}/output`, (text) => text.includes('^C'));

    await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'exit 3\r' } });
    const done = await daemon.request('GET', `/v1/terminals/${id}/done?timeoutMs=10000`);
    expect(done.body).toEqual({ settled: true, exit: { exitCode: 3, signal: null }, error: null });
    await waitFor('the session to be swept', async () => (await daemon!.request('GET', `/v1/terminals/${id}`)).body.treeExited === true);
    expect((await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'late\r' } })).body.error.code).toBe('TERMINAL_EXITED');
  });

  test('runs a process: the seam spec it gets, stdin, stdout and exit', async ({ startDaemon }) => {
    const provider = new MemoryProvider();
    daemon = await startDaemon({}, { runtime: provider });
    const created = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['memcat'],
        cwd: '/',
        env: { KEEP: 'x', DROP: null },
        stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
        graceMs: 1000,
        requestId: 'r-1',
      },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    // The wire's null unsets a variable: the seam's undefined.
    expect(provider.processes[0]!.spec).toStrictEqual({
      argv: ['memcat'],
      cwd: '/',
      env: { KEEP: 'x', DROP: undefined },
      stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 1000,
    });
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin`, { body: { data: 'piped' } })).body).toMatchObject({ applied: true });
    expect((await daemon.request('POST', `/v1/processes/${id}/stdin/close`)).body).toEqual({ ok: true });
    const done = await daemon.request('GET', `/v1/processes/${id}/done?timeoutMs=10000`);
    expect(done.body).toMatchObject({ settled: true, exit: { exitCode: 0, signal: null } });
    await readAll(`/v1/processes/${id}/output/stdout`, (text) => text === 'piped');
    // A retried create with the same request id is the same session.
    const again = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['memcat'], cwd: '/', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000, requestId: 'r-1' },
    });
    expect(again.body.id).toBe(id);
    expect(provider.processes).toHaveLength(1);
  });
});

describe('the sweep of a terminal session whose cleanup fails', () => {
  const limits: SessionLimits = { ...DEFAULT_CONFIG, maxSessionsPerOwner: 1, sweepRetryDelaysMs: [5, 5] };

  function registryLog(): { log: pino.Logger; lines: string[]; gaveUp: Promise<void> } {
    const lines: string[] = [];
    let gaveUp!: () => void;
    const promise = new Promise<void>((resolve) => (gaveUp = resolve));
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        const line = chunk.toString('utf8');
        lines.push(line);
        if (line.includes('it is retried when the session is terminated')) gaveUp();
        callback();
      },
    });
    return { log: pino({ level: 'info' }, sink), lines, gaveUp: promise };
  }

  test('stops after its bounded retries, holds the slot, and a later terminate sweeps it', async () => {
    const provider = new MemoryProvider();
    const { log, gaveUp } = registryLog();
    const registry = new SessionRegistry(provider, limits, log);
    const alice: Principal = { owner: 'alice', access: 'write', runAs: undefined, root: undefined };
    const session = await registry.createTerminal(alice, terminalSpec);
    const terminal = provider.terminals[0]!;
    terminal.failCleanups = 5;
    await terminal.write('exit 0\r');
    await gaveUp;
    // One sweep and one retry per delay, then no more.
    expect(terminal.terminateCalls).toBe(3);
    expect(session.info()).toMatchObject({ status: 'exited', treeExited: false });
    await expect(registry.createTerminal(alice, terminalSpec)).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' });

    // Asked again, the cleanup is tried again and reported while it fails.
    await expect(session.terminate()).rejects.toMatchObject({ code: 'CLEANUP_FAILED' });
    await expect(session.terminate()).rejects.toMatchObject({ code: 'CLEANUP_FAILED' });
    await session.terminate();
    expect(terminal.terminateCalls).toBe(6);
    expect(session.info().treeExited).toBe(true);
    // The slot is free again.
    await registry.createTerminal(alice, terminalSpec);
    await registry.shutdown();
    expect(provider.disposed).toBe(true);
  });
});
