/**
 * `execworld ps`: the terminals and processes of this token's owner, oldest
 * first, with what ended them.
 * @module
 */
import { CLIENT_OPTIONS, clientHelp, openRuntime, shellQuote } from './client.ts';
import { expectPositionals, type Command, defineCommand } from './command.ts';

const OPTIONS = { ...CLIENT_OPTIONS } as const;

const HELP = `Usage: execworld ps [options]

Lists the terminals (ids t_…) and processes (ids p_…) the daemon runs or still
remembers for this token's owner, oldest first: ID, PID, STATUS (running,
exited, or failed: the spawn was refused), EXIT (the exit code, or the signal
that ended it; - while running) and the program's argv.

Options:
${clientHelp()}
  -h, --help           show this help

Exit status: 0; 1 when execworld or the daemon failed; 2 for a usage error.
`;

interface Row {
  readonly id: string;
  readonly pid: number;
  readonly status: string;
  readonly exit: { exitCode: number | null; signal: string | null } | null;
  readonly argv: readonly string[];
  readonly createdAt: string;
}

/** The EXIT column: the code, or the signal that ended the program. */
function exitColumn(exit: Row['exit']): string {
  if (exit === null) return '-';
  return exit.exitCode !== null ? String(exit.exitCode) : (exit.signal ?? '-');
}

/** Rows as columns padded to their widest cell; the last column (argv) is not padded. */
export function formatTable(rows: readonly Row[]): string {
  const cells = [
    ['ID', 'PID', 'STATUS', 'EXIT', 'ARGV'],
    ...rows.map((row) => [row.id, String(row.pid), row.status, exitColumn(row.exit), shellQuote(row.argv)]),
  ];
  const widths = cells[0]!.map((_cell, column) => Math.max(...cells.map((line) => line[column]!.length)));
  return cells.map((line) => line.map((cell, column) => (column === line.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')).join('\n') + '\n';
}

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  expectPositionals(positionals, []);
  const runtime = await openRuntime(values);
  try {
    const [terminals, processes] = await Promise.all([runtime.listTerminals(), runtime.listProcesses()]);
    const rows: Row[] = [...terminals, ...processes].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    process.stdout.write(formatTable(rows));
    return 0;
  } finally {
    runtime.close();
  }
});
