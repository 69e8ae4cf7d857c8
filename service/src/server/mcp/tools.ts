/**
 * The MCP tools: each one a few calls of the operation table, made through
 * the one dispatcher, and its answer as a tool result (structured content
 * that its output schema describes, and text for models that read text).
 * A tool validates nothing itself: its arguments go on to the operations it
 * calls, whose schemas refuse what is wrong (INVALID_ARGUMENT naming the
 * argument), and every refusal is a tool error with the catalog's code.
 *
 * A tool is a write tool when any operation it calls is a write of the table:
 * a read-only token is not shown it, and the dispatcher refuses its call
 * (READ_ONLY) as it refuses the operation over REST.
 * @module
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { OPERATIONS, schemas as s, type Access } from '@execworld/sdk/protocol';
import { renderTerminalText } from '@execworld/sdk/shell';
import { ServiceError } from '../errors.ts';

/** Makes one call of the operation table for the tool's caller, through the dispatcher. */
export type OperationCall = (operation: keyof typeof OPERATIONS, params: Record<string, unknown>) => Promise<unknown>;

/** A refusal as MCP says a tool failed: a tool error (isError) whose text and metadata carry the catalog's code. */
export function toolError(error: ServiceError): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `${error.code}: ${error.message}` }],
    _meta: { 'execworld/error': error.body() },
  };
}

/** The arguments of a call as the client sent them; the operations they reach validate them. */
type Arguments = Record<string, unknown>;

export interface ToolResult {
  readonly structured: Record<string, unknown>;
  readonly text: string;
}

export interface Tool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** Describes the arguments for the client; the operations validate them. */
  readonly input: z.ZodObject;
  readonly output: z.ZodObject;
  /** The operations the tool may call: its access is theirs. */
  readonly operations: readonly (keyof typeof OPERATIONS)[];
  /** It may wait long (a command's wait): a client may call it as an MCP task (tasks.ts). */
  readonly tasks?: true;
  run(call: OperationCall, args: Arguments): Promise<ToolResult>;
}

/** What a tool needs: read when every operation it calls is a read. */
export function accessOf(tool: Tool): Access {
  return tool.operations.every((name) => OPERATIONS[name].access === 'read') ? 'read' : 'write';
}

/** How long a shell tool waits for its command before it answers `running`, unless the caller says. */
export const DEFAULT_WAIT_MS = 30_000;
/** Output one answer of a shell tool holds at most, unless the caller says: its head and tail, the bytes cut between counted. */
export const DEFAULT_OUTPUT_BYTES = 32 * 1024;
/** Text a file read answers at most. */
const READ_TEXT_MAX_BYTES = s.MAX_READ_BYTES;
/** Bytes of output one read answers at most, unless the caller says. */
const DEFAULT_READ_BYTES = 64 * 1024;

/** `args` without `names`: what goes on to the next operation, whose schema refuses any field it does not know. */
function without(args: Arguments, ...names: string[]): Arguments {
  const rest = { ...args };
  for (const name of names) delete rest[name];
  return rest;
}

/** `args`' fields among `names`, present ones only. */
function pick(args: Arguments, ...names: string[]): Arguments {
  const picked: Arguments = {};
  for (const name of names) if (args[name] !== undefined) picked[name] = args[name];
  return picked;
}

// Shells

const RunStatus = z.enum(['exited', 'waiting_for_input', 'running', 'timed_out', 'interrupted']).meta({
  description:
    'exited: the command ended (exitCode, or signal); waiting_for_input: a program of it is proven to read the terminal (program, prompt) — ' +
    'answer with shell_send, or shell_interrupt it; running: still going when the wait ended (waitMs, or idleTimeoutMs of silence) — ' +
    'shell_wait on, or read its output from the handle; timed_out: timeoutMs passed and the command was interrupted (SIGINT); ' +
    'interrupted: shell_interrupt (or the caller going away) interrupted it.',
});

