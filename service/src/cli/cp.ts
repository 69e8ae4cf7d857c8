/**
 * `execworld cp [-r] <source> <destination>`: copies a file or a directory
 * between this machine and the daemon's world, either way, with a progress
 * bar on a terminal.
 * @module
 */
import { stat } from 'node:fs/promises';
import { basename, isAbsolute, join, posix } from 'node:path';
import { RemoteTransfer, type ArchiveResult, type TransferProgress } from '@execworld/sdk/fs';
import type { RemoteRuntime } from '@execworld/sdk';
import { CLIENT_OPTIONS, openRuntime } from './client.ts';
import { CliError, type Command, defineCommand, expectPositionals, optionHelp, type OptionTable, UsageError } from './command.ts';
import { findSession } from './sessions.ts';

const OPTIONS = {
  recursive: { type: 'boolean', short: 'r', help: 'copy a directory and everything in it' },
  'no-progress': { type: 'boolean', help: 'no progress bar (there is one only when stderr is a terminal)' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld cp [options] <source> <destination>

Copies a file (or with -r a directory) between this machine and the daemon's
world, either way. The remote side is written :PATH, an absolute path in the
world, or ID:PATH, a path relative to the working directory of the terminal,
process or shell ID. A destination that is a directory receives the source
inside it, under the source's name, as cp does.

A file goes as an upload or a download that resumes after a cut connection,
and is put in place only once its size and SHA-256 match on both sides. A
directory goes as one tar stream: links stay links, modes and empty
directories are kept, owners are not; special files (sockets, FIFOs,
devices) are left out, each named on stderr, as is anything the unpacking
side refused.

Options:
${optionHelp(OPTIONS)}

Exit status: 0 once copied; 1 when execworld or the daemon failed (the error
names the code, e.g. FS_NOT_FOUND); 2 for a usage error.
`;

/** One side of a copy: a path on this machine, or one in the daemon's world (relative to a session's cwd). */
type Side = { readonly remote: false; readonly path: string } | { readonly remote: true; readonly session: string | undefined; readonly path: string };

/** `:PATH` and `ID:PATH` are remote; anything else (a path with no colon before its first slash) is local. */
export function parseSide(operand: string): Side {
  const colon = operand.indexOf(':');
  const slash = operand.indexOf('/');
  if (colon === -1 || (slash !== -1 && slash < colon)) return { remote: false, path: operand };
  const session = operand.slice(0, colon);
  const path = operand.slice(colon + 1);
  if (path === '') throw new UsageError(`${operand}: no path after the colon`);
  if (session === '' && !path.startsWith('/')) throw new UsageError(`${operand}: a path in the world is absolute (:/path), or relative to a session (ID:path)`);
  return { remote: true, session: session === '' ? undefined : session, path };
}

/** The absolute remote path of `side`: relative ones are resolved against their session's working directory. */
async function remotePath(runtime: RemoteRuntime, side: Side & { remote: true }): Promise<string> {
  if (side.session === undefined || posix.isAbsolute(side.path)) return side.path;
  const cwd = side.session.startsWith('s_') ? (await runtime.call('shell.get', { id: side.session })).cwd : (await findSession(runtime, side.session)).info.cwd;
  return posix.join(cwd, side.path);
}

/** A progress bar on stderr, redrawn at most ten times a second, or nothing when stderr is not a terminal. */
function progressBar(label: string, enabled: boolean): { update(progress: TransferProgress): void; done(): void } {
  if (!enabled || process.stderr.isTTY !== true) return { update: () => undefined, done: () => undefined };
  const started = Date.now();
  let drawn = 0;
  let last: TransferProgress = { bytes: 0, total: undefined };
  const draw = (): void => {
    const seconds = Math.max((Date.now() - started) / 1000, 0.001);
    const rate = `${formatBytes(last.bytes / seconds)}/s`;
    const width = Math.max(10, Math.min(40, (process.stderr.columns ?? 80) - label.length - 40));
    let line: string;
    if (last.total !== undefined && last.total > 0) {
      const fraction = Math.min(1, last.bytes / last.total);
      const filled = Math.round(fraction * width);
      line = `${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${formatBytes(last.bytes)} ${rate}`;
    } else line = `${label} ${formatBytes(last.bytes)} ${rate}`;
    process.stderr.write(`\r${line}\x1b[K`);
  };
  return {
    update: (progress) => {
      last = progress;
      if (Date.now() - drawn >= 100) {
        drawn = Date.now();
        draw();
      }
    },
    done: () => {
      draw();
      process.stderr.write('\n');
    },
  };
}

function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [sourceOperand, destinationOperand] = expectPositionals(positionals, ['<source>', '<destination>']) as [string, string];
  const source = parseSide(sourceOperand);
  const destination = parseSide(destinationOperand);
  if (source.remote === destination.remote) {
    throw new UsageError(
      source.remote ? 'both sides are in the world: one must be on this machine' : 'both sides are on this machine: write the remote one as :PATH or ID:PATH',
    );
  }
  const recursive = values.recursive === true;
  const runtime = await openRuntime(values);
  try {
    const transfer = new RemoteTransfer(runtime);
    const bar = progressBar(basename(source.path), values['no-progress'] !== true);
    const onProgress = (progress: TransferProgress): void => bar.update(progress);
    let warnings: ArchiveResult['warnings'] = [];
    if (!source.remote && destination.remote) {
      const info = await stat(source.path).catch(() => undefined);
      if (info === undefined) throw new CliError(`${source.path}: no such file or directory`);
      if (info.isDirectory() && !recursive) throw new CliError(`${source.path} is a directory (copy it with -r)`);
      let target = await remotePath(runtime, destination);
      const there = (await runtime.call('fs.stat', { path: target })).info;
      if (there?.type === 'directory') target = posix.join(target, basename(source.path));
      if (info.isDirectory()) warnings = (await transfer.uploadDirectory(source.path, target, { onProgress })).warnings;
      else await transfer.uploadFile(source.path, target, { onProgress, mode: info.mode & 0o777 });
    } else if (source.remote && !destination.remote) {
      const from = await remotePath(runtime, source);
      const info = (await runtime.call('fs.stat', { path: from })).info;
      if (info === null) throw new CliError(`${sourceOperand}: no such file or directory in the world`);
      if (info.type === 'directory' && !recursive) throw new CliError(`${sourceOperand} is a directory (copy it with -r)`);
      let target = isAbsolute(destination.path) ? destination.path : join(process.cwd(), destination.path);
      const local = await stat(target).catch(() => undefined);
      if (local?.isDirectory() === true) target = join(target, posix.basename(from));
      if (info.type === 'directory') warnings = (await transfer.downloadDirectory(from, target, { onProgress })).warnings;
      else await transfer.downloadFile(from, target, { onProgress });
    }
    bar.done();
    // Copied all the same: what was left out or refused is said, and the status stays 0, as tar does.
    for (const { path, message } of warnings) process.stderr.write(`execworld cp: ${path === '' ? '' : `${path}: `}${message}\n`);
    return 0;
  } finally {
    runtime.close();
  }
});
