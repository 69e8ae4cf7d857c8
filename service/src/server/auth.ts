/**
 * Bearer tokens, the owners they stand for and what they may do. Tokens are
 * compared in constant time (as SHA-256 digests, over every configured token),
 * and never logged.
 * @module
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { WS_TOKEN_PROTOCOL_PREFIX } from '@execworld/sdk/protocol';
import { DEFAULT_OWNER, MIN_TOKEN_LENGTH, tokenFileLines, type TokenAccess } from '@execworld/sdk/token-file';
import { fileModesGuardPrivacy } from '../platform-facts.ts';
import type { RunAs } from '../provider/api.ts';
import { ConfigError } from './config.ts';
import { MINTED_TOKEN_PREFIX, type Claims, type Lapse } from './minted.ts';
import { readSecretFile } from './secret-file.ts';

export { MIN_TOKEN_LENGTH };

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

export interface TokenEntry {
  readonly owner: string;
  readonly token: string;
  /** What the token may do. @default 'write' */
  readonly access?: TokenAccess | undefined;
  /** The OS user the owner's programs run as; the daemon's own user when absent. */
  readonly user?: RunAs | undefined;
  /** The directory the owner's filesystem calls are confined to; all of the world when absent. */
  readonly root?: string | undefined;
}

/**
 * Who a token stands for, resolved once when the token is: its owner, what
 * the token may do, and what is the owner's whichever of its tokens is
 * presented (a read line names no user or root: its write lines do). Every
 * call carries it (CallContext), so sessions, files and transfers of the
 * owner are made as this says without asking the token table again.
 */
export interface Principal {
  readonly owner: string;
  readonly access: TokenAccess;
  /** The OS user the owner's programs run and its files are served as; the daemon's own when undefined. */
  readonly runAs: RunAs | undefined;
  /** The directory the owner's filesystem calls are confined to; all of the world when undefined. */
  readonly root: string | undefined;
  /**
   * Present for a token the daemon minted (signed, expiring, revocable): its id, when it expires, and the one
   * port or session it is scoped to, if any. A token of the token file has none.
   */
  readonly minted?: MintedScope | undefined;
}

/**
 * Whose budget a connection or a request spends: an owner's tokens, by their
 * access and by where they come from. Its read tokens have budgets of their
 * own beside its write tokens', so watchers can never lock the owner out; the
 * tokens it minted (handed on: to a viewer, a CI job, an agent) have budgets
 * of their own beside the token file's, so what holds one cannot lock the
 * owner out either, and ends its holds when the token is revoked.
 */
export interface OwnerAccess {
  readonly owner: string;
  readonly access: TokenAccess;
  /** Present for a minted token (its scope): any value but undefined puts it in the minted tokens' budget. */
  readonly minted?: unknown;
}

/** The name of the budget `who` spends, one string per budget (owner names hold any character but a newline). */
export function budgetOf(who: OwnerAccess): string {
  return `${who.access}\n${who.minted === undefined ? 'file' : 'minted'}\n${who.owner}`;
}

/** Whether `a` and `b` spend one budget. */
export function sameBudget(a: OwnerAccess, b: OwnerAccess): boolean {
  return budgetOf(a) === budgetOf(b);
}

/** The tokens whose budget `who` spends, for a refusal's message. */
export function tokensOf(who: OwnerAccess): string {
  return `the ${who.minted === undefined ? '' : 'minted '}${who.access === 'read' ? 'read-only ' : ''}tokens of owner ${who.owner}`;
}

/** What a minted token is: its id (to revoke it by), its expiry, and its scope. */
export interface MintedScope {
  readonly id: string;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
  /** The one port in the world it reaches (a preview or a forward), and nothing else. */
  readonly port?: number | undefined;
  /** The one session it acts on. */
  readonly session?: string | undefined;
}

/**
 * Whether `principal` may reach `port` in the world (forward to it, preview it): a token scoped to a port reaches
 * that port only, whatever its access; any other token needs write access, as what listens on a port may change the
 * world when spoken to.
 */
export function permitsPort(principal: Principal, port: number): boolean {
  // A token of one session acts on that session only.
  if (principal.minted?.session !== undefined) return false;
  const scoped = principal.minted?.port;
  return scoped === undefined ? principal.access === 'write' : scoped === port;
}

/** Whether `principal` may act on session `id`: any of its owner's, unless its token is scoped to another one or to a port. */
export function permitsSession(principal: Principal, id: string): boolean {
  if (principal.minted?.port !== undefined) return false;
  const scoped = principal.minted?.session;
  return scoped === undefined || scoped === id;
}

/**
 * How far `principal` reaches through the API: `owner`, everything of its owner (as its access allows);
 * `session`, one session only (the ids permitsSession admits), and no create, file or token call; `port`, no
 * call but its port forward's (its token is for its port's forward or preview, which ask permitsPort).
 */
