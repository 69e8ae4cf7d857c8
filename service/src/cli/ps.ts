/**
 * `execworld ps`: the terminals, processes and shells of this token's owner,
 * oldest first, with what ended them.
 * @module
 */
import { CLIENT_OPTIONS, openRuntime, shellQuote } from './client.ts';
import { type Command, defineCommand, expectPositionals, optionHelp } from './command.ts';

const OPTIONS = { ...CLIENT_OPTIONS } as const;

const HELP = `Usage: execworld ps [options]

Lists the terminals (ids t_…), processes (ids p_…) and shells (ids s_…, kept
by 'execworld run --keep') the daemon runs or still remembers for this token's
owner, oldest first: ID, PID, STATUS, EXIT (the exit code, or the signal that
ended it; - while running), CPU (user and system time of all its processes
so far, in seconds), MEM (their peak memory together: k, M, G of 1024),
LIMITS (memory, pids and cpus it runs under), PORTS (the TCP ports its
processes listen on, each reached at /v1/ports/<port>/ of the daemon; - for
none, or where the daemon cannot tell) and the program's argv. CPU and
MEM are read from the session's cgroup when asked, running or not; - where
no cgroup counts it (and, for LIMITS, where it has none). A terminal's or process's
STATUS is running, exited, or failed (the spawn was refused); a shell's is
idle (ready for 'execworld run --shell <id>'), running (a command runs), open
(its command waits for input or went idle: 'execworld send' answers it,
'execworld interrupt' interrupts it) or closed. A shell's PID and ARGV are its
terminal's, which is not listed apart.

Options:
${optionHelp(OPTIONS)}

Exit status: 0; 1 when execworld or the daemon failed; 2 for a usage error.
`;

interface Row {
  readonly id: string;
  readonly pid: number | null;
  readonly status: string;
  readonly exit: { exitCode: number | null; signal: string | null } | null;
  readonly argv: readonly string[];
  readonly createdAt: string;
  readonly usage?: { readonly cpuUserMs: number; readonly cpuSystemMs: number; readonly peakMemoryBytes: number | null } | undefined;
  readonly limits?: { readonly memoryBytes?: number | undefined; readonly pids?: number | undefined; readonly cpu?: number | undefined } | undefined;
  /** The TCP ports the session's processes listen on. */
  readonly ports?: readonly number[];
}

/** Bytes in the units of 1024 (k, M, G, T), to one decimal below ten. */
export function bytesColumn(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) return '-';
  const units = ['', 'k', 'M', 'G', 'T'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? String(bytes) : `${value < 10 ? value.toFixed(1) : Math.round(value)}${units[unit]}`;
}

/** The CPU column: user and system time together, in seconds. */
function cpuColumn(usage: Row['usage']): string {
  return usage === undefined ? '-' : `${((usage.cpuUserMs + usage.cpuSystemMs) / 1000).toFixed(2)}s`;
}

/** The LIMITS column: mem=, pids= and cpus= of those it has, as run's options name them. */
function limitsColumn(limits: Row['limits']): string {
  if (limits === undefined) return '-';
  const parts = [
    ...(limits.memoryBytes === undefined ? [] : [`mem=${bytesColumn(limits.memoryBytes)}`]),
    ...(limits.pids === undefined ? [] : [`pids=${limits.pids}`]),
    ...(limits.cpu === undefined ? [] : [`cpus=${limits.cpu}`]),
  ];
  return parts.length === 0 ? '-' : parts.join(',');
}

/** The EXIT column: the code, or the signal that ended the program. */
function exitColumn(exit: Row['exit']): string {
  if (exit === null) return '-';
  return exit.exitCode !== null ? String(exit.exitCode) : (exit.signal ?? '-');
}

/** Rows as columns padded to their widest cell; the last column (argv) is not padded. */
export function formatTable(rows: readonly Row[]): string {
  const cells = [
    ['ID', 'PID', 'STATUS', 'EXIT', 'CPU', 'MEM', 'LIMITS', 'PORTS', 'ARGV'],
    ...rows.map((row) => [
      row.id,
      row.pid === null ? '-' : String(row.pid),
      row.status,
      exitColumn(row.exit),
      cpuColumn(row.usage),
      bytesColumn(row.usage?.peakMemoryBytes),
      limitsColumn(row.limits),
      row.ports === undefined || row.ports.length === 0 ? '-' : row.ports.join(','),
      shellQuote(row.argv),
    ]),
  ];
  const widths = cells[0]!.map((_cell, column) => Math.max(...cells.map((line) => line[column]!.length)));
  return cells.map((line) => line.map((cell, column) => (column === line.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')).join('\n') + '\n';
}

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  expectPositionals(positionals, []);
  const runtime = await openRuntime(values);
  try {
    const [terminals, processes, { shells }, listening] = await Promise.all([
      runtime.listTerminals(),
      runtime.listProcesses(),
      runtime.call('shell.list', {}),
      // A daemon without discovery leaves the column empty.
      runtime.call('ports.list', {}).catch(() => ({ supported: false, ports: [] })),
    ]);
    const ports = (session: string | null): number[] => [...new Set(listening.ports.filter((entry) => entry.session === session).map((entry) => entry.port))];
    // A shell stands for its terminal: one row, the shell's id and state with the terminal's pid and argv.
    const shellTerminals = new Set(shells.flatMap((shell) => (shell.terminalId === null ? [] : [shell.terminalId])));
    const shellRows = shells.map((shell): Row => {
      const terminal = terminals.find((each) => each.id === shell.terminalId);
      return {
        id: shell.id,
        pid: terminal?.pid ?? null,
        status: shell.state,
        exit: null,
        argv: terminal?.argv ?? [shell.dialect],
        createdAt: shell.createdAt,
        usage: terminal?.usage,
        limits: terminal?.limits,
        ports: ports(shell.terminalId),
      };
    });
    const sessions = [...terminals.filter((terminal) => !shellTerminals.has(terminal.id)), ...processes].map((row) => ({ ...row, ports: ports(row.id) }));
    const rows: Row[] = [...sessions, ...shellRows].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
    process.stdout.write(formatTable(rows));
    return 0;
  } finally {
    runtime.close();
  }
});
