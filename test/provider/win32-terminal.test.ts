/**
 * The Windows terminal over a replayed pseudoconsole and process table
 * (test/helpers/fake-kernel32.ts): what Wine's ConPTY cannot show (Ctrl-C,
 * a shell killed from outside that never reports its exit, a close request
 * console programs ignore, taskkill that does nothing).
 */
import { describe, expect, it } from 'vitest';
import { JobObjectContainment } from '../../service/src/provider/containment/job-object.ts';
import { Win32Inspector } from '../../service/src/provider/inspect/win32.ts';
import { platformFor } from '../../service/src/provider/platform/index.ts';
import type { HostTerminal } from '../../service/src/provider/host-terminal.ts';
import { WindowsProcesses } from '../../service/src/provider/win32/processes.ts';
import { collect, waitFor } from '../helpers/wait.ts';
import { fakeWindowsRuntime, FakeConPty, FakeKernel32, type FakeConPtyBehaviour } from '../helpers/fake-kernel32.ts';

interface World {
  kernel32: FakeKernel32;
  taskkills: [number, boolean][];
  ptys: FakeConPty[];
  open: (behaviour?: FakeConPtyBehaviour, options?: { job?: boolean; inputBacklogBytes?: number }) => HostTerminal;
}

function world(): World {
  const kernel32 = new FakeKernel32();
  kernel32.spawn(100, 0, 'execworld.exe');
  const taskkills: [number, boolean][] = [];
  const taskkill = (pid: number, force: boolean): void => void taskkills.push([pid, force]);
  const processes = new WindowsProcesses(kernel32, taskkill);
  const ptys: FakeConPty[] = [];
  let nextPid = 1000;
  return {
    kernel32,
    taskkills,
    ptys,
    open(behaviour = {}, options = {}) {
      const platform = platformFor('win32', {
        kernel32,
        taskkill,
        conpty: () => {
          const pty = new FakeConPty(kernel32, (nextPid += 4), behaviour);
          ptys.push(pty);
          return pty;
        },
      });
      const cell = options.job === false ? undefined : new JobObjectContainment(kernel32, processes).create('s-1');
      return platform.terminals.open({
        file: 'C:\\Program Files\\PowerShell\\7\\pwsh.exe',
        args: ['-NoLogo'],
        cwd: 'C:\\',
        env: {},
        rows: 24,
        cols: 80,
        graceMs: 200,
        inspector: new Win32Inspector(() => processes),
        cell,
        ...(options.inputBacklogBytes === undefined ? {} : { inputBacklogBytes: options.inputBacklogBytes }),
      });
    },
  };
}

