/**
 * The terminal peers measured side by side. Each opens a process on a new
 * terminal and exposes the same small surface, so every workload runs the
 * same code against every peer.
 */
import '../../test/helpers/with-resolvers.ts';
import { sessionPids } from '../../test/helpers/proc.ts';
import { Context } from '@deepseek-ai/cordis';
import LocalSubprocessRuntime from '@deepseek-ai/dsh-subprocess-local';
import * as nodePty from 'node-pty';
import type { SubprocessTerminalHandle } from '@execworld/sdk/seam';
import { LocalRuntime } from '@execworld/service';

export interface TerminalSession {
  readonly pid: number;
  onData(listener: (chunk: Buffer) => void): void;
  write(data: string): void;
  /** Foreground inspection, where the peer has it. */
  inspect?(): Promise<unknown>;
  /** Resize, where the peer has it. */
  resize?(cols: number, rows: number): Promise<void>;
  /** A SIGINT to the foreground, where the peer has it. */
  interrupt?(): Promise<void>;
  /** Stops and resumes reading output, as a slow consumer does. */
  pause?(): void;
  resume?(): void;
  /** Ends the session; resolves once the peer says it is closed. */
  close(): Promise<void>;
  /** Resolves when the top-level process has exited (after its output). */
  readonly exited: Promise<void>;
}

export interface TerminalPeer {
  readonly name: string;
  /** Whether close() waits until the whole session is proven gone. */
  readonly closeIsQuiescence: boolean;
  open(argv: readonly string[], env?: Record<string, string>): Promise<TerminalSession>;
  dispose(): Promise<void>;
}

export const BENCH_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/tmp', TERM: 'xterm-256color', LANG: 'C.UTF-8' };
/** Grace of the seam peers' cleanup; the reference harness uses 3000 ms. */
export const CLOSE_GRACE_MS = 3000;

/** A seam terminal handle as a session; `resize` where the handle has one. */
export function seamSession(handle: SubprocessTerminalHandle & { resize?: (cols: number, rows: number) => unknown }): TerminalSession {
  return {
    pid: handle.pid,
    onData: (listener) => handle.output.on('data', (chunk: Buffer | string) => listener(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)),
    write: (data) => void handle.write(data),
    inspect: () => handle.inspectForeground(),
    ...(handle.resize === undefined ? {} : { resize: async (cols: number, rows: number) => void (await handle.resize!(cols, rows)) }),
    interrupt: async () => void (await handle.signalForeground('SIGINT')),
    pause: () => handle.output.pause(),
    resume: () => handle.output.resume(),
    close: () => handle.terminate(),
    exited: handle.done.then(() => undefined),
  };
}

/** execworld's LocalRuntime, in process. */
export function localPeer(): TerminalPeer {
  const runtime = new LocalRuntime({ ambientEnv: BENCH_ENV });
  return {
    name: 'local',
    closeIsQuiescence: true,
    async open(argv, env) {
      return seamSession(await runtime.spawnTerminal({ argv, cwd: '/tmp', env: { ...BENCH_ENV, ...env }, rows: 24, cols: 80, graceMs: CLOSE_GRACE_MS }));
    },
    dispose: () => runtime.dispose(),
  };
}

/** The reference provider, @deepseek-ai/dsh-subprocess-local, in process. */
export async function dshLocalPeer(): Promise<TerminalPeer> {
  const root = new Context();
  await root.plugin(LocalSubprocessRuntime);
  const runtime = root.subprocess;
  return {
    name: 'dsh-local',
    closeIsQuiescence: true,
    async open(argv, env) {
      return seamSession(await runtime.spawnTerminal({ argv, cwd: '/tmp', env: { ...BENCH_ENV, ...env }, rows: 24, cols: 80, graceMs: CLOSE_GRACE_MS }));
    },
    dispose: async () => {
      await root.fiber.dispose();
    },
  };
}

/** Raw node-pty, Buffer mode: the floor. Its close is a SIGHUP and the exit event, nothing more. */
export function nodePtyPeer(): TerminalPeer {
  return {
    name: 'node-pty',
    closeIsQuiescence: false,
    open(argv, env) {
      const pty = nodePty.spawn(argv[0]!, argv.slice(1), {
        cols: 80,
        rows: 24,
        cwd: '/tmp',
        env: { ...BENCH_ENV, ...env },
        encoding: null,
      });
      const exited = new Promise<void>((resolve) => pty.onExit(() => resolve()));
      return Promise.resolve({
        pid: pty.pid,
        // With encoding null node-pty hands out Buffers; its typings say string.
        onData: (listener) => pty.onData((chunk) => listener(chunk as unknown as Buffer)),
        write: (data) => pty.write(data),
        close: async () => {
          pty.kill();
          await exited;
        },
        exited,
      });
    },
    dispose: () => Promise.resolve(),
  };
}

/** Close failures seen per peer, each with the peer's message: a failed close is a finding, not a crash of the run. */
export const closeFailures = new Map<string, string[]>();

/**
 * The peer with a close that never throws: a failure is recorded in
 * {@link closeFailures}, and whatever of the session survived is killed so
 * that it cannot disturb the workloads after it.
 */
export function guardClose(peer: TerminalPeer): TerminalPeer {
  return {
    ...peer,
    open: async (argv, env) => {
      const session = await peer.open(argv, env);
      return {
        ...session,
        close: async () => {
          try {
            await session.close();
          } catch (error) {
            closeFailures.set(peer.name, [...(closeFailures.get(peer.name) ?? []), (error as Error).message]);
            for (const pid of session.pid > 0 ? sessionPids(session.pid) : []) {
              try {
                process.kill(pid, 'SIGKILL');
              } catch (_killError) {
                // Gone meanwhile.
              }
            }
          }
        },
      };
    },
    dispose: () => peer.dispose(),
  };
}