const Handle = z
  .object({
    shell: s.SessionId.meta({ description: 'The shell: pass it to shell_run (next command), shell_send, shell_wait, shell_interrupt, session_end.' }),
    terminal: s.SessionId.nullable().meta({ description: "The shell's terminal: output_read reads its raw output from offset." }),
    offset: z.int().min(0).meta({ description: "Where this answer's output ends in the terminal's output stream." }),
  })
  .meta({ description: 'Where the command is and how far its output was read.' });

const RunAnswer = z.object({
  status: RunStatus,
  reason: s.RunResult.shape.reason.meta({ description: "The shell engine's own reason (idle_timeout and wait_limit are both running)." }),
  exitCode: z.int().nullable().meta({ description: "The command's exit status (for shellExited: the shell's own); null while it runs." }),
  signal: z.string().nullable().meta({ description: 'The signal that ended it (128+n statuses are named so).' }),
  shellExited: z.boolean().meta({ description: 'The shell itself ended (exit, exec, set -e); the next shell_run on it starts a fresh one.' }),
  program: z.string().nullable().meta({ description: 'With waiting_for_input: the name of the program that waits.' }),
  prompt: z.string().nullable().meta({ description: 'With waiting_for_input: the last line it printed, its prompt.' }),
  output: z.string().meta({ description: 'Output since the previous answer of this command, as text; its head and tail when truncated.' }),
  truncatedBytes: z.int().min(0).meta({ description: 'Bytes of output cut between the head and the tail (0: all of it is here).' }),
  durationMs: z.number(),
  handle: Handle,
  usage: s.RunResult.shape.usage,
});
type RunAnswer = z.infer<typeof RunAnswer>;
type WireRun = z.infer<typeof s.RunResult>;

const STATUS_OF: Record<WireRun['reason'], RunAnswer['status']> = {
  completed: 'exited',
  shell_exited: 'exited',
  waiting_for_input: 'waiting_for_input',
  idle_timeout: 'running',
  wait_limit: 'running',
  timeout: 'timed_out',
  canceled: 'interrupted',
};

/** The count in the line the engine puts between a truncated output's head and tail. */
const CUT_LINE = /\n\[… (\d+) bytes of output cut …\]\n/;

function runAnswer(shell: string, result: WireRun): ToolResult {
  const status = STATUS_OF[result.reason];
  const lines = result.output.replace(/\n+$/, '').split('\n');
  const answer: RunAnswer = {
    status,
    reason: result.reason,
    exitCode: result.exitCode,
    signal: result.signal,
    shellExited: result.reason === 'shell_exited',
    program: status === 'waiting_for_input' ? (result.waitingFor?.command ?? null) : null,
    prompt: status === 'waiting_for_input' ? (lines.at(-1) ?? '') : null,
    output: result.output,
    truncatedBytes: result.truncated ? Number(CUT_LINE.exec(result.output)?.[1] ?? 0) : 0,
    durationMs: result.durationMs,
    handle: { shell, terminal: result.terminalId, offset: result.outputEnd },
    ...(result.usage === undefined ? {} : { usage: result.usage }),
  };
  return { structured: answer, text: runText(answer) };
}

function runText(answer: RunAnswer): string {
  const where = `[shell ${answer.handle.shell}, terminal ${answer.handle.terminal ?? '-'}, offset ${answer.handle.offset}]`;
  let head: string;
  switch (answer.status) {
    case 'exited':
      head = answer.signal !== null ? `exited: killed by ${answer.signal}` : `exited: code ${answer.exitCode ?? '?'}`;
      if (answer.shellExited) head += ' (the shell itself exited)';
      break;
    case 'waiting_for_input':
      head = `waiting_for_input: ${answer.program ?? 'a program'} waits for input; prompt: ${JSON.stringify(answer.prompt)} — answer with shell_send`;
      break;
    case 'running':
      head = 'running: still going — shell_wait to wait on, shell_send to type, shell_interrupt to stop';
      break;
    case 'timed_out':
      head = `timed_out: interrupted after timeoutMs${answer.exitCode === null ? '' : `, status ${answer.exitCode}`}`;
      break;
    case 'interrupted':
      head = `interrupted${answer.exitCode === null ? '' : `: status ${answer.exitCode}`}`;
      break;
  }
  const cut = answer.truncatedBytes > 0 ? ` (${answer.truncatedBytes} bytes cut from the middle)` : '';
  return `${head} ${where}${cut}${usageText(answer.usage)}\n${answer.output}`;
}

