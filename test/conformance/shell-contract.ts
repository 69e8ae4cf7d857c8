/**
 * The persistent shell's contract, run over each seam runtime (local and
 * remote): exact exit statuses in the cases shells make hard, state that
 * persists, readiness from markers and the runtime's input-wait proof,
 * interrupts, exits and resets, bounded output.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { PersistentShell } from '@execworld/sdk/shell';
import { markerPids } from '../helpers/proc.ts';
import { waitFor } from '../helpers/wait.ts';

export interface ShellSubject {
  readonly runtime: SubprocessRuntime;
  close(): Promise<void>;
}

export function defineShellContract(name: string, make: () => Promise<ShellSubject>): void {
  describe(`${name}: persistent bash`, () => {
    let subject: ShellSubject;
    let shell: PersistentShell;
    const home = mkdtempSync(join(tmpdir(), 'execworld-shell-'));

    beforeAll(async () => {
      subject = await make();
      shell = await PersistentShell.start(subject.runtime, { cwd: home });
    });
    afterAll(async () => {
      await shell?.close();
      await subject?.close();
    });

    it('runs a command and answers its output and status', async () => {
      expect(await shell.run('echo hello')).toMatchObject({ output: 'hello\n', exitCode: 0, signal: null, reason: 'completed', truncated: false });
      expect(await shell.run('printf "no newline"; false')).toMatchObject({ output: 'no newline', exitCode: 1, reason: 'completed' });
      expect(await shell.run('true')).toMatchObject({ output: '', exitCode: 0 });
    });

    it('keeps cwd, variables and functions between runs', async () => {
      await shell.run('mkdir -p sub && cd sub && export KEPT=value && declare -a list=(a b) && greet() { echo "hi $1"; }');
      expect((await shell.run('pwd')).output).toBe(`${join(home, 'sub')}\n`);
      expect((await shell.run('echo "$KEPT ${list[1]}"; greet you')).output).toBe('value b\nhi you\n');
      await shell.run(`cd ${home}`);
    });

    it('answers exact statuses for multi-line scripts, heredocs, pipefail and quoting', async () => {
      const script = ['x=1', 'if [ "$x" = 1 ]; then', "  echo 'it''s' \"$x\" \\\\ $'\\t'tab", 'fi', 'exit_code() { return 7; }', 'exit_code'].join('\n');
      expect(await shell.run(script)).toMatchObject({ output: 'its 1 \\ \ttab\n', exitCode: 7 });
      expect(await shell.run('cat <<EOF\nline one\n$((1 + 2))\nEOF')).toMatchObject({ output: 'line one\n3\n', exitCode: 0 });
      expect(await shell.run('set -o pipefail; false | true; s=$?; set +o pipefail; exit_code() { return $s; }; exit_code')).toMatchObject({ exitCode: 1 });
      expect(await shell.run('echo "ünïcödé ✓"')).toMatchObject({ output: 'ünïcödé ✓\n' });
    });

    it('is not fooled by a user PROMPT_COMMAND or a command that prints marker-like text', async () => {
      await shell.run('PROMPT_COMMAND="false"');
      expect(await shell.run('(exit 4)')).toMatchObject({ exitCode: 4, reason: 'completed' });
      expect(await shell.run('echo __EW_END_fake:0')).toMatchObject({ output: '__EW_END_fake:0\n', exitCode: 0 });
      await shell.run('PROMPT_COMMAND=');
      expect(await shell.run('true')).toMatchObject({ exitCode: 0, reason: 'completed' });
    });

    it('answers what a terminal shows: a line redrawn after a return or with cursor moves, across answers', async () => {
      expect((await shell.run("printf 'abc\\rX\\n'; printf '10%%\\r20%%\\r30%%\\n'")).output).toBe('Xbc\n30%\n');
      expect((await shell.run("printf 'ab\\033[1DC\\033[Kd\\n'")).output).toBe('aCd\n');
      // A prompt, then a reply drawn over it as a line editor does (back to the prompt's end, the whole reply again).
      const asked = await shell.run("read -r -p 'tag: ' x; printf '\\033[6G%s\\n' \"$x\"");
      expect(asked).toMatchObject({ reason: 'waiting_for_input', output: 'tag: ' });
      const sent = await shell.send('Bob\r');
      expect(`${asked.output}${sent.output}`).toBe('tag: Bob\n');
    });

    it('names a killed command’s signal (128+n)', async () => {
      expect(await shell.run('sh -c "kill -KILL \\$\\$"')).toMatchObject({ exitCode: 137, signal: 'SIGKILL', reason: 'completed' });
    });

    it('runs background jobs without waiting for them', async () => {
      const result = await shell.run('sleep 30 & echo started');
      expect(result).toMatchObject({ exitCode: 0, reason: 'completed' });
      expect(result.output).toContain('started');
      await shell.run('kill %1; wait 2>/dev/null; true');
    });

    it('carries invalid UTF-8 and binary output without failing', async () => {
      const result = await shell.run("printf 'a\\377b\\000c\\n'");
      expect(result.exitCode).toBe(0);
      expect(result.output).toBe('a\uFFFDb\u0000c\n');
      expect(result.outputEnd - result.outputStart).toBe(7);
    });

    it('bounds large output: head and tail kept, the cut counted', async () => {
      const result = await shell.run('seq 1 200000', { maxOutputBytes: 64 * 1024 });
      expect(result).toMatchObject({ exitCode: 0, truncated: true, reason: 'completed' });
      expect(result.output.startsWith('1\n2\n3\n')).toBe(true);
      expect(result.output.endsWith('199999\n200000\n')).toBe(true);
      const cut = /\[… (\d+) bytes of output cut …\]/.exec(result.output);
      expect(cut).not.toBeNull();
      // seq 1 200000 prints 1,288,895 bytes; on the terminal each line ends in CRLF.
      expect(Number(cut![1]) + 64 * 1024).toBe(1_288_895 + 200_000);
    });

    it('reports a program waiting for input at once, with its name, and never types the next command into it', async () => {
      const asked = await shell.run('read -p "name? " answer; echo "got $answer"');
      expect(asked).toMatchObject({ reason: 'waiting_for_input', exitCode: null, output: 'name? ' });
      await expect(shell.run('echo next')).rejects.toMatchObject({ code: 'SHELL_BUSY' });
      expect(await shell.send('world\r')).toMatchObject({ reason: 'completed', exitCode: 0, output: 'got world\n' });

      const paged = await shell.run('seq 1 500 | less', { signal: AbortSignal.timeout(60_000) });
      expect(paged.reason).toBe('waiting_for_input');
      expect(paged.waitingFor?.command).toBe('less');
      expect(await shell.send('q')).toMatchObject({ reason: 'completed', exitCode: 0 });
    });

    it('reports full-screen programs and a pager git starts as waiting, with their names', async () => {
      const edited = await shell.run('vim -u NONE -n notes.txt');
      expect(edited).toMatchObject({ reason: 'waiting_for_input', waitingFor: { command: 'vim' } });
      await expect(shell.run('echo typed-into-vim')).rejects.toMatchObject({ code: 'SHELL_BUSY' });
      expect(await shell.send(':q!\r')).toMatchObject({ reason: 'completed', exitCode: 0 });

      const repo = mkdtempSync(join(tmpdir(), 'execworld-git-'));
      const made = await shell.run(
        `cd ${repo} && git init -q && for n in $(seq 1 60); do git -c user.name=t -c user.email=t@t commit -q --allow-empty -m "commit $n"; done; cd ${home}`,
        { timeoutMs: 120_000 },
      );
      expect(made.exitCode).toBe(0);
      // Without a pager setting of its own (the shell's PAGER=cat and GIT_PAGER=cat unset), git pages through less.
      const logged = await shell.run(`env -u GIT_PAGER -u PAGER git -C ${repo} log --oneline`);
      expect(logged.reason).toBe('waiting_for_input');
      // Debian's git pages through `pager`, the system's choice of pager (less here).
      expect(['less', 'pager']).toContain(logged.waitingFor?.command);
      // The pager waits for keys once its screen is full, which can be before git has written every line. A `q` then
      // would end git with SIGPIPE (141), so the test waits for git to close its end of the pipe: it does that after its
      // last write, and then waits for the pager.
      await waitFor(
        'git log to close its end of the pager pipe',
        () => {
          const git = markerPids(repo);
          return git.length === 1 && !existsSync(`/proc/${git[0]}/fd/1`);
        },
        60_000,
      );
      expect(await shell.send('q')).toMatchObject({ reason: 'completed', exitCode: 0 });
    });

    it('bounds 100 MB of output to the head and tail asked for', async () => {
      // 100,000,000 bytes of base64 (135,000,000 with its line ends), on the terminal with CRLF.
      const result = await shell.run('head -c 75000000 /dev/zero | base64 -w 76', { maxOutputBytes: 256 * 1024, timeoutMs: 600_000 });
      expect(result).toMatchObject({ exitCode: 0, truncated: true, reason: 'completed' });
      const lines = 100_000_000 / 76;
      const total = 100_000_000 + 2 * Math.ceil(lines);
      const cut = Number(/\[… (\d+) bytes of output cut …\]/.exec(result.output)![1]);
      expect(cut + 256 * 1024).toBe(total);
      expect(result.outputEnd - result.outputStart).toBe(total);
    }, 600_000);

    it('gives stdin-reading commands no stale input', async () => {
      const result = await shell.run('cat', { idleTimeoutMs: 60_000 });
      expect(result.reason).toBe('waiting_for_input');
      expect(result.waitingFor?.command).toBe('cat');
      expect(await shell.interrupt()).toMatchObject({ reason: 'canceled', exitCode: 130, signal: 'SIGINT' });
      expect(await shell.run('echo after')).toMatchObject({ output: 'after\n', exitCode: 0 });
    });

    it('interrupts at the timeout with a real SIGINT and keeps the shell', async () => {
      await shell.run('export BEFORE_TIMEOUT=kept');
      const result = await shell.run('echo begun; sleep 30', { timeoutMs: 300 });
      expect(result).toMatchObject({ reason: 'timeout', exitCode: 130, signal: 'SIGINT', output: 'begun\n' });
      expect((await shell.run('echo $BEFORE_TIMEOUT')).output).toBe('kept\n');
    });

    it('answers idle_timeout on silence and goes on with wait()', async () => {
      const idle = await shell.run('sleep 1; echo woke', { idleTimeoutMs: 200 });
      expect(idle).toMatchObject({ reason: 'idle_timeout', exitCode: null });
      expect(await shell.wait()).toMatchObject({ reason: 'completed', output: 'woke\n', exitCode: 0 });
    });

    it('cancels on the caller’s signal', async () => {
      const controller = new AbortController();
      const running = shell.run('sleep 30', { signal: controller.signal });
      setTimeout(() => controller.abort(), 200);
      expect(await running).toMatchObject({ reason: 'canceled', exitCode: 130 });
    });

    it('interrupts the command the shell starts after it took the SIGINT itself, and keeps the shell', async () => {
      // The shell is its terminal's foreground (a loop of builtins) when the interrupt lands; its trap goes on to start
      // `sleep`, which never got the signal: the interrupt follows it there.
      await shell.run('export BEFORE_INTERRUPT=kept');
      const started = join(home, 'loop-started');
      const trapped = join(home, 'loop-trapped');
      const gate = join(home, 'loop-gate');
      const controller = new AbortController();
      const running = shell.run(`trap ': > ${trapped}' INT; : > ${started}; while [ ! -e ${gate} ]; do :; done; sleep 100`, {
        signal: controller.signal,
      });
      await waitFor('the loop to start', () => existsSync(started));
      controller.abort();
      await waitFor('the shell to take the SIGINT', () => existsSync(trapped));
      writeFileSync(gate, '');
      expect(await running).toMatchObject({ reason: 'canceled', exitCode: 130, signal: 'SIGINT' });
      expect(await shell.run('trap - INT; echo $BEFORE_INTERRUPT')).toMatchObject({ output: 'kept\n', exitCode: 0 });
    });

    it('never cuts the line the shell is still reading: an interrupt waits until the shell took it', async () => {
      // A long line takes bash's line editor a while to read; a SIGINT meanwhile would discard what it read and
      // leave the rest of the line to run as a command. The shell, its variables and nothing of the line stay.
      await shell.run('export BEFORE_CUT=kept');
      const controller = new AbortController();
      const running = shell.run(`: ${'x'.repeat(32 * 1024)}; echo ran`, { signal: controller.signal });
      setImmediate(() => controller.abort());
      const result = await running;
      expect(result.reason).toBe('canceled');
      expect(result.output).not.toMatch(/not found|syntax error/);
      expect(await shell.run('echo $BEFORE_CUT')).toMatchObject({ output: 'kept\n', exitCode: 0 });
    });

    it('signals a program that handles SIGINT once', async () => {
      const asked = await shell.run(`bash -c 'trap "echo trapped; sleep 0.3; echo cleaned" INT; head -n1; echo after'`);
      expect(asked).toMatchObject({ reason: 'waiting_for_input', waitingFor: { command: 'head' } });
      const result = await shell.interrupt();
      expect(result).toMatchObject({ reason: 'canceled', exitCode: 0 });
      expect(result.output.match(/trapped/g)).toHaveLength(1);
      expect(result.output).toContain('after');
    });

    it('answers a send of a key the terminal driver takes for itself, also where the program reads raw', async () => {
      // ^C to a program reading raw with ISIG on is a signal, never input: ignored, it leaves the same wait.
      const asked = await shell.run("(trap '' INT; stty -icanon min 1; head -c 1 >/dev/null; stty icanon; echo got)");
      expect(asked).toMatchObject({ reason: 'waiting_for_input', waitingFor: { command: 'head' } });
      expect(await shell.send('\x03', { idleTimeoutMs: 30_000 })).toMatchObject({ reason: 'waiting_for_input' });
      expect(await shell.send('x')).toMatchObject({ reason: 'completed', exitCode: 0, output: 'got\n' });
    });

    it('interrupts a run under way for another caller: both are answered how it ended', async () => {
      const started = join(home, 'held-started');
      const running = shell.run(`: > ${started}; sleep 100`);
      await waitFor('the run to start', () => existsSync(started));
      const interrupted = await shell.interrupt();
      expect(interrupted).toMatchObject({ reason: 'canceled', exitCode: 130, signal: 'SIGINT' });
      expect(await running).toEqual(interrupted);
      expect(await shell.run('echo after')).toMatchObject({ output: 'after\n', exitCode: 0 });
    });

    for (const [command, status] of [
      ['exit 3', 3],
      ['set -e; false; echo never', 1],
      ['set -euo pipefail; echo $UNSET_VARIABLE_X', 1],
      ['exec true', 0],
    ] as const) {
      it(`reports the shell's exit for \`${command}\` (${status}) and starts a fresh shell next`, async () => {
        await shell.run('export FROM_OLD_SHELL=yes');
        const result = await shell.run(command);
        expect(result).toMatchObject({ reason: 'shell_exited', exitCode: status });
        expect(await shell.run('echo "[${FROM_OLD_SHELL:-fresh}]"; echo $PWD')).toMatchObject({ output: `[fresh]\n${home}\n`, exitCode: 0 });
      });
    }
  });
}
