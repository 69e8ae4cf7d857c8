/**
 * Files copied both ways through the SDK's RemoteTransfer: a 1 GiB file up
 * and down byte-exact with the connection cut in the middle of each, memory
 * bounded on both sides; a directory tree (links, modes, empty directories)
 * round trip; mkdir, remove, rename and digest. The daemon is the real CLI in
 * a child process, reached through a TCP proxy that cuts every connection.
 */
import { createHash } from 'node:crypto';
import {
  closeSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { RemoteTransfer, type TransferProgress } from '@execworld/sdk/fs';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { FaultProxy } from '../helpers/proxy.ts';

const MiB = 1024 * 1024;
const scratch = mkdtempSync(join(tmpdir(), 'transfer-'));
const test = daemonProcessTest();
let daemon: DaemonProcess;
let proxy: FaultProxy;
let runtime: RemoteRuntime;
test.beforeAll(async ({ daemonProcess }) => {
  daemon = daemonProcess;
  proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
  runtime = await connect(proxy.url, { token: daemon.token, reconnectInitialDelayMs: 5, reconnectMaxDelayMs: 50, heartbeatMs: 500 });
});
afterAll(async () => {
  runtime.close();
  await proxy.close();
  rmSync(scratch, { recursive: true, force: true });
});

const rssKiB = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]);

