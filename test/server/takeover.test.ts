/**
 * A daemon upgraded in place (`execworld serve --takeover`, an exec of the
 * new build in the same process) keeps its port, its terminals, its managed
 * processes and its persistent shells: the same pids, every stream
 * byte-exact across the takeover, input applied once, the exact exit codes of
 * programs that end under the new image, a shell's command answered with its
 * exact status. A new build that fails its rehearsal leaves the old image
 * serving, with nothing lost.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect } from 'vitest';
import { WebSocket } from 'ws';
import { connect as connectSdk } from '@execworld/sdk';
import { WS_SUBPROTOCOL } from '@execworld/sdk/protocol';
import { PersistentShell } from '@execworld/sdk/shell';
import { BIN, callDaemon, type DaemonProcess } from '../helpers/daemon-process.ts';
import { cliEnv, EXIT_MARK, Tmux, tmuxUnavailable } from '../helpers/cli.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { contiguous, control, counter, outputOf, processCounter, processOutput, repeatTakeovers, requestTakeover } from '../helpers/takeover.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest();

/**
 * Follows terminal `id` by offset with long polls, as a client does, through
 * refused and reset requests, noting when each byte arrived; `longestPauseMs`
 * is the longest time between two arrivals.
 */
function follow(daemon: DaemonProcess, id: string): { stop(): Promise<void>; longestPauseMs(): number } {
  let running = true;
  let last: number | undefined;
  let longest = 0;
  const loop = (async () => {
    let from = 0;
    while (running) {
      try {
        const read = await callDaemon(daemon, 'GET', `/v1/terminals/${id}/output?from=${from}&waitMs=2000`);
        if (read.next > from) {
          const now = performance.now();
          if (last !== undefined) longest = Math.max(longest, now - last);
          last = now;
        }
        from = read.next;
        if (read.ended) return;
      } catch (_error) {
        // The takeover's exec resets the connection: the client asks again.
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
    longestPauseMs: () => longest,
  };
}

/** Each takeover starts a new build twice (its rehearsal, then its exec): seconds each on a busy host. */
describe('serve --takeover', { timeout: 120_000 }, () => {
  test('keeps every terminal: same pids, byte-exact streams, exact exit codes', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const stop = join(stateDir, 'stop');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const codes = [3, 4, 5];
    const terminals: { id: string; pid: number }[] = [];
    for (const code of codes) terminals.push(await callDaemon(daemon, 'POST', '/v1/terminals', counter(stop, code)));
    for (const { id } of terminals) await waitFor('output to flow', async () => (await callDaemon(daemon, 'GET', `/v1/terminals/${id}`)).output.end > 100);
    // One that ended before: its exit facts and output are kept too.
    const ended = await callDaemon(daemon, 'POST', '/v1/terminals', { argv: ['sh', '-c', 'echo ended-before; exit 9'], rows: 24, cols: 80 });
    expect((await callDaemon(daemon, 'GET', `/v1/terminals/${ended.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: 9, signal: null });
    await waitFor('its session to be swept', async () => (await callDaemon(daemon, 'GET', `/v1/terminals/${ended.id}`)).treeExited === true);
    // A writer's sequence numbers are kept: a retry of a write applied before is not applied again after.
    const echo = await callDaemon(daemon, 'POST', '/v1/terminals', { argv: ['cat'], rows: 24, cols: 80 });
    expect(await callDaemon(daemon, 'POST', `/v1/terminals/${echo.id}/input`, { data: 'first\n', writer: 'w-1', seq: 1 })).toEqual({ applied: true, seq: 1 });
    const before = await control(stateDir, { op: 'status' });
    const healthBefore = (await callDaemon(daemon, 'GET', '/v1/health')).daemon;
    expect(healthBefore).toMatchObject({ takeovers: 0 });
    expect(healthBefore).not.toHaveProperty('lastTakeover');
    const follower = follow(daemon, terminals[0]!.id);
    // A WebSocket client is told to come back: 1012, service restart.
    const socket = new WebSocket(`${daemon.url.replace(/^http/, 'ws')}/v1/connect`, [WS_SUBPROTOCOL], { headers: { authorization: `Bearer ${daemon.token}` } });
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const closed = new Promise<number>((resolve) => socket.once('close', resolve));

    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
    expect(outcome.stdout).toMatch(/runs this build now: 5 sessions kept/);
    expect(await closed).toBe(1012);

    // The same process, a new image.
    const after = await control(stateDir, { op: 'status' });
    expect(after[0]!.pid).toBe(daemon.pid);
    expect(after[0]!.imageStartedAt).not.toBe(before[0]!.imageStartedAt);
    expect(after[0]!.takeovers).toBe(1);
    // Health and metrics tell the daemon's start, kept, and the takeover.
    const { pauseMs } = after[0]!.lastTakeover as { pauseMs: number };
    const healthAfter = (await callDaemon(daemon, 'GET', '/v1/health')).daemon;
    expect(healthAfter.startedAt).toBe(healthBefore.startedAt);
    expect(Date.parse(healthAfter.imageStartedAt)).toBeGreaterThan(Date.parse(healthBefore.imageStartedAt));
    expect(healthAfter).toMatchObject({ takeovers: 1, lastTakeover: { sessions: 5, pauseMs } });
    expect(Date.parse(healthAfter.lastTakeover.at)).toBeGreaterThan(Date.parse(healthBefore.imageStartedAt));
    const metrics = await (await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${daemon.token}` } })).text();
    const metric = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
    expect(metric('execworld_takeovers_total')).toBe(1);
    expect(metric('execworld_daemon_start_time_seconds')).toBe(Date.parse(healthBefore.startedAt) / 1000);
    expect(metric('execworld_last_takeover_pause_seconds')).toBe(pauseMs / 1000);
    for (const { id, pid } of terminals) {
      const info = await callDaemon(daemon, 'GET', `/v1/terminals/${id}`);
      expect(info.pid).toBe(pid);
      expect(info.status).toBe('running');
    }
    const kept = await callDaemon(daemon, 'GET', `/v1/terminals/${ended.id}`);
    expect([kept.status, kept.exit, kept.treeExited]).toEqual(['exited', { exitCode: 9, signal: null }, true]);
    expect((await outputOf(daemon, ended.id)).text).toContain('ended-before');
    expect(await callDaemon(daemon, 'POST', `/v1/terminals/${echo.id}/input`, { data: 'first\n', writer: 'w-1', seq: 1 })).toEqual({ applied: false, seq: 1 });
    expect(await callDaemon(daemon, 'POST', `/v1/terminals/${echo.id}/input`, { data: 'second\n', writer: 'w-1', seq: 2 })).toEqual({ applied: true, seq: 2 });
    await waitFor('cat to answer', async () => (await outputOf(daemon, echo.id)).text.split('second').length === 3);
    // Each line twice: the terminal's echo, then cat's.
    expect((await outputOf(daemon, echo.id)).text.split('first').length).toBe(3);
    // The screen is rebuilt from the retained output: what was printed before the takeover is on it.
    expect(JSON.stringify(await callDaemon(daemon, 'GET', `/v1/terminals/${echo.id}/screen`)).split('first').length).toBe(3);
    // Output flows on under the new image.
    const ends = await Promise.all(terminals.map(async ({ id }) => (await callDaemon(daemon, 'GET', `/v1/terminals/${id}`)).output.end as number));
    for (const [index, { id }] of terminals.entries())
      await waitFor('output after the takeover', async () => (await callDaemon(daemon, 'GET', `/v1/terminals/${id}`)).output.end > ends[index]! + 100);

    writeFileSync(stop, '');
    for (const [index, { id }] of terminals.entries()) {
      const done = await callDaemon(daemon, 'GET', `/v1/terminals/${id}/done?timeoutMs=20000`);
      expect(done.exit).toEqual({ exitCode: codes[index], signal: null });
      const { text, ended } = await outputOf(daemon, id);
      expect(ended).toBe(true);
      contiguous(text);
    }
    await follower.stop();
    console.log(
      `takeover: the daemon reported ${String((after[0]!.lastTakeover as { pauseMs: number }).pauseMs)} ms from the old image's last read to the new one listening; ` +
        `a client following by offset saw at most ${follower.longestPauseMs().toFixed(0)} ms between two chunks`,
    );
  });

  test('keeps every managed process: same pids, byte-exact stdout and stderr, stdin once, exact exit codes and signals', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const stop = join(stateDir, 'stop');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const codes = [3, 4];
    const counters: { id: string; pid: number }[] = [];
    for (const code of codes) counters.push(await callDaemon(daemon, 'POST', '/v1/processes', processCounter(stop, code)));
    for (const { id } of counters)
      await waitFor('output to flow', async () => {
        const info = await callDaemon(daemon, 'GET', `/v1/processes/${id}`);
        return info.stdout.end > 100 && info.stderr.end > 100;
      });
    // A program reading its stdin: what was written before the takeover and after reaches it once each.
    const cat = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['cat'], stdio: { stdin: 'pipe' } });
    expect(await callDaemon(daemon, 'POST', `/v1/processes/${cat.id}/stdin`, { data: 'before\n', writer: 'w-1', seq: 1 })).toEqual({ applied: true, seq: 1 });
    await waitFor('cat to echo', async () => (await processOutput(daemon, cat.id, 'stdout')).text === 'before\n');
    // One whose stdin was closed before: it stays closed.
    const closed = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['sh', '-c', 'cat; echo stdin-ended; sleep 60'], stdio: { stdin: 'pipe' } });
    await callDaemon(daemon, 'POST', `/v1/processes/${closed.id}/stdin/close`);
    await waitFor('its end of file', async () => (await processOutput(daemon, closed.id, 'stdout')).text === 'stdin-ended\n');
    // One that ended before: its exit facts and output are kept.
    const ended = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['sh', '-c', 'echo ended-before; echo on-stderr >&2; exit 9'] });
    expect((await callDaemon(daemon, 'GET', `/v1/processes/${ended.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: 9, signal: null });
    await waitFor('its tree to be gone', async () => (await callDaemon(daemon, 'GET', `/v1/processes/${ended.id}`)).treeExited === true);

    // A command of POST /v1/run whose caller waits when the daemon execs: its caller goes, so it ends.
    const run = callDaemon(daemon, 'POST', '/v1/run', { argv: ['sleep', '300'] }).catch(() => undefined);
    const held = new Set([...counters, cat, closed, ended].map(({ id }) => id));
    let runProcess: { id: string; pid: number } | undefined;
    await waitFor('the run to start', async () => {
      runProcess = ((await callDaemon(daemon, 'GET', '/v1/processes')).processes as { id: string; pid: number }[]).find(({ id }) => !held.has(id));
      return runProcess !== undefined;
    });

    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
    // Six processes handed over: the two counters, cat, the closed one, the ended one and the run's.
    expect(outcome.stdout).toMatch(/runs this build now: 6 sessions kept/);
    await run;
    await waitFor('the run to end with its caller', async () => {
      const listed = ((await callDaemon(daemon, 'GET', '/v1/processes')).processes as { id: string }[]).some(({ id }) => id === runProcess!.id);
      return !listed && !pidAlive(runProcess!.pid);
    });

    for (const { id, pid } of [...counters, cat, closed]) {
      const info = await callDaemon(daemon, 'GET', `/v1/processes/${id}`);
      expect([info.pid, info.status]).toEqual([pid, 'running']);
    }
    const kept = await callDaemon(daemon, 'GET', `/v1/processes/${ended.id}`);
    expect([kept.pid, kept.status, kept.exit, kept.treeExited]).toEqual([ended.pid, 'exited', { exitCode: 9, signal: null }, true]);
    expect((await processOutput(daemon, ended.id, 'stdout')).text).toBe('ended-before\n');
    expect((await processOutput(daemon, ended.id, 'stderr')).text).toBe('on-stderr\n');
    // A retried write of before is known; the next is applied, once.
    expect(await callDaemon(daemon, 'POST', `/v1/processes/${cat.id}/stdin`, { data: 'before\n', writer: 'w-1', seq: 1 })).toEqual({ applied: false, seq: 1 });
    expect(await callDaemon(daemon, 'POST', `/v1/processes/${cat.id}/stdin`, { data: 'after\n', writer: 'w-1', seq: 2 })).toEqual({ applied: true, seq: 2 });
    expect((await callDaemon(daemon, 'GET', `/v1/processes/${cat.id}`)).stdinOpen).toBe(true);
    await callDaemon(daemon, 'POST', `/v1/processes/${cat.id}/stdin/close`);
    expect((await callDaemon(daemon, 'GET', `/v1/processes/${cat.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: 0, signal: null });
    expect(await processOutput(daemon, cat.id, 'stdout')).toEqual({ text: 'before\nafter\n', ended: true });
    // The closed stdin is still closed; the program's end by a signal is told exactly.
    expect((await callDaemon(daemon, 'GET', `/v1/processes/${closed.id}`)).stdinOpen).toBe(false);
    process.kill(closed.pid, 'SIGTERM');
    expect((await callDaemon(daemon, 'GET', `/v1/processes/${closed.id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: null, signal: 'SIGTERM' });
    // Output flows on under the new image, then each ends with its own code, every number once and in order.
    const ends = await Promise.all(counters.map(async ({ id }) => (await callDaemon(daemon, 'GET', `/v1/processes/${id}`)).stdout.end as number));
    for (const [index, { id }] of counters.entries())
      await waitFor('output after the takeover', async () => (await callDaemon(daemon, 'GET', `/v1/processes/${id}`)).stdout.end > ends[index]! + 100);
    writeFileSync(stop, '');
    for (const [index, { id }] of counters.entries()) {
      expect((await callDaemon(daemon, 'GET', `/v1/processes/${id}/done?timeoutMs=20000`)).exit).toEqual({ exitCode: codes[index], signal: null });
      for (const stream of ['stdout', 'stderr'] as const) {
        const { text, ended: streamEnded } = await processOutput(daemon, id, stream);
        expect(streamEnded).toBe(true);
        contiguous(text);
      }
    }
  });

  test('keeps persistent shells: one in the middle of a command answers its exact status, an idle one runs on with its state', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const go = join(stateDir, 'go');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const idle = await callDaemon(daemon, 'POST', '/v1/shells', { dialect: 'bash', cwd: stateDir });
    expect(await callDaemon(daemon, 'POST', `/v1/shells/${idle.id}/run`, { command: 'KEPT=kept-before; cd /tmp' })).toMatchObject({
      reason: 'completed',
      exitCode: 0,
    });
    const busy = await callDaemon(daemon, 'POST', '/v1/shells', { dialect: 'bash', cwd: stateDir });
    const idleTerminal = (await callDaemon(daemon, 'GET', `/v1/terminals/${idle.terminalId}`)).pid as number;
    const busyTerminal = (await callDaemon(daemon, 'GET', `/v1/terminals/${busy.terminalId}`)).pid as number;
    // A run whose caller is still waiting when the daemon execs: it prints, then waits for a file, then ends with 3.
    const pending = callDaemon(daemon, 'POST', `/v1/shells/${busy.id}/run`, {
      command: `echo printed-before; while [ ! -e ${go} ]; do sleep 0.05; done; echo printed-after; (exit 3)`,
    }).then(
      (answer: unknown) => ({ answer }),
      (error: unknown) => ({ error }),
    );
    await waitFor('the command to run', async () => (await outputOf(daemon, busy.terminalId)).text.includes('printed-before\r\n'));

    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);
    // The call's connection went with the old image; the run it waited for is open, and wait answers it.
    expect(await pending).toHaveProperty('error');
    expect((await callDaemon(daemon, 'GET', `/v1/shells/${busy.id}`)).state).toBe('open');
    expect((await callDaemon(daemon, 'GET', `/v1/terminals/${busy.terminalId}`)).pid).toBe(busyTerminal);
    writeFileSync(go, '');
    const answer = await callDaemon(daemon, 'POST', `/v1/shells/${busy.id}/wait`, { timeoutMs: 20_000 });
    expect([answer.reason, answer.exitCode, answer.signal]).toEqual(['completed', 3, null]);
    expect(answer.output).toBe('printed-before\nprinted-after\n');
    const history = await callDaemon(daemon, 'GET', `/v1/shells/${busy.id}/history`);
    expect(history.runs.at(-1)).toMatchObject({ state: 'completed', exitCode: 3 });
    // The same shell runs the next command.
    expect(await callDaemon(daemon, 'POST', `/v1/shells/${busy.id}/run`, { command: 'false' })).toMatchObject({ reason: 'completed', exitCode: 1 });
    // The idle one: the same shell process, its variables and working directory kept.
    expect((await callDaemon(daemon, 'GET', `/v1/terminals/${idle.terminalId}`)).pid).toBe(idleTerminal);
    const next = await callDaemon(daemon, 'POST', `/v1/shells/${idle.id}/run`, { command: 'echo "$KEPT $PWD"; (exit 4)' });
    expect([next.reason, next.exitCode, next.output]).toEqual(['completed', 4, 'kept-before /tmp\n']);
  });

  test('two SDK clients ride through with twenty sessions printing: every stream resumes from its offset with nothing lost or repeated, a wait is proven again', async ({
    spawnDaemon,
  }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const stop = join(stateDir, 'stop');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const first = await connectSdk(daemon.url, { token: daemon.token });
    const second = await connectSdk(daemon.url, { token: daemon.token });
    const text = (): { value: string } => ({ value: '' });
    try {
      const terminals = [];
      const processes = [];
      // Twenty counters at 20 lines a second each: every line is a fork of sleep, and faster ones would take the machine from the daemon.
      const loop = (code: number, both: boolean): string[] => [
        'sh',
        '-c',
        `i=0; while [ ! -e ${stop} ]; do i=$((i+1)); echo $i; ${both ? 'echo $i >&2; ' : ''}sleep 0.05; done; exit ${code}`,
      ];
      for (let index = 0; index < 10; index += 1) {
        terminals.push(await first.spawnTerminal({ argv: loop(10 + index, false), cwd: stateDir, rows: 24, cols: 80, graceMs: 1000 }));
        processes.push(first.spawn({ argv: loop(20 + index, true), cwd: stateDir, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 }));
      }
      // The first client reads every stream through its own handles; the second follows each terminal from its start.
      const seen = {
        terminals: terminals.map((terminal) => {
          const read = text();
          terminal.output.on('data', (chunk: Buffer) => (read.value += chunk.toString('utf8')));
          return read;
        }),
        followed: [] as { value: string }[],
        stdout: processes.map((process) => {
          const read = text();
          process.stdout!.on('data', (chunk: Buffer) => (read.value += chunk.toString('utf8')));
          return read;
        }),
        stderr: processes.map((process) => {
          const read = text();
          process.stderr!.on('data', (chunk: Buffer) => (read.value += chunk.toString('utf8')));
          return read;
        }),
      };
      const followers = await Promise.all(terminals.map((terminal) => second.attachTerminal(terminal.id, { from: 0 })));
      for (const follower of followers) {
        const read = text();
        follower.output.on('data', (chunk: Buffer) => (read.value += chunk.toString('utf8')));
        seen.followed.push(read);
      }
      // A program waiting for input: proven waiting before the takeover, and again after it.
      const reader = await first.spawnTerminal({ argv: ['sh', '-c', 'read line; echo "got $line"'], cwd: stateDir, rows: 24, cols: 80, graceMs: 1000 });
      let readerText = '';
      reader.output.on('data', (chunk: Buffer) => (readerText += chunk.toString('utf8')));
      await waitFor('the reader to wait', async () => (await reader.inspectForeground())?.inputWaiting === true);
      const all = (): { value: string }[] => [...seen.terminals, ...seen.followed, ...seen.stdout, ...seen.stderr];
      await waitFor('every stream to flow', () => all().every((read) => read.value.length > 20));
      const pids = { terminals: terminals.map((terminal) => terminal.pid), processes: processes.map((process) => process.pid) };

      const outcome = await requestTakeover(stateDir);
      expect(outcome.stderr).toBe('');
      expect(outcome.status).toBe(0);
      expect(outcome.stdout).toMatch(/runs this build now: 21 sessions kept/);

      const lengths = all().map((read) => read.value.length);
      await waitFor('every stream to flow on under the new image', () => all().every((read, index) => read.value.length > lengths[index]! + 20));
      await waitFor('the reader to be proven waiting again', async () => (await reader.inspectForeground())?.inputWaiting === true);
      await reader.write('hi\r');
      await waitFor('the reader to answer', () => readerText.includes('got hi'));
      expect(await reader.done).toEqual({ exitCode: 0, signal: null });

      writeFileSync(stop, '');
      for (const [index, terminal] of terminals.entries()) {
        expect(await terminal.done).toEqual({ exitCode: 10 + index, signal: null });
        expect(terminal.pid).toBe(pids.terminals[index]);
      }
      for (const [index, process] of processes.entries()) {
        expect(await process.done).toEqual({ exitCode: 20 + index, signal: null });
        expect(process.pid).toBe(pids.processes[index]);
      }
      for (const follower of followers) await follower.done;
      // Whole and in order on both clients: the same text, nothing lost or repeated across the takeover.
      for (const [index, read] of seen.terminals.entries()) {
        contiguous(read.value);
        expect(seen.followed[index]!.value).toBe(read.value);
      }
      for (const read of [...seen.stdout, ...seen.stderr]) contiguous(read.value);
    } finally {
      await first.dispose();
      await second.dispose();
    }
  });

  test("the SDK's own shell on a daemon's terminal rides through: a command in the middle of its run answers its exact status", async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const go = join(stateDir, 'go');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const runtime = await connectSdk(daemon.url, { token: daemon.token });
    try {
      // The engine runs here, in the SDK; its terminal is the daemon's, followed over the SDK's connection.
      const shell = await PersistentShell.start(runtime, { cwd: stateDir });
      const terminal = await shell.terminal;
      const run = shell.run(`echo printed-before; while [ ! -e ${go} ]; do sleep 0.05; done; echo printed-after; (exit 3)`, { timeoutMs: 60_000 });
      await waitFor('the command to run', async () =>
        (await outputOf(daemon, (await callDaemon(daemon, 'GET', '/v1/terminals')).terminals[0].id)).text.includes('printed-before\r\n'),
      );

      const outcome = await requestTakeover(stateDir);
      expect(outcome.status).toBe(0);
      writeFileSync(go, '');
      const answer = await run;
      expect([answer.reason, answer.exitCode, answer.output]).toEqual(['completed', 3, 'printed-before\nprinted-after\n']);
      expect((await shell.run('echo again')).output).toBe('again\n');
      expect((await shell.terminal).pid).toBe(terminal.pid);
      await shell.close();
    } finally {
      await runtime.dispose();
    }
  });

  test("a shell's run with a requestId, called over the SDK, is sent again after the takeover and answers its exact status", async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const go = join(stateDir, 'go');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const runtime = await connectSdk(daemon.url, { token: daemon.token });
    try {
      const shell = await runtime.call('shell.create', { dialect: 'bash', cwd: stateDir });
      const run = runtime.call('shell.run', {
        id: shell.id,
        command: `echo printed-before; while [ ! -e ${go} ]; do sleep 0.05; done; echo printed-after; (exit 3)`,
        requestId: 'run-across-the-takeover',
      });
      await waitFor('the command to run', async () => (await outputOf(daemon, shell.terminalId!)).text.includes('printed-before\r\n'));

      const outcome = await requestTakeover(stateDir);
      expect(outcome.status).toBe(0);
      writeFileSync(go, '');
      const answer = await run;
      expect([answer.reason, answer.exitCode, answer.output]).toEqual(['completed', 3, 'printed-before\nprinted-after\n']);
      const history = await runtime.call('shell.history', { id: shell.id });
      expect(history.runs.map((entry) => [entry.state, entry.exitCode])).toEqual([['completed', 3]]);
    } finally {
      await runtime.dispose();
    }
  });

  test('keeps an upload under way: the bytes sent before go on from their offset, and the file is published whole', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const target = join(mkdtempSync(join(tmpdir(), 'execworld-upload-')), 'file.bin');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const half = 1024 * 1024 + 5;
    const upload = await callDaemon(daemon, 'POST', '/v1/files/uploads', { path: target });
    const put = async (offset: number, body: Buffer): Promise<{ offset: number }> => {
      const response = await fetch(`${daemon.url}/v1/files/uploads/${upload.id}?offset=${offset}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/octet-stream' },
        body,
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { offset: number };
    };
    expect((await put(0, bytes.subarray(0, half))).offset).toBe(half);

    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);

    // The new image knows the upload and where it stands; the sender goes on from there.
    expect(await callDaemon(daemon, 'GET', `/v1/files/uploads/${upload.id}`)).toMatchObject({ id: upload.id, offset: half });
    expect((await put(half, bytes.subarray(half))).offset).toBe(bytes.length);
    const digest = await callDaemon(daemon, 'POST', `/v1/files/uploads/${upload.id}/complete`, {
      size: bytes.length,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    });
    expect(digest).toMatchObject({ size: bytes.length });
    expect(readFileSync(target).equals(bytes)).toBe(true);
    // Published: its stage is gone from beside the target.
    expect(readdirSync(dirname(target))).toEqual(['file.bin']);
  });

  test('a new build that fails its rehearsal leaves the old image serving, nothing lost', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const stop = join(stateDir, 'stop');
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const terminal = await callDaemon(daemon, 'POST', '/v1/terminals', counter(stop, 6));
    await waitFor('output to flow', async () => (await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}`)).output.end > 100);
    const before = await control(stateDir, { op: 'status' });
    const broken = join(stateDir, 'broken.js');
    writeFileSync(broken, "throw new Error('this build is broken');\n");

    const answer = await control(stateDir, { op: 'takeover', entry: broken });
    expect(answer).toHaveLength(1);
    expect(String(answer[0]!.error)).toMatch(/rehearsal: it exited with status 1: .*this build is broken/s);

    // The same image serves on, and the terminal's stream with it.
    const after = await control(stateDir, { op: 'status' });
    expect(after[0]!.imageStartedAt).toBe(before[0]!.imageStartedAt);
    const end = (await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}`)).output.end as number;
    await waitFor('output after the refused takeover', async () => (await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}`)).output.end > end + 100);
    writeFileSync(stop, '');
    const done = await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}/done?timeoutMs=20000`);
    expect(done.exit).toEqual({ exitCode: 6, signal: null });
    contiguous((await outputOf(daemon, terminal.id)).text);
  });

  test('repeated takeovers leave no zombie and no descriptor behind, with processes and a shell mid-command', { timeout: 180_000 }, async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    // Three here; twenty in test/server/takeover-repeat.test.ts (the slow lane).
    await repeatTakeovers(daemon, stateDir, 3);
  });

  test('refuses while a process collects its output, saying which, and takes over once it is gone', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const kept = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['sleep', '60'] });
    const collecting = await callDaemon(daemon, 'POST', '/v1/processes', { argv: ['sleep', '60'], stdio: { stdout: { maxBytes: 1024 } } });
    expect(await control(stateDir, { op: 'takeover', entry: BIN })).toEqual([
      { error: `process ${collecting.id} collects its output (stdio maxBytes), which is not handed over yet; delete it first` },
    ]);
    await callDaemon(daemon, 'DELETE', `/v1/processes/${collecting.id}`);
    const outcome = await requestTakeover(stateDir);
    expect([outcome.status, outcome.stderr]).toEqual([0, '']);
    expect((await callDaemon(daemon, 'GET', `/v1/processes/${kept.id}`)).pid).toBe(kept.pid);
  });

  test('refuses what it cannot take, saying why, and serves on', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir, '--containment', 'subreaper']);
    const terminal = await callDaemon(daemon, 'POST', '/v1/terminals', { argv: ['sleep', '30'], rows: 24, cols: 80 });
    const before = await control(stateDir, { op: 'status' });
    expect(await control(stateDir, { op: 'takeover', entry: BIN })).toEqual([{ error: 'sessions contained by subreaper are not handed over yet' }]);
    expect(await control(stateDir, { op: 'upgrade' })).toEqual([{ error: 'op must be status or takeover' }]);
    expect(await control(stateDir, { op: 'takeover', entry: 'bin/execworld.js' })).toEqual([
      { error: "entry must be the absolute path of the new build's execworld entry" },
    ]);
    const garbage = await new Promise<string>((resolve, reject) => {
      const socket = connect(join(stateDir, 'takeover.sock'));
      let text = '';
      socket.on('connect', () => socket.write('not json\n'));
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      socket.on('error', reject);
      socket.on('close', () => resolve(text));
    });
    expect(JSON.parse(garbage)).toEqual({ error: 'the request is not JSON' });
    // The same image serves on, its terminal with it.
    expect((await control(stateDir, { op: 'status' }))[0]!.imageStartedAt).toBe(before[0]!.imageStartedAt);
    expect((await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}`)).status).toBe('running');
  });
});

const noTmux = tmuxUnavailable !== undefined && process.env.CI === undefined;

describe.skipIf(noTmux)(`the CLI through a takeover${noTmux ? ` (skipped: ${tmuxUnavailable})` : ''}`, { timeout: 120_000 }, () => {
  test('execworld attach rides through: what is typed before and after is seen, and it stays attached', async ({ spawnDaemon }) => {
    if (tmuxUnavailable !== undefined) throw new Error(`cannot run the terminal test on this CI host: ${tmuxUnavailable}`);
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    const terminal = await callDaemon(daemon, 'POST', '/v1/terminals', { argv: ['sh'], rows: 24, cols: 80, env: { PS1: '$ ' } });
    const tmux = new Tmux();
    try {
      await tmux.start('attach', ['attach', terminal.id], cliEnv(daemon.url, daemon.token), { cols: 100, rows: 30 });
      await tmux.type('attach', 'echo before-$((20+1))');
      await tmux.keys('attach', 'Enter');
      await tmux.waitForScreen('attach', 'the echo before', (screen) => screen.includes('before-21'));

      const outcome = await requestTakeover(stateDir);
      expect(outcome.stderr).toBe('');
      expect(outcome.status).toBe(0);

      await tmux.type('attach', 'echo after-$((40+2))');
      await tmux.keys('attach', 'Enter');
      const screen = await tmux.waitForScreen('attach', 'the echo after', (text) => text.includes('after-42'));
      // Still attached: the CLI reconnected rather than ending (it would print its exit mark).
      expect(screen).not.toContain(EXIT_MARK);
      // Resumed from its offset: what was shown before is not shown again.
      expect(screen.split('before-21').length).toBe(2);
    } finally {
      await tmux.close();
      await callDaemon(daemon, 'DELETE', `/v1/terminals/${terminal.id}`).catch(() => undefined);
    }
  });
});
