/**
 * The token file a daemon on this machine reads (and writes, the first time,
 * when none is configured), and the grammar of its lines. The daemon loads
 * its tokens by it; the SDK finds a local daemon's token by it.
 *
 * A line is a bare token (of the owner `default`), or `<owner> <token>`, or
 * `<owner> <token> <os user>`, each of the last two with options:
 * `root=<directory>` (the owner's filesystem calls are confined to it) and
 * `access=read` or `access=write` (the default: the token may do everything).
 * A read token may list, inspect and watch the owner's sessions and files but
 * not act on them. An owner's OS user and root belong to the owner, not to one
 * token, so they are said on its write lines: a read line names neither (an
 * owner may have read lines only). Fields are separated by blanks; blank lines
 * and lines starting with `#` say nothing. A token is at least
 * {@link MIN_TOKEN_LENGTH} characters and not guessable (see
 * {@link unguessableCharacters}).
 * @module @execworld/sdk/token-file
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The owner of a line that holds a bare token. */
export const DEFAULT_OWNER = 'default';
/** The shortest token a token file may hold. */
export const MIN_TOKEN_LENGTH = 16;
/** The fewest characters of a token that {@link unguessableCharacters} counts; a token with fewer is refused as guessable. */
export const MIN_UNGUESSABLE_CHARACTERS = 8;
/** Only a token's first this many characters are judged for guessability, so the work is bounded whatever its length. */
const GUESSABLE_SPAN = 256;
/** A stretch this long or longer that repeats an earlier part of a token adds nothing to it. */
const REPEATED_STRETCH = 3;

/**
 * How many of a token's characters could not be guessed from the ones before
 * them. Not counted: a character that repeats the one before or steps on from
 * it by one (`aaaa`, `1234`, `fedc`) or by the step before it (`aceg`), and a
 * stretch of three or more that repeats an earlier part of the token (the
 * second `abc` of `abcabc`). A token of many repeats, runs or copies of itself
 * counts few, however long; random characters nearly all count (a random hex
 * character about 3 times in 4, a base64 one more). Only the first 256
 * characters are looked at, and counting stops at `enough`.
 */
export function unguessableCharacters(token: string, enough = Number.POSITIVE_INFINITY): number {
  // Code points, not UTF-16 units: twice the span of units holds at least the span of code points.
  const codes = Array.from(token.slice(0, 2 * GUESSABLE_SPAN), (character) => character.codePointAt(0)!).slice(0, GUESSABLE_SPAN);
  let count = 0;
  let index = 0;
  while (index < codes.length && count < enough) {
    let longest = 0;
    for (let earlier = 0; earlier < index; earlier += 1) {
      let length = 0;
      // The copy may run into the stretch it copies (`aaaa` is `a` copied on), as in LZ77.
      while (index + length < codes.length && codes[earlier + length] === codes[index + length]) length += 1;
      longest = Math.max(longest, length);
    }
    if (longest >= REPEATED_STRETCH) {
      index += longest;
      continue;
    }
    const step = index > 0 ? codes[index]! - codes[index - 1]! : undefined;
    const stepBefore = index > 1 ? codes[index - 1]! - codes[index - 2]! : undefined;
    if (step === undefined || (Math.abs(step) > 1 && step !== stepBefore)) count += 1;
    index += 1;
  }
  return count;
}

/** Where a local daemon's token lives when none is configured: $XDG_CONFIG_HOME/execworld/token, or ~/.config/execworld/token. */
export function localTokenFile(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME !== undefined && env.XDG_CONFIG_HOME !== '' ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'execworld', 'token');
}

/** What a token may do: `read` lists, inspects and watches the owner's sessions and files; `write` may also act on them. */
export type TokenAccess = 'read' | 'write';

/**
 * One line of a token file that says something: an entry, or what is wrong
 * with it. Lines count from 1. `access` is there only on a read line: a line
 * without it (or with `access=write`) gives full access.
 */
export type TokenFileLine =
  | {
      readonly line: number;
      readonly owner: string;
      readonly token: string;
      readonly userName?: string;
      readonly root?: string;
      readonly access?: 'read';
    }
  | { readonly line: number; readonly problem: string };

