/**
 * `execworld token-file`: where a local daemon keeps its token by default.
 * @module
 */
import { localTokenFile } from '@execworld/sdk/token-file';
import { defineCommand, expectPositionals, optionHelp, type Command } from './command.ts';

const HELP = `Usage: execworld token-file

Prints the path of the token file a daemon on this machine writes and reads
when none is configured ($XDG_CONFIG_HOME/execworld/token, else
~/.config/execworld/token); the other commands read their default token there.

Options:
${optionHelp({})}
`;

// eslint-disable-next-line @typescript-eslint/require-await -- every command's run is async
export const command: Command = defineCommand(HELP, {}, async (_values, positionals) => {
  expectPositionals(positionals, []);
  process.stdout.write(`${localTokenFile()}\n`);
  return 0;
});
