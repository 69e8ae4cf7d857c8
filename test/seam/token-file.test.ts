/**
 * The token file has one path rule and one line grammar, read by both the
 * daemon (which loads its tokens) and the SDK (which finds a local daemon's).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { localToken, localTokenFile } from '@execworld/sdk';
import { readLocalToken, tokenFileLines } from '@execworld/sdk/token-file';
import { loadTokens, parseTokenFile } from '../../service/src/server/auth.ts';
import { ConfigError, defaultTokenFile } from '../../service/src/server/config.ts';
import { ALICE, ALICE_READER, BOB } from '../helpers/daemon.ts';

const TOKEN = 'q7Vd-2mKx9Lp4wRz';

/** An XDG_CONFIG_HOME whose execworld/token holds `text`. */
function configHome(text: string): NodeJS.ProcessEnv {
  const home = mkdtempSync(join(tmpdir(), 'execworld-token-file-'));
  mkdirSync(join(home, 'execworld'));
  writeFileSync(join(home, 'execworld', 'token'), text, { mode: 0o600 });
  return { XDG_CONFIG_HOME: home };
}

describe('the token file', () => {
  it('lives where the daemon writes it and the SDK looks for it', () => {
    expect(localTokenFile({ XDG_CONFIG_HOME: '/x' })).toBe('/x/execworld/token');
    expect(localTokenFile({ XDG_CONFIG_HOME: '' })).toBe(join(homedir(), '.config', 'execworld', 'token'));
    expect(defaultTokenFile({ XDG_CONFIG_HOME: '/x' })).toBe(localTokenFile({ XDG_CONFIG_HOME: '/x' }));
  });

  it('reads bare tokens, owner lines and OS users, skipping blanks and comments, numbering lines from 1', () => {
    expect(tokenFileLines(`# team\n\n${TOKEN}\nalice ${TOKEN}1\nbob\t${TOKEN}2   nobody\n`)).toEqual([
      { line: 3, owner: 'default', token: TOKEN },
      { line: 4, owner: 'alice', token: `${TOKEN}1` },
      { line: 5, owner: 'bob', token: `${TOKEN}2`, userName: 'nobody' },
    ]);
  });

  it('names what is wrong with a line that is not a token line', () => {
    expect(tokenFileLines(`a b c d\nshort\nal/ice ${TOKEN}\nbob ${TOKEN} 9lives\n`)).toEqual([
      { line: 1, problem: 'expected "<token>" or "<owner> <token> [<os user>] [root=<directory>] [access=read|write]"' },
      { line: 2, problem: 'the token is shorter than 16 characters' },
      { line: 3, problem: 'owner names use letters, digits and . _ ~ -' },
      { line: 4, problem: '9lives is not a user name' },
    ]);
  });

  it('reads access=read and access=write; a read line stands alone, with neither OS user nor root', () => {
    expect(tokenFileLines(`alice ${TOKEN}1 access=read\nalice ${TOKEN}2 nobody root=/srv access=write\nbob ${TOKEN}3 access=read\n`)).toEqual([
      { line: 1, owner: 'alice', token: `${TOKEN}1`, access: 'read' },
      // Write is the default: an explicit one says nothing more.
      { line: 2, owner: 'alice', token: `${TOKEN}2`, userName: 'nobody', root: '/srv' },
      { line: 3, owner: 'bob', token: `${TOKEN}3`, access: 'read' },
    ]);
  });

  it('names what is wrong with an access option', () => {
    const owners = "an owner's OS user and root come from its write lines";
    expect(
      tokenFileLines(
        [
          `alice ${TOKEN} access=admin`,
          `alice ${TOKEN} access=`,
          `alice ${TOKEN} access=read access=read`,
          `alice ${TOKEN} access=read access=write`,
          `alice ${TOKEN} nobody access=read`,
          `alice ${TOKEN} access=read root=/srv`,
          `alice ${TOKEN} acces=read`,
          `${TOKEN} access=read`,
        ].join('\n'),
      ),
    ).toEqual([
      { line: 1, problem: 'access= must be read or write, not "admin"' },
      { line: 2, problem: 'access= must be read or write, not ""' },
      { line: 3, problem: 'access= is given twice' },
      { line: 4, problem: 'access= is given twice' },
      { line: 5, problem: `a read line names no OS user: ${owners}` },
      { line: 6, problem: `a read line takes no root=: ${owners}` },
      { line: 7, problem: 'unknown option acces= (the options are root=<directory> and access=read|write)' },
      // A bare token has no owner for an option to qualify.
      { line: 8, problem: 'expected "<token>" or "<owner> <token> [<os user>] [root=<directory>] [access=read|write]"' },
    ]);
  });

  it('refuses a guessable token: repeats, runs and copies of itself, however long', () => {
    const guessable = [
      'aaaaaaaaaaaaaaaa',
      '0123456789abcdef',
      'fedcba9876543210fedcba',
      '0123456789abcdefXYZ',
      'abababababababab',
      'AaAaAaAaAaAaAaAa',
      'acegikmoqsuwy024',
      'qwerqwerqwerqwerqwer',
      'letmeinletmeinletmein',
      'x'.repeat(10_000),
    ];
    for (const token of guessable) {
      expect(tokenFileLines(`alice ${token}`), token).toEqual([{ line: 1, problem: expect.stringMatching(/^the token is guessable: fewer than 8 /) }]);
    }
    // The SDK is told why, as the daemon is.
    const weak = configHome('0123456789abcdef\n');
    expect(readLocalToken(weak)).toEqual({ missing: expect.stringContaining(`${localTokenFile(weak)} line 1 is not a token line: the token is guessable`) });
    expect(() => parseTokenFile('alice aaaaaaaaaaaaaaaa\n', 'f')).toThrow(/^f line 1: the token is guessable/);
  });

  it("takes random tokens (the daemon's own, openssl rand -hex 16 and 32, -base64 24) and the tests' own", () => {
    for (let round = 0; round < 500; round += 1) {
      for (const token of [
        randomBytes(32).toString('base64url'),
        randomBytes(16).toString('hex'),
        randomBytes(32).toString('hex'),
        randomBytes(24).toString('base64'),
      ]) {
        expect(tokenFileLines(token), token).toEqual([{ line: 1, owner: 'default', token }]);
      }
    }
    for (const token of [ALICE, BOB, ALICE_READER, TOKEN]) expect(tokenFileLines(`alice ${token}`), token).toEqual([{ line: 1, owner: 'alice', token }]);
  });

  it('refuses a token given on two lines, for one owner or two, naming both lines and not the token', () => {
    for (const text of [`alice ${TOKEN}\nbob ${BOB}\n# x\nalice ${TOKEN} access=read\n`, `alice ${TOKEN}\nbob ${BOB}\n\nbob ${TOKEN}\n`]) {
      let error: unknown;
      try {
        parseTokenFile(text, 'f');
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toBe('f lines 1 and 4 hold the same token; give each token one line');
    }
    // The daemon refuses such a file when it loads it.
    const file = join(mkdtempSync(join(tmpdir(), 'execworld-duplicate-tokens-')), 'tokens');
    writeFileSync(file, `alice ${ALICE}\nbob ${ALICE}\n`, { mode: 0o600 });
    expect(() => loadTokens(file, file, () => undefined)).toThrow(`${file} lines 1 and 2 hold the same token`);
  });

  it('gives the SDK the token the daemon takes for its first line', () => {
    const text = `# comment\nalice ${TOKEN} nobody\nbob ${TOKEN}2\n`;
    expect(localToken(configHome(text))).toBe(parseTokenFile(text, 'f')[0]!.token);
    expect(localToken(configHome(`${TOKEN}\n`))).toBe(TOKEN);
  });

  it('tells the SDK why there is no token: no file, no token line, or a first line that is not one', () => {
    const empty = configHome('# nothing here\n');
    expect(readLocalToken(empty)).toEqual({ missing: `${localTokenFile(empty)} holds no token` });
    const malformed = configHome('\nalice short\n');
    expect(readLocalToken(malformed)).toEqual({ missing: `${localTokenFile(malformed)} line 2 is not a token line: the token is shorter than 16 characters` });
    const none = { XDG_CONFIG_HOME: mkdtempSync(join(tmpdir(), 'execworld-no-token-file-')) };
    expect(readLocalToken(none)).toEqual({ missing: `there is no ${localTokenFile(none)}` });
  });
});
