/**
 * The provider conformance suite: every seam scenario of the contract (§1.8,
 * §7), run against each runtime. Where runtimes differ on purpose the
 * difference is declared in {@link RuntimeTraits}, never skipped in a body.
 */
import { readFileSync, statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SubprocessHandle, SubprocessRuntime, SubprocessSpawnSpec, SubprocessStdio, SubprocessTerminalHandle } from '@execworld/sdk/seam';
import { asleepInForeground, sessionPids } from '../helpers/proc.ts';
import { openBash, PROMPT, waitForForeground } from '../helpers/terminal.ts';
import { collect, pidAlive, sleep, waitFor } from '../helpers/wait.ts';

export interface RuntimeTraits {
  /**
   * 'immediate': `pid` is the real pid when `spawn` returns. 'after-start': it is
   * -1 until the provider acknowledged the spawn (a remote runtime), then real.
   */
  readonly pidAtSpawn: 'immediate' | 'after-start';
  /**
   * How `done` names a spawn that failed. 'errno': its `code` is the operating
   * system's (ENOENT), as Node's own error. 'catalog': its `code` is the daemon
   * catalog's (EXECUTABLE_NOT_FOUND, CWD_NOT_FOUND) and the errno is in `errno`.
   */
  readonly spawnFailure: 'errno' | 'catalog';
}

export interface RuntimeUnderTest {
  readonly runtime: SubprocessRuntime & { dispose(): Promise<void> };
  /** Resizes a terminal of this runtime. */
  resize(terminal: SubprocessTerminalHandle, cols: number, rows: number): Promise<void>;
  /** Waits until a handle's pid is known. */
  started(handle: SubprocessHandle): Promise<number>;
  close(): Promise<void>;
}

const collectBoth: SubprocessStdio = { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } };
const sh = (script: string, extra: Partial<SubprocessSpawnSpec> = {}): SubprocessSpawnSpec => ({
  argv: ['/bin/sh', '-c', script],
  cwd: '/tmp',
  stdio: collectBoth,
  graceMs: 2000,
  ...extra,
});
const stdoutOf = (handle: SubprocessHandle): string => handle.collected.stdout!.readFrom(0).text;
const TERMINAL = { cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000 };