/** What a command or session used, as the text of an answer says it; nothing where no cgroup counts it. */
function usageText(usage: z.infer<typeof s.SessionUsage> | undefined): string {
  if (usage === undefined) return '';
  const limit = usage.limitHit === null ? '' : `, hit its ${usage.limitHit} limit`;
  const peak = usage.peakMemoryBytes === null ? '' : `, peak memory ${usage.peakMemoryBytes} bytes`;
  return ` [cpu ${usage.cpuUserMs} ms user + ${usage.cpuSystemMs} ms system${peak}${limit}${usage.oomKilled ? ', OOM-killed' : ''}]`;
}

const waitArgs = {
  waitMs: s.ShellRun.shape.waitMs.meta({ description: `Longest this call waits before it answers running (default ${DEFAULT_WAIT_MS}).` }),
  timeoutMs: s.ShellRun.shape.timeoutMs,
  idleTimeoutMs: s.ShellRun.shape.idleTimeoutMs,
};
const shellArg = s.SessionRef.meta({ description: 'The shell (s_…) of an earlier answer.' });

const shellRun: Tool = {
  name: 'shell_run',
  title: 'Run a command in a persistent shell',
  description:
    'Runs a command line in a persistent shell (bash, or pwsh where present; cd and variables persist between commands) and answers with proof: ' +
    'exited (exit code or signal), waiting_for_input (the waiting program and its prompt: answer with shell_send), running (still going at ' +
    'waitMs: shell_wait, or shell_interrupt) or timed_out, with the output (head and tail, the bytes cut counted) and a handle. ' +
    'Without shell, starts a new shell and answers its id in the handle. Never re-run a command to see its result: wait on it.',
  input: z.object({
    command: s.ShellRun.shape.command.meta({ description: 'The command line, as typed at the prompt.' }),
    shell: shellArg.optional(),
    dialect: s.ShellCreate.shape.dialect,
    cwd: s.ShellCreate.shape.cwd,
    env: s.ShellCreate.shape.env.meta({ description: "The new shell's environment beside the daemon's allowlisted one (PATH where pwsh is found, say)." }),
    limits: s.ShellCreate.shape.limits.meta({
      description: "What the new shell's session may use (memoryBytes, pids, cpu in cores); every command it runs shares them. Not with shell.",
    }),
    ...waitArgs,
    maxOutputBytes: s.ShellRun.shape.maxOutputBytes.meta({ description: `Output one answer holds at most (default ${DEFAULT_OUTPUT_BYTES}).` }),
  }),
  output: RunAnswer,
  operations: ['shell.create', 'shell.run', 'shell.delete'],
  tasks: true,
  async run(call, args) {
    const defaults = { waitMs: DEFAULT_WAIT_MS, maxOutputBytes: DEFAULT_OUTPUT_BYTES };
    if (args.shell !== undefined)
      return runAnswer(args.shell as string, (await call('shell.run', { ...defaults, ...without(args, 'shell'), id: args.shell })) as WireRun);
    const { id } = (await call('shell.create', pick(args, 'dialect', 'cwd', 'env', 'limits'))) as { id: string };
    try {
      return runAnswer(id, (await call('shell.run', { ...defaults, ...without(args, 'dialect', 'cwd', 'env', 'limits'), id })) as WireRun);
    } catch (error) {
      // A run refused (bad arguments) leaves no shell started for it behind.
      await call('shell.delete', { id }).catch(() => undefined);
      throw error;
    }
  },
};

