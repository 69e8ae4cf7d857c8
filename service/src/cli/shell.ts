/**
 * `execworld shell`: a new interactive bash on a terminal of the daemon,
 * attached to this one as `execworld attach` would (see attach.ts).
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
  optionHelp,
  type OptionTable,
  placeOptions,
} from './command.ts';
import { attachAndWait, DETACH_KEYS, terminalSpec } from './interactive.ts';

/** A login shell: the profile of the daemon host's user sets up its environment, as a fresh login would. */
const SHELL_ARGV = ['bash', '-l'] as const;

const OPTIONS = {
  detach: { type: 'boolean', short: 'd', help: "start it, print its terminal's id and return ('execworld attach <id>')" },
  ...CREATE_OPTIONS,
  // What the shell's session may use: it and every command it runs, together.
  ...LIMIT_OPTIONS,
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld shell [options]

Starts an interactive bash on a new terminal of the daemon's host and attaches
this terminal to it: everything typed goes to it, its output comes here, and
its window size follows this one. ${DETACH_KEYS} detaches and leaves it running
(the id is printed); 'execworld attach <id>' resumes. Its TERM is this
terminal's unless --env sets one.

Options:
${optionHelp(OPTIONS)}

--memory, --pids-limit and --cpus limit the shell's session (it and every
command it runs, together), as 'execworld run' does; the daemon refuses a
limit past its --max-session-* ceilings, or one its host cannot enforce.

Exit status: the shell's exit code once it exits (128+n when signal n ended
it); 0 after a detach or with --detach; 1 when execworld or the daemon failed (the line on
stderr says why); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  expectPositionals(positionals, []);
  const env = environmentOptions(values);
  const where = placeOptions(values);
  const limits = limitOptions(values);
  const runtime = await openRuntime(values);
  try {
    if (values.detach === true) {
      const { id } = await runtime.call('terminal.create', terminalSpec(SHELL_ARGV, where, env, limits));
      process.stdout.write(`${id}\n`);
      return 0;
    }
    const terminal = await runtime.spawnTerminal(terminalSpec(SHELL_ARGV, where, env, limits));
    return await attachAndWait(terminal);
  } finally {
    // Closing only detaches: a shell that was detached from runs on.
    runtime.close();
  }
});
