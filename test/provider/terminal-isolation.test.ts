/**
 * A terminal's master descriptor belongs to that terminal alone: no other child
 * inherits it, and once it is closed its number is never written again (the
 * kernel hands the number to the next file the host opens).
 */
import { readdirSync, readlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import type Koffi from 'koffi';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { openBash } from '../helpers/terminal.ts';
import { collect, sleep, waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime({ inputBacklogBytes: 64 * 1024 });
afterAll(() => runtime.dispose());

const TERMINAL = { cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 };

/** The descriptors of `pid` and what each refers to. */
function descriptors(pid: number): Map<number, string> {
  const fds = new Map<number, string>();
  for (const name of readdirSync(`/proc/${pid}/fd`)) {
    try {
      fds.set(Number(name), readlinkSync(`/proc/${pid}/fd/${name}`));
    } catch (_error) {
      // Closed meanwhile.
    }
  }
  return fds;
}

describe('terminal masters stay with their terminal', () => {
  it("gives a managed process exactly fds 0-2 and a terminal no other terminal's master", async () => {
    const first = await openBash(runtime);
    // A process started while a terminal is open holds its stdio and nothing else.
    const sleeper = runtime.spawn({
      argv: ['sleep', '300'],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: { maxBytes: 4096 } },
      graceMs: 1000,
    });
    await waitFor('sleep to exec', () => readlinkSync(`/proc/${sleeper.pid}/exe`).endsWith('/sleep'));
    // sleep itself opens files while it starts (the locale archive): an inherited
    // descriptor would stay, a file of its own start-up closes.
    const only = (): boolean => [...descriptors(sleeper.pid).keys()].sort().join() === '0,1,2';
    await waitFor('sleep to hold only its stdio', only).catch(() => undefined);
    expect([...descriptors(sleeper.pid).keys()].sort()).toEqual([0, 1, 2]);
    sleeper.terminate();
    await sleeper.done;

    // A second terminal's shell holds its own terminal only (bash keeps a dup as fd 255).
    const second = await openBash(runtime);
    const held = [...descriptors(second.terminal.pid).values()];
    expect(held.filter((target) => target === '/dev/ptmx')).toEqual([]);
    expect(held.every((target) => target === second.terminal.device)).toBe(true);

    await first.terminal.terminate();
    await second.terminal.terminate();
  });
});

describe('descriptors the host holds without close-on-exec', () => {
  it('reach no child, however many there are (one close_range, or the sweep where the kernel lacks it)', async () => {
    // dup(2) makes descriptors without FD_CLOEXEC, as a native module's open() does: every one would be inherited.
    const koffi = createRequire(import.meta.url)('koffi') as typeof Koffi;
    const libc = koffi.load('libc.so.6');
    const dup = libc.func('int dup(int fd)') as (fd: number) => number;
    const close = libc.func('int close(int fd)') as (fd: number) => number;
    const open = Array.from({ length: 200 }, () => dup(2));
    try {
      expect(open.every((fd) => fd > 2)).toBe(true);
      const terminal = await runtime.spawnTerminal({ ...TERMINAL, argv: ['sleep', '300'] });
      try {
        await waitFor('sleep to exec', () => readlinkSync(`/proc/${terminal.pid}/exe`).endsWith('/sleep'));
        const only = (): boolean => [...descriptors(terminal.pid).keys()].sort().join() === '0,1,2';
        await waitFor('sleep to hold only its terminal', only).catch(() => undefined);
        expect([...descriptors(terminal.pid).keys()].sort()).toEqual([0, 1, 2]);
      } finally {
        await terminal.terminate();
      }
    } finally {
      for (const fd of open) close(fd);
    }
  });
});

describe('a terminal whose program closed it', () => {
  it('refuses input and resize with TERMINAL_CLOSED, and never writes into the file that reuses the number', async () => {
    const closer = await runtime.spawnTerminal({
      argv: ['/bin/sh', '-c', 'echo closing; trap "" HUP; exec 0<&- 1>&- 2>&-; sleep 300'],
      ...TERMINAL,
    });
    const closerOutput = collect(closer.output);
    await waitFor('the program to close its terminal', () => !closer.inputOpen);
    expect(closerOutput.text()).toContain('closing');
    expect(closer.exited).toBe(false);

    // The next terminal opened is likely to get the number the closed master had.
    const victim = await openBash(runtime);
    await expect(closer.write('echo INJECTED\r')).rejects.toMatchObject({ code: 'TERMINAL_CLOSED' });
    expect(() => closer.resize(100, 30)).toThrow(expect.objectContaining({ code: 'TERMINAL_CLOSED' }) as Error);
    await victim.run('echo after');
    expect(victim.text()).not.toContain('INJECTED');

    // The program still runs, and terminate still ends it.
    await closer.terminate();
    expect(closer.exited).toBe(true);
    await victim.terminal.terminate();
  });
});

describe('input for a program that does not read', () => {
  it('is bounded: writes beyond the backlog are refused with LIMIT_EXCEEDED', async () => {
    // raw mode, no echo, and a program that never reads: the terminal's input queue fills.
    const open = await openBash(runtime);
    await open.terminal.write('stty raw -echo; sleep 300\r');
    await waitFor('sleep in the foreground', async () => (await open.terminal.inspectForeground())?.processGroupId !== open.terminal.pid);
    const chunk = 'x'.repeat(16 * 1024);
    const writes: Promise<unknown>[] = [];
    let refused: unknown;
    for (let index = 0; index < 64 && refused === undefined; index += 1) {
      const write = open.terminal.write(chunk);
      write.catch((error: unknown) => (refused = error));
      writes.push(write.catch(() => undefined));
      // Let a refusal, which is immediate, be seen before the next write.
      await sleep(0);
    }
    expect(refused).toMatchObject({ code: 'LIMIT_EXCEEDED' });
    await open.terminal.terminate();
    // Every write accepted before the refusal settles once the terminal is gone.
    await Promise.all(writes);
  });
  it("is bounded for a process's stdin pipe by the same provider check, with the same limit", async () => {
    const sleeper = runtime.spawn({ argv: ['sleep', '300'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' }, graceMs: 500 });
    await sleeper.spawned;
    const chunk = Buffer.alloc(16 * 1024, 120);
    const writes: Promise<unknown>[] = [];
    let refused: unknown;
    for (let index = 0; index < 64 && refused === undefined; index += 1) {
      const write = sleeper.writeStdin(chunk);
      write.catch((error: unknown) => (refused = error));
      writes.push(write.catch(() => undefined));
      await sleep(0);
    }
    expect(refused).toMatchObject({
      code: 'LIMIT_EXCEEDED',
      message: expect.stringMatching(/^the process is not reading its stdin: \d+ bytes already wait \(the limit is 65536\)$/) as string,
    });
    sleeper.terminate();
    await sleeper.done;
    await Promise.all(writes);
  });
});
