/**
 * File transfer side by side: a file copied up and down through the daemon
 * (RemoteTransfer over loopback: chunked resumable upload, ranged download,
 * SHA-256 checked on both sides) against OpenSSH's scp to a sshd on loopback,
 * and a local cp of the same file as the floor the disk sets.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@execworld/sdk';
import { RemoteTransfer } from '@execworld/sdk/fs';
import type { DaemonProcess } from './daemon.ts';
import type { Sshd } from './ssh-peer.ts';

export const TRANSFER_PATHS = ['local cp', 'execworld up', 'execworld down', 'scp up', 'scp down'] as const;
export type TransferPath = (typeof TRANSFER_PATHS)[number];

/** Writes `bytes` of incompressible data to `path`. */
function writeRandomFile(path: string, bytes: number): void {
  const fd = openSync(path, 'w');
  try {
    const block = Buffer.alloc(1024 * 1024);
    for (let written = 0; written < bytes; written += block.length) {
      for (let at = 0; at < block.length; at += 4) block.writeUInt32LE((Math.random() * 0xffffffff) >>> 0, at);
      writeSync(fd, block, 0, Math.min(block.length, bytes - written));
    }
  } finally {
    closeSync(fd);
  }
}

function seconds(work: () => void): number {
  const started = process.hrtime.bigint();
  work();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function secondsAsync(work: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** MB/s (10^6 bytes) of each path for one file of `bytes`; scp's are absent without a sshd. */
export async function transferMbps(daemon: DaemonProcess, sshd: Sshd | undefined, bytes: number): Promise<Partial<Record<TransferPath, number>>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-transfer-'));
  const source = join(dir, 'source.bin');
  writeRandomFile(source, bytes);
  const rate = (secondsTaken: number): number => bytes / 1e6 / secondsTaken;
  const figures: Partial<Record<TransferPath, number>> = {};
  const runtime = await connect(daemon.url, { token: daemon.token });
  try {
    figures['local cp'] = rate(seconds(() => spawnSync('cp', [source, join(dir, 'copied.bin')])));
    const transfer = new RemoteTransfer(runtime);
    figures['execworld up'] = rate(await secondsAsync(() => transfer.uploadFile(source, join(dir, 'up.bin'))));
    figures['execworld down'] = rate(await secondsAsync(() => transfer.downloadFile(join(dir, 'up.bin'), join(dir, 'down.bin'))));
    if (sshd !== undefined) {
      const key = join(dir, 'key');
      const keyFd = openSync(key, 'w', 0o600);
      writeSync(keyFd, sshd.privateKey);
      closeSync(keyFd);
      const scp = (from: string, to: string): void => {
        const result = spawnSync('scp', [
          '-q',
          '-i',
          key,
          '-P',
          String(sshd.port),
          '-o',
          'StrictHostKeyChecking=no',
          '-o',
          'UserKnownHostsFile=/dev/null',
          from,
          to,
        ]);
        if (result.status !== 0) throw new Error(`scp failed: ${result.stderr.toString()}`);
      };
      const user = process.env.USER ?? 'root';
      figures['scp up'] = rate(seconds(() => scp(source, `${user}@127.0.0.1:${join(dir, 'scp-up.bin')}`)));
      figures['scp down'] = rate(seconds(() => scp(`${user}@127.0.0.1:${join(dir, 'scp-up.bin')}`, join(dir, 'scp-down.bin'))));
    }
  } finally {
    runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}