const shellSend: Tool = {
  name: 'shell_send',
  title: 'Type input to the waiting command',
  description:
    "Writes input to the open command's program (a reply to its prompt; end a line with \\n) and waits as shell_run does. " +
    'Keys: \\u0003 is Ctrl-C, \\u0004 Ctrl-D, q quits a pager.',
  input: z.object({ shell: shellArg, input: s.ShellSend.shape.input, ...waitArgs }),
  output: RunAnswer,
  operations: ['shell.send'],
  tasks: true,
  async run(call, args) {
    const params = { waitMs: DEFAULT_WAIT_MS, ...without(args, 'shell'), id: args.shell };
    return runAnswer(args.shell as string, (await call('shell.send', params)) as WireRun);
  },
};

const shellWait: Tool = {
  name: 'shell_wait',
  title: 'Wait on for the running command',
  description: 'Waits on for the open command of a shell and answers as shell_run does, with the output since the previous answer.',
  input: z.object({ shell: shellArg, ...waitArgs }),
  output: RunAnswer,
  operations: ['shell.wait'],
  tasks: true,
  async run(call, args) {
    const params = { waitMs: DEFAULT_WAIT_MS, ...without(args, 'shell'), id: args.shell };
    return runAnswer(args.shell as string, (await call('shell.wait', params)) as WireRun);
  },
};

const shellInterrupt: Tool = {
  name: 'shell_interrupt',
  title: 'Interrupt the running command',
  description: 'Interrupts the open command of a shell (SIGINT to its program, as Ctrl-C) and answers how it ended; the shell stays.',
  input: z.object({ shell: shellArg }),
  output: RunAnswer,
  operations: ['shell.interrupt'],
  async run(call, args) {
    return runAnswer(args.shell as string, (await call('shell.interrupt', { ...without(args, 'shell'), id: args.shell })) as WireRun);
  },
};

// Terminals

const terminalArg = s.SessionRef.meta({ description: 'The terminal (t_…).' });

const TerminalAnswer = z.object({
  terminal: s.SessionId,
  pid: z.int(),
  argv: z.array(z.string()),
  rows: z.int(),
  cols: z.int(),
  status: s.TerminalInfo.shape.status,
  exit: s.Outcome.nullable(),
  offset: z.int().min(0).meta({ description: "The end of the terminal's output so far: output_read reads on from here." }),
  limits: s.TerminalInfo.shape.limits,
  usage: s.TerminalInfo.shape.usage,
});

function terminalAnswer(info: z.infer<typeof s.TerminalInfo>): ToolResult {
  const answer: z.infer<typeof TerminalAnswer> = {
    terminal: info.id,
    pid: info.pid,
    argv: info.argv,
    rows: info.rows,
    cols: info.cols,
    status: info.status,
    exit: info.exit,
    offset: info.output.end,
    ...(info.limits === undefined ? {} : { limits: info.limits }),
    ...(info.usage === undefined ? {} : { usage: info.usage }),
  };
  const limits = info.limits === undefined ? '' : `, limits ${JSON.stringify(info.limits)}`;
  return {
    structured: answer,
    text: `terminal ${info.id}: ${info.status}, pid ${info.pid}, ${info.cols}x${info.rows}, ${JSON.stringify(info.argv)}${limits}${usageText(info.usage)}`,
  };
}

const terminalOpen: Tool = {
  name: 'terminal_open',
  title: 'Open a terminal',
  description:
    'Starts a program (argv, never shell-interpreted; ["bash"] for an interactive shell) on a new terminal, for full-screen programs ' +
    '(vim, less, top): type to it with terminal_type, look with terminal_screen, end it with session_end.',
  input: z.object({
    argv: s.TerminalCreate.shape.argv,
    cwd: s.TerminalCreate.shape.cwd,
    env: s.TerminalCreate.shape.env,
    rows: z.int().optional(),
    cols: z.int().optional(),
    limits: s.TerminalCreate.shape.limits.meta({ description: "What the terminal's session may use (memoryBytes, pids, cpu in cores)." }),
  }),
  output: TerminalAnswer,
  operations: ['terminal.create'],
  async run(call, args) {
    return terminalAnswer((await call('terminal.create', { rows: 24, cols: 80, ...args })) as z.infer<typeof s.TerminalInfo>);
  },
};

