/**
 * `execworld run [options] '<command>'`: runs a command in a persistent shell
 * the daemon keeps, prints its output and exits with its status.
 * @module
 */
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import {
  type Command,
  CREATE_OPTIONS,
  defineCommand,
  environmentOptions,
  expectPositionals,
  LIMIT_OPTIONS,
  limitOptions,
  milliseconds,
  optionHelp,
  type OptionTable,
  placeOptions,
  UsageError,
} from './command.ts';
import { assertEnded, interruptCommand, shellBusy, streamRun, usageLine, type RunAnswer } from './shell-run.ts';

/** Exit status after Ctrl-C, as a shell gives a command SIGINT ended. */
const INTERRUPTED_STATUS = 130;

const OPTIONS = {
  shell: { type: 'string', value: '<id>', help: 'run in this shell (an id printed by --keep)' },
  keep: { type: 'boolean', help: 'keep the new shell and print its id on stderr' },
  pwsh: {
    type: 'boolean',
    help: "a PowerShell 7 shell (pwsh on the daemon's PATH) instead of bash (a daemon on Windows runs PowerShell without it)",
  },
  // Where, as whom and with what environment the new shell runs.
  ...CREATE_OPTIONS,
  // What the new shell's session may use: every command it runs shares them.
  ...LIMIT_OPTIONS,
  usage: { type: 'boolean', help: 'print what the command used on stderr after its output (see below)' },
  timeout: { type: 'string', value: '<ms>', help: 'interrupt the command (SIGINT) after this long' },
  'idle-timeout': { type: 'string', value: '<ms>', help: 'give up after this long without output (the command runs on in the shell)' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld run [options] '<command>'

Runs <command> in a persistent shell on the daemon's host and prints what it
prints as it comes (as text: escape sequences removed). Without --shell, a new
bash (or pwsh) shell runs it and is ended after; --keep keeps it and prints
its id on stderr, and --shell <id> runs the next command in it, with its cwd,
variables and functions.

Options:
${optionHelp(OPTIONS)}

--memory, --pids-limit and --cpus limit the new shell's session (its
commands share them), as docker run's do; the daemon refuses a limit past its
--max-session-* ceilings, or one its host cannot enforce. --usage prints one
line on stderr after the output, what the command used (where a cgroup
counts it; fields separated by spaces, values in bytes and milliseconds, -
for none):

  execworld: usage cpu_user_ms=<n> cpu_system_ms=<n> peak_memory_bytes=<n|-> peak_scope=<run|session> limit_hit=<memory|pids|cpu|-> oom_killed=<true|false>

Ctrl-C interrupts the command (SIGINT to it on the daemon's host), prints what
it printed and exits 130; the new shell is ended unless --keep. A second
Ctrl-C stops waiting for a command that ignores SIGINT.

A command that waits for input keeps its shell: 'execworld send <id> <text>'
answers it, 'execworld interrupt <id>' interrupts it, 'execworld kill <id>'
ends the shell; 'execworld ps' lists the shells.

Exit status: the command's (128+n when signal n ended it, the shell's own when
the command ended the shell); 130 after Ctrl-C; 1 when execworld or the daemon
failed, or the command waits for input or went idle (the line on stderr says
which, and the shell is kept so it can be answered); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [text] = expectPositionals(positionals, ["'<command>'"]) as [string];
  const timeoutMs = milliseconds(values.timeout, 'timeout');
  const idleTimeoutMs = milliseconds(values['idle-timeout'], 'idle-timeout');
  const where = placeOptions(values);
  const limits = limitOptions(values);
  const makesShell =
    values.pwsh === true || Object.keys(where).length > 0 || Object.keys(limits).length > 0 || values.env !== undefined || values['env-file'] !== undefined;
  if (values.shell !== undefined && makesShell) {
    throw new UsageError('--pwsh, --workdir, --user, --env, --env-file, --memory, --pids-limit and --cpus make a new shell; they do not go with --shell');
  }
  const env = environmentOptions(values);
  const runtime = await openRuntime(values);
  let created: string | undefined;
  let keep = values.keep === true;
  let id = values.shell;
  // Ctrl-C: SIGINT to the command (the foreground of the shell's terminal); its run then answers how it ended.
  // A second one stops waiting for a command that ignores it.
  let interrupted = false;
  let giveUp: () => void = () => undefined;
  const gaveUp = new Promise<undefined>((resolve) => (giveUp = () => resolve(undefined)));
  let running = false;
  let answered = false;
  const interrupting = new AbortController();
  let timeoutTimer: ReturnType<typeof setTimeout> | undefined;
  const onSigint = (): void => {
    if (interrupted) {
      giveUp();
      return;
    }
    interrupted = true;
    interrupting.abort();
    // Nothing on the terminal's foreground (the command just ended): its run answers anyway.
    if (running) interruptCommand(runtime, id!, () => answered).catch(() => undefined);
  };
  process.on('SIGINT', onSigint);
  try {
    if (id === undefined) {
      const shell = await runtime.call('shell.create', {
        // Without --pwsh the daemon's default: bash, or PowerShell on Windows.
        ...(values.pwsh === true ? { dialect: 'pwsh' as const } : {}),
        ...where,
        ...(env === undefined ? {} : { env }),
        ...(Object.keys(limits).length === 0 ? {} : { limits }),
      });
      id = created = shell.id;
      if (keep) process.stderr.write(`execworld: shell ${id}\n`);
    }
    if (interrupted) return INTERRUPTED_STATUS;
    const shellId = id;
    running = true;
    // The daemon interrupts the command at --timeout, from when it took the call: after this, a line end may be the shell's.
    if (timeoutMs !== undefined) timeoutTimer = setTimeout(() => interrupting.abort(), timeoutMs);
    const call = (): Promise<RunAnswer> =>
      runtime.call('shell.run', {
        id: shellId,
        command: text,
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
        ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
      });
    const result = await Promise.race([
      streamRun(runtime, shellId, 'run', call, (output) => process.stdout.write(output), interrupting.signal).catch((error: unknown) => {
        throw shellBusy(error, shellId);
      }),
      gaveUp,
    ]);
    running = false;
    answered = true;
    if (result !== undefined && values.usage === true) process.stderr.write(`${usageLine(result.usage)}\n`);
    if (result === undefined || interrupted) return INTERRUPTED_STATUS;
    if (result.reason === 'waiting_for_input' || result.reason === 'idle_timeout') {
      // Its program is still there: the shell is kept so that it can be answered or interrupted.
      keep = true;
      assertEnded(result, shellId);
    }
    if (result.reason === 'timeout') process.stderr.write(`execworld: TIMEOUT: the command was interrupted after ${timeoutMs} ms\n`);
    if (result.exitCode !== null) return result.exitCode;
    return 1;
  } finally {
    clearTimeout(timeoutTimer);
    process.off('SIGINT', onSigint);
    if (created !== undefined && !keep) await runtime.call('shell.delete', { id: created }).catch(() => undefined);
    runtime.close();
  }
});
