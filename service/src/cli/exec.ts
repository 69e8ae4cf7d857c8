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
import type { RemoteRuntime, RemoteTerminal } from '@execworld/sdk';
import { CLIENT_OPTIONS, clientHelp, exitStatus, GRACE_MS, openRuntime } from './client.ts';
import { parseCommandLine, parseEnvEntries, splitAtProgram, UsageError, type Command } from './command.ts';
import { initialSize, interact, terminalEnv } from './interactive.ts';

const OPTIONS = {
  tty: { type: 'boolean', short: 't' },
  cwd: { type: 'string' },
  env: { type: 'string', short: 'e', multiple: true },
  ...CLIENT_OPTIONS,
} as const;

const HELP = `Usage: execworld exec [options] [--] <program> [<arg>...]

Runs one program on the daemon's host and waits for it to end. Its stdout and
stderr arrive on this command's stdout and stderr, and this command's stdin is
its stdin (closed at end of file). SIGINT, SIGTERM or SIGHUP to this command
ends the program (SIGTERM to its tree, SIGKILL ${GRACE_MS / 1000} s later). The program is
looked up on the daemon's PATH; options after its name are its own.

Options:
  -t, --tty            run it on a terminal: this one in raw mode (when stdin is
                       a terminal) and the window size following this one's
  --cwd <dir>          its working directory on the daemon's host (default: the world's: the owner's home, else the daemon's)
  -e, --env <K=V>      an environment variable to set (repeatable)
${clientHelp()}
  -h, --help           show this help

Exit status: the program's exit code; 128+n when signal n ended it; 1 when
execworld or the daemon failed (the line on stderr says why: the program did
not run, or its end is unknown); 2 for a usage error.
`;

/** A write to stdin failed because the program closed it or ended: nothing more to forward. */
const isClosedPipe = (error: unknown): boolean => (error as NodeJS.ErrnoException).code === 'EPIPE';

/** The program as a managed process with its stdio piped through this command's. */
async function execProcess(runtime: RemoteRuntime, argv: string[], cwd: string | undefined, env: Record<string, string> | undefined): Promise<number> {
  const handle = runtime.spawn({
    argv,
    cwd,
    ...(env === undefined ? {} : { env }),
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
    return exitStatus(outcome);
  } finally {
    for (const signal of signals) process.off(signal, terminate);
    process.stdin.unpipe();
    process.stdin.pause();
    if (id !== undefined) await runtime.call('process.delete', { id }).catch(() => undefined);
  }
}

/** The program on a terminal, this one connected to it until it exits. */
async function execTerminal(runtime: RemoteRuntime, argv: string[], cwd: string | undefined, env: Record<string, string> | undefined): Promise<number> {
  // A signal while the terminal is being made ends it as soon as it is there; interact takes over the signals without a gap.
  let interrupted = false;
  const early = (): void => {
    interrupted = true;
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, early);
  let terminal: RemoteTerminal;
  try {
    terminal = await runtime.spawnTerminal({ argv, cwd, env: { ...terminalEnv(), ...env }, ...initialSize(), graceMs: GRACE_MS });
  } finally {
    for (const signal of signals) process.off(signal, early);
  }
  try {
    if (interrupted) {
      await terminal.terminate();
      return exitStatus(await terminal.done);
    }
    const end = await interact(terminal, { detachable: false, onSignal: 'terminate' });
    // Not detachable: it ends with the program.
    return end.detached ? 0 : exitStatus(end.outcome);
  } finally {
    await runtime.call('terminal.delete', { id: terminal.id }).catch(() => undefined);
  }
}

export const command: Command = {
  help: HELP,
  async run(args) {
    const { options, argv } = splitAtProgram(args, OPTIONS);
    const { values, help } = parseCommandLine(options, OPTIONS);
    if (help) {
      process.stdout.write(HELP);
      return 0;
    }
    if (argv.length === 0) throw new UsageError('missing the program to run');
    const env = parseEnvEntries(values.env);
    // Never this machine's directory, which means nothing in the world: without --cwd the daemon picks.
    const cwd = values.cwd;
    const runtime = await openRuntime(values);
    try {
      return values.tty === true ? await execTerminal(runtime, argv, cwd, env) : await execProcess(runtime, argv, cwd, env);
    } finally {
      runtime.close();
    }
  },
};
