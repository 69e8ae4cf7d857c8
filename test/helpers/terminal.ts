import type { SubprocessRuntime, SubprocessTerminalHandle } from '@execworld/sdk/seam';
import { collect, waitFor } from './wait.ts';

export const PROMPT = 'ew-prompt> ';

/** A terminal handle with the foreground token, as both runtimes give it. */
type Terminal = SubprocessTerminalHandle & {
  inspectForeground(): Promise<{ processGroupId: number; inputWaiting: boolean; inputWaitToken?: string | undefined } | undefined>;
};

export interface OpenTerminal<T extends Terminal = Terminal> {
  readonly terminal: T;
  /** Everything the terminal printed so far, decoded. */
  text(): string;
  bytes(): Buffer;
  /** Waits until the output, from `since` on, matches. */
  waitForOutput(pattern: RegExp | string, since?: number, timeoutMs?: number): Promise<void>;
  /** Types a line and waits for the next prompt. */
  run(line: string): Promise<string>;
}

export async function openBash<R extends SubprocessRuntime>(
  runtime: R,
  options: { graceMs?: number; env?: Record<string, string> } = {},
): Promise<OpenTerminal<Awaited<ReturnType<R['spawnTerminal']>> & Terminal>> {
  const terminal = (await runtime.spawnTerminal({
    argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
    cwd: '/tmp',
    env: { PS1: PROMPT, HISTFILE: '/dev/null', ...options.env },
    rows: 40,
    cols: 160,
    graceMs: options.graceMs ?? 2000,
  })) as Awaited<ReturnType<R['spawnTerminal']>> & Terminal;
  const output = collect(terminal.output);
  const waitForOutput = async (pattern: RegExp | string, since = 0, timeoutMs = 10_000): Promise<void> => {
    const matches = (): boolean => {
      const text = output.text().slice(since);
      return typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text);
    };
    await waitFor(`terminal output ${String(pattern)}`, matches, timeoutMs);
  };
  await waitForOutput(PROMPT);
  return {
    terminal,
    text: output.text,
    bytes: output.bytes,
    waitForOutput,
    async run(line) {
      const since = output.text().length;
      await terminal.write(`${line}\r`);
      await waitForOutput(new RegExp(`[\\s\\S]*\\n${PROMPT.replace(/[>]/g, '\\$&')}$`), since);
      return output.text().slice(since);
    },
  };
}

/** Polls inspectForeground until `accept` holds. */
export async function waitForForeground(
  terminal: Terminal,
  what: string,
  accept: (facts: Awaited<ReturnType<Terminal['inspectForeground']>>) => boolean,
): Promise<NonNullable<Awaited<ReturnType<Terminal['inspectForeground']>>>> {
  let last: Awaited<ReturnType<Terminal['inspectForeground']>>;
  await waitFor(what, async () => {
    last = await terminal.inspectForeground();
    return accept(last);
  });
  return last!;
}
