/**
 * The filesystem seam's contract (`ctx.fs`), one suite run against the
 * reference provider (`@deepseek-ai/dsh-fs-local`), the daemon's own
 * implementation in-process, and `RemoteFiles` over a real daemon: the same
 * results and the same codes for every scenario. Where a provider differs on
 * purpose, the difference is a trait, declared as data.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FsProvider } from '@execworld/sdk/fs';

export interface FsInstance {
  readonly fs: FsProvider;
  /** A second, independent provider on the same world: another client. */
  readonly other: FsProvider;
  close(): Promise<void>;
}

export type FsFactory = (dir: string) => Promise<FsInstance>;

/** What a provider does differently, on purpose. */
export interface FsTraits {
  /** Whether writes of one file through two provider instances take turns (one daemon serves both). */
  readonly sharedTurns: boolean;
}

/** The code of what `promise` rejects with. */
async function codeOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => 'resolved',
    (error: unknown) => (error as { code?: unknown }).code,
  );
}

export function fsContract(name: string, factory: FsFactory, traits: FsTraits): void {
  describe(`${name}: the filesystem seam`, () => {
    let dir: string;
    let instance: FsInstance;
    let fs: FsProvider;
    beforeAll(async () => {
      dir = realpathSync(mkdtempSync(join(tmpdir(), 'fs-contract-')));
      instance = await factory(dir);
      fs = instance.fs;
    });
    afterAll(async () => {
      await instance.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const at = (...parts: string[]) => join(dir, ...parts);

    it('resolves every path to one file to one key, and a missing file under a linked parent to its real parent', async () => {
      mkdirSync(at('real'));
      writeFileSync(at('real', 'f.txt'), 'x');
      symlinkSync(at('real'), at('alias'));
      symlinkSync(at('real', 'f.txt'), at('link.txt'));
      const direct = await fs.resolve(at('real', 'f.txt'));
      expect(direct).toEqual({ targetKey: at('real', 'f.txt'), displayPath: at('real', 'f.txt') });
      expect((await fs.resolve('alias/f.txt', { cwd: dir })).targetKey).toBe(direct.targetKey);
      expect((await fs.resolve(at('link.txt'))).targetKey).toBe(direct.targetKey);
      expect(await fs.resolve(at('alias', 'new.txt'))).toEqual({ targetKey: at('real', 'new.txt'), displayPath: at('alias', 'new.txt') });
      expect(await codeOf(fs.resolve('   '))).toBe('FS_NOT_FOUND');
      expect(await codeOf(fs.resolve(at('real', 'f.txt', 'below')))).toBe('FS_NOT_FOUND');
      expect(await codeOf(fs.resolve(at('x'), { signal: AbortSignal.abort() }))).toBe('FS_ABORTED');
    });

    it('answers process paths, file URLs and containment', async () => {
      mkdirSync(at('a b#%é'));
      const odd = await fs.resolve(at('a b#%é', 'n.txt'));
      expect(fs.processPath(odd)).toBe(at('a b#%é', 'n.txt'));
      expect(fs.fileUrl(odd)).toBe(pathToFileURL(at('a b#%é', 'n.txt')).href);
      mkdirSync(at('p'));
      mkdirSync(at('pc'));
      const parent = await fs.resolve(at('p'));
      expect(fs.contains(parent, parent)).toBe(true);
      expect(fs.contains(parent, await fs.resolve(at('p', 'q', 'r')))).toBe(true);
      expect(fs.contains(parent, await fs.resolve(at('pc')))).toBe(false);
      expect(fs.contains(await fs.resolve(at('p', 'q')), parent)).toBe(false);
    });

    it('stats files, directories and other things, and lstats links', async () => {
      writeFileSync(at('s.txt'), 'hello');
      const file = await fs.resolve(at('s.txt'));
      const before = await fs.stat(file);
      expect(before).toMatchObject({ type: 'file', size: 5 });
      expect(await fs.stat(file)).toEqual(before);
      writeFileSync(at('s.txt'), 'hello!');
      expect((await fs.stat(file))?.version).not.toBe(before?.version);
      expect((await fs.stat(await fs.resolve(dir)))?.type).toBe('directory');
      expect((await fs.stat(await fs.resolve('/dev/null')))?.type).toBe('other');
      expect(await fs.stat(await fs.resolve(at('absent')))).toBeUndefined();
      symlinkSync(at('nowhere'), at('dangling'));
      expect((await fs.lstat('dangling', { cwd: dir }))?.type).toBe('symlink');
      expect((await fs.lstat(at('s.txt')))?.type).toBe('file');
      expect(await fs.lstat(at('absent'))).toBeUndefined();
    });

    it('reads text byte-exact, and refuses what is not text or not a file', async () => {
      writeFileSync(at('t.txt'), 'a\r\nβ\n');
      expect(await fs.readText(await fs.resolve(at('t.txt')))).toBe('a\r\nβ\n');
      writeFileSync(at('bad.txt'), Buffer.from([0x61, 0xff, 0x62]));
      expect(await codeOf(fs.readText(await fs.resolve(at('bad.txt'))))).toBe('FS_NOT_TEXT');
      writeFileSync(at('nul.txt'), Buffer.from('a\0b'));
      expect(await codeOf(fs.readText(await fs.resolve(at('nul.txt'))))).toBe('FS_NOT_TEXT');
      // Only the head is sampled for NUL: a late one reads.
      writeFileSync(at('late-nul.txt'), Buffer.concat([Buffer.alloc(9000, 0x61), Buffer.from([0])]));
      expect((await fs.readText(await fs.resolve(at('late-nul.txt')))).length).toBe(9001);
      expect(await codeOf(fs.readText(await fs.resolve(dir)))).toBe('FS_NOT_REGULAR_FILE');
      expect(await codeOf(fs.readText(await fs.resolve(at('absent'))))).toBe('FS_NOT_FOUND');
      expect(await codeOf(fs.readText(await fs.resolve(at('t.txt')), AbortSignal.abort()))).toBe('FS_ABORTED');
    });

    it('streams a large text whole, across split characters, and fails a late bad byte while streaming', async () => {
      const text = 'é€😀'.repeat(300_000);
      writeFileSync(at('big.txt'), text);
      let joined = '';
      for await (const chunk of await fs.streamText(await fs.resolve(at('big.txt')))) joined += chunk;
      expect(joined).toBe(text);
      writeFileSync(at('late-bad.txt'), Buffer.concat([Buffer.alloc(200_000, 0x61), Buffer.from([0xc3])]));
      const failing = (async () => {
        for await (const _chunk of await fs.streamText(await fs.resolve(at('late-bad.txt')))) {
          // read on
        }
      })();
      expect(await codeOf(failing)).toBe('FS_NOT_TEXT');
      const missing = (async () => {
        for await (const _chunk of await fs.streamText(await fs.resolve(at('absent')))) {
          // nothing
        }
      })();
      expect(await codeOf(missing)).toBe('FS_NOT_FOUND');
    });

    it('reads bytes within the cap, and refuses more without truncating', async () => {
      const bytes = Buffer.from([0, 1, 2, 255, 0, 7]);
      writeFileSync(at('b.bin'), bytes);
      const target = await fs.resolve(at('b.bin'));
      expect(Buffer.from(await fs.readBytes(target, undefined, 6)).equals(bytes)).toBe(true);
      expect(await codeOf(fs.readBytes(target, undefined, 5))).toBe('FS_TOO_LARGE');
      expect(await codeOf(fs.readBytes(await fs.resolve(dir), undefined, 5))).toBe('FS_NOT_REGULAR_FILE');
    });

    it('reads megabytes of bytes whole and exact, at the cap and past it', async () => {
      // Many reads' worth, of every byte value, with an odd length: each chunk lands where it belongs.
      const bytes = randomBytes(3 * 1024 * 1024 + 7);
      writeFileSync(at('large.bin'), bytes);
      const target = await fs.resolve(at('large.bin'));
      const read = await fs.readBytes(target, undefined, bytes.length);
      expect(read.length).toBe(bytes.length);
      expect(Buffer.from(read.buffer, read.byteOffset, read.byteLength).equals(bytes)).toBe(true);
      expect(await codeOf(fs.readBytes(target, undefined, bytes.length - 1))).toBe('FS_TOO_LARGE');
    });

    it('lists a directory in name order with targets and metadata', async () => {
      mkdirSync(at('list'));
      writeFileSync(at('list', 'b.txt'), 'bb');
      mkdirSync(at('list', 'a-dir'));
      symlinkSync(at('list', 'b.txt'), at('list', 'c-link'));
      symlinkSync(at('list', 'missing'), at('list', 'd-broken'));
      const entries = await fs.listDir(await fs.resolve(at('list')));
      expect(entries.map((entry) => [entry.name, entry.type, entry.size])).toEqual([
        ['a-dir', 'directory', undefined],
        ['b.txt', 'file', 2],
        ['c-link', 'file', 2],
        ['d-broken', 'other', undefined],
      ]);
      expect(entries[2]!.target).toEqual({ targetKey: at('list', 'b.txt'), displayPath: at('list', 'c-link') });
      expect(entries[3]!.version).toBeUndefined();
      expect(await codeOf(fs.listDir(await fs.resolve(at('list', 'b.txt'))))).toBe('FS_NOT_DIRECTORY');
      expect(await codeOf(fs.listDir(await fs.resolve(at('absent'))))).toBe('FS_NOT_FOUND');
    });

    it('writes atomically: creates 0600 with parents, keeps modes and links, leaves no staging behind', async () => {
      const created = await fs.writeText(await fs.resolve(at('w', 'deep', 'new.txt')), 'one\r\ntwo\n');
      expect(created).toMatchObject({ operation: 'create', before: null, after: 'one\ntwo\n' });
      expect(readFileSync(at('w', 'deep', 'new.txt'), 'utf8')).toBe('one\r\ntwo\n');
      expect(statSync(at('w', 'deep', 'new.txt')).mode & 0o777).toBe(0o600);
      chmodSync(at('w', 'deep', 'new.txt'), 0o755);
      symlinkSync(at('w', 'deep', 'new.txt'), at('w', 'link.txt'));
      const target = await fs.resolve(at('w', 'link.txt'));
      const updated = await fs.writeText(target, 'three\n');
      expect(updated).toMatchObject({ operation: 'update', before: 'one\ntwo\n', after: 'three\n' });
      expect(updated.version).toBe((await fs.stat(target))?.version);
      expect(statSync(at('w', 'deep', 'new.txt')).mode & 0o777).toBe(0o755);
      expect(readFileSync(at('w', 'link.txt'), 'utf8')).toBe('three\n');
      expect(readdirSync(at('w', 'deep'))).toEqual(['new.txt']);
      writeFileSync(at('w', 'bin'), Buffer.from([0, 1]));
      expect((await fs.writeText(await fs.resolve(at('w', 'bin')), 'text')).before).toBeNull();
    });

    it('writes and reads a large text as it does a small one: the same outcome, guards and bytes', async () => {
      // Past what a single JSON call carries (64 KiB) and what a stat prefetches (256 KiB): the remote provider sends bytes.
      const first = 'line é€😀\uFEFF\r\n'.repeat(40_000);
      const second = 'second ✓\n'.repeat(40_000);
      const target = await fs.resolve(at('large.txt'));
      const created = await fs.writeText(target, first, { kind: 'createIfAbsent' });
      expect(created).toMatchObject({ operation: 'create', before: null, after: first.replaceAll('\r\n', '\n') });
      expect(readFileSync(at('large.txt'))).toEqual(Buffer.from(first, 'utf8'));
      expect(await codeOf(fs.writeText(target, second, { kind: 'createIfAbsent' }))).toBe('FS_NOT_OBSERVED');
      expect(await codeOf(fs.writeText(target, second, { kind: 'replaceIfVersion', version: 'not-it' }))).toBe('FS_STALE_VERSION');
      const again = await fs.resolve(at('large.txt'));
      const info = await fs.stat(again);
      expect(info).toMatchObject({ type: 'file', size: Buffer.byteLength(first) });
      expect(await fs.readText(again)).toBe(first);
      const replaced = await fs.writeText(again, second, { kind: 'replaceIfVersion', version: info!.version });
      expect(replaced).toMatchObject({ operation: 'update', before: first.replaceAll('\r\n', '\n'), after: second });
      expect(replaced.version).toBe((await fs.stat(again))?.version);
      expect(readFileSync(at('large.txt'), 'utf8')).toBe(second);
    });

    it('guards writes: createIfAbsent and replaceIfVersion', async () => {
      writeFileSync(at('g.txt'), 'kept');
      const target = await fs.resolve(at('g.txt'));
      expect(await codeOf(fs.writeText(target, 'x', { kind: 'createIfAbsent' }))).toBe('FS_NOT_OBSERVED');
      expect(await codeOf(fs.writeText(await fs.resolve(dir), 'x', { kind: 'createIfAbsent' }))).toBe('FS_NOT_REGULAR_FILE');
      expect(await codeOf(fs.writeText(target, 'x', { kind: 'replaceIfVersion', version: 'not-it' }))).toBe('FS_STALE_VERSION');
      expect(await codeOf(fs.writeText(await fs.resolve(at('gone.txt')), 'x', { kind: 'replaceIfVersion', version: 'v' }))).toBe('FS_STALE_VERSION');
      expect(readFileSync(at('g.txt'), 'utf8')).toBe('kept');
      const version = (await fs.stat(target))!.version;
      expect(await fs.writeText(target, 'replaced', { kind: 'replaceIfVersion', version })).toMatchObject({ operation: 'update' });
      expect(await codeOf(fs.writeText(target, 'x', undefined, AbortSignal.abort()))).toBe('FS_ABORTED');
      expect(readFileSync(at('g.txt'), 'utf8')).toBe('replaced');
    });

    it('edits literally, keeps CRLF, and checks the version before looking for the text', async () => {
      writeFileSync(at('e.txt'), 'one\r\ntwo\r\ntwo\r\n');
      const target = await fs.resolve(at('e.txt'));
      expect(await codeOf(fs.editText(target, { oldString: 'two', newString: '2', replaceAll: false }))).toBe('FS_AMBIGUOUS_EDIT');
      expect(await codeOf(fs.editText(target, { oldString: 'zzz', newString: '2', replaceAll: false }))).toBe('FS_EDIT_NOT_FOUND');
      expect(await codeOf(fs.editText(target, { oldString: '', newString: '2', replaceAll: false }))).toBe('FS_EDIT_NOT_FOUND');
      expect(await codeOf(fs.editText(target, { oldString: 'zzz', newString: '2', replaceAll: false }, { version: 'stale' }))).toBe('FS_STALE_VERSION');
      const edited = await fs.editText(target, { oldString: 'one\ntwo', newString: 'ONE\nTWO', replaceAll: false });
      expect(edited).toMatchObject({ before: 'one\ntwo\ntwo\n', after: 'ONE\nTWO\ntwo\n' });
      expect(readFileSync(at('e.txt'), 'utf8')).toBe('ONE\r\nTWO\r\ntwo\r\n');
      expect(edited.version).toBe((await fs.stat(target))?.version);
      expect((await fs.editText(target, { oldString: 'O', newString: 'o', replaceAll: true })).after).toBe('oNE\nTWo\ntwo\n');
      expect(await codeOf(fs.editText(await fs.resolve(at('absent')), { oldString: 'a', newString: 'b', replaceAll: false }))).toBe('FS_STALE_VERSION');
      writeFileSync(at('late-nul-edit.txt'), Buffer.concat([Buffer.alloc(9000, 0x61), Buffer.from([0])]));
      expect(await codeOf(fs.editText(await fs.resolve(at('late-nul-edit.txt')), { oldString: 'a', newString: 'b', replaceAll: true }))).toBe('FS_NOT_TEXT');
    });

    it('lets one of two guarded writers win; the other is stale', async () => {
      for (let round = 0; round < 10; round += 1) {
        writeFileSync(at('race.txt'), 'start');
        const target = await fs.resolve(at('race.txt'));
        const version = (await fs.stat(target))!.version;
        const second = traits.sharedTurns ? instance.other : fs;
        const otherTarget = await second.resolve(at('race.txt'));
        const outcomes = await Promise.all([
          codeOf(fs.writeText(target, 'first', { kind: 'replaceIfVersion', version })),
          codeOf(second.writeText(otherTarget, 'second', { kind: 'replaceIfVersion', version })),
        ]);
        expect(outcomes.sort()).toEqual(['FS_STALE_VERSION', 'resolved']);
        expect(['first', 'second']).toContain(readFileSync(at('race.txt'), 'utf8'));
      }
    });

    it('never replaces a file a racing creator made', async () => {
      for (let round = 0; round < 20; round += 1) {
        const path = at(`created-${round}.txt`);
        const target = await fs.resolve(path);
        const guarded = codeOf(fs.writeText(target, 'guarded', { kind: 'createIfAbsent' }));
        let creator = 'lost';
        try {
          writeFileSync(path, 'creator', { flag: 'wx' });
          creator = 'won';
        } catch (_error) {
          // The guarded write was first.
        }
        const outcome = await guarded;
        if (creator === 'won') {
          expect(outcome).toBe('FS_NOT_OBSERVED');
          expect(readFileSync(path, 'utf8')).toBe('creator');
        } else {
          expect(outcome).toBe('resolved');
          expect(readFileSync(path, 'utf8')).toBe('guarded');
        }
      }
    });

    it('applies concurrent unconditional edits of one file one after another', async () => {
      writeFileSync(at('many.txt'), Array.from({ length: 20 }, (_value, index) => `line-${index}`).join('\n'));
      const target = await fs.resolve(at('many.txt'));
      await Promise.all(
        Array.from({ length: 20 }, (_value, index) =>
          fs.editText(target, {
            oldString: `line-${index}\n`.replace(/\n$/, index === 19 ? '' : '\n'),
            newString: `LINE-${index}${index === 19 ? '' : '\n'}`,
            replaceAll: false,
          }),
        ),
      );
      expect(readFileSync(at('many.txt'), 'utf8')).toBe(Array.from({ length: 20 }, (_value, index) => `LINE-${index}`).join('\n'));
    });
  });
}
