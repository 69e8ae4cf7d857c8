/**
 * A pseudoconsole as the Windows terminal drives it: node-pty's ConPTY
 * terminal behind a small interface, the layer tests replace with recorded
 * behaviour, since no Windows machine runs the suite and Wine's ConPTY is not
 * faithful (no Ctrl-C, no resize, no cursor request, NULL standard handles).
 * @module
 */
import { createRequire } from 'node:module';
import type { TerminalOptions } from '../host-terminal.ts';

/** One program on a pseudoconsole. */
export interface ConPty {
  readonly pid: number;
  /** Output, decoded as UTF-8 by the pseudoconsole's reader. */
  onData(listener: (data: string) => void): void;
  /** The program's exit, when the pseudoconsole reports it; it may never come for a program killed from outside. */
  onExit(listener: (exit: { exitCode: number }) => void): void;
  /** Bytes written and not yet taken by the pseudoconsole's input pipe. */
  readonly pendingInputBytes: number;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  pause(): void;
  resume(): void;
  /** Closes the pseudoconsole. */
  close(): void;
}

/** What a pseudoconsole is started with: the program, where, and its size. */
export type ConPtyOptions = Pick<TerminalOptions, 'file' | 'args' | 'cwd' | 'env' | 'cols' | 'rows'>;

/** Starts a program on a new pseudoconsole. */
export type ConPtyFactory = (options: ConPtyOptions) => ConPty;

interface NodePtyTerminal {
  readonly pid: number;
  /** node-pty's agent of the pseudoconsole: its `inSocket` is the console's input pipe. Not node-pty's public API. */
  readonly _agent?: { readonly inSocket?: { readonly writableLength?: number } };
  onData(listener: (data: string) => void): unknown;
  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): unknown;
  write(data: string): void;
  resize(cols: number, rows: number): void;
  pause(): void;
  resume(): void;
  kill(): void;
}

interface NodePty {
  spawn(file: string, args: string[], options: Record<string, unknown>): NodePtyTerminal;
}

/** node-pty's ConPTY, loaded on first use. */
export const nodePtyConPty: ConPtyFactory = (options) => {
  const nodePty = createRequire(import.meta.url)('node-pty') as NodePty;
  const terminal = nodePty.spawn(options.file, [...options.args], {
    name: options.env.TERM ?? 'xterm-256color',
    cols: options.cols,
    rows: options.rows,
    cwd: options.cwd,
    env: { ...options.env },
    useConpty: true,
    // The conpty.dll node-pty bundles is newer than the system's, and does not start everywhere the system's does.
    useConptyDll: false,
  });
  return {
    pid: terminal.pid,
    onData: (listener) => void terminal.onData(listener),
    onExit: (listener) => void terminal.onExit((exit) => listener({ exitCode: exit.exitCode })),
    // node-pty writes input to the console's input pipe, a socket, and says nothing of what it holds: what it
    // buffers for a program that does not read is read there (0 where that internal moved).
    get pendingInputBytes() {
      return terminal._agent?.inSocket?.writableLength ?? 0;
    },
    write: (data) => terminal.write(data),
    resize: (cols, rows) => terminal.resize(cols, rows),
    pause: () => terminal.pause(),
    resume: () => terminal.resume(),
    close: () => {
      try {
        terminal.kill();
      } catch (_error) {
        // Already closed.
      }
    },
  };
};
