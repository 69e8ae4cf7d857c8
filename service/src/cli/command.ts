/**
 * What every subcommand of `execworld` shares: the shape of a command module,
 * usage errors, and its option table, one row per option, from which both
 * its command line is parsed (`node:util`'s parseArgs) and its --help lists
 * its options.
 *
 * A command is one module of this directory exporting `command` (a
 * {@link Command}); `service/src/cli.ts` lists them and loads the one asked
 * for, so adding a command is a module and a row in that list.
 * @module
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { schemas } from '@execworld/sdk/protocol';

/** Exit status of a usage error: an unknown command or option, a missing argument. */
export const USAGE_STATUS = 2;
/** Exit status of a failure of execworld itself or of the daemon (the line on stderr names it). */
export const FAILURE_STATUS = 1;

export interface Command {
  /** The `--help` text. */
  readonly help: string;
  /** The options it takes (with -h/--help, which every command takes); its --help lists these and no other. */
  readonly options: OptionTable;
  /**
   * Runs the command with the arguments after its name. Resolves with the exit
   * status, or `undefined` for a command that goes on running after it
   * resolves (the daemon).
   * @throws {UsageError} for a command line it cannot take
   */
  run(args: readonly string[]): Promise<number | undefined>;
}

/** A command line the command cannot take: said in a line, with a pointer to its --help, exit status 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** A failure the user can act on, without a code of the daemon's: said in one line, exit status 1. */
export class CliError extends Error {
  override name = 'CliError';
}

/** One option of a command: how parseArgs reads it and what its --help says. */
export interface OptionRow {
  readonly type: 'string' | 'boolean';
  /** Repeatable: the values are a list. */
  readonly multiple?: boolean;
  /** The one-letter form, without its dash. */
  readonly short?: string;
  /** How --help shows the value of a string option, e.g. `<dir>`. */
  readonly value?: string;
  /** What it does, for --help. */
  readonly help: string;
  /** The environment variable it falls back to, on a line of its own in --help. */
  readonly env?: string;
  /** The option this one is another name of (docker's and execworld's names for one thing); the docs name that one. */
  readonly alias?: string;
}
export type OptionTable = Readonly<Record<string, OptionRow>>;

/** The option every command takes. */
export const HELP_OPTION = { help: { type: 'boolean', short: 'h', help: 'show this help' } } as const satisfies OptionTable;

/** The furthest --help starts the options' text: a longer `-x, --name <value>` has its text on the next line. */
const MAX_HELP_COLUMN = 44;
/** The width --help fills. */
const HELP_WIDTH = 80;

/** `text` in lines of at most HELP_WIDTH columns (a longer word alone on its line): the first after `first`, the others after `indent` spaces. */
function wrap(text: string, first: string, indent: number): string[] {
  const lines: string[] = [];
  let line = first;
  let empty = true;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (!empty && line.length + 1 + word.length > HELP_WIDTH) {
      lines.push(line);
      line = ' '.repeat(indent);
      empty = true;
    }
    line += empty ? word : ` ${word}`;
    empty = false;
  }
  lines.push(line);
  return lines;
}

/** The --help lines of `table`'s options, in its order: `-x, --name <value>` and what it does. */
export function optionLines(table: OptionTable): string {
  const rows = Object.entries(table).map(
    ([name, row]) =>
      [`  ${row.short === undefined ? '' : `-${row.short}, `}--${name}${row.type === 'string' ? ` ${row.value ?? '<value>'}` : ''}`, row] as const,
  );
  // The text starts two columns past the widest option, as far as MAX_HELP_COLUMN.
  const column = Math.min(Math.max(...rows.map(([left]) => left.length)) + 2, MAX_HELP_COLUMN);
  const pad = ' '.repeat(column);
  const lines: string[] = [];
  for (const [left, row] of rows) {
    if (left.length > column - 2) lines.push(left, ...wrap(row.help, pad, column));
    else lines.push(...wrap(row.help, left.padEnd(column), column));
    if (row.env !== undefined) lines.push(`${pad}env ${row.env}`);
  }
  return lines.join('\n');
}

