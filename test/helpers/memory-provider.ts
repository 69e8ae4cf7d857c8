/**
 * An in-memory provider: the provider interface with no process behind it.
 * It proves that the daemon needs nothing of a provider beyond
 * `provider/api.ts`, and it makes what no real host does on demand (a
 * cleanup that fails) for the daemon's own logic.
 *
 * Its programs: a terminal echoes its input and exits with the number after
 * an `exit ` line; a process copies stdin to stdout and exits 0 at stdin's end.
 */
import { PassThrough } from 'node:stream';
import type { SubprocessOutcome, SubprocessSpawnSpec, SubprocessTerminalSignal, SubprocessTerminalSpawnSpec } from '@execworld/sdk/seam';
import {
  CleanupError,
  ProviderError,
  type CollectedStreamView,
  type ExecutionProvider,
  type ProcessExtensions,
  type ProviderCapabilities,
  type ProviderProcess,
  type ProviderTerminal,
  type ShellDefaults,
  type TerminalExtensions,
} from '../../service/src/provider/api.ts';
import { platformFor } from '../../service/src/provider/platform/index.ts';

let lastPid = 100_000;

/** A settle-once outcome. */
function outcome(): { promise: Promise<SubprocessOutcome>; settle: (value: SubprocessOutcome) => void; settled: () => boolean } {
  let settle!: (value: SubprocessOutcome) => void;
  let done = false;
  const promise = new Promise<SubprocessOutcome>((resolve) => {
    settle = (value) => {
      if (done) return;
      done = true;
      resolve(value);
    };
  });
  return { promise, settle, settled: () => done };
}

export class MemoryTerminal implements ProviderTerminal {
  readonly pid = (lastPid += 1);
  readonly output = new PassThrough();
  readonly done: Promise<SubprocessOutcome>;
  readonly spec: SubprocessTerminalSpawnSpec;
  readonly extensions: TerminalExtensions;
  size: { cols: number; rows: number };
  /** How many more terminate() calls fail as if processes survived; each failure counts down. */
  failCleanups = 0;
  terminateCalls = 0;
  readonly #exit = outcome();
  #line = '';

  constructor(spec: SubprocessTerminalSpawnSpec, extensions: TerminalExtensions) {
    this.spec = spec;
    this.extensions = extensions;
    this.size = { cols: spec.cols, rows: spec.rows };
    this.done = this.#exit.promise;
  }

