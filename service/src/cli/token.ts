/**
 * `execworld token create|revoke`: the operator mints and revokes tokens of
 * the daemon on its machine, with the signing key in the daemon's state
 * directory (which only the daemon's user, or root, can read). Nothing is
 * sent to the daemon: a minted token is self-contained, and a revocation is a
 * file in the state directory that the running daemon polls (minted.ts).
 * @module
 */
import { MAX_TIMER_DELAY_MS } from '@execworld/sdk/seam';
import { ConfigError, defaultStateDir, SETTINGS } from '../server/config.ts';
import { loadSigningKey, mintToken, MINTED_TOKEN_PREFIX, newTokenId, readClaims, recordRevocation } from '../server/minted.ts';
import { CliError, defineCommand, optionHelp, UsageError, type Command, type OptionTable } from './command.ts';

const OPTIONS = {
  owner: { type: 'string', value: '<owner>', help: "create: the owner the token stands for (an owner of the daemon's token file)" },
  access: { type: 'string', value: 'read|write', help: 'create: what it may do (write needs a write line of the owner in the token file)' },
  ttl: { type: 'string', value: '<duration>', help: 'create: how long it lasts: a number and s, m, h or d (15m, 2h, 1d)' },
  port: { type: 'string', value: '<port>', help: 'create: the one port in the world it reaches (a forward or a preview), and no call of the API' },
  session: { type: 'string', value: '<id>', help: 'create: the one session (t_…, p_… or s_…) it acts on' },
  'state-dir': { type: 'string', value: '<dir>', help: "the daemon's state directory, where its signing key and revocations are", env: SETTINGS.stateDir.env },
} as const satisfies OptionTable;

const HELP = `Usage: execworld token create --owner <owner> --access read|write --ttl <duration> [--port <port> | --session <id>]
       execworld token revoke <id|token>

Mints or revokes a token of the daemon on this machine, with the signing key in
its state directory: run it as the daemon's user (or root). create prints the
token on stdout, and its id and expiry on stderr. revoke refuses the token from
then on, and closes what uses it, within a second of the running daemon.

Options:
${optionHelp(OPTIONS)}

Exit status: 0 when done; 1 when the key cannot be read or made; 2 for a usage error.
`;

const UNITS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `15m` in milliseconds. @throws {UsageError} for anything else, or for more than a timer can wait (about 24 days). */
export function parseDuration(text: string): number {
  const match = /^(\d{1,9})([smhd])$/.exec(text);
  const ms = match === null ? Number.NaN : Number(match[1]) * UNITS[match[2]!]!;
  if (!(ms > 0)) throw new UsageError(`--ttl must be a number and s, m, h or d (15m), got ${text}`);
  if (ms > MAX_TIMER_DELAY_MS) throw new UsageError(`--ttl ${text} is longer than ${Math.floor(MAX_TIMER_DELAY_MS / UNITS.d!)} days`);
  return ms;
}

function required(value: string | undefined, option: string): string {
  if (value === undefined || value === '') throw new UsageError(`token create needs --${option}`);
  return value;
}

/** Reads or makes the key, its failure said in one line. */
function key(stateDir: string): Buffer {
  try {
    return loadSigningKey(stateDir);
  } catch (error) {
    throw new CliError((error as Error).message);
  }
}

// eslint-disable-next-line @typescript-eslint/require-await -- every command's run is async
export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  const [action, ...rest] = positionals;
  const stateDir = values['state-dir'] ?? (process.env[SETTINGS.stateDir.env] || undefined) ?? defaultStateDir();
  if (action === 'create') {
    if (rest.length > 0) throw new UsageError(`unexpected argument ${rest[0]}`);
    const owner = required(values.owner, 'owner');
    const access = required(values.access, 'access');
    if (access !== 'read' && access !== 'write') throw new UsageError(`--access must be read or write, got ${access}`);
    const ttlMs = parseDuration(required(values.ttl, 'ttl'));
    if (values.port !== undefined && values.session !== undefined) throw new UsageError('a token is scoped to one --port or one --session, not both');
    const port = values.port === undefined ? undefined : Number(values.port);
    if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) throw new UsageError(`--port must be 1 to 65535, got ${values.port}`);
    const expiresAt = Date.now() + ttlMs;
    const claims = { id: newTokenId(expiresAt), owner, access, expiresAt, port, session: values.session } as const;
    process.stdout.write(`${mintToken(key(stateDir), claims)}\n`);
    process.stderr.write(`token ${claims.id} of owner ${owner} (${access}) expires at ${new Date(expiresAt).toISOString()}\n`);
    return 0;
  }
  if (action === 'revoke') {
    if (rest.length !== 1) throw new UsageError(rest.length === 0 ? 'missing <id|token>' : `unexpected argument ${rest[1]}`);
    let id = rest[0]!;
    if (id.startsWith(MINTED_TOKEN_PREFIX)) {
      const claims = readClaims(key(stateDir), id);
      if (claims === undefined) throw new CliError('the token is not one this daemon signed');
      id = claims.id;
    }
    try {
      recordRevocation(stateDir, id);
    } catch (error) {
      throw new CliError(error instanceof ConfigError ? error.message : `cannot record the revocation in ${stateDir}: ${(error as Error).message}`);
    }
    process.stderr.write(`revoked token ${id}\n`);
    return 0;
  }
  throw new UsageError(action === undefined ? 'missing create or revoke' : `unknown action ${action}: create or revoke`);
});
