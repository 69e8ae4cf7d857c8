import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalRuntime } from '@execworld/service';
import { openBash, PROMPT, waitForForeground } from '../helpers/terminal.ts';
import { collect, pidAlive, sleep, waitFor } from '../helpers/wait.ts';

const runtime = new LocalRuntime();
afterAll(() => runtime.dispose());

/** Pids of live processes whose session is `sid`, read from /proc. */
function sessionPids(sid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[3]) === sid && fields[0] !== 'Z') pids.push(Number(entry));
    } catch (_error) {
      // Gone while reading.
    }
  }
  return pids;
}

describe('terminal: input-wait proof', () => {
  it('proves the bash prompt itself is waiting', async () => {
    const { terminal } = await openBash(runtime);
    const facts = await waitForForeground(terminal, 'prompt wait', (f) => f?.inputWaiting === true);
    expect(facts.processGroupId).toBe(terminal.pid);
    expect(facts.inputWaitToken).toEqual(expect.any(String));
    await terminal.terminate();
  });

  it.each([
    ['cat', 'cat'],
    ['the read builtin', 'read line'],
    ['python3 at its prompt', 'python3 -q'],
  ])('proves %s is waiting', async (_name, command) => {
    const shell = await openBash(runtime);
    await shell.terminal.write(`${command}\r`);
    const facts = await waitForForeground(shell.terminal, command, (f) => f?.inputWaiting === true && (command.startsWith('read') || f.processGroupId !== shell.terminal.pid));
    expect(facts.inputWaiting).toBe(true);
    await shell.terminal.terminate();
  });

  it('does not call sleep waiting, nor a reader of something other than the terminal', async () => {
    const shell = await openBash(runtime);
    await shell.terminal.write('sleep 30\r');
    const sleeping = await waitForForeground(shell.terminal, 'sleep in the foreground', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
    await sleep(100);
    expect(await shell.terminal.inspectForeground()).toEqual({ processGroupId: sleeping.processGroupId, inputWaiting: false });
    await shell.terminal.signalForeground('SIGINT');
    await shell.waitForOutput(PROMPT, shell.text().length - PROMPT.length + 1);
    // cat reads fd 0, but fd 0 is a pipe: no terminal input is awaited.
    await shell.terminal.write('sleep 30 | cat\r');
    const piped = await waitForForeground(shell.terminal, 'pipeline in the foreground', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
    await sleep(100);
    expect(await shell.terminal.inspectForeground()).toEqual({ processGroupId: piped.processGroupId, inputWaiting: false });
    await shell.terminal.terminate();
  });

  it('tells a wait that existed before a write from a new one in the same group', async () => {
    const shell = await openBash(runtime);
    const before = await waitForForeground(shell.terminal, 'prompt wait', (f) => f?.inputWaiting === true);
    await sleep(50);
    const still = await shell.terminal.inspectForeground();
    expect(still?.inputWaitToken).toBe(before.inputWaitToken);
    // The read builtin runs in the shell's own group: same group, waiting again, a new wait.
    await shell.terminal.write('read line\r');
    const after = await waitForForeground(shell.terminal, 'a new wait', (f) => f?.inputWaiting === true && f.inputWaitToken !== before.inputWaitToken);
    expect(after.processGroupId).toBe(before.processGroupId);
    await shell.terminal.terminate();
  });
});

describe('terminal: signals', () => {
  it('delivers SIGINT to the foreground sleep and not to the shell', async () => {
    const shell = await openBash(runtime);
    await shell.terminal.write('sleep 30\r');
    const facts = await waitForForeground(shell.terminal, 'sleep', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
    await expect(shell.terminal.signalForeground('SIGINT')).resolves.toBe(facts.processGroupId);
    expect(await shell.run('echo "status=$?"')).toContain('status=130');
    expect(pidAlive(facts.processGroupId)).toBe(false);
    expect(pidAlive(shell.terminal.pid)).toBe(true);
    await shell.terminal.terminate();
  });

  it("refuses SIGKILL to the shell's own group and rejects an unknown signal", async () => {
    const { terminal } = await openBash(runtime);
    await expect(terminal.signalForeground('SIGKILL')).rejects.toMatchObject({ code: 'SIGNAL_REFUSED' });
    await expect(terminal.signalForeground('SIGUSR1' as 'SIGINT')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(pidAlive(terminal.pid)).toBe(true);
    await terminal.terminate();
  });

  it('after exit: no foreground, signals and writes reject', async () => {
    const shell = await openBash(runtime);
    await shell.terminal.write('exit 3\r');
    await expect(shell.terminal.done).resolves.toEqual({ exitCode: 3, signal: null });
    await expect(shell.terminal.inspectForeground()).resolves.toBeUndefined();
    await expect(shell.terminal.signalForeground('SIGTERM')).rejects.toThrow(/cannot resolve/);
    await expect(shell.terminal.write('x')).rejects.toThrow(/has exited/);
    await shell.terminal.terminate();
  });
});

describe('terminal: output', () => {
  it('passes bytes through unchanged, so a character split across chunks survives', async () => {
    const terminal = await runtime.spawnTerminal({
      argv: ['/bin/sh', '-c', "printf '\\342\\202'; sleep 0.2; printf '\\254 done\\n'"],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    const chunks: Buffer[] = [];
    terminal.output.on('data', (chunk: Buffer) => chunks.push(chunk));
    await terminal.done;
    await terminal.terminate();
    expect(chunks.length).toBeGreaterThan(1);
    expect(Buffer.concat(chunks).toString('utf8')).toBe('€ done\r\n');
  });

  it('turns LF into CRLF as a real terminal does', async () => {
    const terminal = await runtime.spawnTerminal({ argv: ['printf', 'a\\nb\\n'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 });
    const output = collect(terminal.output);
    await terminal.done;
    expect(output.text()).toBe('a\r\nb\r\n');
    await terminal.terminate();
  });

  it('never loses the tail of a burst printed right before exit (200 runs)', async () => {
    const expected = 41_054; // base64 of 30000 bytes, 76-column lines, CRLF line ends
    const failures: string[] = [];
    for (let run = 0; run < 200; run += 1) {
      const terminal = await runtime.spawnTerminal({
        argv: ['/bin/sh', '-c', 'head -c 30000 /dev/zero | base64; exit 3'],
        cwd: '/tmp',
        rows: 24,
        cols: 80,
        graceMs: 1000,
      });
      let bytes = 0;
      let ended = false;
      terminal.output.on('data', (chunk: Buffer) => (bytes += chunk.length));
      terminal.output.on('end', () => (ended = true));
      const outcome = await terminal.done;
      // done comes after the last byte: the stream has already ended.
      await waitFor('output end', () => ended, 2000);
      if (bytes !== expected || outcome.exitCode !== 3) failures.push(`run ${run}: ${bytes} bytes, exit ${String(outcome.exitCode)}`);
      await terminal.terminate();
    }
    expect(failures).toEqual([]);
  });

  it('applies backpressure: a paused reader blocks the program, and nothing is lost', async () => {
    const terminal = await runtime.spawnTerminal({
      argv: ['/bin/sh', '-c', 'head -c 3000000 /dev/zero | base64'],
      cwd: '/tmp',
      rows: 24,
      cols: 80,
      graceMs: 1000,
    });
    terminal.output.pause();
    await sleep(500);
    expect(terminal.exited).toBe(false);
    expect(terminal.output.readableLength).toBeLessThanOrEqual(256 * 1024);
    let bytes = 0;
    terminal.output.on('data', (chunk: Buffer) => (bytes += chunk.length));
    terminal.output.resume();
    await terminal.done;
    await waitFor('all bytes', () => bytes === 4_105_264);
    await terminal.terminate();
  });

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

  it('rejects with the exact reason when aborted before allocation; a later abort has no effect', async () => {
    const spec = { argv: ['/bin/sh'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 };
    await expect(runtime.spawnTerminal({ ...spec, signal: AbortSignal.abort('gone') })).rejects.toBe('gone');
    const controller = new AbortController();
    const shell = await openBash(runtime);
    const terminal = await runtime.spawnTerminal({ ...spec, argv: ['/bin/cat'], signal: controller.signal });
    controller.abort('late');
    await sleep(50);
    expect(terminal.exited).toBe(false);
    await terminal.terminate();
    await shell.terminal.terminate();
  });
});

describe('terminal: terminate', () => {
  it('closes an idle interactive bash without waiting out the grace', async () => {
    const { terminal } = await openBash(runtime, { graceMs: 10_000 });
    const started = Date.now();
    await terminal.terminate();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await terminal.done).toEqual({ exitCode: null, signal: 'SIGHUP' });
    expect(sessionPids(terminal.pid)).toEqual([]);
  });

  it('leaves no survivor from background jobs, nohup children and grandchildren', async () => {
    const shell = await openBash(runtime, { graceMs: 300 });
    await shell.run('sleep 300 &');
    await shell.run("nohup sh -c 'trap \"\" HUP TERM; sleep 300' > /dev/null 2>&1 &");
    await shell.run("bash -c 'sleep 300 & sleep 300 & wait' &");
    await shell.terminal.write('sleep 300\r');
    await waitFor('five sleeps and their shells', () => sessionPids(shell.terminal.pid).length >= 7);
    const members = sessionPids(shell.terminal.pid);
    await shell.terminal.terminate();
    expect(members.filter(pidAlive)).toEqual([]);
    expect(sessionPids(shell.terminal.pid)).toEqual([]);
  });

  it('sweeps a subshell that outlives the shell, never observed before the exit', async () => {
    const shell = await openBash(runtime, { graceMs: 300 });
    await shell.terminal.write("(trap '' HUP TERM; sleep 300) & disown; echo \"child=$!\"; exit 0\r");
    await expect(shell.terminal.done).resolves.toEqual({ exitCode: 0, signal: null });
    const child = Number(/child=(\d+)/.exec(shell.text())?.[1]);
    expect(pidAlive(child)).toBe(true);
    await shell.terminal.terminate();
    expect(pidAlive(child)).toBe(false);
    expect(sessionPids(shell.terminal.pid)).toEqual([]);
  });

  it('sweeps the leftovers of a shell that exited by itself even without a terminate call', async () => {
    const shell = await openBash(runtime);
    await shell.terminal.write('sleep 300 & echo "child=$!"; exit 0\r');
    await shell.terminal.done;
    const child = Number(/child=(\d+)/.exec(shell.text())?.[1]);
    await waitFor('the runtime to sweep the session', () => !pidAlive(child));
  });

  it('is one operation while in flight', async () => {
    const { terminal } = await openBash(runtime);
    const first = terminal.terminate();
    expect(terminal.terminate()).toBe(first);
    await first;
    await expect(terminal.terminate()).resolves.toBeUndefined();
  });
});