const InputAnswer = z.object({ terminal: s.SessionId, bytes: z.int().min(0) });

const terminalType: Tool = {
  name: 'terminal_type',
  title: 'Type to a terminal',
  description: 'Writes keys to a terminal as a person types them: \\r is Enter, \\u001b Escape, \\u0003 Ctrl-C, \\u001b[A the up arrow.',
  input: z.object({ terminal: terminalArg, data: s.TerminalInput.shape.data }),
  output: InputAnswer,
  operations: ['terminal.input'],
  async run(call, args) {
    await call('terminal.input', { ...without(args, 'terminal'), id: args.terminal });
    const bytes = Buffer.byteLength(String(args.data));
    return { structured: { terminal: args.terminal, bytes }, text: `typed ${bytes} bytes to ${args.terminal as string}` };
  },
};

const ScreenAnswer = s.Screen.extend({ terminal: s.SessionId });

const terminalScreen: Tool = {
  name: 'terminal_screen',
  title: "Read a terminal's screen",
  description: "The terminal's screen as a terminal emulator draws it: rows of text, cursor, whether a full-screen program (alternate screen) shows.",
  input: z.object({ terminal: terminalArg }),
  output: ScreenAnswer,
  operations: ['terminal.screen'],
  async run(call, args) {
    const screen = (await call('terminal.screen', { ...without(args, 'terminal'), id: args.terminal })) as z.infer<typeof s.Screen>;
    const text = [
      `screen of ${args.terminal as string} at offset ${screen.offset}, ${screen.cols}x${screen.rows}, cursor ${screen.cursor.row},${screen.cursor.col}` +
        `${screen.alternate ? ', alternate screen' : ''}${screen.title === '' ? '' : `, title ${JSON.stringify(screen.title)}`}`,
      ...screen.lines,
    ].join('\n');
    return { structured: { ...ScreenAnswer.parse({ ...screen, terminal: args.terminal }) }, text };
  },
};

const terminalResize: Tool = {
  name: 'terminal_resize',
  title: 'Resize a terminal',
  description: 'Sets a terminal to rows x cols; its program is told (SIGWINCH).',
  input: z.object({ terminal: terminalArg, rows: s.TerminalResize.shape.rows, cols: s.TerminalResize.shape.cols }),
  output: TerminalAnswer,
  operations: ['terminal.resize'],
  async run(call, args) {
    return terminalAnswer((await call('terminal.resize', { ...without(args, 'terminal'), id: args.terminal })) as z.infer<typeof s.TerminalInfo>);
  },
};

const OutputAnswer = z.object({
  from: z.int().meta({ description: 'Offset of the first byte read.' }),
  next: z.int().meta({ description: 'Offset to read from next.' }),
  text: z.string().meta({ description: 'The bytes as text, escape sequences removed.' }),
  lost: z.int().min(0).meta({ description: 'Bytes before from that are no longer kept (0: nothing was lost).' }),
  ended: z.boolean().meta({ description: 'The output ended, and next is its end.' }),
});

const outputRead: Tool = {
  name: 'output_read',
  title: "Read a terminal's output from an offset",
  description:
    "Reads a terminal's output (a shell's: its handle.terminal) from a byte offset, as text; waits up to waitMs for bytes when none are there yet. " +
    'Read on from next: nothing is read twice or skipped (lost counts bytes no longer kept).',
  input: z.object({
    terminal: terminalArg,
    from: s.OutputQuery.shape.from,
    waitMs: s.OutputQuery.shape.waitMs,
    maxBytes: s.OutputQuery.shape.maxBytes.meta({ description: `Bytes to read at most (default ${DEFAULT_READ_BYTES}).` }),
  }),
  output: OutputAnswer,
  operations: ['terminal.output'],
  async run(call, args) {
    const read = (await call('terminal.output', { maxBytes: DEFAULT_READ_BYTES, ...without(args, 'terminal'), id: args.terminal })) as z.infer<
      typeof s.OutputRead
    >;
    const text = renderTerminalText(Buffer.from(read.data, 'base64'));
    const lost = read.gap === null ? 0 : read.gap.to - read.gap.from;
    const answer = { from: read.from, next: read.next, text, lost, ended: read.ended };
    return {
      structured: answer,
      text: `bytes ${read.from}..${read.next}${lost > 0 ? `, ${lost} bytes lost before` : ''}${read.ended ? ', ended' : ''}\n${text}`,
    };
  },
};