export function reachOf(principal: Principal): 'owner' | 'session' | 'port' {
  if (principal.minted?.port !== undefined) return 'port';
  return principal.minted?.session === undefined ? 'owner' : 'session';
}

/** What verifies minted tokens for a token table (minted.ts's TokenMinter). */
export interface MintedVerifier {
  verify(token: string): Claims | 'invalid' | Lapse;
}

export class TokenTable {
  readonly #entries: { digest: Buffer; principal: Principal }[];
  readonly #users = new Map<string, RunAs>();
  /** Each owner's principal at the most its token file's lines give it: what a minted token of the owner is made from. */
  readonly #owners = new Map<string, Principal>();
  #minted: MintedVerifier | undefined;
  /** Where the tokens came from, for the log. */
  readonly source: string;

  constructor(entries: readonly TokenEntry[], source: string) {
    const roots = new Map<string, string>();
    for (const entry of entries) {
      if (entry.user !== undefined) this.#users.set(entry.owner, entry.user);
      if (entry.root !== undefined) roots.set(entry.owner, entry.root);
    }
    const principal = (entry: TokenEntry): Principal =>
      Object.freeze({ owner: entry.owner, access: entry.access ?? 'write', runAs: this.#users.get(entry.owner), root: roots.get(entry.owner) });
    this.#entries = entries.map((entry) => ({ digest: digest(entry.token), principal: principal(entry) }));
    for (const { principal: each } of this.#entries) {
      if (this.#owners.get(each.owner)?.access !== 'write') this.#owners.set(each.owner, each);
    }
    this.source = source;
  }

  /** Has `verifier` check the minted tokens presented from now on; without one, every minted token is refused. */
  trust(verifier: MintedVerifier): void {
    this.#minted = verifier;
  }

  /** Owner to OS user name, for the log. */
  get users(): Record<string, string> {
    return Object.fromEntries([...this.#users].map(([owner, user]) => [owner, user.name]));
  }

  /** The uids of the OS users owners run as, beside the daemon's own: a session could have run as any of them. */
  get uids(): number[] {
    return [...new Set([...this.#users.values()].map((user) => user.uid))];
  }

  get owners(): string[] {
    return [...new Set(this.#entries.map((entry) => entry.principal.owner))];
  }

  /**
   * The principal `token` stands for, or undefined; `refused` is told why a minted token was not taken. The one
   * place a token becomes a principal. A token of the file takes the same time whichever matches. A minted token
   * (its prefix is no file token's) stands for its owner as the file says the owner is (its OS user and root),
   * with no more access than it was minted with nor than the owner's lines give, and carries its scope; one
   * whose owner is no longer in the file is refused.
   */
  identify(token: string | undefined, refused?: (reason: string) => void): Principal | undefined {
    if (token === undefined || token.length === 0) return undefined;
    if (token.startsWith(MINTED_TOKEN_PREFIX)) return this.#identifyMinted(token, refused ?? (() => {}));
    const presented = digest(token);
    let principal: Principal | undefined;
    for (const entry of this.#entries) {
      if (timingSafeEqual(presented, entry.digest)) principal ??= entry.principal;
    }
    return principal;
  }

  #identifyMinted(token: string, refused: (reason: string) => void): Principal | undefined {
    const claims = this.#minted?.verify(token) ?? 'invalid';
    if (typeof claims === 'string') {
      refused(claims === 'invalid' ? 'the bearer token is not valid' : claims === 'expired' ? 'the token expired' : 'the token was revoked');
      return undefined;
    }
    const owner = this.#owners.get(claims.owner);
    if (owner === undefined) {
      refused(`the token's owner ${claims.owner} is no longer in the token file`);
      return undefined;
    }
    return Object.freeze({
      owner: owner.owner,
      access: owner.access === 'write' ? claims.access : 'read',
      runAs: owner.runAs,
      root: owner.root,
      minted: Object.freeze({
        id: claims.id,
        expiresAt: claims.expiresAt,
        ...(claims.port === undefined ? {} : { port: claims.port }),
        ...(claims.session === undefined ? {} : { session: claims.session }),
      }),
    });
  }
}

/** A token file's entry before its user and root are looked up. */
export interface TokenLine {
  readonly owner: string;
  readonly token: string;
  readonly userName?: string;
  readonly root?: string;
  /** Present on a read line only, which names no user or root. */
  readonly access?: 'read';
}

/**
 * Parses a token file by the grammar of `@execworld/sdk/token-file`: one bare
 * token (owner `default`), or lines of `<owner> <token> [<os user>] [root=<directory>] [access=read|write]`;
 * blank lines and `#` comments are skipped. An OS user makes the owner's
 * programs run as that user (see {@link resolveUsers}); a root confines the
 * owner's filesystem calls to that directory; `access=read` makes a token
 * that may only read (a read line names no user or root: they are the owner's,
 * said on its write lines). A token may be on one line only: the same token
 * twice, for one owner or two, would leave whose it is to the order of the
 * lines.
 * @throws {ConfigError} naming the file and line of the first line that is not a token line,
 * or both lines of a token given twice.
 */
export function parseTokenFile(text: string, path: string): TokenLine[] {
  /** The line each token is on; compared as they are written, the token itself is never in a message. */
  const seen = new Map<string, number>();
  const entries = tokenFileLines(text).map((line) => {
    if ('problem' in line) throw new ConfigError(`${path} line ${line.line}: ${line.problem}`);
    const first = seen.get(line.token);
    if (first !== undefined) throw new ConfigError(`${path} lines ${first} and ${line.line} hold the same token; give each token one line`);
    // Tokens of this shape are the daemon's minted ones: one in the file could be taken for either.
    if (line.token.startsWith(MINTED_TOKEN_PREFIX))
      throw new ConfigError(`${path} line ${line.line}: a token may not begin with ${MINTED_TOKEN_PREFIX}, which marks a minted token`);
    seen.set(line.token, line.line);
    return {
      owner: line.owner,
      token: line.token,
      ...(line.userName === undefined ? {} : { userName: line.userName }),
      ...(line.root === undefined ? {} : { root: line.root }),
      ...(line.access === undefined ? {} : { access: line.access }),
    };
  });
  if (entries.length === 0) throw new ConfigError(`${path} holds no token`);
  return entries;
}

/**
 * Resolves the OS users a token file names. Running programs as another user
 * needs root; a daemon that is not root may only name its own user.
 * @throws {ConfigError} for an unknown user, or one the daemon cannot become.
 */
export function resolveUsers(
  entries: readonly TokenLine[],
  path: string,
  lookup: (name: string) => RunAs | undefined,
  daemonUid: number | undefined = process.getuid?.(),
): TokenEntry[] {
  return entries.map(({ owner, token, userName, root, access }) => {
    // A read line names neither user nor root (the grammar refuses them): the owner's come from its write lines.
    if (access === 'read') return { owner, token, access };
    const confined = root === undefined ? {} : { root: existingDirectory(root, path, owner) };
    if (userName === undefined) return { owner, token, ...confined };
    const user = lookup(userName);
    if (user === undefined) throw new ConfigError(`${path}: owner ${owner} names OS user ${userName}, who does not exist`);
    if (daemonUid !== 0 && daemonUid !== user.uid) {
      throw new ConfigError(`${path}: owner ${owner} names OS user ${userName}; running programs as another user needs the daemon to run as root`);
    }
    // The daemon's own user needs no switch.
    return daemonUid === user.uid ? { owner, token, ...confined } : { owner, token, user, ...confined };
  });
}

/** `root` if it is an existing directory. @throws {ConfigError} naming the file and owner otherwise. */
function existingDirectory(root: string, path: string, owner: string): string {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(root).isDirectory();
  } catch (error) {
    throw new ConfigError(
      `${path}: the root of owner ${owner}, ${root}, cannot be reached (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
  if (!isDirectory) throw new ConfigError(`${path}: the root of owner ${owner}, ${root}, is not a directory`);
  return root;
}

/**
 * The token table of the daemon: from `tokenFile` when configured, otherwise
 * from the user-only default file, which is created with a fresh token the
 * first time. Where file modes guard privacy, the file is read only once it
 * and the directories on its way pass {@link readSecretFile}'s checks.
 */
export function loadTokens(
  tokenFile: string | undefined,
  defaultFile: string,
  lookup: (name: string) => RunAs | undefined,
): { table: TokenTable; generated: boolean } {
  const path = tokenFile ?? defaultFile;
  if (tokenFile === undefined && !existsSync(defaultFile)) {
    mkdirSync(dirname(defaultFile), { recursive: true, mode: 0o700 });
    const token = randomBytes(32).toString('base64url');
    writeFileSync(defaultFile, `${token}\n`, { mode: 0o600, flag: 'wx' });
    chmodSync(defaultFile, 0o600);
    return { table: new TokenTable([{ owner: DEFAULT_OWNER, token }], defaultFile), generated: true };
  }
  let text: string;
  if (fileModesGuardPrivacy()) {
    // Only root or the daemon's uid may have written it or be able to swap it; see secret-file.ts for exactly what passes.
    text = readSecretFile(path, 'token file');
  } else {
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new ConfigError(`cannot read token file ${path}: ${(error as Error).message}`);
    }
  }
  return { table: new TokenTable(resolveUsers(parseTokenFile(text, path), path, lookup), path), generated: false };
}

/** The token of an `Authorization: Bearer …` header. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * The token of an `X-Execworld-Token` header, for clients behind a proxy that
 * strips `Authorization` (the agent-sandbox router does).
 */
export function headerToken(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  const token = value?.trim();
  return token === undefined || token === '' ? undefined : token;
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
