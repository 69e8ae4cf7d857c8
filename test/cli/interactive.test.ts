/**
 * `execworld shell`, `attach` and `exec --tty` in a real terminal: tmux runs
 * the command in a pane, types into it, resizes its window and reads its
 * screen, as a person at a terminal would.
 *
 * tmux is needed: .ci/run installs it. On CI (CI set) a missing tmux fails
 * these tests; elsewhere they are skipped, with the reason in their title.
 */
import { readFileSync } from 'node:fs';
import { describe, expect } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { cliEnv, Tmux, tmuxUnavailable } from '../helpers/cli.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const skip = tmuxUnavailable !== undefined && process.env.CI === undefined;

let daemon: TestDaemon;
let tmux: Tmux;
let env: NodeJS.ProcessEnv;

const test = daemonTest();

/** The owner's terminals the daemon lists. */
async function terminals(): Promise<{ id: string; status: string; rows: number; cols: number }[]> {
  return (await daemon.request('GET', '/v1/terminals')).body.terminals;
}

/** Everything the terminal printed so far, as the daemon keeps it. */
async function terminalOutput(id: string): Promise<string> {
  const read = (await daemon.request('GET', `/v1/terminals/${id}/output?from=0&waitMs=0`)).body;
  return Buffer.from(read.data, 'base64').toString();
}

/** Lines of a screen, without the blank ones. */
const lines = (screen: string): string[] => screen.split('\n').filter((line) => line.trim() !== '');

