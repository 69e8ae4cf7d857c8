/**
 * `GET /v1/files/archive` of a directory that holds special files (a unix
 * socket, FIFOs) and files large enough that the pack reads ahead: the
 * archive ends, holds every file whole, leaves the special files out and
 * names them in its trailer; and a download cut off midway releases every
 * descriptor it held. Both for an owner served by the daemon itself and for
 * one mapped to an OS user, whose calls a file worker of that user makes.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { SKIPPED_TRAILER } from '@execworld/sdk/fs';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

const ERIN = 'erin-token-0123456789abcdefgh';
/** A user of this test's own, for the owner whose files a worker serves. */
const USER = `ew-archive-${process.pid}`;
const MiB = 1024 * 1024;

const scratch = mkdtempSync(join(tmpdir(), 'archive-special-'));
const tree = join(scratch, 'tree');
/** Files only: what a cut download of it leaves open is its own fault. */
const plain = join(scratch, 'plain');
let socketServer: Server;
let daemon: TestDaemon;
let uid: number;
let gid: number;

const test = daemonTest(() => [
  {},
  { owners: [{ owner: 'erin', token: ERIN, user: { name: USER, uid, gid, home: '/nonexistent', shell: '/usr/sbin/nologin' } }] },
]);

test.beforeAll(async () => {
  execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', USER]);
  uid = Number(execFileSync('id', ['-u', USER], { encoding: 'utf8' }).trim());
  gid = Number(execFileSync('id', ['-g', USER], { encoding: 'utf8' }).trim());
  // Files of 1 to 3 MiB around the special files: the pack reads ahead of what it sends.
  chmodSync(scratch, 0o755);
  mkdirSync(join(tree, 'sub'), { recursive: true, mode: 0o755 });
  for (let index = 0; index < 16; index += 1) {
    writeFileSync(join(tree, `f${String(index).padStart(2, '0')}.bin`), Buffer.alloc(MiB * ((index % 3) + 1), index), { mode: 0o644 });
  }
  writeFileSync(join(tree, 'sub', 'inner.txt'), 'inner\n', { mode: 0o644 });
  mkdirSync(plain, { mode: 0o755 });
  for (let index = 0; index < 8; index += 1) writeFileSync(join(plain, `p${index}.bin`), Buffer.alloc(2 * MiB, index), { mode: 0o644 });
  execFileSync('mkfifo', [join(tree, 'f05.fifo'), join(tree, 'sub', 'pipe')]);
  socketServer = createServer();
  await new Promise<void>((resolve) => socketServer.listen(join(tree, 'f10.sock'), resolve));
});
test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});
test.afterAll(async () => {
  // The daemon ends first: its file worker for erin runs as the user, which userdel refuses to remove while it runs.
  await daemon.close();
  socketServer.close();
  rmSync(scratch, { recursive: true, force: true });
  execFileSync('userdel', [USER]);
});

/** The open descriptors of `pid`. */
const descriptors = (pid: number | 'self'): string[] =>
  readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch (_error) {
      return 'gone';
    }
  });

/** This process's file workers running as the test's user. */
function workers(): number[] {
  let lines: string;
  try {
    lines = execFileSync('ps', ['-o', 'pid=,ppid=,args=', '-u', String(uid)], { encoding: 'utf8' });
  } catch (_error) {
    // ps fails when no process of the user runs.
    return [];
  }
  return lines
    .split('\n')
    .filter((line) => line.includes('file-worker') && Number(line.trim().split(/\s+/)[1]) === process.pid)
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}

/** Starts a download of the archive of `directory` with `token` (on a connection of its own). */
function download(token: string, directory: string): Promise<{ response: IncomingMessage; cut: () => void }> {
  return new Promise((resolve, reject) => {
    const sent = request(
      `${daemon.url}/v1/files/archive?path=${encodeURIComponent(directory)}`,
      { headers: { authorization: `Bearer ${token}` }, agent: false },
      (response) => resolve({ response, cut: () => sent.destroy() }),
    );
    sent.once('error', reject);
    sent.end();
  });
}

/** The whole archive and its trailers, or an error when it does not end within a generous deadline. */
async function wholeArchive(token: string, directory: string): Promise<{ status: number; archive: Buffer; trailers: NodeJS.Dict<string> }> {
  const { response, cut } = await download(token, directory);
  const chunks: Buffer[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.once('end', resolve);
    response.once('error', reject);
    response.once('aborted', () => reject(new Error('the archive was cut off')));
  });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`the archive did not end within 60 s (${Buffer.concat(chunks).length} bytes came)`)), 60_000);
  });
  try {
    await Promise.race([ended, deadline]);
  } finally {
    clearTimeout(timer);
    cut();
  }
  return { status: response.statusCode!, archive: Buffer.concat(chunks), trailers: response.trailers };
}

describe.each([
  ["the daemon's own user", ALICE],
  ['an OS user, through its file worker', ERIN],
])('an archive download, for an owner served by %s', (_who, token) => {
  test('ends, holds every file whole, and leaves the socket and FIFOs out, naming them in its trailer', async () => {
    const { status, archive, trailers } = await wholeArchive(token, tree);
    expect(status).toBe(200);
    const names = execFileSync('tar', ['-t'], { input: archive, maxBuffer: 128 * MiB, encoding: 'utf8' })
      .trim()
      .split('\n')
      .sort();
    const files = readdirSync(tree).filter((name) => name.endsWith('.bin'));
    expect(names).toEqual([...files, 'sub/', 'sub/inner.txt'].sort());
    const out = mkdtempSync(join(scratch, 'out-'));
    execFileSync('tar', ['-x', '-C', out], { input: archive, maxBuffer: 128 * MiB });
    for (const name of [...files, 'sub/inner.txt']) expect(readFileSync(join(out, name)).equals(readFileSync(join(tree, name))), name).toBe(true);
    expect(JSON.parse(trailers[SKIPPED_TRAILER]!)).toEqual({
      count: 3,
      entries: [
        { path: 'f05.fifo', kind: 'fifo' },
        { path: 'f10.sock', kind: 'socket' },
        { path: 'sub/pipe', kind: 'fifo' },
      ],
    });
  }, 120_000);

  test('releases every descriptor it held when the client goes away midway', async () => {
    // A whole download first: whatever is made once (the worker) is there before the count.
    expect((await wholeArchive(token, plain)).status).toBe(200);
    const held = (): number => descriptors('self').length + workers().reduce((sum, pid) => sum + descriptors(pid).length, 0);
    const before = held();
    for (let cut = 0; cut < 3; cut += 1) {
      const started = await download(token, plain);
      let received = 0;
      await new Promise<void>((resolve) => {
        started.response.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received >= 4 * MiB) resolve();
        });
        started.response.once('close', resolve);
      });
      expect(received).toBeGreaterThanOrEqual(4 * MiB);
      started.cut();
    }
    let after = held();
    await waitFor('the cut downloads to release their descriptors', () => (after = held()) <= before, 30_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${after} open, ${before} before`);
    });
    console.log(`open descriptors (daemon and workers): ${before} before the cut downloads, ${after} after`);
  }, 120_000);
});
