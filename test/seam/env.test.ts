import { describe, expect, it } from 'vitest';
import { mergeEnvironment, scrubEnvironment } from '@execworld/sdk/seam';

describe('scrubEnvironment', () => {
  it('drops credential-shaped names and every DSH_ name, case-insensitively', () => {
    const env = scrubEnvironment({
      PATH: '/bin',
      PLAIN: 'kept',
      DSH_X: 'x',
      dsh_x_lower: 'x',
      GITHUB_TOKEN: 't',
      DB_PASSWORD: 'p',
      api_key: 'k',
      client_secret: 's',
      UNDEFINED: undefined,
    });
    expect(env).toEqual({ PATH: '/bin', PLAIN: 'kept' });
  });

  it('over-scrubs names that merely contain a pattern, as documented', () => {
    expect(scrubEnvironment({ KEYTIMEOUT: '1', TOKENIZERS_PARALLELISM: 'false', PASSPHRASE_HINT: 'kept' })).toEqual({ PASSPHRASE_HINT: 'kept' });
  });

  it('gives the same answer on every call (the pattern is not global)', () => {
    for (let round = 0; round < 3; round += 1) expect(scrubEnvironment({ A_TOKEN: 'x', B: 'y' })).toEqual({ B: 'y' });
  });
});

describe('mergeEnvironment', () => {
  it('overlays explicit entries after the scrub; explicit credentials and DSH_ facts survive', () => {
    const base = scrubEnvironment({ DSH_STALE: 'old', PATH: '/bin' });
    expect(mergeEnvironment(base, { DSH_SHELL: '1', DSH_SESSION_ID: 's', EXPLICIT_OVERRIDE_PASSWORD: 'x' }, false)).toEqual({
      PATH: '/bin',
      DSH_SHELL: '1',
      DSH_SESSION_ID: 's',
      EXPLICIT_OVERRIDE_PASSWORD: 'x',
    });
  });

  it('treats undefined and null as tombstones', () => {
    expect(mergeEnvironment({ PROBE: 'v', OTHER: 'o', KEEP: 'k' }, { PROBE: undefined, OTHER: null }, false)).toEqual({ KEEP: 'k' });
  });

  it('is case-sensitive on POSIX', () => {
    expect(mergeEnvironment({ PATH: '/a' }, { Path: '/b' }, false)).toEqual({ PATH: '/a', Path: '/b' });
  });

  it('on Windows keeps exactly one key per name, with the explicit casing', () => {
    const env = mergeEnvironment({ PATH: '/ambient', PATHEXT: '.COM', Other: 'x' }, { Path: '/bin', PathExt: '.EXE;.CMD' }, true);
    expect(env).toEqual({ Other: 'x', Path: '/bin', PathExt: '.EXE;.CMD' });
  });

  it('on Windows a tombstone removes every case variant, and later explicit entries replace earlier ones', () => {
    expect(mergeEnvironment({ Probe: 'a', PROBE: 'b', keep: 'k' }, { probe: undefined }, true)).toEqual({ keep: 'k' });
    expect(mergeEnvironment({}, { FOO: '1', foo: '2' }, true)).toEqual({ foo: '2' });
  });

  it('does not modify its inputs', () => {
    const base = { A: '1' };
    mergeEnvironment(base, { A: undefined, B: '2' }, false);
    expect(base).toEqual({ A: '1' });
  });
});
