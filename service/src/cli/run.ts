/**
 * `execworld run [options] '<command>'`: runs a command in a persistent shell
 * the daemon keeps, prints its output and exits with its status.
 * @module
 */
import { CLIENT_OPTIONS, clientHelp, openRuntime } from './client.ts';
import { CliError, expectPositionals, parseEnvEntries, UsageError, type Command, defineCommand } from './command.ts';

const OPTIONS = {
  shell: { type: 'string' },
  keep: { type: 'boolean' },
  pwsh: { type: 'boolean' },
  cwd: { type: 'string' },
  env: { type: 'string', multiple: true },
  timeout: { type: 'string' },
  'idle-timeout': { type: 'string' },
  ...CLIENT_OPTIONS,
} as const;

const HELP = `Usage: execworld run [options] '<command>'

Runs <command> in a persistent shell on the daemon's host and prints what it
printed (as text: escape sequences removed). Without --shell, a new bash (or
pwsh) shell runs it and is ended after; --keep keeps it and prints its id on
stderr, and --shell <id> runs the next command in it, with its cwd, variables
and functions.

Options:
  --shell <id>         run in this shell (an id printed by --keep)
  --keep               keep the new shell and print its id on stderr
  --pwsh               a PowerShell 7 shell (pwsh on the daemon's PATH) instead of bash
                       (a daemon on Windows runs PowerShell without it)
  --cwd <dir>          the new shell's working directory (default: the world's: the owner's home, else the daemon's)
  --env K=V            a variable of the new shell (repeatable)
  --timeout <ms>       interrupt the command (SIGINT) after this long
  --idle-timeout <ms>  give up after this long without output (the command runs on in the shell)
${clientHelp()}
  -h, --help           show this help

Ctrl-C interrupts the command (SIGINT on the daemon's host).

Exit status: the command's (128+n when signal n ended it, the shell's own when
the command ended the shell); 1 when execworld or the daemon failed, or the
command waits for input or went idle (the line on stderr says which, and the
shell is kept so it can be answered); 2 for a usage error.
`;

function milliseconds(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number <= 0) throw new UsageError(`--${option} must be a positive number of milliseconds, got ${value}`);
  return number;
}

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [text] = expectPositionals(positionals, ["'<command>'"]) as [string];
  const timeoutMs = milliseconds(values.timeout, 'timeout');
  const idleTimeoutMs = milliseconds(values['idle-timeout'], 'idle-timeout');
  if (values.shell !== undefined && (values.pwsh === true || values.cwd !== undefined || values.env !== undefined)) {
    throw new UsageError('--pwsh, --cwd and --env make a new shell; they do not go with --shell');
  }
  const env = parseEnvEntries(values.env);
  const runtime = await openRuntime(values);
  let created: string | undefined;
  let keep = values.keep === true;
  // Ctrl-C: the connection closes, and the daemon interrupts the run of a caller that went away.
  const interrupt = (): void => runtime.close();
  process.once('SIGINT', interrupt);
  try {
    let id = values.shell;
    if (id === undefined) {
      const shell = await runtime.call('shell.create', {
        // Without --pwsh the daemon's default: bash, or PowerShell on Windows.
        ...(values.pwsh === true ? { dialect: 'pwsh' as const } : {}),
        cwd: values.cwd,
        ...(env === undefined ? {} : { env }),
      });
      id = created = shell.id;
      if (keep) process.stderr.write(`execworld: shell ${id}\n`);
    }
    const result = await runtime.call('shell.run', {
      id,
      command: text,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
    });
    process.stdout.write(result.output);
    if (result.reason === 'waiting_for_input' || result.reason === 'idle_timeout') {
      // Its program is still there: the shell is kept so that it can be answered or interrupted.
      keep = true;
      const what =
        result.reason === 'waiting_for_input'
          ? `waits for input${result.waitingFor?.command === undefined ? '' : ` (${result.waitingFor.command})`}`
          : 'went idle';
      throw new CliError(`${result.reason.toUpperCase()}: the command ${what}; shell ${id} keeps it`);
    }
    if (result.reason === 'timeout') process.stderr.write(`execworld: TIMEOUT: the command was interrupted after ${timeoutMs} ms\n`);
    if (result.exitCode !== null) return result.exitCode;
    return 1;
  } finally {
    process.off('SIGINT', interrupt);
    if (created !== undefined && !keep) await runtime.call('shell.delete', { id: created }).catch(() => undefined);
    runtime.close();
  }
});
