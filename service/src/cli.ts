/**
 * The `execworld` command: a dispatcher over its subcommands, one module each
 * in `cli/` (each exports a {@link Command}; see `cli/command.ts`), listed in
 * {@link COMMANDS}, one row each, in the order `execworld --help` shows them.
 * A module is loaded only when its command runs, so the client commands never
 * load the daemon.
 *
 * Exit status: exec, shell and attach give their program's; every command
 * exits 1 when execworld or the daemon failed (one line on stderr, naming the
 * error's code when it has one) and 2 for a usage error (with a pointer to
 * --help); serve exits 0 after SIGTERM or SIGINT once every session ended.
 * @module
 */
import { isExecworldError } from '@execworld/sdk';
import { CLIENT_OPTIONS, describeFailure } from './cli/client.ts';
import { CliError, FAILURE_STATUS, optionLines, USAGE_STATUS, UsageError, type Command } from './cli/command.ts';
import { packageVersion } from './version.ts';

interface CommandEntry {
  readonly name: string;
  readonly summary: string;
  load(): Promise<Command>;
}

/** Every command, in the order the help lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  { name: 'serve', summary: 'run the daemon (execworld serve --help for its options)', load: async () => (await import('./cli/serve.ts')).command },
  { name: 'run', summary: 'run a command in a persistent shell and exit with its status', load: async () => (await import('./cli/run.ts')).command },
  { name: 'exec', summary: "run a program on the daemon's host and exit with its status", load: async () => (await import('./cli/exec.ts')).command },
  { name: 'shell', summary: 'start an interactive bash on a new terminal and attach to it', load: async () => (await import('./cli/shell.ts')).command },
  { name: 'attach', summary: 'attach this terminal to a terminal of the daemon', load: async () => (await import('./cli/attach.ts')).command },
  { name: 'ps', summary: 'list the terminals, processes and shells', load: async () => (await import('./cli/ps.ts')).command },
  { name: 'logs', summary: "print a terminal's or a process's output (-f follows it)", load: async () => (await import('./cli/logs.ts')).command },
  { name: 'screen', summary: "print a terminal's screen", load: async () => (await import('./cli/screen.ts')).command },
  { name: 'kill', summary: 'end a terminal, a process or a shell (--delete forgets it too)', load: async () => (await import('./cli/kill.ts')).command },
  { name: 'send', summary: 'type input to the command of a kept shell that waits for it', load: async () => (await import('./cli/send.ts')).command },
  { name: 'interrupt', summary: 'interrupt (SIGINT) the command a kept shell runs', load: async () => (await import('./cli/interrupt.ts')).command },
  { name: 'mcp', summary: "serve the daemon's MCP tools on stdin and stdout (for an MCP client)", load: async () => (await import('./cli/mcp.ts')).command },
  { name: 'cp', summary: "copy a file or (-r) a directory to or from the daemon's world", load: async () => (await import('./cli/cp.ts')).command },
  { name: 'token', summary: 'mint (create) or revoke a token of the daemon on this machine', load: async () => (await import('./cli/token.ts')).command },
  {
    name: 'token-file',
    summary: 'print the path of the token file a local daemon uses by default',
    load: async () => (await import('./cli/token-file.ts')).command,
  },
];

function usage(): string {
  const width = Math.max(...COMMANDS.map((entry) => entry.name.length)) + 2;
  return `Usage: execworld [--url <url>] [--token <token>] [--sandbox <id>] <command> [options]

Commands:
${COMMANDS.map((entry) => `  ${entry.name.padEnd(width)} ${entry.summary}`).join('\n')}

The commands but serve, token and token-file talk to a daemon, named by these options
(before the command or among its own):
${optionLines(CLIENT_OPTIONS)}

Options:
  --version            print the version
  -h, --help           show this help; execworld <command> --help shows a command's

Ctrl-P Ctrl-Q detaches from a terminal (shell, attach), which runs on.

Exit status: exec, shell and attach exit with their program's status (128+n
when signal n ended it), run, send and interrupt with their command's (130
after Ctrl-C); any command exits 1 when execworld or the daemon failed (one
line on stderr: execworld: CODE: message) and 2 for a usage error; serve
exits 1 when the daemon cannot start.
`;
}

/** The client options given before the command (`execworld --url … ps`), handed on to the command. */
function leadingClientOptions(argv: readonly string[]): { options: string[]; rest: string[] } {
  let index = 0;
  while (index < argv.length) {
    const arg = argv[index]!;
    const name = arg.split('=', 1)[0]!;
    if (!Object.hasOwn(CLIENT_OPTIONS, name.replace(/^--/, '')) || !name.startsWith('--')) break;
    index += arg.includes('=') ? 1 : 2;
  }
  return { options: argv.slice(0, Math.min(index, argv.length)), rest: argv.slice(index) };
}

/** A usage error: what was wrong, where the help is. */
function usageError(message: string, help: string): number {
  process.stderr.write(`execworld: ${message}\nRun '${help}' for the usage.\n`);
  return USAGE_STATUS;
}

/** Exit status of a command whose stdout reader went away (`execworld logs … | head`), as a program killed by SIGPIPE. */
const BROKEN_PIPE_STATUS = 128 + 13;

function onStdoutError(error: NodeJS.ErrnoException): void {
  if (error.code === 'EPIPE') process.exit(BROKEN_PIPE_STATUS);
  throw error;
}

/** Runs the command `argv` names; resolves with its exit status, or undefined while it runs on (the daemon). */
async function dispatch(argv: readonly string[]): Promise<number | undefined> {
  const { options, rest } = leadingClientOptions(argv);
  const [name, ...args] = rest;
  switch (name) {
    case '--version':
    case 'version':
      process.stdout.write(`${packageVersion()}\n`);
      return 0;
    case undefined:
    case '--help':
    case '-h':
      process.stdout.write(usage());
      return 0;
    case 'help': {
      // `execworld help <command>`: that command's help.
      const entry = COMMANDS.find((each) => each.name === args[0]);
      process.stdout.write(entry === undefined ? usage() : (await entry.load()).help);
      return 0;
    }
  }
  const entry = COMMANDS.find((each) => each.name === name);
  if (entry === undefined) return usageError(`${name.startsWith('-') ? 'unknown option' : 'unknown command'} ${name}`, 'execworld --help');
  // The daemon's log has its own rule (a reader that goes away ends logging, not the daemon).
  if (entry.name !== 'serve') process.stdout.on('error', onStdoutError);
  try {
    return await (await entry.load()).run([...options, ...args]);
  } catch (error) {
    if (error instanceof UsageError) return usageError(error.message, `execworld ${entry.name} --help`);
    // One line for what a user can act on; a fault of execworld itself keeps its stack.
    if (!(error instanceof CliError) && !isExecworldError(error)) throw error;
    process.stderr.write(`execworld: ${describeFailure(error)}\n`);
    return FAILURE_STATUS;
  }
}

export async function main(argv: readonly string[]): Promise<void> {
  const status = await dispatch(argv);
  if (status === undefined) return;
  // Once stdout and stderr took everything, exit: a client command may still hold its stdin (a terminal) open.
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise<void>((resolve) => stream.write('', () => resolve()))));
  process.exit(status);
}
