/**
 * Bearer tokens and the owners they stand for. Tokens are compared in constant
 * time (as SHA-256 digests, over every configured token), and never logged.
 * @module
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { WS_TOKEN_PROTOCOL_PREFIX } from '@execworld/sdk/protocol';
import { ConfigError } from './config.ts';

/** Shortest token accepted from a file. */
export const MIN_TOKEN_LENGTH = 16;

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

export class TokenTable {
  readonly #entries: { digest: Buffer; owner: string }[];
  /** Where the tokens came from, for the log. */
  readonly source: string;

  constructor(entries: readonly { owner: string; token: string }[], source: string) {
    this.#entries = entries.map((entry) => ({ digest: digest(entry.token), owner: entry.owner }));
    this.source = source;
  }

  get owners(): string[] {
    return [...new Set(this.#entries.map((entry) => entry.owner))];
  }

  /** The owner of `token`, or undefined. Takes the same time whichever token matches. */
  ownerOf(token: string | undefined): string | undefined {
    if (token === undefined || token.length === 0) return undefined;
    const presented = digest(token);
    let owner: string | undefined;
    for (const entry of this.#entries) {
      if (timingSafeEqual(presented, entry.digest)) owner ??= entry.owner;
    }
    return owner;
  }
}

/**
 * Parses a token file: one bare token (owner `default`), or lines of
 * `<owner> <token>`; blank lines and `#` comments are skipped.
 */
export function parseTokenFile(text: string, path: string): { owner: string; token: string }[] {
  const entries: { owner: string; token: string }[] = [];
  text.split('\n').forEach((line, index) => {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const fields = trimmed.split(/\s+/);
    if (fields.length > 2) throw new ConfigError(`${path} line ${index + 1}: expected "<token>" or "<owner> <token>"`);
    const [owner, token] = fields.length === 1 ? ['default', fields[0]!] : [fields[0]!, fields[1]!];
    if (token.length < MIN_TOKEN_LENGTH) throw new ConfigError(`${path} line ${index + 1}: the token is shorter than ${MIN_TOKEN_LENGTH} characters`);
    if (!/^[A-Za-z0-9._~-]{1,128}$/.test(owner)) throw new ConfigError(`${path} line ${index + 1}: owner names use letters, digits and . _ ~ -`);
    entries.push({ owner, token });
  });
  if (entries.length === 0) throw new ConfigError(`${path} holds no token`);
  return entries;
}

/**
 * The token table of the daemon: from `tokenFile` when configured, otherwise
 * from the user-only default file, which is created with a fresh token the
 * first time.
 */
export function loadTokens(tokenFile: string | undefined, defaultFile: string): { table: TokenTable; generated: boolean } {
  const path = tokenFile ?? defaultFile;
  if (tokenFile === undefined && !existsSync(defaultFile)) {
    mkdirSync(dirname(defaultFile), { recursive: true, mode: 0o700 });
    const token = randomBytes(32).toString('base64url');
    writeFileSync(defaultFile, `${token}\n`, { mode: 0o600, flag: 'wx' });
    chmodSync(defaultFile, 0o600);
    return { table: new TokenTable([{ owner: 'default', token }], defaultFile), generated: true };
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read token file ${path}: ${(error as Error).message}`);
  }
  if (process.platform !== 'win32' && (statSync(path).mode & 0o077) !== 0) {
    throw new ConfigError(`token file ${path} is readable by other users; chmod 600 it`);
  }
  return { table: new TokenTable(parseTokenFile(text, path), path), generated: false };
}

/** The token of an `Authorization: Bearer …` header. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** The token carried by a `base64url.bearer.authorization.k8s.io.<token>` subprotocol, for browsers. */
export function subprotocolToken(header: string | undefined): string | undefined {
  for (const protocol of (header ?? '').split(',').map((value) => value.trim())) {
    if (!protocol.startsWith(WS_TOKEN_PROTOCOL_PREFIX)) continue;
    try {
      return Buffer.from(protocol.slice(WS_TOKEN_PROTOCOL_PREFIX.length), 'base64url').toString('utf8');
    } catch (_error) {
      return undefined;
    }
  }
  return undefined;
}