describe.skipIf(skip)(`in a terminal${skip ? ` (skipped: ${tmuxUnavailable})` : ''}`, () => {
  // Inside the suite tmux runs: where it is skipped, no daemon is started.
  test.beforeAll(({ daemon: fileDaemon }) => {
    if (tmuxUnavailable !== undefined) throw new Error(`cannot run the terminal tests on this CI host: ${tmuxUnavailable}`);
    daemon = fileDaemon;
    tmux = new Tmux();
    env = cliEnv(daemon.url, ALICE);
  });
  test.afterAll(async () => {
    await tmux?.close();
  });

  test('shell: type and see, the window size follows, Ctrl-P Ctrl-Q detaches, attach resumes with what came meanwhile, exit gives the status', async () => {
    // History stays out of the user's ~/.bash_history.
    await tmux.start('shell', ['shell', '--env', 'HISTFILE=/dev/null'], env, { cols: 100, rows: 30 });
    // The prompt shows once the command is connected, with this terminal in raw mode.
    await tmux.waitForScreen('shell', 'the prompt', (screen) => screen.trim() !== '');
    const [terminal] = await terminals();
    expect(terminal).toMatchObject({ status: 'running', rows: 30, cols: 100 });

    await tmux.type('shell', 'echo $((6*7))');
    await tmux.keys('shell', 'Enter');
    await tmux.waitForScreen('shell', 'the echo', (screen) => lines(screen).includes('42'));

    await tmux.resize('shell', { cols: 120, rows: 40 });
    await waitFor('the terminal to take the new size', async () => (await terminals()).some((each) => each.rows === 40 && each.cols === 120));
    await tmux.type('shell', 'stty size');
    await tmux.keys('shell', 'Enter');
    await tmux.waitForScreen('shell', 'stty size', (screen) => lines(screen).includes('40 120'));

    // A lone Ctrl-P is the program's: it gets it with the key after it.
    await tmux.type('shell', 'cat -v');
    await tmux.keys('shell', 'Enter');
    await waitFor('cat to run', async () => (await terminalOutput(terminal!.id)).includes('cat -v\r\n'));
    await tmux.keys('shell', 'C-p', 'x', 'Enter', 'C-d');
    await tmux.waitForScreen('shell', 'cat -v to show ^Px', (screen) => lines(screen).includes('^Px'));

    await tmux.keys('shell', 'C-p', 'C-q');
    expect(await tmux.exitStatus('shell')).toBe(0);
    const detached = await tmux.screen('shell');
    expect(detached).toContain(`detached from ${terminal!.id}`);
    expect((await terminals())[0]!.status).toBe('running');

    // Typed and printed while nobody is attached.
    await daemon.request('POST', `/v1/terminals/${terminal!.id}/input`, { body: { data: 'echo made-$((20+3))-meanwhile\r' } });
    // Generous: on a loaded machine bash takes its time back from cat and to the line.
    await waitFor('the echo made while detached', async () => (await terminalOutput(terminal!.id)).includes('made-23-meanwhile'), 60_000);

    await tmux.start('again', ['attach', terminal!.id], env, { cols: 120, rows: 40 });
    const resumed = await tmux.waitForScreen('again', 'the replay', (screen) => lines(screen).includes('made-23-meanwhile'));
    // The replay starts at the terminal's first byte: what came before the detach is there too.
    expect(lines(resumed)).toContain('42');
    await tmux.type('again', 'exit 7');
    await tmux.keys('again', 'Enter');
    expect(await tmux.exitStatus('again')).toBe(7);
    expect((await terminals())[0]).toMatchObject({ status: 'exited' });
  }, 120_000);

  test('shell: closing the window (SIGHUP) detaches, and the shell runs on', async () => {
    const before = new Set((await terminals()).map((each) => each.id));
    await tmux.start('closed', ['shell', '--env', 'HISTFILE=/dev/null'], env, { cols: 80, rows: 24 });
    await tmux.waitForScreen('closed', 'the prompt', (screen) => screen.trim() !== '');
    const [terminal] = (await terminals()).filter((each) => !before.has(each.id));
    // The pane's shell runs the command as its child.
    const shell = Number((await tmux.tmux('display-message', '-p', '-t', 'closed', '#{pane_pid}')).trim());
    const command = Number(readFileSync(`/proc/${shell}/task/${shell}/children`, 'utf8').trim().split(' ')[0]);
    expect(pidAlive(command)).toBe(true);
    await tmux.tmux('kill-session', '-t', 'closed');
    await waitFor('the command to exit', () => !pidAlive(command));
    // The terminal still runs and still takes input.
    await daemon.request('POST', `/v1/terminals/${terminal!.id}/input`, { body: { data: 'echo still-$((4*4))\r' } });
    await waitFor('the shell to answer', async () => (await terminalOutput(terminal!.id)).includes('still-16'));
    expect((await daemon.request('GET', `/v1/terminals/${terminal!.id}`)).body.status).toBe('running');
    await daemon.request('DELETE', `/v1/terminals/${terminal!.id}`);
  }, 120_000);

  test('exec --tty: the program sees a terminal of the window size, keys reach it raw, and its status is the exit status', async () => {
    const before = new Set((await terminals()).map((each) => each.id));
    await tmux.start('sized', ['exec', '--tty', '--', 'sh', '-c', 'stty size; test -t 0 && echo on-a-tty; exit 3'], env, { cols: 90, rows: 25 });
    expect(await tmux.exitStatus('sized')).toBe(3);
    expect(lines(await tmux.screen('sized'))).toEqual(expect.arrayContaining(['25 90', 'on-a-tty']));

    // Ctrl-C is a byte for the program's terminal, whose driver interrupts it: the command itself is not interrupted.
    await tmux.start('interrupted', ['exec', '-t', 'sh', '-c', 'echo ready; exec sleep 300'], env, { cols: 80, rows: 24 });
    await tmux.waitForScreen('interrupted', 'the program to start', (screen) => lines(screen).includes('ready'));
    await tmux.keys('interrupted', 'C-c');
    expect(await tmux.exitStatus('interrupted')).toBe(128 + 2);
    // exec forgets its terminals once they ended.
    expect((await terminals()).filter((each) => !before.has(each.id))).toEqual([]);
  }, 120_000);

  test("exec --tty takes the limit flags, and --usage prints the terminal's usage after it ended", async ({ startDaemon }) => {
    const limited = await startDaemon({ containment: 'cgroup' });
    const pidsMax = 'cat /sys/fs/cgroup/pids$(grep :pids: /proc/self/cgroup | cut -d: -f3)/pids.max';
    // The file is read once a line was typed, after the create: the spawn's instant holds the limit higher.
    await tmux.start('limited', ['exec', '-t', '--pids-limit', '30', '--usage', '--', 'sh', '-c', `read _ && ${pidsMax}; exit 4`], cliEnv(limited.url, ALICE), {
      cols: 200,
      rows: 24,
    });
    await tmux.type('limited', 'go');
    await tmux.keys('limited', 'Enter');
    expect(await tmux.exitStatus('limited')).toBe(4);
    const screen = lines(await tmux.screen('limited'));
    expect(screen).toContain('30');
    expect(screen).toEqual(
      expect.arrayContaining([expect.stringMatching(/^execworld: usage cpu_user_ms=\d+ .* peak_scope=session limit_hit=- oom_killed=false$/)]),
    );
  }, 120_000);
});