  write(data: string): Promise<void> {
    if (this.#exit.settled()) return Promise.reject(new ProviderError('TERMINAL_EXITED', 'the terminal has exited'));
    this.output.write(data.replaceAll('\r', '\r\n'));
    this.#line += data;
    const match = /exit (\d+)\r/.exec(this.#line);
    if (match !== null) this.#end({ exitCode: Number(match[1]), signal: null });
    this.#line = this.#line.slice(this.#line.lastIndexOf('\r') + 1);
    return Promise.resolve();
  }

  inspectForeground(): Promise<{ processGroupId: number; inputWaiting: boolean } | undefined> {
    return Promise.resolve(this.#exit.settled() ? undefined : { processGroupId: this.pid, inputWaiting: true });
  }

  signalForeground(signal: SubprocessTerminalSignal): Promise<number> {
    if (this.#exit.settled()) return Promise.reject(new ProviderError('NO_FOREGROUND_GROUP', 'the terminal has exited'));
    this.output.write(signal === 'SIGINT' ? '^C\r\n' : `[${signal}]\r\n`);
    return Promise.resolve(this.pid);
  }

  resize(cols: number, rows: number): void {
    this.size = { cols, rows };
  }

  terminate(): Promise<void> {
    this.terminateCalls += 1;
    this.#end({ exitCode: null, signal: 'SIGHUP' });
    if (this.failCleanups > 0) {
      this.failCleanups -= 1;
      return Promise.reject(new CleanupError(`terminal cleanup failed; surviving pids: ${this.pid + 1}`, [this.pid + 1]));
    }
    return Promise.resolve();
  }

  #end(value: SubprocessOutcome): void {
    if (this.#exit.settled()) return;
    this.#exit.settle(value);
    this.output.end();
  }
}

export class MemoryProcess implements ProviderProcess {
  readonly pid = (lastPid += 1);
  readonly stdin: PassThrough | undefined;
  readonly stdout: PassThrough | undefined;
  readonly stderr: PassThrough | undefined;
  readonly collected = {};
  readonly done: Promise<SubprocessOutcome>;
  readonly spec: SubprocessSpawnSpec;
  readonly extensions: ProcessExtensions;
  readonly #exit = outcome();

  constructor(spec: SubprocessSpawnSpec, extensions: ProcessExtensions) {
    this.spec = spec;
    this.extensions = extensions;
    this.done = this.#exit.promise;
    const piped = (mode: SubprocessSpawnSpec['stdio']['stdout']): PassThrough | undefined => (mode === 'pipe' ? new PassThrough() : undefined);
    this.stdout = piped(spec.stdio.stdout);
    this.stderr = piped(spec.stdio.stderr);
    const stdin = spec.stdio.stdin;
    this.stdin = stdin === 'pipe' ? new PassThrough() : undefined;
    if (this.stdin !== undefined) {
      this.stdin.on('data', (chunk: Buffer) => this.stdout?.write(chunk));
      this.stdin.on('end', () => this.#end({ exitCode: 0, signal: null }));
    } else {
      if (typeof stdin === 'object') this.stdout?.write(stdin.data);
      this.#end({ exitCode: 0, signal: null });
    }
  }

  get treeExited(): boolean {
    return this.#exit.settled();
  }

  collector(): CollectedStreamView | undefined {
    return undefined;
  }

  /** The double's program reads its stdin at once: nothing waits to be bounded. */
  writeStdin(data: Buffer): Promise<void> {
    const stdin = this.stdin;
    if (stdin === undefined) return Promise.reject(new ProviderError('INVALID_ARGUMENT', 'stdin is not a pipe'));
    return new Promise((resolve, reject) => stdin.write(data, (error) => (error === null || error === undefined ? resolve() : reject(error))));
  }

  terminate(): void {
    this.#end({ exitCode: null, signal: 'SIGTERM' });
  }

  async waitForExit(): Promise<boolean> {
    await this.done;
    return true;
  }

  #end(value: SubprocessOutcome): void {
    if (this.#exit.settled()) return;
    this.#exit.settle(value);
    this.stdout?.end();
    this.stderr?.end();
  }
}

export class MemoryProvider implements ExecutionProvider {
  readonly capabilities: ProviderCapabilities;
  /** The shells of the platform the double claims to be. */
  readonly shells: ShellDefaults;
  readonly terminals: MemoryTerminal[] = [];
  readonly processes: MemoryProcess[] = [];
  disposed = false;

  constructor(capabilities: Partial<ProviderCapabilities> = {}) {
    this.capabilities = { platform: 'linux', terminals: true, exactInputWait: false, containment: 'none', signals: true, ...capabilities };
    this.shells = platformFor(this.capabilities.platform).shells;
  }

  resolveExecutable(command: string): Promise<string> {
    return command.includes('/') ? Promise.resolve(command) : Promise.reject(new ProviderError('EXECUTABLE_NOT_FOUND', `${command} was not found on PATH`));
  }

  startProcess(spec: SubprocessSpawnSpec, extensions: ProcessExtensions = {}): Promise<MemoryProcess> {
    if (typeof spec.stdio.stdout === 'object' || typeof spec.stdio.stderr === 'object')
      return Promise.reject(new ProviderError('UNSUPPORTED', 'the memory provider does not collect output'));
    const process = new MemoryProcess(spec, extensions);
    this.processes.push(process);
    return Promise.resolve(process);
  }

  spawnTerminal(spec: SubprocessTerminalSpawnSpec, extensions: TerminalExtensions = {}): Promise<MemoryTerminal> {
    if (!this.capabilities.terminals) return Promise.reject(new ProviderError('UNSUPPORTED', 'terminals are not available here'));
    const terminal = new MemoryTerminal(spec, extensions);
    this.terminals.push(terminal);
    return Promise.resolve(terminal);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    for (const process of this.processes) process.terminate();
    await Promise.allSettled(this.terminals.map((terminal) => terminal.terminate()));
  }
}