// Files

const FileAnswer = z.object({
  path: z.string(),
  version: s.FsVersion.meta({ description: 'Pass it to file_write or file_edit: they refuse (FS_STALE_VERSION) once the file changed.' }),
  text: z.string(),
});

const fileRead: Tool = {
  name: 'file_read',
  title: 'Read a text file',
  description:
    'A whole text file with its version, read from one open file. Errors: FS_NOT_FOUND, FS_NOT_TEXT, FS_TOO_LARGE, FS_NOT_REGULAR_FILE, FS_ACCESS_DENIED.',
  input: z.object({ path: s.FsRef.shape.path, cwd: s.FsRef.shape.cwd }),
  output: FileAnswer,
  operations: ['fs.resolve', 'fs.readText', 'fs.stat'],
  async run(call, args) {
    const resolved = (await call('fs.resolve', { ...args, readTextMaxBytes: READ_TEXT_MAX_BYTES })) as z.infer<typeof s.FsResolved>;
    let { text } = resolved;
    let version = resolved.info?.version;
    if (text === null || version === undefined) {
      // Not a text file within the bound, or nothing there: the read says which, with its FS_* code.
      text = ((await call('fs.readText', args)) as z.infer<typeof s.FsText>).text;
      version = ((await call('fs.stat', args)) as z.infer<typeof s.FsStatResult>).info?.version;
      if (version === undefined) throw new ServiceError('FS_NOT_FOUND', `${args.path as string} is gone`);
    }
    const path = resolved.target.displayPath;
    return { structured: { path, version, text }, text: `${path} (version ${version})\n${text}` };
  },
};

const WriteAnswer = z.object({ path: z.string(), operation: s.FsWriteOutcome.shape.operation, version: s.FsVersion });

const fileWrite: Tool = {
  name: 'file_write',
  title: 'Write a text file',
  description:
    'Replaces or creates a whole text file atomically. With version, only while the file is still at that version (else FS_STALE_VERSION: read it again); ' +
    'with createOnly, only when nothing is there.',
  input: z.object({
    path: s.FsWrite.shape.path,
    cwd: s.FsWrite.shape.cwd,
    content: s.FsWrite.shape.content,
    version: s.FsVersion.optional().meta({ description: 'The version file_read answered.' }),
    createOnly: z.boolean().optional(),
  }),
  output: WriteAnswer,
  operations: ['fs.writeText'],
  async run(call, args) {
    const expected =
      args.version !== undefined ? { kind: 'replaceIfVersion', version: args.version } : args.createOnly === true ? { kind: 'createIfAbsent' } : undefined;
    const rest = without(args, 'version', 'createOnly');
    // createOnly: false asks nothing; any other value goes on for the schema to refuse.
    if (args.createOnly !== undefined && typeof args.createOnly !== 'boolean') rest.expected = args.createOnly;
    const outcome = (await call('fs.writeText', { ...rest, ...(expected === undefined ? {} : { expected }) })) as z.infer<typeof s.FsWriteOutcome>;
    const path = args.path as string;
    return { structured: { path, operation: outcome.operation, version: outcome.version }, text: `${outcome.operation}d ${path} (version ${outcome.version})` };
  },
};

const EditAnswer = z.object({ path: z.string(), version: s.FsVersion });

