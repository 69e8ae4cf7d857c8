/**
 * Tokens the daemon mints: self-contained, signed with a key kept in its
 * state directory, expiring, scoped and revocable by id.
 *
 * A minted token is `ewm1.<payload>.<signature>`: the payload the base64url
 * JSON of {v: 1, id, owner, access, exp, port?, session?}, the signature the
 * base64url HMAC-SHA-256 of `ewm1.<payload>` under the daemon's key. The
 * prefix names the format's version and sets it apart from every token of a
 * token file, which may not begin with it (auth.ts refuses such a line). The
 * daemon keeps nothing per token to verify one: a token it minted before a
 * restart is good after it, and the operator mints with the same key on the
 * daemon's machine (`execworld token create`).
 *
 * The key is `token-key` in the state directory: 32 random bytes made on the
 * first start, 0600 in a 0700 directory, read under the token file's rules
 * (secret-file.ts). The state directory is one of the daemon's secrets, which
 * no owner's file call reaches (daemon-runtime.ts), and the key never leaves
 * the daemon's process otherwise.
 *
 * Revocation is by id: an empty file named by the id in `revoked/` of the
 * state directory, made by the daemon (`token.revoke`) or by the operator's
 * `execworld token revoke`; the daemon polls the directory (four times a
 * second) and ends what holds a revoked token (grants.ts). An id begins with
 * its token's expiry, so an entry is dropped once its token could no longer
 * be used: the list holds revoked tokens that have not expired yet, and no more.
 * @module
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, unlinkSync, unwatchFile, watchFile, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { TokenAccess } from '@execworld/sdk/token-file';
import { fileModesGuardPrivacy } from '../platform-facts.ts';
import { ConfigError } from './config.ts';
import { readSecretFile } from './secret-file.ts';

/** What every minted token begins with: its format's version, and the mark that sets it apart from a token file's. */
export const MINTED_TOKEN_PREFIX = 'ewm1.';
const KEY_FILE = 'token-key';
const REVOKED_DIRECTORY = 'revoked';
const KEY_BYTES = 32;
/** A token longer than this is no token of the daemon's: it is refused before anything is decoded. */
const MAX_TOKEN_LENGTH = 2048;
/** How often the revocation directory is looked at for what another process (the operator's CLI) revoked. */
export const REVOCATION_POLL_MS = 250;
/** How often revocations of tokens that expired are dropped, when nothing else drops them. */
const PRUNE_INTERVAL_MS = 60_000;
/** Tokens minted through the API and not yet expired, per owner; minting more is refused until some expire or are revoked. */
export const MAX_LIVE_MINTED_PER_OWNER = 1024;
/** Tokens the daemon remembers it minted or saw, to list and revoke them by id for their owner. */
const MAX_KNOWN = 65_536;

const ID_PATTERN = /^([0-9a-z]{1,11})-[0-9a-f]{24}$/;

/** What a minted token says: who it stands for, what it may do, until when, and its scope. */
export interface Claims {
  readonly id: string;
  readonly owner: string;
  readonly access: TokenAccess;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
  readonly port?: number | undefined;
  readonly session?: string | undefined;
}

const Payload = z.strictObject({
  v: z.literal(1),
  id: z.string().regex(ID_PATTERN),
  owner: z.string().min(1).max(256),
  access: z.enum(['read', 'write']),
  exp: z.int().min(0),
  port: z.int().min(1).max(65535).optional(),
  session: z.string().min(1).max(256).optional(),
});

export const signingKeyPath = (stateDir: string): string => join(stateDir, KEY_FILE);
const revokedDirectory = (stateDir: string): string => join(stateDir, REVOKED_DIRECTORY);

/** A fresh id for a token that expires at `expiresAt`: the expiry first, so a revocation knows when it may be dropped. */
export function newTokenId(expiresAt: number): string {
  return `${Math.floor(expiresAt).toString(36)}-${randomBytes(12).toString('hex')}`;
}

/** When the token of id `id` expires, or undefined for no id of a minted token. */
export function idExpiry(id: string): number | undefined {
  const match = ID_PATTERN.exec(id);
  return match === null ? undefined : parseInt(match[1]!, 36);
}

const sign = (key: Buffer, signed: string): Buffer => createHmac('sha256', key).update(signed, 'utf8').digest();

/** The token of `claims`, signed with `key`. */
export function mintToken(key: Buffer, claims: Claims): string {
  const payload = {
    v: 1,
    id: claims.id,
    owner: claims.owner,
    access: claims.access,
    exp: claims.expiresAt,
    ...(claims.port === undefined ? {} : { port: claims.port }),
    ...(claims.session === undefined ? {} : { session: claims.session }),
  };
  const signed = `${MINTED_TOKEN_PREFIX}${Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')}`;
  return `${signed}.${sign(key, signed).toString('base64url')}`;
}

/**
 * What `token` says, if `key` signed it as it is; undefined for anything else (another key's, a byte changed,
 * no minted token at all). The signature is compared in constant time, before the payload is read. Expiry and
 * revocation are not checked here.
 */
