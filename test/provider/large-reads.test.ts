/**
 * A content stream reads in large chunks while few streams of the process do
 * (they hold about two reads each for a reader that reads slowly), and in fs's
 * own size beyond them; a stream that ends, fails or is closed gives its
 * large read back.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, describe, expect, test } from 'vitest';
import { LARGE_READ_BYTES, LARGE_READS_AT_ONCE, LargeReads, SMALL_READ_BYTES } from '../../service/src/provider/fs/large-reads.ts';
import { WorldFiles } from '../../service/src/provider/fs/world-files.ts';
import { waitFor } from '../helpers/wait.ts';

const dir = mkdtempSync(join(tmpdir(), 'large-reads-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('LargeReads', () => {
  test('leases large reads up to its bound, then small ones; a release frees one, once', () => {
    const reads = new LargeReads();
    const leases = Array.from({ length: LARGE_READS_AT_ONCE }, () => reads.lease());
    expect(leases.every((lease) => lease.bytes === LARGE_READ_BYTES)).toBe(true);
    expect(reads.lease().bytes).toBe(SMALL_READ_BYTES);
    leases[0]!.release();
    leases[0]!.release();
    expect(reads.inFlight).toBe(LARGE_READS_AT_ONCE - 1);
    expect(reads.lease().bytes).toBe(LARGE_READ_BYTES);
    expect(reads.lease().bytes).toBe(SMALL_READ_BYTES);
  });

  test("bounds a view's content streams, which give their large reads back as they end", async () => {
    const largeReads = new LargeReads();
    const files = new WorldFiles({ cwd: dir, largeReads });
    writeFileSync(join(dir, 'big.txt'), Buffer.alloc(3 * LARGE_READ_BYTES, 0x61));
    const target = await files.resolve('big.txt');
    const open = async (): Promise<Readable> => (await files.openContent(target)).stream(0);
    // Opened and not read: each holds its lease, as a download to a reader that does not read does.
    const held = await Promise.all(Array.from({ length: LARGE_READS_AT_ONCE }, open));
    expect(held.map((stream) => stream.readableHighWaterMark)).toEqual(Array(LARGE_READS_AT_ONCE).fill(LARGE_READ_BYTES));
    const beyond = await open();
    expect(beyond.readableHighWaterMark).toBe(SMALL_READ_BYTES);
    // One cut off, one read to its end: both give their large reads back.
    held[0]!.destroy();
    let length = 0;
    for await (const chunk of held[1]! as AsyncIterable<Buffer>) length += chunk.length;
    expect(length).toBe(3 * LARGE_READ_BYTES);
    await waitFor('two large reads given back', () => largeReads.inFlight === LARGE_READS_AT_ONCE - 2);
    const again = await open();
    expect(again.readableHighWaterMark).toBe(LARGE_READ_BYTES);
    for (const stream of [...held, beyond, again]) stream.destroy();
    await waitFor('every large read given back', () => largeReads.inFlight === 0);
  });
});