const fileEdit: Tool = {
  name: 'file_edit',
  title: 'Edit a text file',
  description:
    'Replaces oldString by newString in a text file atomically (exactly one match unless replaceAll). With version, only while the file is still at it ' +
    '(else FS_STALE_VERSION: read it again). Errors: FS_EDIT_NOT_FOUND, FS_AMBIGUOUS_EDIT.',
  input: z.object({
    path: s.FsEdit.shape.path,
    cwd: s.FsEdit.shape.cwd,
    oldString: z.string(),
    newString: z.string(),
    replaceAll: z.boolean().optional(),
    version: s.FsVersion.optional().meta({ description: 'The version file_read answered.' }),
  }),
  output: EditAnswer,
  operations: ['fs.editText'],
  async run(call, args) {
    const edit = pick(args, 'oldString', 'newString', 'replaceAll');
    const rest = without(args, 'oldString', 'newString', 'replaceAll', 'version');
    const expected = args.version === undefined ? {} : { expected: { version: args.version } };
    const outcome = (await call('fs.editText', { ...rest, edit, ...expected })) as z.infer<typeof s.FsEditOutcome>;
    const path = args.path as string;
    return { structured: { path, version: outcome.version }, text: `edited ${path} (version ${outcome.version})` };
  },
};

const ListAnswer = z.object({
  entries: z.array(z.object({ name: z.string(), type: s.FsDirEntry.shape.type, size: z.int().min(0).optional(), version: s.FsVersion.optional() })),
});

const fileList: Tool = {
  name: 'file_list',
  title: 'List a directory',
  description: "A directory's entries in name order: name, type (file, directory, other), size and version.",
  input: z.object({ path: s.FsRef.shape.path, cwd: s.FsRef.shape.cwd }),
  output: ListAnswer,
  operations: ['fs.listDir'],
  async run(call, args) {
    const listing = (await call('fs.listDir', args)) as z.infer<typeof s.FsListing>;
    const entries = listing.entries.map(({ name, type, size, version }) => ({
      name,
      type,
      ...(size === undefined ? {} : { size }),
      ...(version === undefined ? {} : { version }),
    }));
    const text = entries
      .map((entry) => `${entry.type === 'directory' ? `${entry.name}/` : entry.name}${entry.size === undefined ? '' : `\t${entry.size}`}`)
      .join('\n');
    return { structured: { entries }, text: text === '' ? '(empty)' : text };
  },
};

// Sessions

/** What a listed session runs under and used so far, as `execworld ps` shows them; a shell's are its terminal's. */
const sessionCost = { limits: s.TerminalInfo.shape.limits, usage: s.TerminalInfo.shape.usage };

const SessionsAnswer = z.object({
  shells: z.array(z.object({ id: s.SessionId, dialect: s.ShellDialectName, state: s.ShellInfo.shape.state, terminal: s.SessionId.nullable(), ...sessionCost })),
  terminals: z.array(
    z.object({ id: s.SessionId, pid: z.int(), argv: z.array(z.string()), status: s.TerminalInfo.shape.status, exit: s.Outcome.nullable(), ...sessionCost }),
  ),
  processes: z.array(
    z.object({ id: s.SessionId, pid: z.int(), argv: z.array(z.string()), status: s.ProcessInfo.shape.status, exit: s.Outcome.nullable(), ...sessionCost }),
  ),
});

/** A session's limits and usage where it has them, for its entry in the list. */
function costOf(info: { limits?: z.infer<typeof s.SessionLimits> | undefined; usage?: z.infer<typeof s.SessionUsage> | undefined } | undefined) {
  return { ...(info?.limits === undefined ? {} : { limits: info.limits }), ...(info?.usage === undefined ? {} : { usage: info.usage }) };
}

/** The end of a session's line in the list: its limits and what it used, where it has them. */
function costText(entry: { limits?: z.infer<typeof s.SessionLimits> | undefined; usage?: z.infer<typeof s.SessionUsage> | undefined }): string {
  return `${entry.limits === undefined ? '' : `\tlimits ${JSON.stringify(entry.limits)}`}${usageText(entry.usage)}`;
}