export function readClaims(key: Buffer, token: string): Claims | undefined {
  if (!token.startsWith(MINTED_TOKEN_PREFIX) || token.length > MAX_TOKEN_LENGTH) return undefined;
  const dot = token.lastIndexOf('.');
  const signed = token.slice(0, dot);
  const signature = token.slice(dot + 1);
  if (dot < MINTED_TOKEN_PREFIX.length || !/^[A-Za-z0-9_-]+$/.test(signature) || !/^[A-Za-z0-9_-]+$/.test(signed.slice(MINTED_TOKEN_PREFIX.length)))
    return undefined;
  const presented = Buffer.from(signature, 'base64url');
  const expected = sign(key, signed);
  // The same time for every signature of the right length; a wrong length says only that it is no signature of ours.
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(signed.slice(MINTED_TOKEN_PREFIX.length), 'base64url').toString('utf8'));
  } catch (_error) {
    return undefined;
  }
  const parsed = Payload.safeParse(json);
  if (!parsed.success || idExpiry(parsed.data.id) !== parsed.data.exp) return undefined;
  const { id, owner, access, exp, port, session } = parsed.data;
  return { id, owner, access, expiresAt: exp, port, session };
}

/**
 * The daemon's signing key, made on the first call: 32 random bytes in `token-key` of `stateDir`, 0600. It is
 * written beside its place and linked into it, which fails if another daemon (or the CLI) made it meanwhile, so
 * nobody ever reads half a key; that one is then read. Read as the token file is, where file modes guard privacy.
 * @throws {ConfigError} for a key file that may not be trusted or is not a key.
 */
