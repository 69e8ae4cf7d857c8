/**
 * The real DeepSeek harness packages — the ctx.terminals registry,
 * dsh-terminal-bash and dsh-tool-bash-persistent — composed over our
 * ctx.subprocess plugins, local and remote: the same scenarios give the same
 * wait reasons, outputs and exit codes, and closing leaves no process on the
 * daemon's host.
 */
import '../helpers/with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import { TerminalSessionService } from '@deepseek-ai/dsh-terminal';
import * as terminalBash from '@deepseek-ai/dsh-terminal-bash';
import * as toolBashPersistent from '@deepseek-ai/dsh-tool-bash-persistent';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteSubprocess } from '@execworld/sdk/dsh';
import { LocalSubprocess } from '@execworld/service/dsh';
import { sessionPids } from '../helpers/proc.ts';
import { ALICE, startDaemon, type TestDaemon } from '../helpers/daemon.ts';

interface Tool {
  execute(args: { command: string }, exec: { agent: unknown; signal: AbortSignal }): Promise<string>;
}

interface Harness {
  readonly root: Context;
  readonly owner: { id: string; ctx: Context; session: { header: { cwd: string }; events: unknown[] } };
  readonly bash: Tool;
  readonly terminals: TerminalSessionService;
  close(): Promise<void>;
}

/** The minimal harness around ctx.subprocess: an agent registry, a sandbox policy, a tool registry. */
async function compose(subprocess: (root: Context) => PromiseLike<unknown>): Promise<Harness> {
  const root = new Context();
  const owner = { id: 'agent-1', ctx: root, session: { header: { cwd: '/tmp' }, events: [] as unknown[] } };
  const tools = new Map<string, Tool>();
  root.provide('agents', { get: (id: string) => (id === owner.id ? owner : undefined) } as never);
  root.provide('sandboxPolicy', { defaultMode: 'danger-full-access', workspaceRoot: '/tmp', resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp' }) } as never);
  root.provide('tools', { register: (tool: Tool & { name: string }) => (tools.set(tool.name, tool), () => tools.delete(tool.name)) } as never);
  await subprocess(root);
  await root.plugin(TerminalSessionService);
  await root.plugin(terminalBash, { shellPath: '/bin/bash', disposeGraceMs: 1000, idleSilenceMs: 3000 });
  await root.plugin(toolBashPersistent, { timeoutMs: 20_000 });
  const terminals = (root as unknown as { terminals: TerminalSessionService }).terminals;
  return {
    root,
    owner,
    bash: tools.get('bash')!,
    terminals,
    close: async () => {
      await root.fiber.dispose();
    },
  };
}

let daemon: TestDaemon;
beforeAll(async () => {
  daemon = await startDaemon();
});
afterAll(() => daemon.close());

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

  it('settles echo hi and cat as stdin_read, interrupts with a real SIGINT, and closes without leftovers', async () => {
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

  it('runs the persistent bash tool with exact output, exit codes and shell state', async () => {
    expect(await run('echo hello')).toBe('hello');
    expect(await run('(exit 42)')).toBe('[exit code: 42]');
    expect(await run('false')).toBe('[exit code: 1]');
    await run('cd /usr && export EW_STATE=kept');
    expect(await run('pwd; echo "$EW_STATE"')).toBe('/usr\nkept');
    expect(await run("cat <<'EOF'\nline one\n  line two\nEOF")).toBe('line one\n  line two');
    expect(await run('printf "a%.0s" $(seq 1 3); echo')).toBe('aaa');
  });

  it('returns the partial output of an interactive child waiting for input, and keeps the shell', async () => {
    // cat runs in a group of its own, so the input wait is new evidence at once.
    const partial = await run('echo before; cat');
    expect(partial).toContain('before');
    const [session] = harness.terminals.list(harness.owner as never);
    expect(sessionPids(session!.pid!).length).toBeGreaterThan(1);
    // End cat with a real SIGINT; the shell takes the next command as before.
    await harness.terminals.signal(harness.owner as never, session!.sessionId, 'SIGINT');
    const settled = await harness.terminals.startSend(harness.owner as never, session!.sessionId, { text: '', submit: false }).done;
    expect(settled.waitReason).toBe('stdin_read');
    expect(await run('echo after')).toBe('after');
  });

  it('resets the shell when it exits, with the exit reported', async () => {
    const exited = await run('exit 9');
    expect(exited).toContain('[shell exited: code 9]');
    expect(await run('echo back')).toBe('back');
  });
});
