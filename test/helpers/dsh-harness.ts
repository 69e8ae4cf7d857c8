/**
 * The minimal DeepSeek harness around a ctx.subprocess plugin: an agent
 * registry, a sandbox policy, a tool registry, the terminal registry,
 * dsh-terminal-bash and dsh-tool-bash-persistent. For tests and benchmarks.
 */
import './with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import { TerminalSessionService } from '@deepseek-ai/dsh-terminal';
import * as terminalBash from '@deepseek-ai/dsh-terminal-bash';
import * as toolBashPersistent from '@deepseek-ai/dsh-tool-bash-persistent';

export interface Tool {
  execute(args: { command: string }, exec: { agent: unknown; signal: AbortSignal }): Promise<string>;
}

export interface Harness {
  readonly root: Context;
  readonly owner: { id: string; ctx: Context; session: { header: { cwd: string }; events: unknown[] } };
  readonly bash: Tool;
  readonly terminals: TerminalSessionService;
  close(): Promise<void>;
}

/** The harness over the ctx.subprocess that `subprocess` registers on the root context. */
export async function compose(subprocess: (root: Context) => PromiseLike<unknown>, options: { toolTimeoutMs?: number } = {}): Promise<Harness> {
  const root = new Context();
  const owner = { id: 'agent-1', ctx: root, session: { header: { cwd: '/tmp' }, events: [] as unknown[] } };
  const tools = new Map<string, Tool>();
  root.provide('agents', { get: (id: string) => (id === owner.id ? owner : undefined) } as never);
  root.provide('sandboxPolicy', {
    defaultMode: 'danger-full-access',
    workspaceRoot: '/tmp',
    resolve: () => ({ mode: 'danger-full-access', workspaceRoot: '/tmp' }),
  } as never);
  root.provide('tools', { register: (tool: Tool & { name: string }) => (tools.set(tool.name, tool), () => tools.delete(tool.name)) } as never);
  await subprocess(root);
  await root.plugin(TerminalSessionService);
  await root.plugin(terminalBash, { shellPath: '/bin/bash', disposeGraceMs: 1000, idleSilenceMs: 3000 });
  await root.plugin(toolBashPersistent, { timeoutMs: options.toolTimeoutMs ?? 20_000 });
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
