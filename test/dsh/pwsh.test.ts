/**
 * The DeepSeek harness's persistent pwsh stack — dsh-terminal-bash in its pwsh
 * dialect and dsh-tool-pwsh-persistent, 0.1.0-rc.8 — over the reference
 * provider (@deepseek-ai/dsh-subprocess-local), our LocalRuntime plugin and
 * our RemoteRuntime plugin: the same calls give the same results over each.
 *
 * What these packages do on Linux, over every provider alike:
 * - pwsh asks its terminal for the cursor position (ESC [ 6 n) before every
 *   prompt and while it edits a line, and nothing in the stack answers (the
 *   first test shows it over each provider; ../helpers/terminal-replies.ts
 *   says what follows). Unanswered, in a run here over the reference and the
 *   local provider alike, the first tool call returned the start-up echo, the
 *   second the first call's markers, and the fourth found the shell exited
 *   (code 0). The daemon answers them (unless a terminal is created with
 *   answerQueries: false), so over the remote provider the stack runs as
 *   published; over the other two the requests are answered in front of the
 *   provider.
 * - The backend types its bootstrap (UTF-8 setup, prompt function) before
 *   pwsh has the terminal in raw mode; the line discipline turns its CR into
 *   LF, which PSReadLine takes as a new line of the input, so the bootstrap
 *   is not run, yet start-up settles on its echo, which holds `dsh> `. The
 *   tool's initialization line comes next, and its Enter runs both together.
 * - The tool's own prompt replaces `dsh> `, so the backend's marker readiness
 *   never matches: a call settles on the provider's proof that pwsh waits for
 *   input, once a poll has seen pwsh leave its wait after the write, or else
 *   after 3.5 s of silence. Short calls such as `$null` take either time.
 * - The tool's wrapper catches a terminating error: its message is lost and
 *   only `[exit code: 1]` is shown. A non-terminating error shows its message
 *   and no exit code.
 * - PSReadLine keeps a history and shows inline predictions from it; the
 *   tests keep that history in a scratch XDG_DATA_HOME.
 *
 * Needs PowerShell 7 (pwsh on PATH or in ~/.dotnet/tools): skipped where it
 * is missing, failed where it is missing and CI is set.
 */