export function loadSigningKey(stateDir: string): Buffer {
  const path = signingKeyPath(stateDir);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  if (!existsSync(path)) {
    const fresh = `${path}.${process.pid}.${randomBytes(6).toString('hex')}`;
    writeFileSync(fresh, `${randomBytes(KEY_BYTES).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    try {
      linkSync(fresh, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new ConfigError(`cannot make the signing key ${path}: ${(error as Error).message}`);
    } finally {
      unlinkSync(fresh);
    }
  }
  let text: string;
  try {
    text = fileModesGuardPrivacy() ? readSecretFile(path, 'signing key') : readFileSync(path, 'utf8');
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`cannot read the signing key ${path}: ${(error as Error).message}`);
  }
  const key = Buffer.from(text.trim(), 'base64url');
  if (key.length !== KEY_BYTES) throw new ConfigError(`signing key ${path} is not ${KEY_BYTES} bytes of base64url; remove it to have a new one made`);
  return key;
}

/**
 * Records the revocation of token `id` in `stateDir`, for the daemon to find: an empty file named by the id in
 * `revoked/`. The operator's CLI and the daemon both write here; each id is its own file, so neither can lose
 * what the other wrote.
 * @throws {ConfigError} for no id of a minted token.
 */
export function recordRevocation(stateDir: string, id: string): void {
  if (idExpiry(id) === undefined) throw new ConfigError(`${id} is no id of a minted token (they look like mj2k3l8w-0123456789abcdef01234567)`);
  const directory = revokedDirectory(stateDir);
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  writeFileSync(join(directory, id), '', { mode: 0o600 });
}

/** A token as its owner lists it. */
export interface MintedInfo {
  readonly id: string;
  readonly access: TokenAccess;
  readonly expiresAt: number;
  readonly port?: number;
  readonly session?: string;
}

const info = (claims: Claims): MintedInfo => ({
  id: claims.id,
  access: claims.access,
  expiresAt: claims.expiresAt,
  ...(claims.port === undefined ? {} : { port: claims.port }),
  ...(claims.session === undefined ? {} : { session: claims.session }),
});

/** Why a minted token is refused: 'expired', 'revoked', or 'invalid' (not signed by this daemon's key as it is). */
export type Lapse = 'expired' | 'revoked';

/**
 * The daemon's side of minted tokens: its key, what was revoked (kept in memory, persisted in the state
 * directory, and polled for what the operator revoked), and the tokens it knows by id, to list and revoke for
 * their owners.
 */
export class TokenMinter {
  readonly #key: Buffer;
  readonly #stateDir: string;
  readonly #now: () => number;
  readonly #log: Logger | undefined;
  /** Revoked ids, with when each could have been used last. */
  readonly #revoked = new Map<string, number>();
  /** Tokens minted here or seen verified, by id: what `token.list` and `token.revoke` know of. */
  readonly #known = new Map<string, Claims>();
  readonly #listeners = new Set<(id: string) => void>();
  readonly #directory: string;
  #watching = false;
  #pruning: NodeJS.Timeout | undefined;
  readonly #onChange = (): void => this.#scan();

  constructor(stateDir: string, options: { log?: Logger; now?: () => number } = {}) {
    this.#stateDir = stateDir;
    this.#key = loadSigningKey(stateDir);
    this.#now = options.now ?? Date.now;
    this.#log = options.log;
    this.#directory = revokedDirectory(stateDir);
    mkdirSync(this.#directory, { recursive: true, mode: 0o700 });
    this.#scan();
  }

  /**
   * Starts polling the revocation directory for what another process wrote there. Stat polling rather than
   * inotify: it sees the directory replaced or made anew, works on every filesystem, and costs a stat a poll.
   */
  watch(): void {
    if (this.#watching) return;
    this.#watching = true;
    watchFile(this.#directory, { interval: REVOCATION_POLL_MS, persistent: false }, this.#onChange);
    // Entries of tokens that expired are dropped even when nothing else happens.
    this.#pruning = setInterval(() => this.#prune(), PRUNE_INTERVAL_MS).unref();
  }

  close(): void {
    // This listener only: another minter of this process (a second daemon on the directory) keeps its own.
    if (this.#watching) unwatchFile(this.#directory, this.#onChange);
    clearInterval(this.#pruning);
    this.#watching = false;
    this.#listeners.clear();
  }

  /** Calls `listener` with each id revoked from now on. @returns what stops it. */
  onRevoke(listener: (id: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Whether the token of `id` was revoked. */
  isRevoked(id: string): boolean {
    return this.#revoked.has(id);
  }

  /** What `token` says if this daemon signed it and it is still good, or why not. */
  verify(token: string): Claims | 'invalid' | Lapse {
    const claims = readClaims(this.#key, token);
    if (claims === undefined) return 'invalid';
    if (claims.expiresAt <= this.#now()) return 'expired';
    if (this.#revoked.has(claims.id)) return 'revoked';
    if (!this.#known.has(claims.id) && this.#known.size < MAX_KNOWN) this.#known.set(claims.id, claims);
    return claims;
  }

  /** Mints a token of `request`'s owner, access and scope, good for `ttlMs` from now. */
  mint(request: Omit<Claims, 'id' | 'expiresAt'> & { ttlMs: number }): { token: string; claims: Claims } {
    this.#prune();
    const expiresAt = this.#now() + request.ttlMs;
    const claims: Claims = {
      id: newTokenId(expiresAt),
      owner: request.owner,
      access: request.access,
      expiresAt,
      ...(request.port === undefined ? {} : { port: request.port }),
      ...(request.session === undefined ? {} : { session: request.session }),
    };
    this.#known.set(claims.id, claims);
    return { token: mintToken(this.#key, claims), claims };
  }

  /** How many of `owner`'s tokens are known and still good. */
  liveOf(owner: string): number {
    this.#prune();
    let count = 0;
    for (const claims of this.#known.values()) if (claims.owner === owner && !this.#revoked.has(claims.id)) count += 1;
    return count;
  }

  /** `owner`'s known tokens that are still good, soonest to expire first. */
  list(owner: string): MintedInfo[] {
    this.#prune();
    return [...this.#known.values()]
      .filter((claims) => claims.owner === owner && !this.#revoked.has(claims.id))
      .sort((a, b) => a.expiresAt - b.expiresAt)
      .map(info);
  }

  /** Whether `id` is a known token of `owner`'s (revoked or not), which it may revoke. */
  owns(owner: string, id: string): boolean {
    return this.#known.get(id)?.owner === owner && (this.#known.get(id)?.expiresAt ?? 0) > this.#now();
  }

  /** Revokes `id`: recorded in the state directory, then refused from now on, and its holders told. */
  revoke(id: string): void {
    recordRevocation(this.#stateDir, id);
    this.#add(id);
  }

  #add(id: string): void {
    const expiresAt = idExpiry(id);
    if (expiresAt === undefined || expiresAt <= this.#now() || this.#revoked.has(id)) return;
    this.#revoked.set(id, expiresAt);
    for (const listener of this.#listeners) listener(id);
  }

  /** Reads the revocation directory: new entries are revoked, those of expired tokens dropped. */
  #scan(): void {
    let names: string[];
    try {
      names = readdirSync(this.#directory);
    } catch (error) {
      this.#log?.warn({ err: error, directory: this.#directory }, 'cannot read the revoked tokens');
      return;
    }
    const now = this.#now();
    for (const name of names) {
      const expiresAt = idExpiry(name);
      if (expiresAt !== undefined && expiresAt > now) {
        this.#add(name);
        continue;
      }
      // An entry of a token that has expired (or of no token at all) holds nothing back any more.
      try {
        unlinkSync(join(this.#directory, name));
      } catch (_error) {
        // Gone already, or not ours to remove: the next scan tries again.
      }
    }
    this.#prune();
  }

  /** Forgets what expired: revocations and known tokens alike. */
  #prune(): void {
    const now = this.#now();
    for (const [id, expiresAt] of this.#revoked) {
      if (expiresAt > now) continue;
      this.#revoked.delete(id);
      try {
        unlinkSync(join(this.#directory, id));
      } catch (_error) {
        // Gone already: a scan dropped it.
      }
    }
    for (const [id, claims] of this.#known) if (claims.expiresAt <= now) this.#known.delete(id);
  }
}
