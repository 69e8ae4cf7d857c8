/**
 * The real DeepSeek harness packages — the ctx.terminals registry,
 * dsh-terminal-bash and dsh-tool-bash-persistent — composed over our
 * ctx.subprocess plugins, local and remote: the same scenarios give the same
 * wait reasons, outputs and exit codes, and closing leaves no process on the
 * daemon's host.
 */
import '../helpers/with-resolvers.ts';
import type { Context } from '@deepseek-ai/cordis';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import { LocalSubprocess } from '@execworld/service/dsh';
import { sessionPids } from '../helpers/proc.ts';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { compose, type Harness } from '../helpers/dsh-harness.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

const providers = [
  ['local', (root: Context) => root.plugin(LocalSubprocess, {})],
  ['remote', (root: Context) => root.plugin(RemoteSubprocess, { url: daemon.url, token: ALICE })],
] as const;

describe.each(providers)('the harness over the %s plugin', (_name, subprocess) => {
  let harness: Harness;
  beforeAll(async () => {
    harness = await compose(subprocess);
  });
  afterAll(() => harness.close());

  const run = (command: string): Promise<string> => harness.bash.execute({ command }, { agent: harness.owner, signal: AbortSignal.timeout(30_000) });

  test('settles echo hi and cat as stdin_read, interrupts with a real SIGINT, and closes without leftovers', async () => {
    const snapshot = await harness.terminals.spawn(harness.owner as never, { type: 'shell' });
    expect(snapshot.motd).toContain('dsh> ');
    const echo = await harness.terminals.startSend(harness.owner as never, snapshot.sessionId, { text: 'echo hi', submit: true }).done;
    expect(echo.waitReason).toBe('stdin_read');
    expect(echo.viewport).toContain('hi\n');
    const cat = await harness.terminals.startSend(harness.owner as never, snapshot.sessionId, { text: 'cat', submit: true }).done;
    expect(cat.waitReason).toBe('stdin_read');
    const controller = new AbortController();
    const sleeping = harness.terminals.startSend(harness.owner as never, snapshot.sessionId, { text: '', submit: false, signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    expect((await sleeping.done).waitReason).toBe('stdin_read');
    const after = await harness.terminals.startSend(harness.owner as never, snapshot.sessionId, { text: 'echo "after=$?"', submit: true }).done;
    expect(after.viewport).toContain('after=130');
    const pid = snapshot.pid!;
    expect(sessionPids(pid)).toContain(pid);
    await harness.terminals.kill(harness.owner as never, snapshot.sessionId, 'test done');
    expect(sessionPids(pid)).toEqual([]);
  });

  test('runs the persistent bash tool with exact output, exit codes and shell state', async () => {
    expect(await run('echo hello')).toBe('hello');
    expect(await run('(exit 42)')).toBe('[exit code: 42]');
    expect(await run('false')).toBe('[exit code: 1]');
    await run('cd /usr && export EW_STATE=kept');
    expect(await run('pwd; echo "$EW_STATE"')).toBe('/usr\nkept');
    expect(await run("cat <<'EOF'\nline one\n  line two\nEOF")).toBe('line one\n  line two');
    expect(await run('printf "a%.0s" $(seq 1 3); echo')).toBe('aaa');
  });

  test('returns the partial output of an interactive child waiting for input, and keeps the shell', async () => {
    // cat runs in a group of its own, so the input wait is new evidence at once.
    const partial = await run('echo before; cat');
    expect(partial).toContain('before');
    const [session] = harness.terminals.list(harness.owner as never);
    expect(sessionPids(session!.pid!).length).toBeGreaterThan(1);
    // End cat with a real SIGINT; the shell takes the next command as before. (An empty
    // send right after the signal is no test of that: whether the harness settles it as
    // stdin_read or inferred_idle depends on whether its first look comes before the
    // shell is back at its prompt, as a wait that was there before a send is no readiness.)
    await harness.terminals.signal(harness.owner as never, session!.sessionId, 'SIGINT');
    await waitFor('cat to end', () => sessionPids(session!.pid!).length === 1);
    expect(await run('echo after')).toBe('after');
  });

  test('resets the shell when it exits, with the exit reported', async () => {
    const exited = await run('exit 9');
    expect(exited).toContain('[shell exited: code 9]');
    expect(await run('echo back')).toBe('back');
  });
});
