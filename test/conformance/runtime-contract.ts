/**
 * The terminal part of the conformance suite: every terminal scenario of the
 * contract (§1.5, §1.7, §1.8, §2.5, §7) and disposal, run against each POSIX
 * runtime. The process part, which also runs in a Windows world, is
 * `process-contract.ts`.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type {
  CommandResult,
  RunCommandOptions,
  SpawnRequest,
  SubprocessHandle,
  SubprocessRuntime,
  SubprocessSpawnSpec,
  SubprocessStdio,
  SubprocessTerminalHandle,
} from '@execworld/sdk/seam';
import { asleepInForeground, sessionPids } from '../helpers/proc.ts';
import { openBash, PROMPT, waitForForeground } from '../helpers/terminal.ts';
import { collect, pidAlive, sleep, waitFor } from '../helpers/wait.ts';

/** A runtime of the seam with execworld's extensions: specs with defaults, and the one-call run. */
export type ExecworldRuntime = SubprocessRuntime & {
  spawn(spec: SpawnRequest): SubprocessHandle;
  run(command: string | readonly string[], options?: RunCommandOptions): Promise<CommandResult>;
  dispose(): Promise<void>;
};

export interface RuntimeUnderTest {
  readonly runtime: ExecworldRuntime;
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

export function defineRuntimeContract(name: string, make: () => Promise<RuntimeUnderTest>): void {
  describe(`${name}: seam contract`, () => {
    let subject: RuntimeUnderTest;
    let runtime: RuntimeUnderTest['runtime'];
    beforeAll(async () => {
      subject = await make();
      runtime = subject.runtime;
    });
    afterAll(() => subject.close());

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

      it('never proves an input wait while a terminal query of the program is unanswered', async () => {
        // Nobody answers here (a daemon is asked not to): the program stays blocked on the cursor report it asked for.
        type WithOptions = (
          spec: Parameters<SubprocessRuntime['spawnTerminal']>[0],
          options?: { answerQueries?: boolean },
        ) => Promise<SubprocessTerminalHandle>;
        const spawn: WithOptions = runtime.spawnTerminal.bind(runtime);
        const terminal = await spawn(
          {
            ...TERMINAL,
            argv: [
              '/bin/bash',
              '-c',
              "stty -icanon -echo; printf 'asked\\033[6n'; IFS= read -r -d R reply; stty icanon; printf 'got%s\\n' \"${reply#*[}\"; read line",
            ],
          },
          { answerQueries: false },
        );
        const output = collect(terminal.output);
        await waitFor('the query', () => output.text().includes('asked\x1b[6n'));
        await waitFor('bash to block on the reply', () => asleepInForeground(terminal.pid, 'bash'));
        for (let probe = 0; probe < 20; probe += 1) expect(await terminal.inspectForeground()).toMatchObject({ inputWaiting: false });
        // Answered, the program reads the reply, prints it and waits for a line: a real wait.
        await terminal.write('\x1b[3;7R');
        // The output comes on its own stream (over a daemon, its own frames): waited for, not assumed with the wait's proof.
        await waitFor('the reply read and printed', () => output.text().includes('got3;7'));
        await waitForForeground(terminal, 'read line', (f) => f?.inputWaiting === true);
        await terminal.terminate();
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

    describe('defaults and the one-call run', () => {
      it("spawns with only argv: pipes, a grace, and this host's working directory (the daemon's, which runs here)", async () => {
        const handle = runtime.spawn({ argv: ['/bin/sh', '-c', 'pwd; cat'] });
        const out = collect(handle.stdout!);
        handle.stdin!.end('piped\n');
        await expect(handle.done).resolves.toEqual({ exitCode: 0, signal: null });
        await waitFor('the output', () => out.text().endsWith('piped\n'));
        expect(out.text()).toBe(`${process.cwd()}\npiped\n`);
      });

      it('runs a string through /bin/sh and an argv as it is, with the exit, both streams and the duration', async () => {
        const result = await runtime.run('echo out; echo err >&2; exit 3');
        expect(result).toMatchObject({ exitCode: 3, signal: null, stdout: 'out\n', stderr: 'err\n', truncated: null, timedOut: false });
        expect(result.durationMs).toBeGreaterThanOrEqual(0);
        expect((await runtime.run(['/bin/echo', '$HOME', 'a b'], { cwd: '/' })).stdout).toBe('$HOME a b\n');
        expect((await runtime.run('pwd', { cwd: '/' })).stdout).toBe('/\n');
        expect((await runtime.run('echo "$RUN_VAR"', { env: { RUN_VAR: 'set' } })).stdout).toBe('set\n');
      });

      it('takes stdin as text or bytes, and closes it after them', async () => {
        expect((await runtime.run('cat', { stdin: 'hello\n' })).stdout).toBe('hello\n');
        expect((await runtime.run('wc -c', { stdin: new Uint8Array(100_000).fill(7) })).stdout.trim()).toBe('100000');
        // Without stdin it is /dev/null: a reader sees its end at once.
        expect((await runtime.run('cat; echo end')).stdout).toBe('end\n');
      });

      it('streams output to callbacks as it comes', async () => {
        const go = join(mkdtempSync(join(tmpdir(), 'ew-run-')), 'go');
        const chunks: string[] = [];
        const running = runtime.run(`echo one; while [ ! -e ${go} ]; do sleep 0.02; done; echo two >&2`, {
          onStdout: (chunk) => chunks.push(`out:${Buffer.from(chunk).toString()}`),
          onStderr: (chunk) => chunks.push(`err:${Buffer.from(chunk).toString()}`),
        });
        // The command goes on only once its first line was seen here.
        await waitFor('the first line', () => chunks.includes('out:one\n'));
        writeFileSync(go, '');
        const result = await running;
        expect(chunks).toEqual(['out:one\n', 'err:two\n']);
        expect(result).toMatchObject({ exitCode: 0, stdout: 'one\n', stderr: 'two\n' });
      });

      it('bounds the output it keeps to a head and a tail, counts what it cut, and streams all of it', async () => {
        let streamed = 0;
        const result = await runtime.run("head -c 300000 /dev/zero | tr '\\0' a; printf END", {
          maxOutputBytes: 1000,
          onStdout: (chunk) => (streamed += chunk.length),
        });
        expect(streamed).toBe(300_003);
        expect(result.stdout).toBe(`${'a'.repeat(500)}${'a'.repeat(497)}END`);
        expect(result.truncated).toEqual({ stdout: 299_003, stderr: 0 });
      });

      it('ends the process tree at the timeout and says so', async () => {
        const result = await runtime.run('echo $$; sleep 30 & echo $!; wait', { timeoutMs: 300, graceMs: 500 });
        expect(result).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGTERM' });
        const pids = result.stdout.trim().split('\n').map(Number);
        expect(pids).toHaveLength(2);
        expect(pids.filter(pidAlive)).toEqual([]);
      });

      it('ends the process tree on abort and rejects with the reason', async () => {
        const controller = new AbortController();
        let out = '';
        const running = runtime.run('echo $$; sleep 30 & echo $!; wait', {
          signal: controller.signal,
          onStdout: (chunk) => (out += Buffer.from(chunk).toString()),
        });
        await waitFor('both pids', () => out.split('\n').length > 2);
        controller.abort('stop');
        await expect(running).rejects.toBe('stop');
        expect(out.trim().split('\n').map(Number).filter(pidAlive)).toEqual([]);
        await expect(runtime.run('true', { signal: AbortSignal.abort('before') })).rejects.toBe('before');
      });

      it('leaves nothing running: what the command left in the background is ended with it', async () => {
        const result = await runtime.run('sleep 300 & echo $!', { graceMs: 300 });
        expect(result.exitCode).toBe(0);
        expect(pidAlive(Number(result.stdout.trim()))).toBe(false);
      });

      it('refuses bad options with the field named, and rejects a command that cannot start', async () => {
        await expect(runtime.run('true', { timeoutMs: 0 })).rejects.toThrow(/timeoutMs/);
        await expect(runtime.run('true', { maxOutputBytes: 1 })).rejects.toThrow(/maxOutputBytes/);
        await expect(runtime.run('')).rejects.toThrow(/command must be a non-empty string/);
        await expect(runtime.run([])).rejects.toThrow(/argv\[0\]/);
        await expect(runtime.run(['/definitely/missing'])).rejects.toThrow();
        expect(existsSync('/definitely/missing')).toBe(false);
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
