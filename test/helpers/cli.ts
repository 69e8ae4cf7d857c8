/**
 * The `execworld` command as a person runs it: a real process of the bin,
 * talking to a daemon by URL, with the token a local daemon would have
 * written (a token file under its own XDG_CONFIG_HOME), and tmux to drive the
 * interactive commands through a real terminal.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BIN } from './daemon-process.ts';
import { waitFor } from './wait.ts';

export { BIN };

/**
 * The environment of a user of the daemon at `url` whose token file holds
 * `token`: EXECWORLD_URL names the daemon, and nothing else of the test's
 * environment says a token.
 */
export function cliEnv(url: string, token: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const config = mkdtempSync(join(tmpdir(), 'execworld-cli-config-'));
  mkdirSync(join(config, 'execworld'));
  writeFileSync(join(config, 'execworld', 'token'), `${token}\n`, { mode: 0o600 });
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: config, EXECWORLD_URL: url, ...extra };
  delete env.EXECWORLD_TOKEN;
  return env;
}

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunningCli {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  readonly result: Promise<CliResult>;
}

/** Starts the bin with `args`; `stdin` is written and closed, or left open as a pipe (`{ open: true }`), or /dev/null. */
export function startCli(args: readonly string[], options: { env: NodeJS.ProcessEnv; stdin?: string | { open: true }; cwd?: string }): RunningCli {
  const child = spawn(BIN, [...args], {
    env: options.env,
    cwd: options.cwd ?? tmpdir(),
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  if (typeof options.stdin === 'string') child.stdin!.end(options.stdin);
  const result = new Promise<CliResult>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, stdout: () => stdout, stderr: () => stderr, result };
}

/** Runs the bin to its end. */
export function runCli(args: readonly string[], options: { env: NodeJS.ProcessEnv; stdin?: string; cwd?: string }): Promise<CliResult> {
  return startCli(args, options).result;
}

/** Why tmux cannot run here, or undefined when it can. */
export const tmuxUnavailable: string | undefined =
  spawnSync('tmux', ['-V'], { stdio: 'ignore' }).status === 0 ? undefined : 'tmux is not installed (.ci/run installs it)';

const execFileAsync = promisify(execFile);

/** What the pane's shell prints before the command's exit status. */
export const EXIT_MARK = 'pane command exited: ';

/** Quotes a word for the shell tmux runs a pane's command with. */
const quote = (word: string): string => `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * A tmux server of its own (its own socket and configuration), whose panes
 * stay after their command exits so that what it printed last (and its exit
 * status) can be read, and have no status line, so a window's size is its pane's.
 */
export class Tmux {
  readonly #dir: string;
  readonly #socket: string;
  readonly #config: string;

  constructor() {
    this.#dir = mkdtempSync(join(tmpdir(), 'execworld-tmux-'));
    this.#socket = join(this.#dir, 'socket');
    this.#config = join(this.#dir, 'tmux.conf');
    writeFileSync(this.#config, 'set -g remain-on-exit on\nset -g status off\nset -g history-limit 5000\n');
  }

  async tmux(...args: string[]): Promise<string> {
    const { stdout } = await execFileAsync('tmux', ['-S', this.#socket, '-f', this.#config, ...args]);
    return stdout;
  }

  /** A new session `name` of `cols`x`rows` whose one pane runs the bin with `args` in `env`. */
  async start(name: string, args: readonly string[], env: NodeJS.ProcessEnv, size: { cols: number; rows: number }): Promise<void> {
    const assignments = Object.entries(env)
      .filter(([key, value]) => value !== undefined && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key))
      .map(([key, value]) => quote(`${key}=${value!}`));
    // The exit status is printed by a shell around the command: tmux's own pane_dead_status is sometimes never filled in.
    const report = `"$@"; echo "${EXIT_MARK}$?"`;
    const command = `exec env -i ${assignments.join(' ')} /bin/sh -c ${quote(report)} sh ${[BIN, ...args].map(quote).join(' ')}`;
    await this.tmux('new-session', '-d', '-s', name, '-x', String(size.cols), '-y', String(size.rows), command);
  }

  /** Keys as tmux's send-keys names them (`Enter`, `C-p`), or text typed literally with `{ literal }`. */
  async keys(name: string, ...keys: string[]): Promise<void> {
    await this.tmux('send-keys', '-t', name, ...keys);
  }

  async type(name: string, text: string): Promise<void> {
    await this.tmux('send-keys', '-t', name, '-l', text);
  }

  /**
   * The pane's text, wrapped lines joined, with the lines scrolled off its top
   * (tmux scrolls a dead pane's screen by a line to say it is dead).
   */
  async screen(name: string): Promise<string> {
    return await this.tmux('capture-pane', '-p', '-J', '-S', '-', '-t', name);
  }

  /** Waits until the pane's text satisfies `predicate`; the error shows the pane. */
  async waitForScreen(name: string, what: string, predicate: (text: string) => boolean, timeoutMs = 30_000): Promise<string> {
    let text = '';
    try {
      await waitFor(what, async () => predicate((text = await this.screen(name))), timeoutMs);
    } catch (error) {
      throw new Error(`${(error as Error).message}; the pane shows:\n${text}`, { cause: error });
    }
    return text;
  }

  /** The exit status of the pane's command once it exited (128+n for a signal n, as the shell says it); waits for that. */
  async exitStatus(name: string, timeoutMs = 30_000): Promise<number> {
    const screen = await this.waitForScreen(name, 'the command to exit', (text) => text.includes(EXIT_MARK), timeoutMs);
    return Number(new RegExp(`${EXIT_MARK}(\\d+)`).exec(screen)![1]);
  }

  /** Resizes session `name`'s window, as a person dragging its edge would. */
  async resize(name: string, size: { cols: number; rows: number }): Promise<void> {
    await this.tmux('resize-window', '-t', name, '-x', String(size.cols), '-y', String(size.rows));
  }

  async close(): Promise<void> {
    await this.tmux('kill-server').catch(() => undefined);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