/** The Options section of a command's --help: `table`'s lines, then -h/--help, which every command takes. */
export function optionHelp(table: OptionTable): string {
  return optionLines({ ...table, ...HELP_OPTION });
}
/** The parsed values of `table`: strings, booleans, or lists of the repeatable ones. */
export type OptionValues<T extends OptionTable> = {
  -readonly [K in keyof T]?: T[K]['type'] extends 'boolean' ? boolean : T[K]['multiple'] extends true ? string[] : string;
};

/** parseArgs's complaint in the words of a command line: the one message of every command's argument errors. */
export function argumentError(error: Error & { code?: string }): string {
  const quoted = /'([^']+)'/.exec(error.message)?.[1] ?? '';
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${quoted}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return `option ${quoted.replace(/^-\w, /, '').split(' ')[0]} needs a value`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return `unexpected argument ${quoted}`;
    default:
      return error.message;
  }
}

/** `table` as parseArgs takes it: the parsing half of each row. */
function parseArgsOptions(table: OptionTable): Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> {
  return Object.fromEntries(
    Object.entries(table).map(([name, row]) => [
      name,
      { type: row.type, ...(row.multiple === undefined ? {} : { multiple: row.multiple }), ...(row.short === undefined ? {} : { short: row.short }) },
    ]),
  );
}

/**
 * Parses `args` against `table` (plus `-h`/`--help`), strictly: an unknown
 * option or a missing value is a {@link UsageError}. Positionals are returned
 * in order; how many a command takes is its own to check.
 */
export function parseCommandLine<T extends OptionTable>(args: readonly string[], table: T): { values: OptionValues<T>; positionals: string[]; help: boolean } {
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: [...args],
      options: parseArgsOptions({ ...table, ...HELP_OPTION }),
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError(argumentError(error as Error & { code?: string }));
  }
  const { help, ...values } = parsed.values;
  return { values: values as OptionValues<T>, positionals: parsed.positionals, help: help === true };
}

/**
 * Splits a command line whose tail is a program's argv: the options before
 * `--` or before the first argument that is not an option (or the value of
 * one), and the argv after. So `exec ls -l` and `exec -- ls -l` mean the same,
 * and an option of the program is never taken for one of execworld's.
 */
export function splitAtProgram(args: readonly string[], table: OptionTable): { options: string[]; argv: string[] } {
  const takesValue = new Set<string>();
  for (const [name, kind] of Object.entries(table)) {
    if (kind.type !== 'string') continue;
    takesValue.add(`--${name}`);
    if (kind.short !== undefined) takesValue.add(`-${kind.short}`);
  }
  let index = 0;
  while (index < args.length) {
    const arg = args[index]!;
    if (arg === '--') return { options: args.slice(0, index), argv: args.slice(index + 1) };
    if (!arg.startsWith('-') || arg === '-') break;
    index += takesValue.has(arg) ? 2 : 1;
  }
  return { options: args.slice(0, index), argv: args.slice(index) };
}

/** `--env NAME=VALUE` entries as an environment; a {@link UsageError} for one without a name or `=`. */
export function parseEnvEntries(entries: readonly string[] | undefined): Record<string, string> | undefined {
  if (entries === undefined || entries.length === 0) return undefined;
  const env: Record<string, string> = {};
  for (const entry of entries) {
    const equals = entry.indexOf('=');
    if (equals <= 0) throw new UsageError(`--env takes NAME=VALUE, got ${JSON.stringify(entry)}`);
    env[entry.slice(0, equals)] = entry.slice(equals + 1);
  }
  return env;
}