describe('the Windows terminal', () => {
  it('has the shell as its foreground, proves no input wait, and passes output and input through', async () => {
    const { open, ptys } = world();
    const terminal = open({ banner: 'PS C:\\> ' });
    const output = collect(terminal.output);
    await waitFor('the banner', () => output.text() === 'PS C:\\> ');
    await expect(terminal.inspectForeground()).resolves.toEqual({ processGroupId: terminal.pid, inputWaiting: false });
    await terminal.write('dir\r');
    terminal.resize(100, 30);
    expect(ptys[0]!.typed).toEqual(['dir\r']);
    expect(ptys[0]!.sizes).toEqual([[100, 30]]);
    expect(terminal.device).toBe('conpty');
    await terminal.terminate();
  });

  it('types Ctrl-C for SIGINT, asks politely for SIGTERM, refuses SIGKILL to the shell, and has no SIGTSTP or SIGHUP', async () => {
    const { open, ptys, taskkills } = world();
    const terminal = open();
    await expect(terminal.signalForeground('SIGINT')).resolves.toBe(terminal.pid);
    expect(ptys[0]!.typed).toEqual(['\x03']);
    await expect(terminal.signalForeground('SIGTERM')).resolves.toBe(terminal.pid);
    expect(taskkills).toEqual([[terminal.pid, false]]);
    await expect(terminal.signalForeground('SIGKILL')).rejects.toMatchObject({ code: 'SIGNAL_REFUSED' });
    await expect(terminal.signalForeground('SIGTSTP')).rejects.toMatchObject({ code: 'UNSUPPORTED', message: 'SIGTSTP is unsupported on Windows' });
    await expect(terminal.signalForeground('SIGHUP')).rejects.toMatchObject({ code: 'UNSUPPORTED', message: 'SIGHUP is unsupported on Windows' });
    await expect(terminal.signalForeground('SIGUSR1' as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await terminal.terminate();
    await expect(terminal.signalForeground('SIGINT')).rejects.toMatchObject({ code: 'NO_FOREGROUND_GROUP' });
    await expect(terminal.inspectForeground()).resolves.toBeUndefined();
    await expect(terminal.write('x')).rejects.toMatchObject({ code: 'TERMINAL_EXITED' });
  });

  it('refuses input past the backlog bound while its program reads none, as the POSIX terminal does', async () => {
    const { open, ptys } = world();
    const terminal = open({ readsNoInput: true }, { inputBacklogBytes: 1024 });
    // A write larger than the bound is taken while nothing waits: the bound is on what piles up.
    await terminal.write('x'.repeat(2000));
    await expect(terminal.write('y')).rejects.toMatchObject({
      code: 'LIMIT_EXCEEDED',
      message: "the terminal's program is not reading its input: 2000 bytes already wait (the limit is 1024)",
    });
    expect(ptys[0]!.typed).toEqual(['x'.repeat(2000)]);
    await terminal.terminate();
  });

  it('ends the job after the grace when the shell ignores the close request, with everything the shell started', async () => {
    const { open, kernel32, taskkills } = world();
    const terminal = open();
    const child = kernel32.spawn(2000, terminal.pid, 'python.exe');
    const output = collect(terminal.output);
    await terminal.terminate();
    expect(taskkills).toEqual([[terminal.pid, false]]);
    expect(child).toMatchObject({ running: false, exitCode: 1 });
    await expect(terminal.done).resolves.toEqual({ exitCode: 1, signal: null });
    expect(terminal.output.readableEnded || output.text() === '').toBe(true);
    // The job's handle is closed: nothing of the session is held open.
    expect([...kernel32.jobs.values()].every((job) => job.closed)).toBe(true);
    await expect(terminal.terminate()).resolves.toBeUndefined();
  });

  it('settles done from verified absence when a shell killed from outside is never reported', async () => {
    const { open, kernel32 } = world();
    const terminal = open({ silentExit: true });
    let settled = false;
    void terminal.done.then(() => (settled = true));
    kernel32.exit(terminal.pid, 1);
    // A fixed wait is right here: the pseudoconsole must be shown never to report it.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled).toBe(false);
    await terminal.terminate();
    await expect(terminal.done).resolves.toEqual({ exitCode: null, signal: null });
    expect(terminal.exited).toBe(true);
  });

  it('without a job, and with a taskkill that does nothing, ends the shell by its identity', async () => {
    const { open, ptys, taskkills } = world();
    const terminal = open({}, { job: false });
    await terminal.terminate();
    expect(taskkills).toEqual([[terminal.pid, false]]);
    expect(ptys[0]!.process).toMatchObject({ running: false, exitCode: 1 });
    await expect(terminal.done).resolves.toEqual({ exitCode: 1, signal: null });
    expect(ptys[0]!.closed).toBe(true);
  });

  it('is what LocalRuntime makes on Windows', async () => {
    const { runtime, ptys } = fakeWindowsRuntime();
    expect(runtime.capabilities).toMatchObject({ platform: 'win32', terminals: true, exactInputWait: false, signals: false });
    // The program is looked for by the Windows rules on this host's files.
    const terminal = await runtime.spawnTerminal({ argv: [process.execPath], cwd: '/tmp', rows: 24, cols: 80, graceMs: 100 });
    expect(terminal.pid).toBe(1000);
    await runtime.dispose();
    expect(ptys[0]!.process.running).toBe(false);
  });
});
