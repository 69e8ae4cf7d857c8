/**
 * Every command's options are one table: its --help lists exactly the options
 * its parser takes (read back from the help text, so a row left out of either
 * shows), and an option it does not take is the one argument error, exit
 * status 2, for serve as for the others.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../service/src/cli.ts';
import { CLIENT_OPTIONS } from '../../service/src/cli/client.ts';
import { runCli } from '../helpers/cli.ts';

/** The options the Options section of `help` lists, as `--name` and `-x` for those with a short form. */
function listed(help: string): string[] {
  const section = help.slice(help.indexOf('\nOptions:\n'));
  expect(section.length, 'an Options section').toBeGreaterThan(0);
  return [...section.matchAll(/^ {2}(?:-(\w), )?--([\w-]+)/gm)].flatMap(([, short, name]) =>
    short === undefined ? [`--${name}`] : [`-${short}`, `--${name}`],
  );
}

describe('command options', () => {
  it.each(COMMANDS.map((entry) => [entry.name, entry] as const))('%s --help lists exactly the options it parses', async (_name, entry) => {
    const command = await entry.load();
    const parsed = Object.entries(command.options).flatMap(([name, row]) => (row.short === undefined ? [`--${name}`] : [`-${row.short}`, `--${name}`]));
    expect(parsed).toContain('--help');
    expect(listed(command.help).sort()).toEqual(parsed.sort());
  });

  it.each(COMMANDS.map((entry) => [entry.name]))('%s refuses an option it does not take with the one argument error', async (name) => {
    const result = await runCli([name, '--no-such-option'], { env: { ...process.env, EXECWORLD_URL: 'http://127.0.0.1:9' } });
    expect(result).toMatchObject({
      code: 2,
      stdout: '',
      stderr: `execworld: unknown option --no-such-option\nRun 'execworld ${name} --help' for the usage.\n`,
    });
  });

  // serve's flags are docs/settings.md's, which test/docs/generated.test.ts holds to serve --help.
  it.each(COMMANDS.filter((entry) => entry.name !== 'serve').map((entry) => [entry.name, entry] as const))(
    "docs/cli.md's synopsis of %s names exactly its own options",
    async (name, entry) => {
      const page = readFileSync('docs/cli.md', 'utf8');
      const synopsis = new RegExp(`\\*\\*\`${name}(?: [^\`]*)?\`\\*\\*`).exec(page)?.[0];
      expect(synopsis, `a bullet **\`${name} …\`**`).toBeDefined();
      // Options in brackets, after a | and, for those a command needs (token create's --owner), bare.
      const named = new Set([...synopsis!.matchAll(/(?:\[| )(--?[a-z][\w-]*)/g)].map((match) => match[1]!));
      const own = Object.entries((await entry.load()).options).filter(
        ([option, row]) => option !== 'help' && !Object.hasOwn(CLIENT_OPTIONS, option) && row.alias === undefined,
      );
      // Each by its short form where it has one, as docker's habits are written.
      expect([...named].sort()).toEqual(own.map(([option, row]) => (row.short === undefined ? `--${option}` : `-${row.short}`)).sort());
    },
  );

  it('says a missing value alike for serve and the client commands', async () => {
    for (const [name, option] of [
      ['serve', '--port'],
      ['ps', '--url'],
    ]) {
      const result = await runCli([name!, option!], { env: process.env });
      expect(result).toMatchObject({ code: 2, stderr: `execworld: option ${option} needs a value\nRun 'execworld ${name} --help' for the usage.\n` });
    }
  });
});
