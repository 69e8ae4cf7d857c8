/**
 * `execworld logs [-f] <id>`: what a terminal printed, or a process's stdout
 * and stderr (on this command's stdout and stderr), from the oldest byte the
 * daemon still keeps; with -f, on until the stream ends.
 * @module
 */
import { once } from 'node:events';
import { MAX_WAIT_MS } from '@execworld/sdk/seam';
import type { OperationResult } from '@execworld/sdk/protocol';
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { CliError, type Command, defineCommand, expectPositionals, optionHelp, type OptionTable } from './command.ts';
import { findSession } from './sessions.ts';

const OPTIONS = {
  follow: { type: 'boolean', short: 'f', help: 'go on printing until the output ends (the program exited)' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld logs [options] <id>

Prints the output of a terminal, or the stdout and stderr of a process (on
this command's stdout and stderr), from the oldest byte the daemon still keeps
(each stream keeps its last --ring-bytes, 1 MiB by default). Bytes no longer
kept are said on stderr.

Options:
${optionHelp(OPTIONS)}

Exit status: 0; 1 when execworld or the daemon failed (NOT_FOUND: nothing of
this owner has that id); 2 for a usage error.
`;

/** One read of a stream: from an offset (undefined: the oldest kept), waiting up to waitMs for bytes. */
type Reader = (from: number | undefined, waitMs: number) => Promise<OperationResult<'terminal.output'>>;

/** Writes `bytes` to `target`, waiting while it is full. */
async function write(target: NodeJS.WritableStream, bytes: Buffer): Promise<void> {
  if (!target.write(bytes)) await once(target, 'drain');
}

/**
 * Copies a stream to `target`: to `end` (where the stream stood when asked)
 * or, following, to the stream's end.
 */
async function copy(read: Reader, target: NodeJS.WritableStream, options: { follow: boolean; end: number; name: string }): Promise<void> {
  let from: number | undefined;
  for (;;) {
    const chunk = await read(from, options.follow ? MAX_WAIT_MS : 0);
    if (chunk.gap !== null) process.stderr.write(`execworld: ${options.name} bytes ${chunk.gap.from} to ${chunk.gap.to} are no longer kept\n`);
    const bytes = Buffer.from(chunk.data, 'base64');
    if (bytes.length > 0) await write(target, bytes);
    from = chunk.next;
    if (chunk.ended) return;
    if (!options.follow && (bytes.length === 0 || from >= options.end)) return;
  }
}

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [id] = expectPositionals(positionals, ['<id>']) as [string];
  const follow = values.follow === true;
  const runtime = await openRuntime(values);
  try {
    const session = await findSession(runtime, id);
    const at = (from: number | undefined): { from?: number } => (from === undefined ? {} : { from });
    if (session.kind === 'shell') {
      // A shell's commands print through its terminal, between the markers that delimit each run.
      const terminal = session.info.terminalId === null ? '' : `; 'execworld logs ${session.info.terminalId}' prints its terminal's raw output`;
      throw new CliError(`${id} is a shell: each command's output is what its run printed${terminal}`);
    }
    if (session.kind === 'terminal') {
      const read: Reader = (from, waitMs) => runtime.call('terminal.output', { id, ...at(from), waitMs });
      await copy(read, process.stdout, { follow, end: session.info.output.end, name: 'output' });
    } else {
      const copies: Promise<void>[] = [];
      for (const [name, target] of [
        ['stdout', process.stdout],
        ['stderr', process.stderr],
      ] as const) {
        const stream = session.info[name];
        if (stream === null) continue;
        const read: Reader = (from, waitMs) => runtime.call('process.output', { id, stream: name, ...at(from), waitMs });
        copies.push(copy(read, target, { follow, end: stream.end, name }));
      }
      await Promise.all(copies);
    }
    return 0;
  } finally {
    runtime.close();
  }
});
