/**
 * The minimal DeepSeek harness around a ctx.subprocess plugin: an agent
 * registry, a sandbox policy, a tool registry, the terminal registry, and a
 * persistent shell stack: dsh-terminal-bash with dsh-tool-bash-persistent, or
 * dsh-terminal-bash in its pwsh dialect with dsh-tool-pwsh-persistent. For
 * tests and benchmarks.
 */
import './with-resolvers.ts';
import { Context } from '@deepseek-ai/cordis';
import { TerminalSessionService } from '@deepseek-ai/dsh-terminal';
import * as terminalBash from '@deepseek-ai/dsh-terminal-bash';
import * as toolBashPersistent from '@deepseek-ai/dsh-tool-bash-persistent';
import * as toolPwshPersistent from '@deepseek-ai/dsh-tool-pwsh-persistent';
import * as fsObservationPolicy from '@deepseek-ai/dsh-fs-observation-policy';
import * as toolFs from '@deepseek-ai/dsh-tool-fs';
import type { SubprocessRuntime } from '@execworld/sdk/seam';
import { spawnAnsweringCursorRequests } from './terminal-replies.ts';

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

/** A file tool of dsh-tool-fs: it answers its outcome, or throws the seam's FsError. */
export interface FileTool {
  execute(args: Record<string, unknown>, exec: { agent: unknown; signal: AbortSignal }): Promise<Record<string, unknown>>;
}

export interface FilesHarness extends Harness {
  readonly read: FileTool;
  readonly write: FileTool;
  readonly edit: FileTool;
}

export interface PwshHarness extends Omit<Harness, 'bash'> {
  readonly pwsh: Tool;
}

/** The owner, the agent registry, the sandbox policy and the tool registry on a new root, then `subprocess` and the terminal registry. */
async function base(subprocess: (root: Context) => PromiseLike<unknown>, cwd = '/tmp') {
  const root = new Context();
  const owner = { id: 'agent-1', ctx: root, session: { header: { cwd }, events: [] as unknown[] } };
  const tools = new Map<string, Tool>();
  root.provide('agents', { get: (id: string) => (id === owner.id ? owner : undefined) } as never);
  root.provide('sandboxPolicy', {
    defaultMode: 'danger-full-access',
    workspaceRoot: cwd,
    resolve: () => ({ mode: 'danger-full-access', workspaceRoot: cwd }),
  } as never);
  // The file tools add sections to the system prompt; nothing here reads them.
  root.provide('systemPrompt', { section: () => () => undefined } as never);
  root.provide('tools', { register: (tool: Tool & { name: string }) => (tools.set(tool.name, tool), () => tools.delete(tool.name)) } as never);
  await subprocess(root);
  await root.plugin(TerminalSessionService);
  const terminals = (root as unknown as { terminals: TerminalSessionService }).terminals;
  const close = async (): Promise<void> => {
    await root.fiber.dispose();
  };
  return { root, owner, tools, terminals, close };
}

/** The harness over the ctx.subprocess that `subprocess` registers on the root context. */
export async function compose(subprocess: (root: Context) => PromiseLike<unknown>, options: { toolTimeoutMs?: number } = {}): Promise<Harness> {
  const { tools, ...harness } = await base(subprocess);
  await harness.root.plugin(terminalBash, { shellPath: '/bin/bash', disposeGraceMs: 1000, idleSilenceMs: 3000 });
  await harness.root.plugin(toolBashPersistent, { timeoutMs: options.toolTimeoutMs ?? 20_000 });
  return { ...harness, bash: tools.get('bash')! };
}

/**
 * The harness with the persistent bash tool and the file tools (read, write,
 * edit, with the observation policy: read before write, stale edits refused)
 * over what `world` registers: `ctx.subprocess` and `ctx.fs`. Relative paths
 * resolve against `cwd`, the agent's session directory.
 */
export async function composeWithFiles(world: (root: Context) => PromiseLike<unknown>, cwd: string): Promise<FilesHarness> {
  const { tools, ...harness } = await base(world, cwd);
  await harness.root.plugin(terminalBash, { shellPath: '/bin/bash', disposeGraceMs: 1000, idleSilenceMs: 3000 });
  await harness.root.plugin(toolBashPersistent, { timeoutMs: 20_000 });
  await harness.root.plugin(fsObservationPolicy);
  await harness.root.plugin(toolFs);
  const file = (name: string) => tools.get(name) as unknown as FileTool;
  return { ...harness, bash: tools.get('bash')!, read: file('read'), write: file('write'), edit: file('edit') };
}

export interface PwshOptions {
  /** The pwsh executable; the backend's default is the bare name `pwsh`, found on the PATH of the execution world. */
  readonly pwshPath: string;
  /**
   * Whether the backend's terminals answer pwsh's cursor position requests
   * (terminal-replies.ts explains why pwsh needs that on Linux). Default true;
   * false composes dsh-terminal-bash 0.1.0-rc.8 exactly as published.
   */
  readonly answerCursorRequests?: boolean;
  readonly toolTimeoutMs?: number;
  readonly maxOutputChars?: number;
}

type BackendConfig = ConstructorParameters<typeof terminalBash.BashTerminalBackend>[1];

/**
 * The harness with the persistent pwsh stack: dsh-terminal-bash with
 * `shellDialect: 'pwsh'` (its default arguments, `-NoLogo -NoProfile`) and
 * dsh-tool-pwsh-persistent, over the ctx.subprocess that `subprocess` registers.
 */
export async function composePwsh(subprocess: (root: Context) => PromiseLike<unknown>, options: PwshOptions): Promise<PwshHarness> {
  const { tools, ...harness } = await base(subprocess);
  const config = { shellDialect: 'pwsh' as const, shellPath: options.pwshPath, shellArgs: ['-NoLogo', '-NoProfile'], disposeGraceMs: 1000 };
  if (options.answerCursorRequests === false) {
    await harness.root.plugin(terminalBash, config);
  } else {
    // The plugin's own registration, with the backend's spawnTerminal parameter filled in.
    const runtime = (harness.root as unknown as { subprocess: SubprocessRuntime }).subprocess;
    const spawn = spawnAnsweringCursorRequests((spec) => runtime.spawnTerminal(spec));
    const backend = new terminalBash.BashTerminalBackend(harness.root, terminalBash.Config(config) as BackendConfig, spawn);
    harness.terminals.registerBackend(backend);
  }
  await harness.root.plugin(toolPwshPersistent, {
    timeoutMs: options.toolTimeoutMs ?? 30_000,
    ...(options.maxOutputChars === undefined ? {} : { maxOutputChars: options.maxOutputChars }),
  });
  return { ...harness, pwsh: tools.get('pwsh')! };
}
