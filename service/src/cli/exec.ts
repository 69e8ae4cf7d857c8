/**
 * `execworld exec [options] [--] <program> [<arg>...]`: one program on the
 * daemon's host, as if it ran here. Without --tty a managed process: its
 * stdout and stderr arrive apart on this command's, this command's stdin is
 * its stdin (closed at end of file). With --tty a terminal: this one in raw
 * mode, its window size followed. Either way the exit status is the
 * program's, and the session is forgotten on the daemon once it ended: its
 * output and outcome were all handed over here.
 * @module
 */
import { finished } from 'node:stream/promises';
import type { RemoteRuntime, RemoteTerminal, SessionLimits, SessionUsage } from '@execworld/sdk';
import { CLIENT_OPTIONS, exitStatus, GRACE_MS, openRuntime } from './client.ts';
import {
  type Command,
  CREATE_OPTIONS,
  environmentOptions,
  HELP_OPTION,
  LIMIT_OPTIONS,
  limitOptions,
  optionHelp,
  type OptionTable,
  parseCommandLine,
  placeOptions,
  splitAtProgram,
  UsageError,
  type Where,
} from './command.ts';
import { interact, terminalSpec } from './interactive.ts';
import { usageLine } from './shell-run.ts';

const OPTIONS = {
  tty: {
    type: 'boolean',
    short: 't',
    help:
      "run it on a terminal: this one in raw mode and the window size following this one's. When stdin is not a " +
      'terminal (a pipe, a file) it says so on stderr and runs without one',
  },
  interactive: { type: 'boolean', short: 'i', help: "pass stdin on (always done; taken for docker's and kubectl's -it)" },
  detach: {
    type: 'boolean',
    short: 'd',
    help: "start it, print its id and return; it runs on ('execworld logs', 'execworld attach' for a terminal, 'execworld kill')",
  },
  ...CREATE_OPTIONS,
  // What the program's session may use: it and every process it starts, together.
  ...LIMIT_OPTIONS,
  usage: { type: 'boolean', help: 'print what the program used on stderr once it ended (see below; not with --detach)' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

/** What kubectl says when it is asked for a terminal its input cannot be; the program then runs without one. */
export const NO_TTY_WARNING = 'Unable to use a TTY - input is not a terminal or the right kind of file';

/** Output a detached process keeps of each of its streams for 'execworld logs': its last MiB. */
const DETACHED_OUTPUT_BYTES = 1024 * 1024;

const HELP = `Usage: execworld exec [options] [--] <program> [<arg>...]

Runs one program on the daemon's host and waits for it to end. Its stdout and
stderr arrive on this command's stdout and stderr, and this command's stdin is
its stdin (closed at end of file). SIGINT, SIGTERM or SIGHUP to this command
ends the program (SIGTERM to its tree, SIGKILL ${GRACE_MS / 1000} s later). The program is
looked up on the daemon's PATH; options after its name are its own.

Options:
${optionHelp(OPTIONS)}

--memory, --pids-limit and --cpus limit the program's session (it and what
it starts, together), as 'execworld run' does; the daemon refuses a limit
past its --max-session-* ceilings, or one its host cannot enforce. --usage
prints one line on stderr once the program ended, what its session used, in
the form of 'execworld run --usage' (peak_scope is always session: the peak is
the program's own), or that no cgroup counted it:

  execworld: usage cpu_user_ms=<n> cpu_system_ms=<n> peak_memory_bytes=<n|-> peak_scope=session limit_hit=<memory|pids|cpu|-> oom_killed=<true|false>

Exit status: the program's exit code; 128+n when signal n ended it; 0 with
--detach once it started; 1 when execworld or the daemon failed (the line on
stderr says why: the program did not run, or its end is unknown); 2 for a
usage error.
`;

/** What the options ask of the program's session: where it runs, its environment and its limits. */
interface Session {
  readonly where: Where;
  readonly env: Record<string, string> | undefined;
  readonly limits: SessionLimits;
}

/** The create's fields of a {@link Session}: the place, and env and limits where given. */
const sessionFields = ({ where, env, limits }: Session) => ({
  ...where,
  ...(env === undefined ? {} : { env }),
  ...(Object.keys(limits).length === 0 ? {} : { limits }),
});

/** A terminal's create of `argv` in `session`. */
const terminalCreate = (argv: string[], { where, env, limits }: Session) => terminalSpec(argv, where, env, limits);

/** `--usage`'s line: the session's usage, whose peak is the program's own. */
const printUsage = (usage: SessionUsage | undefined): void => {
  process.stderr.write(`${usageLine(usage === undefined ? undefined : { ...usage, peakScope: 'session' })}\n`);
};

/** A write to stdin failed because the program closed it or ended: nothing more to forward. */
const isClosedPipe = (error: unknown): boolean => (error as NodeJS.ErrnoException).code === 'EPIPE';

/** The program as a managed process with its stdio piped through this command's. */
async function execProcess(runtime: RemoteRuntime, argv: string[], session: Session, usage: boolean): Promise<number> {
  const handle = runtime.spawn({
    argv,
    ...sessionFields(session),
    stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
    graceMs: GRACE_MS,
  });
  // From the spawn on, before the daemon even answered: a terminate waits for the acknowledgement.
  const terminate = (): void => handle.terminate();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, terminate);
  let id: string | undefined;
  try {
    id = (await handle.started).id;
    const stdin = handle.stdin!;
    const stdout = handle.stdout!;
    const stderr = handle.stderr!;
    let stdinFailure: Error | undefined;
    stdin.on('error', (error) => {
      process.stdin.unpipe(stdin);
      process.stdin.pause();
      if (!isClosedPipe(error)) stdinFailure = error;
    });
    process.stdin.pipe(stdin);
    stdout.pipe(process.stdout, { end: false });
    stderr.pipe(process.stderr, { end: false });
    // Every byte of both streams is written out before the exit status is given.
    const drained = Promise.all([finished(stdout), finished(stderr)]);
    drained.catch(() => undefined);
    const outcome = await handle.done;
    await drained;
    if (stdinFailure !== undefined) throw stdinFailure;
    if (usage) printUsage(handle.usage());
    return exitStatus(outcome);
  } finally {
    for (const signal of signals) process.off(signal, terminate);
    process.stdin.unpipe();
    process.stdin.pause();
    if (id !== undefined) await runtime.call('process.delete', { id }).catch(() => undefined);
  }
}

/** The program on a terminal, this one connected to it until it exits. */
async function execTerminal(runtime: RemoteRuntime, argv: string[], session: Session, usage: boolean): Promise<number> {
  // A signal while the terminal is being made ends it as soon as it is there; interact takes over the signals without a gap.
  let interrupted = false;
  const early = (): void => {
    interrupted = true;
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, early);
  let terminal: RemoteTerminal;
  try {
    terminal = await runtime.spawnTerminal(terminalCreate(argv, session));
  } finally {
    for (const signal of signals) process.off(signal, early);
  }
  try {
    if (interrupted) {
      await terminal.terminate();
      return exitStatus(await terminal.done);
    }
    const end = await interact(terminal, { detachable: false, onSignal: 'terminate' });
    // Not detachable: it ends with the program, whose done answer said what its session used.
    if (usage) printUsage(terminal.usage());
    return end.detached ? 0 : exitStatus(end.outcome);
  } finally {
    await runtime.call('terminal.delete', { id: terminal.id }).catch(() => undefined);
  }
}

/**
 * Starts the program and prints its id, leaving it to run: a process without
 * input whose output the daemon keeps (its last MiB of each stream, so it never
 * waits for a reader), or a terminal.
 */
async function detach(runtime: RemoteRuntime, tty: boolean, argv: string[], session: Session): Promise<number> {
  const { id } = tty
    ? await runtime.call('terminal.create', terminalCreate(argv, session))
    : await runtime.call('process.create', {
        argv,
        ...sessionFields(session),
        stdio: { stdin: 'ignore', stdout: { maxBytes: DETACHED_OUTPUT_BYTES }, stderr: { maxBytes: DETACHED_OUTPUT_BYTES } },
        graceMs: GRACE_MS,
      });
  process.stdout.write(`${id}\n`);
  return 0;
}

export const command: Command = {
  help: HELP,
  options: { ...OPTIONS, ...HELP_OPTION },
  async run(args) {
    const { options, argv } = splitAtProgram(args, OPTIONS);
    const { values, help } = parseCommandLine(options, OPTIONS);
    if (help) {
      process.stdout.write(HELP);
      return 0;
    }
    if (argv.length === 0) throw new UsageError('missing the program to run');
    const session: Session = { env: environmentOptions(values), where: placeOptions(values), limits: limitOptions(values) };
    const usage = values.usage === true;
    if (usage && values.detach === true) throw new UsageError('--usage prints what the program used once it ended; it does not go with --detach');
    let tty = values.tty === true;
    if (tty && values.detach !== true && process.stdin.isTTY !== true) {
      // A terminal would never see the end of a pipe's input (a terminal has no end of file but Ctrl-D), so
      // \`echo abc | execworld exec -t cat\` would never return: without a terminal, stdin's end closes the program's.
      process.stderr.write(`execworld: ${NO_TTY_WARNING}\n`);
      tty = false;
    }
    const runtime = await openRuntime(values);
    try {
      if (values.detach === true) return await detach(runtime, tty, argv, session);
      return tty ? await execTerminal(runtime, argv, session, usage) : await execProcess(runtime, argv, session, usage);
    } finally {
      runtime.close();
    }
  },
};
