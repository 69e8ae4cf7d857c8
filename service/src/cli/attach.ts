/**
 * `execworld attach <terminal-id>`: this terminal becomes that terminal's,
 * until its program exits or Ctrl-P Ctrl-Q detaches.
 *
 * Where it resumes: the output is replayed from the oldest byte the daemon
 * still holds (the start of the terminal's ring) onto a cleared screen. While
 * the ring holds the terminal's whole life, that is the very byte stream the
 * program wrote onto a blank terminal, so replaying it draws the screen the
 * program has now: a shell's recent lines and prompt, or a full-screen
 * program's screen (the terminal is then resized to this one, and the program
 * redraws). Nothing printed or echoed while no one was attached is lost, and
 * no offset has to be remembered between a detach and an attach, or between
 * two people attaching. Once the ring has wrapped, the replay starts mid-way
 * and a mode set before its start (the alternate screen, say) is missing
 * until the program redraws. A snapshot of the daemon's screen model would
 * replace the replay with the screen itself.
 * @module
 */
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { type Command, defineCommand, expectPositionals, optionHelp } from './command.ts';
import { attachAndWait, DETACH_KEYS } from './interactive.ts';

const OPTIONS = { ...CLIENT_OPTIONS } as const;

/** Moves the cursor home and clears the screen: where the replayed output starts, as the program's own output once did. */
const CLEAR_SCREEN = '\x1b[H\x1b[2J';

const HELP = `Usage: execworld attach [options] <terminal-id>

Attaches this terminal to a terminal of the daemon: its output so far is
replayed from the oldest byte the daemon keeps (onto a cleared screen), then
everything typed goes to its program and its window size follows this one.
${DETACH_KEYS} detaches and leaves it running; attach again to resume.

Options:
${optionHelp(OPTIONS)}

Exit status: the program's exit code once it exits (128+n when signal n ended
it); 0 after a detach; 1 when execworld or the daemon failed (the line on
stderr says why); 2 for a usage error.
`;

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [id] = expectPositionals(positionals, ['<terminal-id>']);
  const runtime = await openRuntime(values);
  try {
    const terminal = await runtime.attachTerminal(id!);
    if (process.stdout.isTTY) process.stdout.write(CLEAR_SCREEN);
    return await attachAndWait(terminal);
  } finally {
    // Closing only detaches: the terminal runs on.
    runtime.close();
  }
});
