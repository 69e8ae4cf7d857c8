/**
 * `execworld interrupt <shell-id>`: SIGINT to the command a kept shell runs.
 * @module
 */
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { CliError, type Command, defineCommand, expectPositionals, optionHelp } from './command.ts';

const OPTIONS = { ...CLIENT_OPTIONS } as const;

const HELP = `Usage: execworld interrupt [options] <shell-id>

Interrupts (SIGINT, as Ctrl-C would) the command shell <shell-id> runs. A
command that waits for input or went idle is answered: what it printed since
and how it ended are printed, and the shell is ready for the next command. A
command an 'execworld run' or 'execworld send' is waiting for gets the signal,
and that command prints how it ended; this one returns once it ended.

Options:
${optionHelp(OPTIONS)}

Exit status: the interrupted command's status (130 when SIGINT ended it) for
a command that waited; 0 once the command another command waits for ended; 1 when execworld or the daemon failed (the shell runs no command,
NOT_FOUND: no shell of this owner has that id); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [id] = expectPositionals(positionals, ['<shell-id>']) as [string];
  const runtime = await openRuntime(values);
  try {
    const shell = await runtime.call('shell.get', { id });
    if (shell.state === 'open') {
      const result = await runtime.call('shell.interrupt', { id });
      process.stdout.write(result.output);
      return result.exitCode ?? 1;
    }
    if (shell.state === 'running') {
      // Another call waits for the run: it is answered how the command ended, and prints it.
      await runtime.call('shell.interrupt', { id });
      return 0;
    }
    throw new CliError(`shell ${id} runs no command (it is ${shell.state})`);
  } finally {
    runtime.close();
  }
});