/** The lines of a token file's text that say something, in order; blank and comment lines are left out. */
export function tokenFileLines(text: string): TokenFileLine[] {
  const lines: TokenFileLine[] = [];
  text.split('\n').forEach((raw, index) => {
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    lines.push(tokenFileLine(trimmed.split(/\s+/), index + 1));
  });
  return lines;
}

function tokenFileLine(fields: readonly string[], line: number): TokenFileLine {
  const usage = 'expected "<token>" or "<owner> <token> [<os user>] [root=<directory>] [access=read|write]"';
  const options = fields.slice(2).filter((field) => field.includes('='));
  const plain = fields.filter((field) => !field.includes('='));
  if (plain.length > 3 || (fields.length > 1 && fields[1]!.includes('='))) return { line, problem: usage };
  const [owner, token] = plain.length === 1 ? [DEFAULT_OWNER, plain[0]!] : [plain[0]!, plain[1]!];
  if (token.length < MIN_TOKEN_LENGTH) return { line, problem: `the token is shorter than ${MIN_TOKEN_LENGTH} characters` };
  if (unguessableCharacters(token, MIN_UNGUESSABLE_CHARACTERS) < MIN_UNGUESSABLE_CHARACTERS) {
    return {
      line,
      problem:
        `the token is guessable: fewer than ${MIN_UNGUESSABLE_CHARACTERS} of its characters are more than a repeat, a run (1234, fedc) ` +
        'or a copy of an earlier stretch; make one with openssl rand -hex 32',
    };
  }
  if (!/^[A-Za-z0-9._~-]{1,128}$/.test(owner)) return { line, problem: 'owner names use letters, digits and . _ ~ -' };
  const userName = plain[2];
  if (userName !== undefined && !/^[A-Za-z_][A-Za-z0-9._-]{0,31}\$?$/.test(userName)) return { line, problem: `${userName} is not a user name` };
  let root: string | undefined;
  let access: TokenAccess | undefined;
  for (const option of options) {
    const [name, value] = [option.slice(0, option.indexOf('=')), option.slice(option.indexOf('=') + 1)];
    if (name === 'root') {
      if (root !== undefined) return { line, problem: 'root= is given twice' };
      if (!value.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(value)) return { line, problem: `root= must be an absolute directory, not "${value}"` };
      root = value;
    } else if (name === 'access') {
      if (access !== undefined) return { line, problem: 'access= is given twice' };
      if (value !== 'read' && value !== 'write') return { line, problem: `access= must be read or write, not "${value}"` };
      access = value;
    } else {
      return { line, problem: `unknown option ${name}= (the options are root=<directory> and access=read|write)` };
    }
  }
  if (access === 'read') {
    // The OS user and root are the owner's, whichever token it comes with: a read line that named them could contradict its write lines.
    if (userName !== undefined) return { line, problem: "a read line names no OS user: an owner's OS user and root come from its write lines" };
    if (root !== undefined) return { line, problem: "a read line takes no root=: an owner's OS user and root come from its write lines" };
    return { line, owner, token, access };
  }
  return { line, owner, token, ...(userName === undefined ? {} : { userName }), ...(root === undefined ? {} : { root }) };
}

/**
 * The token a local daemon wrote (the first line's), or why there is none:
 * the file looked for, and what was wrong with it.
 */
export function readLocalToken(env: NodeJS.ProcessEnv = process.env): { token: string } | { missing: string } {
  const file = localTokenFile(env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { missing: code === 'ENOENT' ? `there is no ${file}` : `${file} cannot be read (${code ?? (error as Error).message})` };
  }
  const first = tokenFileLines(text)[0];
  if (first === undefined) return { missing: `${file} holds no token` };
  return 'problem' in first ? { missing: `${file} line ${first.line} is not a token line: ${first.problem}` } : { token: first.token };
}

/** The token a local daemon wrote, if there is one. */
export function localToken(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const local = readLocalToken(env);
  return 'token' in local ? local.token : undefined;
}
