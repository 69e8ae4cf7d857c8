/**
 * Unpacking an archive of 250,000 entries (directories, empty and small
 * files, symbolic links) into the real daemon, a child process: its peak
 * resident memory grows by a bounded amount whatever the entry count, and
 * every entry is made. The archive is a stream of headers made here.
 */
import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar';
import { afterAll, describe, expect } from 'vitest';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';

const ENTRIES = 250_000;
/** Entries per directory of the archive. */
const PER_DIRECTORY = 1000;
/** What the daemon's peak RSS may grow by while it unpacks them (it grew by about 800 MiB when every entry was queued). */
const BOUND_MiB = 160;

const scratch = mkdtempSync(join(tmpdir(), 'unpack-memory-'));
const test = daemonProcessTest();
let daemon: DaemonProcess;
test.beforeAll(({ daemonProcess }) => {
  daemon = daemonProcess;
});
// 250,000 entries take a while to remove on a busy machine: wait for it rather than a default. The daemon stops after this.
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

function header(fields: tar.HeaderData): Buffer {
  const made = new tar.Header(fields);
  made.encode();
  return made.block!;
}

/** Where the link of entry `index` points: long enough that the links pass what an unpack keeps of them in memory. */
const targetOf = (index: number): string => `e${index - (index % PER_DIRECTORY)}-${'t'.repeat(48)}`;

/** The archive: a directory every 1,000 entries, then in turn an empty file, a file of one byte, a symbolic link, another empty file. */
function* archive(count: number): Generator<Buffer> {
  let batch: Buffer[] = [];
  for (let index = 0; index < count; index += 1) {
    const directory = `d${Math.floor(index / PER_DIRECTORY)}`;
    if (index % PER_DIRECTORY === 0) batch.push(header({ path: `${directory}/`, type: 'Directory', mode: 0o755, size: 0 }));
    const path = `${directory}/e${index}`;
    if (index % 4 === 1) {
      batch.push(header({ path, type: 'File', mode: 0o644, size: 1 }), Buffer.concat([Buffer.from('x'), Buffer.alloc(511)]));
    } else if (index % 4 === 2) {
      batch.push(header({ path, type: 'SymbolicLink', linkpath: targetOf(index), mode: 0o777, size: 0 }));
    } else batch.push(header({ path, type: 'File', mode: 0o644, size: 0 }));
    if (batch.length >= 128) {
      yield Buffer.concat(batch);
      batch = [];
    }
  }
  yield Buffer.concat([...batch, Buffer.alloc(1024)]);
}

/** PUTs the archive of `count` entries into `directory`; the daemon's answer. */
function unpack(count: number, directory: string): Promise<{ status: number; body: { entries: number; warnings: unknown[] } }> {
  return new Promise((resolve, reject) => {
    const sent = request(
      `${daemon.url}/v1/files/archive?path=${encodeURIComponent(directory)}`,
      { method: 'PUT', headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/x-tar' } },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.once('end', () => resolve({ status: response.statusCode!, body: JSON.parse(text) as { entries: number; warnings: unknown[] } }));
        response.once('error', reject);
      },
    );
    sent.once('error', reject);
    Readable.from(archive(count)).pipe(sent);
  });
}

describe('an archive of 250,000 entries', () => {
  test("is unpacked whole with the daemon's memory bounded", async () => {
    // A small one first, so that what the first unpack loads is there before the measure.
    expect((await unpack(2000, join(scratch, 'warm'))).status).toBe(200);
    const before = daemon.peakRssKiB();
    const target = join(scratch, 'big');
    const answer = await unpack(ENTRIES, target);
    const grewMiB = (daemon.peakRssKiB() - before) / 1024;
    console.log(
      `unpacking ${ENTRIES} entries: daemon peak RSS ${(before / 1024).toFixed(0)} MiB before, ${((before + grewMiB * 1024) / 1024).toFixed(0)} MiB after (+${grewMiB.toFixed(0)} MiB); RSS now ${(daemon.rssKiB() / 1024).toFixed(0)} MiB`,
    );
    expect(answer).toEqual({ status: 200, body: { path: target, entries: ENTRIES + ENTRIES / PER_DIRECTORY, warnings: [] } });
    // Files, their bytes and the links, in the first directory and the last.
    const last = `d${ENTRIES / PER_DIRECTORY - 1}`;
    expect(readFileSync(join(target, 'd0', 'e1'), 'utf8')).toBe('x');
    expect(lstatSync(join(target, last, `e${ENTRIES - 1}`)).size).toBe(0);
    expect(readlinkSync(join(target, 'd0', 'e2'))).toBe(targetOf(2));
    expect(readlinkSync(join(target, last, `e${ENTRIES - 2}`))).toBe(targetOf(ENTRIES - 2));
    // The links set aside on the way are gone with the unpack.
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith('execworld-links-'))).toEqual([]);
    expect(grewMiB).toBeLessThan(BOUND_MiB);
  }, 600_000);
});
