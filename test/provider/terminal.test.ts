import { readFileSync, statSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import type { ProcessRow } from '../../service/src/provider/inspect/inspector.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { asleepInForeground } from '../helpers/proc.ts';
import { openBash, PROMPT, waitForForeground } from '../helpers/terminal.ts';
import { pidAlive, sleep, waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

describe('terminal: input-wait proof', () => {
  it('does not call sleep waiting, nor a reader of something other than the terminal', async () => {
    const shell = await openBash(runtime);
    await shell.terminal.write('sleep 30\r');
    const sleeping = await waitForForeground(shell.terminal, 'sleep in the foreground', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
    // Not proven waiting once sleep is where it stays: asleep in nanosleep.
    await waitFor('sleep to be asleep', () => asleepInForeground(shell.terminal.pid, 'sleep'));
    expect(await shell.terminal.inspectForeground()).toEqual({ processGroupId: sleeping.processGroupId, inputWaiting: false, command: 'sleep' });
    await shell.terminal.signalForeground('SIGINT');
    await shell.waitForOutput(PROMPT, shell.text().length - PROMPT.length + 1);
    // cat reads fd 0, but fd 0 is a pipe: no terminal input is awaited.
    await shell.terminal.write('sleep 30 | cat\r');
    const piped = await waitForForeground(shell.terminal, 'pipeline in the foreground', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
    await waitFor('cat to block reading the pipe', () => asleepInForeground(shell.terminal.pid, 'cat'));
    expect(await shell.terminal.inspectForeground()).toEqual({ processGroupId: piped.processGroupId, inputWaiting: false, command: 'sleep' });
    await shell.terminal.terminate();
  });

  it('tells a wait that existed before a write from a new one in the same group', async () => {
    const shell = await openBash(runtime);
    const before = await waitForForeground(shell.terminal, 'prompt wait', (f) => f?.inputWaiting === true);
    // A fixed pause is right here: it checks that the token does not change without input.
    await sleep(50);
    const still = await shell.terminal.inspectForeground();
    expect(still?.inputWaitToken).toBe(before.inputWaitToken);
    // The read builtin runs in the shell's own group: same group, waiting again, a new wait.
    await shell.terminal.write('read line\r');
    const after = await waitForForeground(shell.terminal, 'a new wait', (f) => f?.inputWaiting === true && f.inputWaitToken !== before.inputWaitToken);
    expect(after.processGroupId).toBe(before.processGroupId);
    await shell.terminal.terminate();
  });

  it('tells whether the waiting read takes lines or any byte', async () => {
    const shell = await openBash(runtime);
    type Facts = { inputWaiting: boolean; inputWaitToken?: string; readsLines?: boolean; command?: string };
    // At its prompt, readline reads the terminal raw.
    const prompt = (await waitForForeground(shell.terminal, 'prompt wait', (f) => f?.inputWaiting === true)) as Facts;
    expect(prompt.readsLines).toBe(false);
    await shell.terminal.write('read line\r');
    const line = (await waitForForeground(
      shell.terminal,
      'read waits',
      (f) => f?.inputWaiting === true && (f as Facts).inputWaitToken !== prompt.inputWaitToken,
    )) as Facts;
    expect(line.readsLines).toBe(true);
    await shell.terminal.write('done\r');
    await shell.waitForOutput(PROMPT, shell.text().length);
    await shell.terminal.write('stty -icanon min 1; head -c 1 >/dev/null; stty icanon\r');
    const raw = (await waitForForeground(
      shell.terminal,
      'head waits',
      (f) => (f as Facts | undefined)?.command === 'head' && f?.inputWaiting === true,
    )) as Facts;
    expect(raw.readsLines).toBe(false);
    await shell.terminal.write('x');
    await waitForForeground(shell.terminal, 'head woken by one byte', (f) => (f as Facts | undefined)?.command !== 'head');
    await shell.terminal.terminate();
  });
});

describe('terminal: signals', () => {
  it("refuses SIGKILL to the shell's own group and rejects an unknown signal", async () => {
    const { terminal } = await openBash(runtime);
    await expect(terminal.signalForeground('SIGKILL')).rejects.toMatchObject({ code: 'SIGNAL_REFUSED' });
    await expect(terminal.signalForeground('SIGUSR1' as 'SIGINT')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(pidAlive(terminal.pid)).toBe(true);
    await terminal.terminate();
  });
});

describe('terminal: output', () => {
  it('resizes the terminal', async () => {
    const shell = await openBash(runtime);
    shell.terminal.resize(100, 30);
    expect(await shell.run('stty size')).toContain('30 100');
    expect(() => shell.terminal.resize(0, 10)).toThrow(/cols/);
    await shell.terminal.terminate();
  });
});

describe('terminal: allocation', () => {
  it('rejects a bad spec with the field named', async () => {
    const spec = { argv: ['/bin/sh'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 };
    await expect(runtime.spawnTerminal({ ...spec, argv: [] })).rejects.toThrow(/terminal argv must contain a program/);
    await expect(runtime.spawnTerminal({ ...spec, rows: 0 })).rejects.toThrow(/rows/);
    await expect(runtime.spawnTerminal({ ...spec, graceMs: -1 })).rejects.toThrow(/graceMs/);
    await expect(runtime.spawnTerminal({ ...spec, cwd: '/definitely/missing' })).rejects.toMatchObject({ code: 'CWD_NOT_FOUND' });
    await expect(runtime.spawnTerminal({ ...spec, argv: ['definitely-missing-program'] })).rejects.toMatchObject({ code: 'EXECUTABLE_NOT_FOUND' });
  });
});

describe('terminal: terminate', () => {
  it('sweeps the leftovers of a shell that exited by itself even without a terminate call', async () => {
    const shell = await openBash(runtime);
    await shell.terminal.write('sleep 300 & echo "child=$!"; exit 0\r');
    await shell.terminal.done;
    const child = Number(/child=(\d+)/.exec(shell.text())?.[1]);
    await waitFor('the runtime to sweep the session', () => !pidAlive(child));
  });
});

describe('terminal: the spawn', () => {
  /** The threads of this process now. */
  const threads = (): number => Number(/^Threads:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]);

  it('leaves no thread per terminal in the host, whose moves into a cgroup cost more with each thread', async () => {
    const count = 16;
    const before = threads();
    const shells = [];
    for (let index = 0; index < count; index += 1) shells.push(await openBash(runtime));
    try {
      // libuv's threadpool (4 threads) may start meanwhile; a thread per terminal would add 16.
      expect(threads() - before).toBeLessThan(count / 2);
    } finally {
      await Promise.all(shells.map((shell) => shell.terminal.terminate()));
    }
  });

  it('runs the program as the leader of a session whose controlling terminal is its own, with the modes of a new terminal, and reports its exit', async () => {
    const shell = await openBash(runtime);
    const pid = shell.terminal.pid;
    // /proc/<pid>/stat after the name: state, ppid, pgrp, session, tty_nr, tpgid.
    const [, , pgrp, session, ttyNr] = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ').map(Number);
    expect({ pgrp, session }).toEqual({ pgrp: pid, session: pid });
    expect(ttyNr).toBe(statSync(shell.terminal.device).rdev);
    expect(await shell.run('tty')).toContain(shell.terminal.device);
    const modes = await shell.run('stty -a');
    for (const mode of [
      'icrnl',
      'ixon',
      'ixany',
      'imaxbel',
      'brkint',
      'iutf8',
      'opost',
      'onlcr',
      'cs8',
      'hupcl',
      'icanon',
      'isig',
      'iexten',
      'echo',
      'echoctl',
      'echoke',
    ])
      expect(modes).toMatch(new RegExp(`(^|\\s)${mode}(\\s|$)`, 'm'));
    expect(modes).toMatch(/intr = \^C; quit = \^\\; erase = \^\?; kill = \^U; eof = \^D/);
    await shell.terminal.write('exit 7\r');
    await expect(shell.terminal.done).resolves.toEqual({ exitCode: 7, signal: null });
    const killed = await openBash(runtime);
    process.kill(killed.terminal.pid, 'SIGKILL');
    await expect(killed.terminal.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
  });
});

describe('terminal: terminate in a cgroup', () => {
  it('reads the cell once for members where the shell runs alone, not twice in the same instant, and leaves nothing', async () => {
    class CountingInspector extends LinuxInspector {
      cellReads = 0;
      override snapshotOf(pids: readonly number[]): ProcessRow[] {
        this.cellReads += 1;
        return super.snapshotOf(pids);
      }
    }
    const inspector = new CountingInspector();
    const local = new LocalRuntime({ inspector });
    try {
      expect(local.containmentMode).toBe('cgroup');
      const shell = await openBash(local);
      inspector.cellReads = 0;
      await shell.terminal.terminate();
      // Before the hang-up, after the shell's exit, and the last look: three readings.
      expect(inspector.cellReads).toBe(3);
      expect(pidAlive(shell.terminal.pid)).toBe(false);
    } finally {
      await local.dispose();
    }
  });
});
