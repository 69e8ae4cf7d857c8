/**
 * `execworld shell`: a new interactive bash on a terminal of the daemon,
 * attached to this one as `execworld attach` would (see attach.ts).
 * @module
 */
import { CLIENT_OPTIONS, clientHelp, GRACE_MS, openRuntime } from './client.ts';
import { expectPositionals, parseEnvEntries, type Command, defineCommand } from './command.ts';
import { attachAndWait, DETACH_KEYS, initialSize, terminalEnv } from './interactive.ts';

/** A login shell: the profile of the daemon host's user sets up its environment, as a fresh login would. */
const SHELL_ARGV = ['bash', '-l'] as const;

const OPTIONS = {
  cwd: { type: 'string' },
  env: { type: 'string', short: 'e', multiple: true },
  ...CLIENT_OPTIONS,
} as const;

const HELP = `Usage: execworld shell [options]

Starts an interactive bash on a new terminal of the daemon's host and attaches
this terminal to it: everything typed goes to it, its output comes here, and
its window size follows this one. ${DETACH_KEYS} detaches and leaves it running
(the id is printed); 'execworld attach <id>' resumes.

Options:
  --cwd <dir>          its working directory on the daemon's host (default: the world's: the owner's home, else the daemon's)
  -e, --env <K=V>      an environment variable to set (repeatable); TERM is this terminal's
${clientHelp()}
  -h, --help           show this help

Exit status: the shell's exit code once it exits (128+n when signal n ended
it); 0 after a detach; 1 when execworld or the daemon failed (the line on
stderr says why); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  expectPositionals(positionals, []);
  const env = { ...terminalEnv(), ...parseEnvEntries(values.env) };
  const runtime = await openRuntime(values);
  try {
    const terminal = await runtime.spawnTerminal({ argv: SHELL_ARGV, cwd: values.cwd, env, ...initialSize(), graceMs: GRACE_MS });
    return await attachAndWait(terminal);
  } finally {
    // Closing only detaches: a shell that was detached from runs on.
    runtime.close();
  }
});
