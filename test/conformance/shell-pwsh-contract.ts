/**
 * The persistent shell's pwsh dialect on real PowerShell 7, over each seam
 * runtime. It runs wherever pwsh is installed; with CI set a missing pwsh
 * fails it instead of skipping.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PersistentShell, pwsh } from '@execworld/sdk/shell';
import { requiredTool } from '../helpers/tools.ts';
import type { ShellSubject } from './shell-contract.ts';

/** PowerShell 7: on PATH, or where `dotnet tool install --global` puts it. */
export const PWSH = requiredTool('pwsh', { candidates: [join(homedir(), '.dotnet', 'tools', 'pwsh')], installedBy: "CONTRIBUTING.md's development notes" });

export function definePwshShellContract(name: string, make: () => Promise<ShellSubject>): void {
  describe.skipIf(PWSH.skip)(`${name}: persistent pwsh${PWSH.note}`, { timeout: 120_000 }, () => {
    let subject: ShellSubject;
    let shell: PersistentShell;

    beforeAll(async () => {
      const program = PWSH.require();
      vi.stubEnv('EXECWORLD_PWSH_PROBE_TOKEN', 'secret-value');
      subject = await make();
      shell = await PersistentShell.start(subject.runtime, { dialect: pwsh, shellPath: program, cwd: '/tmp', startTimeoutMs: 90_000 });
    }, 120_000);
    afterAll(async () => {
      await shell?.close();
      await subject?.close();
    });

    it('keeps cwd and $env: variables, and answers output and exact statuses', async () => {
      expect(await shell.run('Set-Location /; $env:KEPT = "value"')).toMatchObject({ exitCode: 0, reason: 'completed' });
      expect(await shell.run('Write-Output "$env:KEPT in $((Get-Location).Path)"')).toMatchObject({ output: 'value in /\n', exitCode: 0 });
      expect(await shell.run('/bin/sh -c "exit 3"')).toMatchObject({ exitCode: 3 });
      // A cmdlet-only run after one that set $LASTEXITCODE: 0, not the stale 3.
      expect(await shell.run('Get-Date | Out-Null')).toMatchObject({ exitCode: 0 });
      expect(await shell.run('throw "boom"')).toMatchObject({ output: 'boom\n', exitCode: 1 });
      expect(await shell.run('Get-Item /definitely/missing')).toMatchObject({ exitCode: 1 });
    });

    it('answers pwsh’s own status rules: caught errors never count', async () => {
      expect(await shell.run("try { throw 'x' } catch { 'handled' }")).toMatchObject({ output: 'handled\n', exitCode: 0 });
      expect(await shell.run("try { Get-Item /nope -ErrorAction Stop } catch { 'c' }")).toMatchObject({ output: 'c\n', exitCode: 0 });
      expect(await shell.run("trap { 'trapped'; continue }; throw 'x'; 'on'")).toMatchObject({ output: 'trapped\non\n', exitCode: 0 });
      // A terminating error that escapes, and a non-terminating one written to the error stream: 1.
      expect(await shell.run("'a'; throw 'boom'; 'b'")).toMatchObject({ output: 'a\nboom\n', exitCode: 1 });
      expect(await shell.run("Write-Error 'written'; 'after'")).toMatchObject({ exitCode: 1 });
      // The native program's status when it ran after the last error; a native's standard error is no error.
      expect(await shell.run('Get-Item /nope; /bin/sh -c "exit 3"')).toMatchObject({ exitCode: 3 });
      expect(await shell.run('/bin/sh -c "exit 3"; Get-Item /nope')).toMatchObject({ exitCode: 1 });
      expect(await shell.run('Get-Item /nope; /bin/sh -c "exit 1"; /bin/sh -c "exit 1"')).toMatchObject({ exitCode: 1 });
      expect(await shell.run('/bin/sh -c "echo err >&2; exit 0"')).toMatchObject({ output: 'err\n', exitCode: 0 });
      expect(await shell.run("/bin/sh -c 'exit 3'; 'then'")).toMatchObject({ output: 'then\n', exitCode: 3 });
    });

    it('writes a few hundred bytes to the terminal per trivial run, also after the prompt is redefined', async () => {
      const terminal = await shell.terminal;
      let seen = 0;
      const count = (chunk: Buffer): void => void (seen += chunk.length);
      terminal.output.on('data', count);
      // The mean over 20 runs: the next prompt's bytes (its marker, text and cursor query) may come before or after a
      // run's answer, so one run's count varies by them; over 20 they shift the mean by 2 bytes at most.
      const RUNS = 20;
      const perRun = async (): Promise<number> => {
        const from = seen;
        for (let index = 0; index < RUNS; index += 1) expect(await shell.run('$null')).toMatchObject({ exitCode: 0, output: '' });
        return (seen - from) / RUNS;
      };
      try {
        // The cursor on the last row from now on: the redraws name its row, whose digits would vary while the screen fills.
        await shell.run("1..50 | ForEach-Object { '' }");
        const plain = await perRun();
        await shell.run("function prompt { 'X> ' }");
        const prompted = await perRun();
        console.log(`pwsh bytes written per run('$null'): ${plain}; after function prompt { 'X> ' }: ${prompted}`);
        // The line typed (`. $__ew_run`, drawn key by key), the markers, the prompt and its cursor query.
        expect(plain).toBeLessThan(1024);
        // The user's prompt text ('X> ' instead of ' ') is drawn where the hook's was. The 8 are the mean's edge: a
        // prompt's bytes that land on either side of an answer, and PSReadLine's occasional redraw of a few bytes
        // when the machine is busy (one such in 20 runs is 0.2 bytes of the mean); a redraw of the line per run
        // would be tens of bytes.
        expect(prompted).toBeLessThanOrEqual(plain + 'X> '.length + 8);
        expect((await shell.run('Write-Output still')).output).toBe('still\n');
      } finally {
        terminal.output.off('data', count);
        await shell.run('Remove-Item function:prompt; $global:__ew_userPrompt = $null');
      }
    });

    it('carries UTF-8, multi-line commands and here-strings', async () => {
      expect((await shell.run('Write-Output "ünïcödé ✓"')).output).toBe('ünïcödé ✓\n');
      expect((await shell.run("$x = 2\nif ($x -eq 2) {\n  Write-Output 'two'\n}")).output).toBe('two\n');
      expect((await shell.run("@'\nhere $not `expanded\nstring\n'@")).output).toBe('here $not `expanded\nstring\n');
    });

    it('scrubs secret-looking variables of the host from the child environment', async () => {
      expect((await shell.run('Write-Output "[$env:EXECWORLD_PWSH_PROBE_TOKEN]"')).output).toBe('[]\n');
    });

    it('bounds large output', async () => {
      const result = await shell.run('1..100000 | ForEach-Object { "line $_" }', { maxOutputBytes: 32 * 1024, timeoutMs: 90_000 });
      expect(result).toMatchObject({ exitCode: 0, truncated: true, reason: 'completed' });
      expect(result.output.startsWith('line 1\nline 2\n')).toBe(true);
      expect(result.output.endsWith('line 100000\n')).toBe(true);
      expect(result.output).toMatch(/\[… \d+ bytes of output cut …\]/);
    });

    it('reports a program waiting for input, and interrupts a running command with SIGINT', async () => {
      const waiting = await shell.run('cat');
      expect(waiting).toMatchObject({ reason: 'waiting_for_input', waitingFor: { command: 'cat' } });
      expect(await shell.interrupt()).toMatchObject({ reason: 'canceled', exitCode: 130 });
      expect(await shell.run('sleep 30', { timeoutMs: 500 })).toMatchObject({ reason: 'timeout', exitCode: 130, signal: 'SIGINT' });
      expect(await shell.run('Write-Output after')).toMatchObject({ output: 'after\n', reason: 'completed', exitCode: 0 });
    });

    it('never takes pwsh waiting for a cursor report for a wait for input', async () => {
      // Progress bars are off in the shell; on here, each draw asks the terminal for the cursor and waits for the answer.
      const progress = await shell.run(
        "$ProgressPreference = 'Continue'; 1..10 | ForEach-Object { Write-Progress -Activity p -PercentComplete ($_*10); Start-Sleep -Milliseconds 100 }; 'done'",
        { timeoutMs: 60_000 },
      );
      await shell.run("$ProgressPreference = 'SilentlyContinue'");
      expect(progress).toMatchObject({ reason: 'completed', exitCode: 0 });
      // The bars are erased before the run ends: none of their text stays.
      expect(progress.output).not.toContain('Processing');
      expect(progress.output.trim()).toBe('done');
      // Each read of the position asks the terminal and waits for the answer: 200 chances to be taken for a wait.
      const cursor = await shell.run("1..200 | ForEach-Object { $null = $Host.UI.RawUI.CursorPosition; Start-Sleep -Milliseconds 5 }; 'done'", {
        timeoutMs: 60_000,
      });
      expect(cursor).toMatchObject({ reason: 'completed', exitCode: 0, output: 'done\n' });
    });

    it('answers the echo of a reply to Read-Host as the terminal shows it', async () => {
      const asked = await shell.run("Read-Host 'tag'");
      expect(asked).toMatchObject({ reason: 'waiting_for_input', output: 'tag: ' });
      const sent = await shell.send('Bob\r');
      expect(sent).toMatchObject({ reason: 'completed', exitCode: 0 });
      const shown = `${asked.output}${sent.output}`;
      expect(shown).toBe('tag: Bob\nBob\n');
      expect(shown).not.toContain('BBoBob');
    });

    it('interrupts pwsh’s own Read-Host and keeps the shell and its variables', async () => {
      const pid = (await shell.terminal).pid;
      await shell.run('$v = 7');
      expect(await shell.run("Read-Host 'tag'")).toMatchObject({ reason: 'waiting_for_input', output: 'tag: ' });
      // Read-Host stops as a pipeline stopped by Ctrl+C does: no status of its own, the shell reports 1.
      expect(await shell.interrupt()).toMatchObject({ reason: 'canceled', exitCode: 1 });
      expect(await shell.run('$v')).toMatchObject({ output: '7\n', exitCode: 0 });
      expect((await shell.terminal).pid).toBe(pid);
      // A timeout and a cancel at the prompt keep it too.
      expect(await shell.run("Read-Host 'again'")).toMatchObject({ reason: 'waiting_for_input' });
      // The proof answers a wait at once: a deadline of 0 (before the first probe) and an aborted signal are reached.
      expect(await shell.wait({ timeoutMs: 0 })).toMatchObject({ reason: 'timeout', exitCode: 1 });
      expect(await shell.run("Read-Host 'more'")).toMatchObject({ reason: 'waiting_for_input' });
      expect(await shell.wait({ signal: AbortSignal.abort() })).toMatchObject({ reason: 'canceled', exitCode: 1 });
      expect(await shell.run('$v')).toMatchObject({ output: '7\n', exitCode: 0 });
      expect((await shell.terminal).pid).toBe(pid);
    });

    it('reports the shell’s exit and starts a fresh one', async () => {
      await shell.run('$env:FROM_OLD = "yes"');
      expect(await shell.run('exit 4')).toMatchObject({ reason: 'shell_exited', exitCode: 4 });
      expect(await shell.run('Write-Output "[$env:FROM_OLD]"', { timeoutMs: 90_000 })).toMatchObject({ output: '[]\n', exitCode: 0 });
    });
  });
}
