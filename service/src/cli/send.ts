/**
 * `execworld send <shell-id> <text>`: answers the command of a kept shell that
 * waits for input, and follows it on as `execworld run` does.
 * @module
 */
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { type Command, defineCommand, expectPositionals, milliseconds, optionHelp, type OptionTable } from './command.ts';
import { assertEnded, interruptCommand, shellBusy, streamRun, type RunAnswer } from './shell-run.ts';

const OPTIONS = {
  'no-newline': { type: 'boolean', short: 'n', help: 'type <text> alone, without the Enter after it' },
  timeout: { type: 'string', value: '<ms>', help: 'interrupt the command (SIGINT) after this long' },
  'idle-timeout': { type: 'string', value: '<ms>', help: 'give up after this long without output (the command runs on in the shell)' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld send [options] <shell-id> <text>

Types <text> and Enter to the command of shell <shell-id> that waits for
input (a prompt, a password, a pager: 'execworld run' said so and kept the
shell), then prints what the command prints as it comes, as 'execworld run'
does, until it ends or waits again.

Options:
${optionHelp(OPTIONS)}

Ctrl-C interrupts the command (SIGINT on the daemon's host) and exits 130;
the shell is kept.

Exit status: the command's, as for 'execworld run'; 130 after Ctrl-C; 1 when
execworld or the daemon failed (SHELL_BUSY: no command of the shell waits for
input), or the command waits for input again or went idle; 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [id, text] = expectPositionals(positionals, ['<shell-id>', '<text>']) as [string, string];
  const timeoutMs = milliseconds(values.timeout, 'timeout');
  const idleTimeoutMs = milliseconds(values['idle-timeout'], 'idle-timeout');
  // Enter on a terminal is a carriage return.
  const input = values['no-newline'] === true ? text : `${text}\r`;
  const runtime = await openRuntime(values);
  let interrupted = false;
  let interruptAnswer: Promise<RunAnswer | undefined> = Promise.resolve(undefined);
  const interrupting = new AbortController();
  const onSigint = (): void => {
    if (interrupted) return;
    interrupted = true;
    interrupting.abort();
    interruptAnswer = interruptCommand(runtime, id).catch(() => undefined);
  };
  process.on('SIGINT', onSigint);
  // The daemon interrupts the command at --timeout, from when it took the call: after this, a line end may be the shell's.
  const timeoutTimer = timeoutMs === undefined ? undefined : setTimeout(() => interrupting.abort(), timeoutMs);
  try {
    const result = await streamRun(
      runtime,
      id,
      'continue',
      () =>
        runtime.call('shell.send', {
          id,
          input,
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
          ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
        }),
      (output) => process.stdout.write(output),
      interrupting.signal,
    ).catch(async (error: unknown) => {
      // Interrupted before the send reached the shell: the interrupt took the open run, and its answer is the one.
      const answer = interrupted ? await interruptAnswer : undefined;
      if (answer === undefined) throw shellBusy(error, id);
      process.stdout.write(answer.output);
      return undefined;
    });
    if (interrupted || result === undefined) return 130;
    assertEnded(result, id);
    if (result.reason === 'timeout') process.stderr.write(`execworld: TIMEOUT: the command was interrupted after ${timeoutMs} ms\n`);
    return result.exitCode ?? 1;
  } finally {
    clearTimeout(timeoutTimer);
    process.off('SIGINT', onSigint);
    runtime.close();
  }
});