/** Writes `size` bytes of a random MiB repeated, each MiB stamped with its index (so a lost, doubled or swapped MiB changes the hash). */
function writeLargeFile(path: string, size: number): string {
  const block = createHash('sha512').update(String(Math.random())).digest();
  const mib = Buffer.alloc(MiB);
  for (let at = 0; at < MiB; at += block.length) block.copy(mib, at);
  const hash = createHash('sha256');
  const fd = openSync(path, 'w');
  try {
    for (let index = 0; index * MiB < size; index += 1) {
      mib.writeUInt32BE(index, 0);
      const piece = mib.subarray(0, Math.min(MiB, size - index * MiB));
      writeSync(fd, piece);
      hash.update(piece);
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

function sha256File(path: string): string {
  const hash = createHash('sha256');
  const fd = openSync(path, 'r');
  const buffer = Buffer.alloc(4 * MiB);
  try {
    for (;;) {
      const read = readSync(fd, buffer);
      if (read === 0) break;
      hash.update(buffer.subarray(0, read));
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

/** Progress that cuts every connection once, when half of `total` has moved, and tracks this process's peak memory. */
function cutHalfway(total: number) {
  const state = { cut: false, peakRssKiB: rssKiB(), startRssKiB: rssKiB(), calls: 0 };
  return {
    state,
    onProgress: (progress: TransferProgress) => {
      state.calls += 1;
      if (state.calls % 64 === 0) state.peakRssKiB = Math.max(state.peakRssKiB, rssKiB());
      if (!state.cut && progress.bytes >= total / 2) {
        state.cut = true;
        proxy.cut();
      }
    },
  };
}

describe('RemoteTransfer', () => {
  test('copies a 1 GiB file up and down byte-exact through a cut in the middle of each, with bounded memory', { timeout: 600_000 }, async () => {
    const size = Number(process.env.TRANSFER_TEST_MIB ?? 1024) * MiB;
    const local = join(scratch, 'big.bin');
    const expected = writeLargeFile(local, size);
    const transfer = new RemoteTransfer(runtime, { chunkBytes: 256 * MiB });
    const remote = join(scratch, 'remote-big.bin');

    const up = cutHalfway(size);
    const digest = await transfer.uploadFile(local, remote, { onProgress: up.onProgress });
    expect(up.state.cut).toBe(true);
    expect(digest).toMatchObject({ path: remote, size, sha256: expected });
    expect(sha256File(remote)).toBe(expected);
    // No staging directory is left beside the published file.
    expect(readdirSync(scratch).filter((name) => name.startsWith('.execworld'))).toEqual([]);

    const back = join(scratch, 'back.bin');
    const down = cutHalfway(size);
    const downloaded = await transfer.downloadFile(remote, back, { onProgress: down.onProgress });
    expect(down.state.cut).toBe(true);
    expect(downloaded.sha256).toBe(expected);
    expect(statSync(back).size).toBe(size);
    expect(sha256File(back)).toBe(expected);
    expect(readdirSync(scratch).filter((name) => name.includes('.execworld-'))).toEqual([]);

    // A GiB went through each side; neither held more than a small part of it.
    const clientGrowthMiB = (Math.max(up.state.peakRssKiB, down.state.peakRssKiB) - up.state.startRssKiB) / 1024;
    const daemonPeakMiB = daemon.peakRssKiB() / 1024;
    console.log(`1 GiB round trip: client RSS growth ${clientGrowthMiB.toFixed(0)} MiB, daemon peak RSS ${daemonPeakMiB.toFixed(0)} MiB`);
    expect(clientGrowthMiB).toBeLessThan(256);
    expect(daemonPeakMiB).toBeLessThan(384);
    rmSync(local);
    rmSync(back);
    rmSync(remote);
  });

  test('copies a directory tree with links, modes and empty directories both ways', async () => {
    const tree = join(scratch, 'tree');
    mkdirSync(join(tree, 'src/deep/er'), { recursive: true });
    mkdirSync(join(tree, 'empty'));
    writeFileSync(join(tree, 'src/main.ts'), 'export {};\n');
    writeFileSync(join(tree, 'src/deep/er/data.bin'), Buffer.from([0, 1, 2, 255]));
    writeFileSync(join(tree, 'run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
    writeFileSync(join(tree, 'private'), 'secret\n', { mode: 0o600 });
    symlinkSync('src/main.ts', join(tree, 'link-to-main'));
    symlinkSync('/etc/hostname', join(tree, 'absolute-link'));
    symlinkSync('nowhere', join(tree, 'dangling'));
    const transfer = new RemoteTransfer(runtime);

    const remote = join(scratch, 'remote-tree');
    const up = await transfer.uploadDirectory(tree, remote);
    expect(up.warnings).toEqual([]);
    // Links keep their targets as written, an absolute one included.
    const expected = describeTree(tree);
    expect(expected['absolute-link']).toBe('link /etc/hostname');
    expect(describeTree(remote)).toEqual(expected);
    // Every entry.
    expect(up.entries).toBe(Object.keys(expected).length);

    const back = join(scratch, 'tree-back');
    const down = await transfer.downloadDirectory(remote, back);
    expect(down.warnings).toEqual([]);
    expect(describeTree(back)).toEqual(expected);
  });

  test('makes, renames, digests and removes', async () => {
    const transfer = new RemoteTransfer(runtime);
    const base = join(scratch, 'ops');
    expect(await transfer.mkdir(join(base, 'a/b'))).toEqual({ path: join(base, 'a/b'), created: true });
    expect(await transfer.mkdir(join(base, 'a/b'))).toEqual({ path: join(base, 'a/b'), created: false });
    await expect(transfer.mkdir(join(base, 'a/b'), { parents: false })).rejects.toMatchObject({ code: 'FS_ALREADY_EXISTS' });
    writeFileSync(join(base, 'a/file'), 'content\n');
    const digest = await transfer.digest(join(base, 'a/file'));
    expect(digest).toMatchObject({ size: 8, sha256: createHash('sha256').update('content\n').digest('hex') });
    await expect(transfer.rename(join(base, 'a/file'), join(base, 'a/b'))).rejects.toMatchObject({ code: 'FS_ALREADY_EXISTS' });
    expect(await transfer.rename(join(base, 'a/file'), join(base, 'moved'))).toEqual({ path: join(base, 'moved') });
    expect(readFileSync(join(base, 'moved'), 'utf8')).toBe('content\n');
    await expect(transfer.remove(join(base, 'a'))).rejects.toMatchObject({ code: 'FS_NOT_EMPTY' });
    expect(await transfer.remove(join(base, 'a'), { recursive: true })).toEqual({ removed: true });
    expect(await transfer.remove(join(base, 'a'), { recursive: true })).toEqual({ removed: false });
    expect(readdirSync(base)).toEqual(['moved']);
  });

  test('refuses an upload whose bytes are not what was said, and publishes nothing', async () => {
    const target = join(scratch, 'checked.txt');
    const upload = await runtime.call('upload.create', { path: target });
    const put = await fetch(`${daemon.url}/v1/files/uploads/${upload.id}?offset=0`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/octet-stream' },
      body: 'hello\n',
    });
    expect(await put.json()).toEqual({ id: upload.id, path: target, offset: 6 });
    await expect(runtime.call('upload.complete', { id: upload.id, size: 7 })).rejects.toMatchObject({ code: 'FS_CHECKSUM_MISMATCH' });
    await expect(runtime.call('upload.complete', { id: upload.id, sha256: '0'.repeat(64) })).rejects.toMatchObject({ code: 'FS_CHECKSUM_MISMATCH' });
    expect(() => statSync(target)).toThrow();
    const done = await runtime.call('upload.complete', { id: upload.id, size: 6, sha256: createHash('sha256').update('hello\n').digest('hex') });
    expect(done.size).toBe(6);
    expect(readFileSync(target, 'utf8')).toBe('hello\n');
    expect(statSync(target).mode & 0o777).toBe(0o644);
    await expect(runtime.call('upload.get', { id: upload.id })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

/** Every entry of a tree: its kind, its mode (files and directories), its link text or its content's hash. */
function describeTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (directory: string): void => {
    for (const name of readdirSync(directory).sort()) {
      const path = join(directory, name);
      const info = lstatSync(path);
      const key = relative(root, path);
      if (info.isSymbolicLink()) out[key] = `link ${readlinkSync(path)}`;
      else if (info.isDirectory()) {
        out[key] = `dir ${(info.mode & 0o7777).toString(8)}`;
        walk(path);
      } else out[key] = `file ${(info.mode & 0o7777).toString(8)} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    }
  };
  walk(root);
  return out;
}
