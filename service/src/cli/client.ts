/**
 * The client side of every command that talks to a daemon: which daemon and
 * which token (flags, then the environment, then a local daemon's defaults),
 * the connection, the one line an error is said in, and the exit status of a
 * program's outcome.
 * @module
 */
import { constants } from 'node:os';
import { connect, isExecworldError, sandboxRouter, type RemoteRuntime } from '@execworld/sdk';
import { readLocalToken, localTokenFile } from '@execworld/sdk/token-file';
import { CliError, readOptionFile, type OptionTable, type OptionValues } from './command.ts';

/** Where a local daemon listens by default (`execworld serve`). */
export const DEFAULT_URL = 'http://127.0.0.1:7878';

/** Milliseconds between SIGTERM and SIGKILL when a session this CLI starts is ended. */
export const GRACE_MS = 5000;

/** The options of every command that talks to a daemon. */
export const CLIENT_OPTIONS = {
  url: { type: 'string', value: '<url>', help: `the daemon (default: $EXECWORLD_URL, else ${DEFAULT_URL})` },
  token: {
    type: 'string',
    value: '<token>',
    help: `its token (default: $EXECWORLD_TOKEN, else the token a local daemon wrote to ${localTokenFile()})`,
  },
  sandbox: {
    type: 'string',
    value: '<id>',
    help: 'reach the daemon of sandbox <id> through the agent-sandbox router at --url (default: $EXECWORLD_SANDBOX; the token then travels in X-Execworld-Token)',
  },
  ca: {
    type: 'string',
    value: '<file>',
    help:
      "PEM certificates to trust for an https:// daemon with its own certificate (its CA's, or a self-signed daemon's own), " +
      "instead of the system's (default: $EXECWORLD_CA; NODE_EXTRA_CA_CERTS=<file> adds to the system's instead)",
  },
} as const satisfies OptionTable;

const nonEmpty = (value: string | undefined): string | undefined => (value === undefined || value === '' ? undefined : value);

/** The daemon the options and the environment name, and how to reach it. */
export interface DaemonTarget {
  readonly url: string;
  readonly token: string;
  /** The agent-sandbox router's sandbox id, when the daemon is reached through the router at `url`. */
  readonly sandbox: string | undefined;
  /** PEM certificates to trust instead of the system's. */
  readonly ca: Buffer | undefined;
}

/**
 * The daemon the options and the environment name: flags, then the environment, then a local daemon's defaults.
 * @throws {CliError} when no token is given and no local daemon wrote one, or the --ca file cannot be read.
 */
export function daemonTarget(values: OptionValues<typeof CLIENT_OPTIONS>, env: NodeJS.ProcessEnv = process.env): DaemonTarget {
  const url = values.url ?? nonEmpty(env.EXECWORLD_URL) ?? DEFAULT_URL;
  let token = values.token ?? nonEmpty(env.EXECWORLD_TOKEN);
  if (token === undefined) {
    const local = readLocalToken(env);
    if ('missing' in local) throw new CliError(`no token: pass --token or set EXECWORLD_TOKEN (${local.missing}, the file a daemon on this machine writes)`);
    token = local.token;
  }
  const sandbox = values.sandbox ?? nonEmpty(env.EXECWORLD_SANDBOX);
  const caFile = values.ca ?? nonEmpty(env.EXECWORLD_CA);
  const ca = caFile === undefined ? undefined : readOptionFile(caFile, 'ca');
  return { url, token, sandbox, ca };
}

/**
 * Connects to the daemon the options and the environment name.
 * @throws {CliError} when no token is given and no local daemon wrote one; the SDK's errors when the daemon cannot be reached or refuses the token.
 */
export async function openRuntime(values: OptionValues<typeof CLIENT_OPTIONS>, env: NodeJS.ProcessEnv = process.env): Promise<RemoteRuntime> {
  const { url, token, sandbox, ca } = daemonTarget(values, env);
  // A CLI that cannot reach its daemon says so soon; a session it follows survives a daemon restart within the SDK's reconnect deadline.
  try {
    return await connect(url, { token, ...(ca === undefined ? {} : { ca }), ...(sandbox === undefined ? {} : sandboxRouter(sandbox)) });
  } catch (error) {
    // The SDK says how its callers pass a certificate; this command's users pass a file.
    if (isExecworldError(error) && error.message.includes('connect(url, { ca:')) {
      throw new CliError(`${error.code}: ${error.message.replace(/as connect\(url, \{ ca: .*\}\)/, 'with --ca <file> (or NODE_EXTRA_CA_CERTS=<file>)')}`);
    }
    throw error;
  }
}

/** An error in one line: `CODE: message` for execworld's errors (the daemon's and the connection's), the message otherwise. */
export function describeFailure(error: unknown): string {
  if (isExecworldError(error)) return `${error.code}: ${error.message.replace(/\s*\n\s*/g, ' ')}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** The exit status a shell gives a program that ended so: its code, or 128 + the number of the signal that ended it. */
export function exitStatus(outcome: { readonly exitCode: number | null; readonly signal: string | null }): number {
  if (outcome.exitCode !== null) return outcome.exitCode;
  const number = outcome.signal === null ? undefined : (constants.signals as Record<string, number | undefined>)[outcome.signal];
  // An ended session always has a code or a known signal; this is never reached by one.
  return number === undefined ? 255 : 128 + number;
}

/** An argv as a shell would read it back: words quoted only where needed. */
export function shellQuote(argv: readonly string[]): string {
  return argv.map((word) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`)).join(' ');
}