const sessionList: Tool = {
  name: 'session_list',
  title: 'List shells, terminals and processes',
  description:
    "The caller's shells (s_…), terminals (t_…) and processes (p_…), running or remembered, with how they ended, the limits each runs " +
    "under and what it used so far (cpu, peak memory, a limit it hit; a shell's are its terminal's).",
  input: z.object({}),
  output: SessionsAnswer,
  operations: ['shell.list', 'terminal.list', 'process.list'],
  async run(call, args) {
    const [shells, terminals, processes] = (await Promise.all([call('shell.list', args), call('terminal.list', args), call('process.list', args)])) as [
      z.infer<typeof s.ShellList>,
      z.infer<typeof s.TerminalList>,
      z.infer<typeof s.ProcessList>,
    ];
    const answer: z.infer<typeof SessionsAnswer> = {
      shells: shells.shells.map((shell) => ({
        id: shell.id,
        dialect: shell.dialect,
        state: shell.state,
        terminal: shell.terminalId,
        ...costOf(terminals.terminals.find((terminal) => terminal.id === shell.terminalId)),
      })),
      terminals: terminals.terminals.map(({ id, pid, argv, status, exit, ...info }) => ({ id, pid, argv, status, exit, ...costOf(info) })),
      processes: processes.processes.map(({ id, pid, argv, status, exit, ...info }) => ({ id, pid, argv, status, exit, ...costOf(info) })),
    };
    const lines = [
      ...answer.shells.map((shell) => `${shell.id}\tshell ${shell.dialect}\t${shell.state}${costText(shell)}`),
      ...answer.terminals.map((terminal) => `${terminal.id}\t${terminal.status}\t${JSON.stringify(terminal.argv)}${costText(terminal)}`),
      ...answer.processes.map((process) => `${process.id}\t${process.status}\t${JSON.stringify(process.argv)}${costText(process)}`),
    ];
    return { structured: answer, text: lines.length === 0 ? '(none)' : lines.join('\n') };
  },
};

const EndAnswer = z.object({ id: z.string(), ended: z.literal(true) });

/** The operation that ends a session of each kind, by its id's prefix; an id of no known kind answers as an unknown terminal does (NOT_FOUND). */
const END_OPERATION = { s: 'shell.delete', p: 'process.delete', t: 'terminal.delete' } as const;

const sessionEnd: Tool = {
  name: 'session_end',
  title: 'End a shell, terminal or process',
  description: 'Ends a shell (s_…), terminal (t_…) or process (p_…) and everything it started, and forgets it.',
  input: z.object({ id: s.SessionRef }),
  output: EndAnswer,
  operations: ['shell.delete', 'process.delete', 'terminal.delete'],
  async run(call, args) {
    const kind = typeof args.id === 'string' ? args.id.charAt(0) : '';
    await call(END_OPERATION[kind as keyof typeof END_OPERATION] ?? 'terminal.delete', args);
    return { structured: { id: args.id, ended: true }, text: `ended ${args.id as string}` };
  },
};

/** Every tool, in the order tools/list answers them. */
export const TOOLS: readonly Tool[] = [
  shellRun,
  shellSend,
  shellWait,
  shellInterrupt,
  outputRead,
  terminalOpen,
  terminalType,
  terminalScreen,
  terminalResize,
  fileRead,
  fileWrite,
  fileEdit,
  fileList,
  sessionList,
  sessionEnd,
];

export const TOOLS_BY_NAME: ReadonlyMap<string, Tool> = new Map(TOOLS.map((tool) => [tool.name, tool]));

/**
 * A schema in the JSON Schema draft 7 MCP clients validate with, its root an
 * object (MCP asks that of a tool's schemas): the protocol's named schemas are
 * definitions the root refers to.
 */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { target: 'draft-7', io, unrepresentable: 'any' }) as Record<string, unknown>;
  delete out.$schema;
  return out;
}