import '../helpers/with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import ReferenceSubprocess from '@deepseek-ai/dsh-subprocess-local';
import { mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { RemoteRuntime } from '@execworld/sdk';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { LocalSubprocess } from '@execworld/service/dsh';
import { DEFAULT_PASS_ENV } from '../../service/src/server/child-env.ts';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { composePwsh, type PwshHarness } from '../helpers/dsh-harness.ts';
import { asleepInForeground, sessionPids, sessionProcesses } from '../helpers/proc.ts';
import { requiredTool } from '../helpers/tools.ts';
import { collect, sleep, waitFor } from '../helpers/wait.ts';

const pwsh = requiredTool('pwsh', { candidates: [join(homedir(), '.dotnet', 'tools', 'pwsh')], installedBy: "CONTRIBUTING.md's development notes" });

/** A credential-shaped variable of the host (and so of the in-process daemon) that no shell may see, and a plain one that every shell sees. */
const SECRET = 'EW_PWSH_SECRET_TOKEN';
const PLAIN = 'EW_PWSH_PLAIN';
process.env[SECRET] = 'must-not-leak';
process.env[PLAIN] = 'plain-value';
/** PSReadLine keeps its history under XDG_DATA_HOME: the tests' commands go to a scratch directory, not the user's history. */
const dataHome = mkdtempSync(join(tmpdir(), 'execworld-pwsh-data-'));
process.env.XDG_DATA_HOME = dataHome;

const RESET_NOTICE = 'The persistent pwsh shell was reset; the next pwsh call starts from the workspace with a fresh current directory and environment.';

// The daemon passes the test's variables on, so that the secret meets the seam's scrub there too, not only the daemon's allowlist.
const test = daemonTest({ passEnv: [...DEFAULT_PASS_ENV, 'XDG_DATA_HOME', 'EW_PWSH_*'] });
let daemon: TestDaemon;
let pwshPath: string;

describe.skipIf(pwsh.skip)(`the DeepSeek pwsh stack${pwsh.note}`, () => {
  test.beforeAll(({ daemon: fileDaemon }) => {
    pwshPath = pwsh.require();
    daemon = fileDaemon;
  });
  // Every terminal and shell of the stack is ended by its test or suite before; the file's daemon closes after this.
  afterAll(() => {
    rmSync(dataHome, { recursive: true, force: true });
  });

  const providers = [
    ['reference', (root: Context) => root.plugin(ReferenceSubprocess)],
    ['local', (root: Context) => root.plugin(LocalSubprocess, {})],
    ['remote', (root: Context) => root.plugin(RemoteSubprocess, { url: daemon.url, token: ALICE })],
  ] as const;

  describe.each(providers)('unanswered cursor requests over the %s provider', (name, subprocess) => {
    test('pwsh asks for the cursor position before its first prompt and shows none until it is answered', async () => {
      const root = new Context();
      await subprocess(root);
      const runtime = (root as unknown as { subprocess: SubprocessRuntime }).subprocess;
      const spec = { argv: [pwshPath, '-NoLogo', '-NoProfile'], cwd: '/tmp', env: { TERM: 'dumb' }, rows: 40, cols: 160, graceMs: 1000 };
      // The daemon answers terminal queries unless told not to: here nobody may.
      const terminal =
        name === 'remote'
          ? await (runtime as unknown as { runtime: RemoteRuntime }).runtime.spawnTerminal(spec, { answerQueries: false })
          : await runtime.spawnTerminal(spec);
      try {
        const output = collect(terminal.output);
        await waitFor('a cursor position request', () => output.text().includes('\x1b[6n'), 20_000);
        // .NET waits 10 s for the first answer, and shows no prompt meanwhile.
        await sleep(2000);
        expect(output.text()).not.toContain('PS /tmp>');
        await terminal.write('\x1b[1;1R');
        await waitFor('the prompt once answered', () => output.text().includes('PS /tmp>'), 8000);
      } finally {
        await terminal.terminate();
        await root.fiber.dispose();
      }
    }, 60_000);
  });

  test('is answered by the daemon over the remote provider, with no client answering', async () => {
    const root = new Context();
    await root.plugin(RemoteSubprocess, { url: daemon.url, token: ALICE });
    const runtime = (root as unknown as { subprocess: SubprocessRuntime }).subprocess;
    const terminal = await runtime.spawnTerminal({
      argv: [pwshPath, '-NoLogo', '-NoProfile'],
      cwd: '/tmp',
      env: { TERM: 'dumb' },
      rows: 40,
      cols: 160,
      graceMs: 1000,
    });
    try {
      const output = collect(terminal.output);
      await waitFor('the prompt, the daemon having answered', () => output.text().includes('PS /tmp>'), 30_000);
      expect(output.text()).toContain('\x1b[6n');
    } finally {
      await terminal.terminate();
      await root.fiber.dispose();
    }
  }, 60_000);

  describe.each(providers)('over the %s provider', (name, subprocess) => {
    let harness: PwshHarness;
    beforeAll(async () => {
      // Over the daemon the stack runs as published: the daemon answers pwsh's cursor requests itself.
      harness = await composePwsh(subprocess, { pwshPath, answerCursorRequests: name !== 'remote' });
    }, 60_000);
    afterAll(() => harness?.close());

    const run = (command: string, signal = AbortSignal.timeout(60_000)): Promise<string> => harness.pwsh.execute({ command }, { agent: harness.owner, signal });

    test('runs commands with exact output and keeps the cwd, $env: variables and functions across calls', async () => {
      expect(await run('Write-Output hello')).toBe('hello');
      expect(await run('Set-Location /usr; $env:EW_STATE = \'kept\'; function Get-Twice($x) { "$x$x" }')).toBe('');
      expect(await run('(Get-Location).Path; $env:EW_STATE; Get-Twice ab')).toBe('/usr\nkept\nabab');
    }, 60_000);

    test('gives the shell the scrubbed environment: no credential-shaped variable of the host, the plain ones and the backend’s own', async () => {
      expect(await run(`"[$env:${SECRET}]"; $env:${PLAIN}; $env:TERM; $env:NO_COLOR; $env:DSH_SHELL`)).toBe('[]\nplain-value\ndumb\n1\n1');
    }, 60_000);

    test('round-trips non-ASCII text, from pwsh and from a native program, and through a pipe into one', async () => {
      expect(await run('"é€ — ünï 日本語"')).toBe('é€ — ünï 日本語');
      expect(await run("/usr/bin/printf '%s\\n' 'né日'")).toBe('né日');
      expect(await run("'ü→日' | /usr/bin/cat")).toBe('ü→日');
    }, 60_000);

    test('runs multi-line commands and here-strings', async () => {
      expect(await run('foreach ($i in 1..3) {\n  "n=$i"\n}')).toBe('n=1\nn=2\nn=3');
      expect(await run('$text = @\'\nline one\n  line two "quoted" $notvar `tick\n\'@\n$text')).toBe('line one\n  line two "quoted" $notvar `tick');
    }, 60_000);

    // The wrapper of dsh-tool-pwsh-persistent catches a terminating error, so its message is lost and only the 1 is shown;
    // a non-terminating error leaves $? true in the wrapper, so it shows its message and no exit code.
    test('reports the exact exit code of the last native program, 1 for a terminating error, and nothing after success', async () => {
      expect(await run(`& '${pwshPath}' -NoLogo -NoProfile -Command 'exit 3'`)).toBe('[exit code: 3]');
      expect(await run('/bin/sh -c \'exit 7\'; "last=$LASTEXITCODE"')).toBe('last=7\n[exit code: 7]');
      expect(await run('/bin/false')).toBe('[exit code: 1]');
      expect(await run("throw 'boom'")).toBe('[exit code: 1]');
      expect(await run('Get-Item /nonexistent-ew')).toBe("Get-Item: Cannot find path '/nonexistent-ew' because it does not exist.");
      expect(await run('"fine"')).toBe('fine');
    }, 90_000);

    test('clips large output to its first 16,000 characters with the notice', async () => {
      const lines = Array.from({ length: 3000 }, (_unused, index) => `line ${index + 1}`).join('\n');
      const result = await run('1..3000 | ForEach-Object { "line $_" }');
      expect(result.slice(0, 16_000)).toBe(lines.slice(0, 16_000));
      expect(result.slice(16_000)).toMatch(/^<response clipped><NOTE>[^\n]*Select-String[^\n]*<\/NOTE>$/);
    }, 60_000);

    test('reports the exit of the shell and starts a fresh one on the next call', async () => {
      await run('Set-Location /usr');
      expect(await run('exit 4')).toBe(`[shell exited: code 4]\n${RESET_NOTICE}`);
      expect(await run('(Get-Location).Path; "[$env:EW_STATE]"')).toBe('/tmp\n[]');
    }, 90_000);

    test('interrupts a running native command with a real SIGINT and keeps the shell', async () => {
      const snapshot = await harness.terminals.spawn(harness.owner as never, { type: 'shell' });
      const scrollback = (): string => harness.terminals.read(harness.owner as never, snapshot.sessionId, { offset: 0, count: 50 }).text;
      const send = (text: string, signal?: AbortSignal) =>
        harness.terminals.startSend(harness.owner as never, snapshot.sessionId, { text, submit: true, ...(signal === undefined ? {} : { signal }) }).done;
      // The backend typed its bootstrap (the UTF-8 setup and the prompt function) before pwsh had the terminal
      // in raw mode: the line discipline echoed it and turned its CR into LF, which PSReadLine takes as a new
      // line of the input, not as Enter. Start-up settled on that echo, which holds the text `dsh> `; the
      // bootstrap waits in the edit buffer, under pwsh's own prompt, until the next Enter runs it.
      expect(snapshot.motd).toContain("'dsh> ' }");
      await waitFor("pwsh's own prompt", () => scrollback().includes('PS /tmp> '), 30_000);
      expect(scrollback()).not.toMatch(/\ndsh> $/);
      await send('');
      await waitFor('the prompt of the bootstrap', () => /\ndsh> $/.test(scrollback()), 30_000);
      // A send can also settle mid-line, as stdin_read on pwsh waiting for a cursor answer; so each step
      // below waits for what the shell printed, ending at its prompt.
      const atPrompt = (output: string) =>
        waitFor(`${JSON.stringify(output)} and the prompt`, () => new RegExp(`\\n${output}\\ndsh> $`).test(scrollback()), 30_000);
      await send("Set-Location /usr; 'moved'");
      await atPrompt('moved');
      const controller = new AbortController();
      const sleeping = send('/usr/bin/sleep 30', controller.signal);
      await waitFor('sleep in the foreground', () => asleepInForeground(snapshot.pid!, 'sleep'), 20_000);
      controller.abort();
      expect((await sleeping).sessionStatus.kind).toBe('running');
      await waitFor('sleep to end', () => !sessionProcesses(snapshot.pid!).some((process) => process.comm === 'sleep'), 10_000);
      await send('"cwd=$((Get-Location).Path) last=$LASTEXITCODE"');
      await atPrompt('cwd=/usr last=130');
      await harness.terminals.kill(harness.owner as never, snapshot.sessionId, 'test done');
      expect(sessionPids(snapshot.pid!)).toEqual([]);
    }, 90_000);

    test('cancelling a tool call ends its shell; the next call runs in a fresh one', async () => {
      await run('Set-Location /usr');
      const [session] = harness.terminals.list(harness.owner as never);
      const controller = new AbortController();
      const call = run('Start-Sleep -Seconds 30', controller.signal);
      await sleep(1000);
      controller.abort(new Error('cancelled by the test'));
      await expect(call).rejects.toThrow('cancelled by the test');
      expect(sessionPids(session!.pid!)).toEqual([]);
      expect(await run('(Get-Location).Path')).toBe('/tmp');
    }, 90_000);
  });
});