/** The file a `--<option> <file>` names, read whole; a {@link CliError} naming the option, the file and why it cannot be read. */
export function readOptionFile(file: string, option: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new CliError(`cannot read --${option} ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
}

/**
 * The variables of `--env-file` files, in docker's format: a `NAME=VALUE` per
 * line, taken literally (no quotes or escapes are read); a line starting with
 * `#` and a blank line are skipped; a bare `NAME` takes this command's own
 * value, and is left out when it has none.
 * @throws {CliError} for a file that cannot be read; {@link UsageError} for a line without a name
 */
export function readEnvFiles(files: readonly string[] | undefined, local: NodeJS.ProcessEnv = process.env): Record<string, string> | undefined {
  if (files === undefined || files.length === 0) return undefined;
  const env: Record<string, string> = {};
  for (const file of files) {
    const text = readOptionFile(file, 'env-file').toString('utf8');
    for (const [index, raw] of text.split(/\r?\n/).entries()) {
      const line = raw.replace(/^\s+/, '');
      if (line === '' || line.startsWith('#')) continue;
      const equals = line.indexOf('=');
      const name = equals === -1 ? line.trimEnd() : line.slice(0, equals);
      if (name === '' || /\s/.test(name)) throw new UsageError(`--env-file ${file}: line ${index + 1} is not NAME=VALUE or NAME`);
      if (equals !== -1) env[name] = line.slice(equals + 1);
      else if (local[name] !== undefined) env[name] = local[name];
    }
  }
  return env;
}

/** The environment of `--env-file` files and then `--env` entries, which win; undefined for none. */
export function environmentOptions(values: {
  readonly env?: readonly string[] | undefined;
  readonly 'env-file'?: readonly string[] | undefined;
}): Record<string, string> | undefined {
  const fromFiles = readEnvFiles(values['env-file']);
  const entries = parseEnvEntries(values.env);
  return fromFiles === undefined && entries === undefined ? undefined : { ...fromFiles, ...entries };
}

/** The working directory `--cwd` or `-w`/`--workdir` (docker's name for it) gives; a {@link UsageError} for both. */
export function workdirOption(values: { readonly cwd?: string | undefined; readonly workdir?: string | undefined }): string | undefined {
  if (values.cwd !== undefined && values.workdir !== undefined) throw new UsageError('--cwd and --workdir say the same; give one');
  return values.workdir ?? values.cwd;
}

/** Where and as whom a program runs on the daemon's host: the fields of a create, each only when given. */
export interface Where {
  readonly cwd?: string;
  readonly user?: string;
}

/**
 * The create fields of `-w`/`--workdir` (or `--cwd`) and `-u`/`--user`: left
 * out when not given, for the world's defaults to apply (the owner's home or
 * the daemon's directory; the owner's OS user).
 */
export function placeOptions(values: { readonly cwd?: string | undefined; readonly workdir?: string | undefined; readonly user?: string | undefined }): Where {
  const cwd = workdirOption(values);
  return { ...(cwd === undefined ? {} : { cwd }), ...(values.user === undefined ? {} : { user: values.user }) };
}

/**
 * The options of every command that creates a program on the daemon's host:
 * where and as whom it runs ({@link placeOptions}) and its environment
 * ({@link environmentOptions}).
 */
export const CREATE_OPTIONS = {
  workdir: {
    type: 'string',
    short: 'w',
    value: '<dir>',
    help: "its working directory on the daemon's host (default: the world's: the owner's home, else the daemon's)",
  },
  cwd: { type: 'string', value: '<dir>', alias: 'workdir', help: 'the same as --workdir' },
  user: {
    type: 'string',
    short: 'u',
    value: '<name|uid>',
    help:
      "the OS user it runs as, where the owner may (docker's -u without :group): a token mapped to a user names only " +
      'that one; another token names any user when the daemon runs as root',
  },
  env: { type: 'string', short: 'e', multiple: true, value: '<K=V>', help: 'an environment variable to set (repeatable)' },
  'env-file': {
    type: 'string',
    multiple: true,
    value: '<file>',
    help: "environment variables from a file of K=V lines, as docker reads one (# comments; a bare K takes this command's value; repeatable)",
  },
} as const satisfies OptionTable;

/**
 * What a new session may use, named as docker run names its limits: its
 * memory (swap included), its processes and threads, its cores.
 */
export const LIMIT_OPTIONS = {
  memory: {
    type: 'string',
    short: 'm',
    value: '<bytes>',
    help: "memory its processes may use together, swap included (docker's -m: a number with b, k, m or g; 100m); past it the OOM killer ends one",
  },
  'pids-limit': { type: 'string', value: '<n>', help: 'processes and threads it may hold at once; a fork past it fails' },
  cpus: { type: 'string', value: '<cores>', help: 'cores it may use, fractional (0.5: half a core)' },
} as const satisfies OptionTable;

const MEMORY_UNITS: Readonly<Record<string, number>> = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/**
 * The limits the {@link LIMIT_OPTIONS} ask for, held to the wire's bounds
 * (`SessionLimits`), or a {@link UsageError} naming the option.
 */
export function limitOptions(values: {
  readonly memory?: string | undefined;
  readonly 'pids-limit'?: string | undefined;
  readonly cpus?: string | undefined;
}): {
  memoryBytes?: number;
  pids?: number;
  cpu?: number;
} {
  const limits: { memoryBytes?: number; pids?: number; cpu?: number } = {};
  const check = (option: string, name: 'memoryBytes' | 'pids' | 'cpu', value: number, given: string): void => {
    const parsed = schemas.SessionLimits.shape[name].safeParse(value);
    if (!parsed.success || !Number.isFinite(value)) {
      throw new UsageError(`--${option} ${given}: ${parsed.error?.issues[0]?.message ?? 'not a number'} (SessionLimits.${name})`);
    }
    limits[name] = value;
  };
  if (values.memory !== undefined) {
    const match = /^(\d+(?:\.\d+)?)\s*([bkmgt]?)(?:i?b)?$/i.exec(values.memory.trim());
    if (match === null) throw new UsageError(`--memory must be a number of bytes with b, k, m, g or t (100m), got ${values.memory}`);
    check('memory', 'memoryBytes', Math.floor(Number(match[1]) * MEMORY_UNITS[match[2]!.toLowerCase()]!), values.memory);
  }
  if (values['pids-limit'] !== undefined) check('pids-limit', 'pids', Number(values['pids-limit']), values['pids-limit']);
  if (values.cpus !== undefined) check('cpus', 'cpu', values.cpus.trim() === '' ? Number.NaN : Number(values.cpus), values.cpus);
  return limits;
}

/** A `--<option> <ms>` value: a positive whole number of milliseconds, or a {@link UsageError}. */
export function milliseconds(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number <= 0) throw new UsageError(`--${option} must be a positive number of milliseconds, got ${value}`);
  return number;
}

/** One positional for each of `names`, or a {@link UsageError} saying which is missing or extra. */
export function expectPositionals(positionals: readonly string[], names: readonly string[]): string[] {
  if (positionals.length < names.length) throw new UsageError(`missing ${names[positionals.length]}`);
  if (positionals.length > names.length) throw new UsageError(`unexpected argument ${positionals[names.length]}`);
  return [...positionals];
}

/**
 * A command of `help` and `options`: parses its command line, answers
 * `--help`, and runs `body` with the options and positional arguments.
 */
export function defineCommand<T extends OptionTable>(
  help: string,
  options: T,
  body: (values: OptionValues<T>, positionals: string[]) => Promise<number | undefined>,
): Command {
  return {
    help,
    options: { ...options, ...HELP_OPTION },
    async run(args) {
      const { values, positionals, help: asked } = parseCommandLine(args, options);
      if (asked) {
        process.stdout.write(help);
        return 0;
      }
      return body(values, positionals);
    },
  };
}