export function defineRuntimeContract(name: string, make: () => Promise<RuntimeUnderTest>, traits: RuntimeTraits): void {
  describe(`${name}: seam contract`, () => {
    let subject: RuntimeUnderTest;
    let runtime: RuntimeUnderTest['runtime'];
    beforeAll(async () => {
      subject = await make();
      runtime = subject.runtime;
    });
    afterAll(() => subject.close());

    describe('resolveExecutable', () => {
      it('verifies absolute paths and looks bare names up on PATH', async () => {
        await expect(runtime.resolveExecutable('/bin/sh')).resolves.toBe('/bin/sh');
        await expect(runtime.resolveExecutable('sh')).resolves.toMatch(/\/sh$/);
        await expect(runtime.resolveExecutable('/definitely/missing')).rejects.toThrow(/is not an executable file/);
        await expect(runtime.resolveExecutable('/tmp')).rejects.toThrow(/is not an executable file/);
        await expect(runtime.resolveExecutable('definitely-missing-tool', { PATH: '' })).rejects.toThrow(/was not found on PATH/);
      });

      it('rejects relative paths, empty commands, and an abort with exactly its reason', async () => {
        await expect(runtime.resolveExecutable('./bin/x')).rejects.toThrow(/is a relative path/);
        await expect(runtime.resolveExecutable('')).rejects.toThrow(/must be non-empty/);
        await expect(runtime.resolveExecutable('sh', undefined, AbortSignal.abort('stop'))).rejects.toBe('stop');
      });
    });

    describe('spawn', () => {
      it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31])('throws synchronously for graceMs %s', (graceMs) => {
        expect(() => runtime.spawn(sh('true', { graceMs }))).toThrow(/graceMs must be a positive finite number no greater than/);
      });

      it('throws synchronously for an empty program and an aborted signal', () => {
        expect(() => runtime.spawn(sh('', { argv: [] }))).toThrow(/expected a non-empty program name at argv\[0\]/);
        expect(() => runtime.spawn(sh('', { argv: [''] }))).toThrow(/expected a non-empty program name at argv\[0\]/);
        expect(() => runtime.spawn(sh('true', { signal: AbortSignal.abort('too late') }))).toThrow('aborted before spawn: too late');
        const reasonless = { aborted: true, reason: undefined, addEventListener() {}, removeEventListener() {} } as unknown as AbortSignal;
        expect(() => runtime.spawn(sh('true', { signal: reasonless }))).toThrow('aborted before spawn: aborted');
      });

      it('throws synchronously for environment entries no process can carry', () => {
        expect(() => runtime.spawn(sh('true', { env: { 'A=B': 'x' } }))).toThrow('env name "A=B" is not valid');
        expect(() => runtime.spawn(sh('true', { env: { NAME: 'a\0b' } }))).toThrow('env.NAME must not contain a NUL character');
      });

      it(`returns at once with ${traits.pidAtSpawn === 'immediate' ? 'the real pid' : 'pid -1, then the real pid'}`, async () => {
        const handle = runtime.spawn(sh('exit 0'));
        if (traits.pidAtSpawn === 'immediate') expect(handle.pid).toBeGreaterThan(0);
        else expect(handle.pid).toBe(-1);
        const pid = await subject.started(handle);
        expect(pid).toBeGreaterThan(0);
        expect(handle.pid).toBe(pid);
        await handle.done;
      });

      it('never interprets argv through a shell', async () => {
        const handle = runtime.spawn({ argv: ['printf', '%s', '$HOME'], cwd: '/tmp', stdio: collectBoth, graceMs: 1000 });
        await handle.done;
        expect(stdoutOf(handle)).toBe('$HOME');
      });

      it('reports exit codes and raw signals', async () => {
        await expect(runtime.spawn(sh('exit 42')).done).resolves.toEqual({ exitCode: 42, signal: null });
        await expect(runtime.spawn(sh('kill -TERM $$')).done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
      });

      it('rejects done for a missing program and a missing cwd; waitForExit is true at once', async () => {
        const missing = runtime.spawn(sh('', { argv: ['/definitely/missing/program'] }));
        await expect(missing.done).rejects.toMatchObject(
          traits.spawnFailure === 'errno' ? { code: 'ENOENT' } : { code: 'EXECUTABLE_NOT_FOUND', errno: 'ENOENT' },
        );
        const badCwd = runtime.spawn(sh('true', { cwd: '/definitely/missing/dir' }));
        await expect(badCwd.done).rejects.toThrow(/ENOENT/);
        await expect(badCwd.done).rejects.toMatchObject({ code: 'CWD_NOT_FOUND' });
        await expect(badCwd.waitForExit()).resolves.toBe(true);
        expect(badCwd.pid).toBe(-1);
      });

      it('runs with the scrubbed environment plus explicit entries and tombstones', async () => {
        vi.stubEnv('EXECWORLD_CONTRACT_PROBE', 'v');
        vi.stubEnv('DSH_STALE', 'old');
        vi.stubEnv('EXECWORLD_CONTRACT_TOKEN', 'secret');
        const handle = runtime.spawn(
          sh(
            'echo "${EXECWORLD_CONTRACT_PROBE:-absent} ${DSH_STALE:-absent} ${EXECWORLD_CONTRACT_TOKEN:-absent} $DSH_SHELL $DSH_SESSION_ID $EXPLICIT_OVERRIDE_PASSWORD"',
            {
              env: { EXECWORLD_CONTRACT_PROBE: undefined, DSH_SHELL: '1', DSH_SESSION_ID: 's', EXPLICIT_OVERRIDE_PASSWORD: 'x' },
            },
          ),
        );
        await handle.done;
        expect(stdoutOf(handle)).toBe('absent absent absent 1 s x\n');
      });

      it("gives 'ignore' stdin as a character device at EOF", async () => {
        const cat = runtime.spawn({ argv: ['cat'], cwd: '/tmp', stdio: collectBoth, graceMs: 1000 });
        await expect(cat.done).resolves.toEqual({ exitCode: 0, signal: null });
        const probe = runtime.spawn(sh('test -c /dev/stdin && echo char'));
        await probe.done;
        expect(stdoutOf(probe)).toBe('char\n');
      });

      it('writes batch stdin and closes it; EPIPE from a child that does not read is swallowed', async () => {
        const batch = runtime.spawn(sh('cat', { stdio: { ...collectBoth, stdin: { data: 'batch\n' } } }));
        expect(batch.stdin).toBeUndefined();
        await batch.done;
        expect(stdoutOf(batch)).toBe('batch\n');
        const big = runtime.spawn(sh('exit 7', { stdio: { ...collectBoth, stdin: { data: 'x'.repeat(1 << 20) } } }));
        await expect(big.done).resolves.toEqual({ exitCode: 7, signal: null });
      });

      it('hands pipe streams over and exposes readers exactly for collected streams', async () => {
        const handle = runtime.spawn({ argv: ['cat'], cwd: '/tmp', stdio: { stdin: 'pipe', stdout: 'pipe', stderr: { maxBytes: 100 } }, graceMs: 1000 });
        expect(handle.stdout).toBeDefined();
        expect(handle.stdin).toBeDefined();
        expect(handle.collected.stdout).toBeUndefined();
        expect(handle.collected.stderr).toBeDefined();
        const out = collect(handle.stdout!);
        handle.stdin!.end('x\n');
        await handle.done;
        await waitFor('pipe output', () => out.text() === 'x\n');
      });

      it('keeps a 500-byte tail of 200 lines, with the whole stream in a private spill file', async () => {
        const handle = runtime.spawn(
          sh('i=1; while [ $i -le 200 ]; do printf "line-%04d\\n" $i; i=$((i+1)); done', {
            stdio: { stdin: 'ignore', stdout: { maxBytes: 500, spill: { maxBytes: 1 << 20 } }, stderr: 'pipe' },
          }),
        );
        await handle.done;
        const read = handle.collected.stdout!.readFrom(0);
        expect(read).toMatchObject({ nextOffset: 2000, lossy: true });
        expect(read.text).toContain('line-0200');
        expect(read.text).not.toContain('line-0001');
        expect(Buffer.byteLength(read.text)).toBe(500);
        expect(handle.collected.stdout!.readFrom(1990)).toMatchObject({ text: 'line-0200\n', lossy: false });
        const spill = readFileSync(read.spillPath!, 'utf8');
        expect(spill.length).toBe(2000);
        expect(spill).toContain('line-0001');
        expect(statSync(read.spillPath!).mode & 0o777).toBe(0o600);
      });

      it('settles at most graceMs after exit while a descendant holds the collected pipe', async () => {
        const started = Date.now();
        const handle = runtime.spawn(sh('sleep 30 & echo started', { graceMs: 300 }));
        await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
        // Far below the descendant's 30 s, which done would wait out without the grace; far above any start.
        expect(Date.now() - started).toBeLessThan(20_000);
        expect(stdoutOf(handle)).toBe('started\n');
        // A fixed wait is right here: the tree must not be seen gone while sleep 30 lives.
        await expect(handle.waitForExit(AbortSignal.timeout(100))).resolves.toBe(false);
        handle.terminate();
        await expect(handle.waitForExit()).resolves.toBe(true);
      });

      it('escalates to SIGKILL when SIGTERM is ignored', async () => {
        const handle = runtime.spawn(sh("trap '' TERM; echo ready; while :; do sleep 0.05; done", { graceMs: 200 }));
        await waitFor('ready', () => stdoutOf(handle).includes('ready'));
        handle.terminate();
        await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGKILL' });
      });

      it('ends the whole group, grandchildren included; a second terminate is the same ladder', async () => {
        const handle = runtime.spawn(sh('sleep 60 & echo $!; wait', { graceMs: 2000 }));
        await waitFor('grandchild pid', () => /\d+\n/.test(stdoutOf(handle)));
        const grandchild = Number(stdoutOf(handle).trim());
        expect(pidAlive(grandchild)).toBe(true);
        handle.terminate();
        handle.terminate();
        await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
        await expect(handle.waitForExit()).resolves.toBe(true);
        expect(pidAlive(grandchild)).toBe(false);
      });

      it('keeps a TERM-trapping helper owned after the leader exits, until terminate', async () => {
        const handle = runtime.spawn(sh("(trap '' TERM; while :; do sleep 0.05; done) > /dev/null 2>&1 & echo $!", { graceMs: 200 }));
        await handle.done;
        const helper = Number(stdoutOf(handle).trim());
        expect(pidAlive(helper)).toBe(true);
        await expect(handle.waitForExit(AbortSignal.timeout(150))).resolves.toBe(false);
        handle.terminate();
        await expect(handle.waitForExit()).resolves.toBe(true);
        expect(pidAlive(helper)).toBe(false);
      });

      it('terminates on abort, and ignores an abort after settlement', async () => {
        const controller = new AbortController();
        const handle = runtime.spawn(sh('sleep 30', { signal: controller.signal }));
        await subject.started(handle);
        await sleep(50);
        controller.abort('stop');
        await expect(handle.done).resolves.toEqual({ exitCode: null, signal: 'SIGTERM' });
        const late = new AbortController();
        const done = runtime.spawn(sh('exit 3', { signal: late.signal }));
        await expect(done.done).resolves.toEqual({ exitCode: 3, signal: null });
        late.abort();
        await expect(done.waitForExit()).resolves.toBe(true);
      });
    });

    describe('terminals', () => {
      it('proves the prompt, cat, read and python3 wait for input, and sleep does not', async () => {
        const shell = await openBash(runtime);
        const prompt = await waitForForeground(shell.terminal, 'prompt wait', (f) => f?.inputWaiting === true);
        expect(prompt.processGroupId).toBe(shell.terminal.pid);
        for (const [command, leave] of [
          ['cat', '\x04'],
          ['python3 -q', 'exit()\r'],
        ] as const) {
          await shell.terminal.write(`${command}\r`);
          await waitForForeground(shell.terminal, command, (f) => f?.inputWaiting === true && f.processGroupId !== shell.terminal.pid);
          await shell.terminal.write(leave);
          await waitForForeground(shell.terminal, 'back at the prompt', (f) => f?.processGroupId === shell.terminal.pid && f.inputWaiting);
        }
        const before = (await shell.terminal.inspectForeground()) as { inputWaitToken?: string } | undefined;
        await shell.terminal.write('read line\r');
        await waitForForeground(
          shell.terminal,
          'read',
          (f) => f?.inputWaiting === true && (f as { inputWaitToken?: string }).inputWaitToken !== before?.inputWaitToken,
        );
        await shell.terminal.write('\r');
        await shell.terminal.write('sleep 30\r');
        const sleeping = await waitForForeground(shell.terminal, 'sleep', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
        await waitFor('sleep to be asleep', () => asleepInForeground(shell.terminal.pid, 'sleep'));
        expect(await shell.terminal.inspectForeground()).toMatchObject({ processGroupId: sleeping.processGroupId, inputWaiting: false });
        await shell.terminal.terminate();
      });

      it('delivers SIGINT to the foreground sleep and not to the shell', async () => {
        const shell = await openBash(runtime);
        await shell.terminal.write('sleep 30\r');
        const facts = await waitForForeground(shell.terminal, 'sleep', (f) => f !== undefined && f.processGroupId !== shell.terminal.pid);
        // The group is the foreground one already while bash's child has yet to exec sleep; a
        // SIGINT then lands in bash code of that child. Signal the program once it runs.
        await waitFor('sleep to be asleep', () => asleepInForeground(shell.terminal.pid, 'sleep'));
        await expect(shell.terminal.signalForeground('SIGINT')).resolves.toBe(facts.processGroupId);
        // The prompt bash prints after the interrupted job, before the next command is typed.
        await waitFor('the prompt after SIGINT', () => shell.text().endsWith(PROMPT));
        expect(await shell.run('echo "status=$?"')).toContain('status=130');
        expect(pidAlive(facts.processGroupId)).toBe(false);
        expect(pidAlive(shell.terminal.pid)).toBe(true);
        await shell.terminal.terminate();
      });

      it("refuses SIGKILL to the shell's own group; after exit nothing resolves a foreground and writes reject", async () => {
        const shell = await openBash(runtime);
        await expect(shell.terminal.signalForeground('SIGKILL')).rejects.toMatchObject({ code: 'SIGNAL_REFUSED' });
        await shell.terminal.write('exit 3\r');
        await expect(shell.terminal.done).resolves.toEqual({ exitCode: 3, signal: null });
        await expect(shell.terminal.inspectForeground()).resolves.toBeUndefined();
        await expect(shell.terminal.signalForeground('SIGTERM')).rejects.toThrow(/cannot resolve/);
        await expect(shell.terminal.write('x')).rejects.toThrow(/has exited/);
        await shell.terminal.terminate();
      });

      it('passes bytes through unchanged: a character split across chunks survives, LF becomes CRLF', async () => {
        // The rest of the character is printed only after its first two bytes arrived, so they always arrive apart.
        const terminal = await runtime.spawnTerminal({
          ...TERMINAL,
          argv: ['/bin/sh', '-c', "stty -echo; printf '\\342\\202'; read line; printf '\\254 done\\n'"],
        });
        const output = collect(terminal.output);
        await waitFor('the first two bytes', () => output.bytes().length === 2);
        await terminal.write('\r');
        await terminal.done;
        expect(output.text()).toBe('€ done\r\n');
        await terminal.terminate();
      });

      it('never loses the tail of a burst printed right before exit (200 runs)', async () => {
        const failures: string[] = [];
        for (let run = 0; run < 200; run += 1) {
          const terminal = await runtime.spawnTerminal({ ...TERMINAL, argv: ['/bin/sh', '-c', 'head -c 30000 /dev/zero | base64; exit 3'] });
          let bytes = 0;
          let ended = false;
          terminal.output.on('data', (chunk: Buffer) => (bytes += chunk.length));
          terminal.output.on('end', () => (ended = true));
          const outcome = await terminal.done;
          await waitFor('output end', () => ended);
          if (bytes !== 41_054 || outcome.exitCode !== 3) failures.push(`run ${run}: ${bytes} bytes, exit ${String(outcome.exitCode)}`);
          await terminal.terminate();
        }
        expect(failures).toEqual([]);
      }, 180_000); // 200 terminals one after another: 15-20 s here, past 30 s while other suites load the machine.

      it('proves an input wait only after the output printed before it was delivered (200 runs)', async () => {
        // `seq` prints, exits, and `cat` blocks: at the first proof of cat's wait,
        // the delivered output must already end with seq's last line.
        const bash = await openBash(runtime);
        const early: string[] = [];
        for (let run = 0; run < 200; run += 1) {
          const since = bash.bytes().length;
          await bash.terminal.write('seq 1 3000; cat\r');
          const facts = await waitForForeground(
            bash.terminal,
            'cat waiting',
            (foreground) => foreground?.inputWaiting === true && foreground.processGroupId !== bash.terminal.pid,
          );
          const delivered = bash.bytes().subarray(since).toString('latin1');
          if (!delivered.includes('\n3000\r\n'))
            early.push(`run ${run}: group ${facts.processGroupId}, ${delivered.length} bytes, ends ${JSON.stringify(delivered.slice(-20))}`);
          await bash.terminal.write('\x04');
          await bash.waitForOutput(new RegExp(`\\n${PROMPT.replace('>', '\\>')}$`), since);
        }
        expect(early).toEqual([]);
        await bash.terminal.terminate();
      }, 180_000); // 200 rounds of output and proof: well under 30 s alone, past it while other suites load the machine.

      it('applies backpressure: a paused reader blocks the program, and nothing is lost', async () => {
        const terminal = await runtime.spawnTerminal({ ...TERMINAL, argv: ['/bin/sh', '-c', 'head -c 3000000 /dev/zero | base64'] });
        terminal.output.pause();
        // Fixed waits are right here: they check that the program does not finish while nothing reads.
        await sleep(700);
        let exited = false;
        void terminal.done.then(() => (exited = true));
        await sleep(50);
        expect(exited).toBe(false);
        let bytes = 0;
        terminal.output.on('data', (chunk: Buffer) => (bytes += chunk.length));
        terminal.output.resume();
        await terminal.done;
        await waitFor('all bytes', () => bytes === 4_105_264);
        await terminal.terminate();
      });

      it('terminates a program whose reader is paused: done settles without the reader, the rest still ends', async () => {
        const terminal = await runtime.spawnTerminal({ ...TERMINAL, argv: ['/bin/sh', '-c', 'head -c 100000000 /dev/zero | base64'] });
        terminal.output.pause();
        // Every buffer on the way fills and the program blocks on its next write.
        await sleep(500);
        const settled = Promise.all([terminal.terminate(), terminal.done]);
        await expect(Promise.race([settled.then(() => 'settled'), sleep(10_000).then(() => 'stuck')])).resolves.toBe('settled');
        // Killed, or the shell reporting its killed pipeline (128 + signal).
        const outcome = await terminal.done;
        expect(outcome.signal !== null || (outcome.exitCode ?? 0) > 128).toBe(true);
        // The reader comes back: what was queued arrives, then the end.
        const ended = new Promise<void>((resolve) => terminal.output.once('end', resolve));
        terminal.output.resume();
        await expect(Promise.race([ended.then(() => 'ended'), sleep(10_000).then(() => 'no end')])).resolves.toBe('ended');
      });

      it('resizes', async () => {
        const shell = await openBash(runtime);
        await subject.resize(shell.terminal, 100, 30);
        expect(await shell.run('stty size')).toContain('30 100');
        await shell.terminal.terminate();
      });

      it('rejects bad allocations with the field named, and an abort with exactly its reason', async () => {
        const spec = { ...TERMINAL, argv: ['/bin/sh'] };
        await expect(runtime.spawnTerminal({ ...spec, argv: [] })).rejects.toThrow(/terminal argv must contain a program/);
        await expect(runtime.spawnTerminal({ ...spec, rows: 0 })).rejects.toThrow(/rows/);
        await expect(runtime.spawnTerminal({ ...spec, cwd: '/definitely/missing' })).rejects.toMatchObject({ code: 'CWD_NOT_FOUND' });
        await expect(runtime.spawnTerminal({ ...spec, argv: ['definitely-missing-program'] })).rejects.toMatchObject({ code: 'EXECUTABLE_NOT_FOUND' });
        await expect(runtime.spawnTerminal({ ...spec, signal: AbortSignal.abort('gone') })).rejects.toBe('gone');
        const controller = new AbortController();
        const terminal = await runtime.spawnTerminal({ ...spec, argv: ['/bin/cat'], signal: controller.signal });
        controller.abort('late');
        // A fixed wait is right here: it checks that a late abort does not end the terminal.
        await sleep(50);
        expect(pidAlive(terminal.pid)).toBe(true);
        await terminal.terminate();
      });

      it('closes an idle interactive bash without waiting out the grace', async () => {
        const { terminal } = await openBash(runtime, { graceMs: 20_000 });
        const started = Date.now();
        await terminal.terminate();
        // Below the grace, which waiting it out would take; far above a close.
        expect(Date.now() - started).toBeLessThan(15_000);
        expect(await terminal.done).toEqual({ exitCode: null, signal: 'SIGHUP' });
        expect(sessionPids(terminal.pid)).toEqual([]);
      });

      it('leaves no survivor from background jobs, nohup children and grandchildren', async () => {
        const shell = await openBash(runtime, { graceMs: 300 });
        await shell.run('sleep 300 &');
        await shell.run('nohup sh -c \'trap "" HUP TERM; sleep 300\' > /dev/null 2>&1 &');
        await shell.run("bash -c 'sleep 300 & sleep 300 & wait' &");
        await shell.terminal.write('sleep 300\r');
        await waitFor('the whole session', () => sessionPids(shell.terminal.pid).length >= 7);
        const members = sessionPids(shell.terminal.pid);
        await shell.terminal.terminate();
        expect(members.filter(pidAlive)).toEqual([]);
      });

      it('closes a shell that keeps forking children while they are stopped', async () => {
        // A loop forks a new child each time the last one is killed: the shell itself must be stopped too.
        const looping = await runtime.spawnTerminal({ ...TERMINAL, argv: ['/bin/sh', '-c', 'printf READY; while :; do sleep 1 & wait; done'], graceMs: 300 });
        const shell = await openBash(runtime, { graceMs: 300 });
        await shell.terminal.write('while :; do sleep 0.2; done\r');
        await waitFor('both loops to fork', () => sessionPids(looping.pid).length >= 2 && sessionPids(shell.terminal.pid).length >= 2);
        await looping.terminate();
        await shell.terminal.terminate();
        expect(sessionPids(looping.pid)).toEqual([]);
        expect(sessionPids(shell.terminal.pid)).toEqual([]);
        expect(pidAlive(looping.pid) || pidAlive(shell.terminal.pid)).toBe(false);
      });

      it('sweeps a subshell that outlives the shell, never observed before the exit', async () => {
        const shell = await openBash(runtime, { graceMs: 300 });
        await shell.terminal.write('(trap \'\' HUP TERM; sleep 300) & disown; echo "child=$!"; exit 0\r');
        await expect(shell.terminal.done).resolves.toEqual({ exitCode: 0, signal: null });
        const child = Number(/child=(\d+)/.exec(shell.text())?.[1]);
        expect(child).toBeGreaterThan(0);
        await shell.terminal.terminate();
        expect(pidAlive(child)).toBe(false);
        expect(sessionPids(shell.terminal.pid)).toEqual([]);
      });

      it('terminate is one operation while in flight and idempotent after', async () => {
        const { terminal } = await openBash(runtime);
        const first = terminal.terminate();
        expect(terminal.terminate()).toBe(first);
        await first;
        await expect(terminal.terminate()).resolves.toBeUndefined();
      });
    });

    describe('disposal', () => {
      it('terminates and joins everything still owned', async () => {
        const own = await make();
        const shell = await openBash(own.runtime, { graceMs: 300 });
        const job = Number(/job=(\d+)/.exec(await shell.run('sleep 300 & echo "job=$!"'))?.[1]);
        const tree = own.runtime.spawn(sh('sleep 300 & echo $!; wait', { graceMs: 300 }));
        await waitFor('the tree', () => /\d+\n/.test(stdoutOf(tree)));
        const pids = [shell.terminal.pid, job, await own.started(tree), Number(stdoutOf(tree).trim())];
        expect(pids.every(pidAlive)).toBe(true);
        await own.runtime.dispose();
        expect(pids.filter(pidAlive)).toEqual([]);
        await own.close();
      });
    });
  });
}
