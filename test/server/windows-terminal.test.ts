/**
 * A Windows terminal served by the daemon, over a replayed pseudoconsole
 * (test/helpers/fake-kernel32.ts): ConPTY asks for the cursor position when
 * it starts and shows nothing until it is answered, which Wine's ConPTY does
 * not do. The daemon's emulator answers it whenever no client does.
 */
import { describe, expect } from 'vitest';
import { platformFor } from '../../service/src/provider/platform/index.ts';
import { resolvePwsh } from '../../service/src/server/sessions/shells.ts';
import { type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest, type StartDaemon } from '../helpers/daemon-test.ts';
import { fakeWindowsRuntime, type FakeConPty } from '../helpers/fake-kernel32.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest();

/** A daemon of this test over a replayed Windows provider. */
async function serveWindows(startDaemon: StartDaemon): Promise<{ daemon: TestDaemon; ptys: FakeConPty[] }> {
  const { runtime, ptys } = fakeWindowsRuntime({ cursorRequest: true, banner: 'PS C:\\> ' });
  return { daemon: await startDaemon({}, { runtime }), ptys };
}

async function output(target: TestDaemon, id: string): Promise<string> {
  const read = await target.request('GET', `/v1/terminals/${id}/output?from=0`);
  return Buffer.from(read.body.data as string, 'base64').toString('utf8');
}

describe('a Windows terminal served by the daemon', () => {
  test("answers ConPTY's cursor request at start, so the shell's first output arrives", async ({ startDaemon }) => {
    const { daemon: target, ptys } = await serveWindows(startDaemon);
    const created = await target.request('POST', '/v1/terminals', { body: { argv: [process.execPath], cwd: '/tmp', rows: 24, cols: 80, graceMs: 200 } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await waitFor('the banner after the answer', async () => (await output(target, id)).endsWith('PS C:\\> '));
    expect(ptys[0]!.typed).toEqual(['\x1b[1;1R']);
    await target.request('DELETE', `/v1/terminals/${id}`);
  });

  test('leaves the request to the client with answerQueries: false: nothing shows until it answers', async ({ startDaemon }) => {
    const { daemon: target, ptys } = await serveWindows(startDaemon);
    const created = await target.request('POST', '/v1/terminals', {
      body: { argv: [process.execPath], cwd: '/tmp', rows: 24, cols: 80, graceMs: 200, answerQueries: false },
    });
    const id = created.body.id as string;
    await waitFor('the cursor request', async () => (await output(target, id)) === '\x1b[6n');
    // A fixed wait is right here: the banner must be shown not to come unanswered.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await output(target, id)).toBe('\x1b[6n');
    expect(ptys[0]!.typed).toEqual([]);
    await target.request('POST', `/v1/terminals/${id}/input`, { body: { data: '\x1b[5;9R' } });
    await waitFor('the banner after the answer', async () => (await output(target, id)).endsWith('PS C:\\> '));
    await target.request('DELETE', `/v1/terminals/${id}`);
  });
});

describe('a Windows world, as the daemon reports and shells it', () => {
  test('reports the platform, no signals, no input-wait proof, terminals, and PowerShell as the default shell', async ({ startDaemon }) => {
    const { daemon: target } = await serveWindows(startDaemon);
    const health = await target.request('GET', '/v1/health', { token: null });
    expect(health.body).toMatchObject({
      platform: 'win32',
      capabilities: { terminals: true, exactInputWait: false, signals: false, defaultShell: 'pwsh' },
    });
    const linux = await startDaemon();
    expect((await linux.request('GET', '/v1/health', { token: null })).body.capabilities).toMatchObject({ signals: true, defaultShell: 'bash' });
    expect((['win32', 'linux', 'darwin'] as const).map((name) => platformFor(name).shells.dialect)).toEqual(['pwsh', 'bash', 'bash']);
  });

  test('looks for PowerShell 7 on the PATH, then where it is installed, then Windows PowerShell 5.1', async () => {
    const windows = platformFor('win32').shells;
    expect(windows.pwshCandidates({ ProgramFiles: 'D:\\Apps\\' })).toEqual(['pwsh', 'D:\\Apps\\PowerShell\\7\\pwsh.exe', 'powershell']);
    expect(platformFor('linux').shells.pwshCandidates()).toEqual(['pwsh']);
    const asked: string[] = [];
    const only = (found: string) => (command: string) => {
      asked.push(command);
      return command === found ? Promise.resolve(`C:\\found\\${command}`) : Promise.reject(new Error(`${command} was not found on PATH`));
    };
    await expect(resolvePwsh(only('powershell'), windows, { ProgramFiles: 'C:\\Program Files' })).resolves.toBe('C:\\found\\powershell');
    expect(asked).toEqual(['pwsh', 'C:\\Program Files\\PowerShell\\7\\pwsh.exe', 'powershell']);
    asked.length = 0;
    await expect(resolvePwsh(only('pwsh'), windows)).resolves.toBe('C:\\found\\pwsh');
    expect(asked).toEqual(['pwsh']);
    await expect(resolvePwsh(only('none'), windows)).rejects.toThrow('pwsh was not found on PATH');
  });
});
