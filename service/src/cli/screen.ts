/**
 * `execworld screen <terminal-id>`: prints a terminal's screen as the daemon's
 * emulator draws it.
 * @module
 */
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { type Command, defineCommand, expectPositionals, optionHelp, type OptionTable } from './command.ts';

const OPTIONS = {
  json: { type: 'boolean', help: 'print the whole snapshot (cursor, alternate screen, title, output offset) as JSON' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld screen [options] <terminal-id>

Prints the terminal's screen, one line per row (trailing blank rows left
out), as the daemon's terminal emulator draws it: what a person attached to
it would see, full-screen programs (vim, less, top) included.

Options:
${optionHelp(OPTIONS)}

Exit status: 0; 1 when execworld or the daemon failed (NOT_FOUND: no terminal
of this owner has that id); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [id] = expectPositionals(positionals, ['<terminal-id>']) as [string];
  const runtime = await openRuntime(values);
  try {
    const screen = await runtime.call('terminal.screen', { id });
    if (values.json === true) {
      process.stdout.write(`${JSON.stringify(screen, null, 2)}\n`);
      return 0;
    }
    const lines = [...screen.lines];
    while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
    process.stdout.write(lines.map((line) => `${line}\n`).join(''));
    return 0;
  } finally {
    runtime.close();
  }
});
