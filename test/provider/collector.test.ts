import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OutputCollector, SpillDirectory, type SpillFileSystem } from '../../service/src/provider/collector.ts';

const push = (collector: OutputCollector, text: string): void => collector.push(Buffer.from(text));

describe('OutputCollector', () => {
  it('keeps a byte-exact tail however the stream is chunked', () => {
    const collector = new OutputCollector({ maxBytes: 10 }, new SpillDirectory(), 'stdout');
    for (const chunk of ['aaaa', 'bbbbbb', 'cc']) push(collector, chunk);
    expect(collector.readFrom(0)).toEqual({ text: 'aabbbbbbcc', nextOffset: 12, lossy: true });
    expect(collector.truncated).toBe(true);
  });

  it('reads from offsets without consuming, lossy once the offset left the window', () => {
    const collector = new OutputCollector({ maxBytes: 10, spill: { maxBytes: 100 } }, new SpillDirectory(), 'stdout');
    push(collector, '01234');
    expect(collector.readFrom(0)).toMatchObject({ text: '01234', nextOffset: 5, lossy: false });
    push(collector, '56789');
    expect(collector.readFrom(5)).toMatchObject({ text: '56789', nextOffset: 10, lossy: false });
    expect(collector.readFrom(5)).toMatchObject({ text: '56789', nextOffset: 10, lossy: false });
    push(collector, 'abcdefghijklmnopqrst');
    const read = collector.readFrom(10);
    expect(read).toMatchObject({ text: 'klmnopqrst', nextOffset: 30, lossy: true });
    expect(read.spillPath).toBeDefined();
    expect(readFileSync(read.spillPath!, 'utf8')).toBe('0123456789abcdefghijklmnopqrst');
    expect(collector.readFrom(30)).toMatchObject({ text: '', nextOffset: 30, lossy: false });
    expect(collector.readFrom(99)).toMatchObject({ text: '', nextOffset: 30, lossy: false });
  });

  it('is not truncated and spills nothing when the stream fits exactly', () => {
    const collector = new OutputCollector({ maxBytes: 500, spill: { maxBytes: 1000 } }, new SpillDirectory(), 'stdout');
    push(collector, 'x'.repeat(500));
    expect(collector.readFrom(0)).toEqual({ text: 'x'.repeat(500), nextOffset: 500, lossy: false });
    expect(collector.spillPath).toBeUndefined();
  });

  it('discards the spill once the stream outgrows its cap, and withholds the path', () => {
    const directory = new SpillDirectory();
    const collector = new OutputCollector({ maxBytes: 4, spill: { maxBytes: 8 } }, directory, 'stdout');
    push(collector, 'aaaa');
    push(collector, 'bbbb');
    const path = collector.spillPath!;
    expect(readFileSync(path, 'utf8')).toBe('aaaabbbb');
    push(collector, 'c');
    expect(collector.spillPath).toBeUndefined();
    expect(() => statSync(path)).toThrow(/ENOENT/);
    expect(collector.readFrom(0)).toEqual({ text: 'bbbc', nextOffset: 9, lossy: true });
  });

  it('never creates a spill when the first overflowing chunk already exceeds the cap', () => {
    let opened = 0;
    const fs = countingFs(() => (opened += 1));
    const collector = new OutputCollector({ maxBytes: 4, spill: { maxBytes: 4 } }, new SpillDirectory({ fs }), 'stdout');
    push(collector, '12345678');
    expect(opened).toBe(0);
    expect(collector.readFrom(0)).toEqual({ text: '5678', nextOffset: 8, lossy: true });
  });

  it('withholds the spill path when the final close fails, and keeps the tail', () => {
    const fs: SpillFileSystem = {
      ...countingFs(() => {}),
      close: () => {
        throw Object.assign(new Error('EIO'), { code: 'EIO' });
      },
    };
    const collector = new OutputCollector({ maxBytes: 2, spill: { maxBytes: 100 } }, new SpillDirectory({ fs }), 'stderr');
    push(collector, 'hello');
    expect(collector.spillPath).toBeDefined();
    collector.seal();
    expect(collector.spillPath).toBeUndefined();
    expect(collector.readFrom(0)).toEqual({ text: 'lo', nextOffset: 5, lossy: true });
  });

  it('gives up the spill, not the stream, when a spill write fails', () => {
    const fs: SpillFileSystem = {
      ...countingFs(() => {}),
      write: () => {
        throw Object.assign(new Error('ENOSPC'), { code: 'ENOSPC' });
      },
    };
    const collector = new OutputCollector({ maxBytes: 2, spill: { maxBytes: 100 } }, new SpillDirectory({ fs }), 'stdout');
    push(collector, 'hello');
    push(collector, 'world');
    expect(collector.spillPath).toBeUndefined();
    expect(collector.readFrom(0)).toEqual({ text: 'ld', nextOffset: 10, lossy: true });
  });

  it('keeps only the tail without a spill configuration', () => {
    const collector = new OutputCollector({ maxBytes: 100 }, new SpillDirectory(), 'stdout');
    for (let line = 1; line <= 200; line += 1) push(collector, `line-${String(line).padStart(4, '0')}\n`);
    const read = collector.readFrom(0);
    expect(read.lossy).toBe(true);
    expect(read.text).toContain('line-0200');
    expect(read.spillPath).toBeUndefined();
  });

  it('names spill files privately: 0600 files in a 0700 directory', () => {
    const collector = new OutputCollector({ maxBytes: 10, spill: { maxBytes: 1000 } }, new SpillDirectory(), 'stdout');
    push(collector, 'x'.repeat(20));
    const path = collector.spillPath!;
    expect(basename(path)).toMatch(new RegExp(`^execworld-${process.pid}-\\d+-[0-9a-f]{12}-stdout\\.log$`));
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(path)).mode & 0o777).toBe(0o700);
    expect(dirname(dirname(path))).toBe(tmpdir());
  });

  it('decodes each read on its own, so a cut character becomes U+FFFD', () => {
    const collector = new OutputCollector({ maxBytes: 100 }, new SpillDirectory(), 'stdout');
    collector.push(Buffer.from('€'));
    expect(collector.readFrom(1).text).toBe('\ufffd\ufffd');
    expect(collector.readFrom(0).text).toBe('€');
  });

  it('rejects offsets that are not non-negative integers', () => {
    const collector = new OutputCollector({ maxBytes: 10 }, new SpillDirectory(), 'stdout');
    for (const offset of [-1, 1.5, Number.NaN]) expect(() => collector.readFrom(offset)).toThrow(RangeError);
  });
});

function countingFs(onOpen: () => void): SpillFileSystem {
  return {
    open: (path) => {
      onOpen();
      return openSync(path, 'wx', 0o600);
    },
    write: (fd, chunk) => {
      writeSync(fd, chunk);
    },
    close: (fd) => closeSync(fd),
    unlink: (path) => unlinkSync(path),
  };
}
