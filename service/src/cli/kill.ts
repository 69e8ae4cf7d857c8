/**
 * `execworld kill [--delete] <id>`: ends a terminal, a process tree or a shell, and
 * returns once nothing of it runs.
 * @module
 */
import { MAX_WAIT_MS } from '@execworld/sdk/seam';
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { type Command, defineCommand, expectPositionals, optionHelp, type OptionTable } from './command.ts';
import { findSession } from './sessions.ts';

const OPTIONS = { delete: { type: 'boolean', help: 'forget it too: its output and exit are gone' }, ...CLIENT_OPTIONS } as const satisfies OptionTable;

const HELP = `Usage: execworld kill [options] <id>

Ends a terminal, a process or a shell (an id of 'execworld ps') with
everything it started: SIGTERM (and SIGHUP to a terminal's shell), then
SIGKILL after the session's grace. Returns once nothing of it runs. An ended
terminal or process stays listed, with its output, until the daemon's
retention ends; --delete forgets it at once. An ended shell is forgotten.

Options:
${optionHelp(OPTIONS)}

Exit status: 0 once it ended; 1 when execworld or the daemon failed (NOT_FOUND:
nothing of this owner has that id); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [id] = expectPositionals(positionals, ['<id>']) as [string];
  const runtime = await openRuntime(values);
  try {
    const session = await findSession(runtime, id);
    if (session.kind === 'shell') {
      // Answers once the shell's terminal and everything it ran ended.
      await runtime.call('shell.delete', { id });
    } else if (session.kind === 'terminal') {
      // Both answer once nothing of the terminal's session runs.
      if (values.delete === true) await runtime.call('terminal.delete', { id });
      else await runtime.call('terminal.terminate', { id });
    } else if (values.delete === true) {
      await runtime.call('process.delete', { id });
    } else {
      await runtime.call('process.terminate', { id });
      // A process's terminate answers at once; the tree is gone when a wait says so.
      let gone = false;
      while (!gone) gone = (await runtime.call('process.wait', { id, timeoutMs: MAX_WAIT_MS })).treeExited;
    }
    return 0;
  } finally {
    runtime.close();
  }
});
