/**
 * Pagers and full-screen programs in a terminal (issue 16): an agent harness
 * runs them with TERM=dumb and must see each one proven waiting for input, or
 * it waits out its timeout. Kept apart from runtime-contract.ts and run over
 * the same runtimes.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBash, PROMPT, waitForForeground } from '../helpers/terminal.ts';
import type { RuntimeUnderTest } from './runtime-contract.ts';

interface Program {
  /** What the test is called by. */
  readonly name: string;
  /** The tools it needs on PATH. */
  readonly tools: readonly string[];
  readonly command: string;
  /** What quits it. */
  readonly quit: string;
  /** The command name of the process that waits for input. */
  readonly reader: string;
}

/** The man page the test reads: its own, because slim images ship none (dpkg path-exclude /usr/share/man). */
const PAGE = 'ewpager';

/**
 * All of them run with TERM=dumb, which each one accepts: less and man (through
 * less) first ask for RETURN after a warning that the terminal is not fully
 * functional, vim and top draw with what little dumb offers.
 */
const PROGRAMS: readonly Program[] = [
  { name: 'less', tools: ['seq', 'less'], command: 'seq 1 300 | less', quit: 'q', reader: 'less' },
  { name: 'more', tools: ['seq', 'more'], command: 'seq 1 300 | more', quit: 'q', reader: 'more' },
  { name: 'vim', tools: ['vim'], command: 'vim', quit: ':q!\r', reader: 'vim' },
  // man reads nothing itself: its pager does.
  { name: 'man', tools: ['man', 'less'], command: `man ${PAGE}`, quit: 'q', reader: 'less' },
  { name: 'top', tools: ['top'], command: 'top', quit: 'q', reader: 'top' },
];

/**
 * man-db filters its helpers with seccomp, which some container runtimes refuse;
 * the filter guards against hostile pages and the only page here is the test's.
 */
const MAN_SANDBOX_OFF = { MAN_DISABLE_SECCOMP: '1' };

/** The tools of this list missing on this host, probed once. */
const missingTools = new Set(
  [...new Set(PROGRAMS.flatMap((program) => program.tools))].filter(
    (tool) => spawnSync('/bin/sh', ['-c', 'command -v "$1"', 'sh', tool], { stdio: 'ignore' }).status !== 0,
  ),
);

/** Writes a man page longer than the terminal into a new MANPATH directory, so the pager has to wait for a key. */
function writeManPage(): string {
  const root = mkdtempSync(join(tmpdir(), 'execworld-man-'));
  mkdirSync(join(root, 'man1'));
  const body = Array.from({ length: 120 }, (_unused, index) => `.PP\nParagraph ${index + 1} of the pager test page.`).join('\n');
  writeFileSync(join(root, 'man1', `${PAGE}.1`), `.TH EWPAGER 1\n.SH NAME\n${PAGE} \\- a page for the pager test\n.SH DESCRIPTION\n${body}\n`);
  return root;
}

/** Why `program` cannot run here, or undefined when it can. */
function unavailable(program: Program): string | undefined {
  const missing = program.tools.filter((tool) => missingTools.has(tool));
  if (missing.length > 0) return `${missing.join(', ')} not installed`;
  if (program.name !== 'man') return undefined;
  // man-db installs, but formats nothing without groff's macros, which slim images exclude too.
  const root = writeManPage();
  try {
    const formatted = spawnSync('man', ['-P', 'cat', PAGE], { env: { ...process.env, MANPATH: root, MANWIDTH: '80', ...MAN_SANDBOX_OFF }, encoding: 'utf8' });
    return formatted.stdout?.includes('Paragraph 120') ? undefined : `man cannot format a page (groff-base macros missing?): ${formatted.stderr ?? ''}`.trim();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** Why each program cannot run here, probed once when the file loads, so that the reason can be in a test's title. */
const unavailableReasons = new Map(PROGRAMS.map((program) => [program.name, unavailable(program)]));

/** What the pager cases use of a {@link RuntimeUnderTest}; any factory of one fits. */
export type PagerSubject = Pick<RuntimeUnderTest, 'runtime' | 'close'>;

export function definePagerContract(name: string, make: () => Promise<PagerSubject>): void {
  describe(`${name}: pagers and full-screen programs are proven waiting`, () => {
    let subject: PagerSubject;
    let manRoot: string;
    beforeAll(async () => {
      manRoot = writeManPage();
      subject = await make();
    });
    afterAll(async () => {
      await subject.close();
      rmSync(manRoot, { recursive: true, force: true });
    });

    for (const program of PROGRAMS) {
      const reason = unavailableReasons.get(program.name);
      // On CI a missing tool fails the test instead: .ci/run installs them all.
      const skip = reason !== undefined && process.env.CI === undefined;
      it.skipIf(skip)(
        `${program.name} waits for input with TERM=dumb and the prompt returns after quitting${skip ? ` (skipped: ${reason})` : ''}`,
        async () => {
          if (reason !== undefined) throw new Error(`${program.name} cannot run on this CI host: ${reason}`);
          const shell = await openBash(subject.runtime, {
            // Pager choices of the environment the runtime inherits would change what runs.
            env: { TERM: 'dumb', PAGER: 'less', MANPAGER: 'less', LESS: '', MORE: '', MANPATH: manRoot, ...MAN_SANDBOX_OFF },
          });
          const shellGroup = shell.terminal.pid;
          await shell.terminal.write(`${program.command}\r`);
          const first = await waitForForeground(shell.terminal, `${program.name} waiting`, (f) => f?.inputWaiting === true && f.processGroupId !== shellGroup);
          // The program proven to wait is named, so a caller can say which one asks.
          expect((first as { command?: string }).command).toBe(program.reader);
          // RETURN goes past less's warning about the dumb terminal, and is a harmless
          // key to the others: each must be proven waiting again, with a new wait.
          await shell.terminal.write('\r');
          const again = await waitForForeground(
            shell.terminal,
            `${program.name} waiting after RETURN`,
            (f) => f?.inputWaiting === true && f.processGroupId === first.processGroupId && f.inputWaitToken !== first.inputWaitToken,
          );
          expect(again.inputWaitToken).toBeDefined();
          const since = shell.text().length;
          await shell.terminal.write(program.quit);
          await waitForForeground(shell.terminal, `the shell after quitting ${program.name}`, (f) => f?.processGroupId === shellGroup && f.inputWaiting);
          await shell.waitForOutput(new RegExp(`${PROMPT.replace(/[>]/g, '\\$&')}$`), since);
          expect(await shell.run('echo "status=$?"')).toContain('status=0');
          await shell.terminal.terminate();
        },
      );
    }
  });
}
