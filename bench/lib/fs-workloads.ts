/**
 * The filesystem seam side by side: the reference provider
 * (`@deepseek-ai/dsh-fs-local`) on this host against `RemoteFiles` over the
 * daemon on loopback, for the tool calls a harness makes: a read (resolve,
 * stat, readText) and a write (resolve, writeText), of a 4 KiB and a 10 MiB file.
 */
import '../../test/helpers/with-resolvers.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Context } from '@deepseek-ai/cordis';
import { LocalFileSystem } from '@deepseek-ai/dsh-fs-local';
import { connect } from '@execworld/sdk';
import { RemoteFiles, type FsProvider } from '@execworld/sdk/fs';
import type { DaemonProcess } from './daemon.ts';

export const FS_SIZES = { '4 KiB': 4096, '10 MiB': 10 * 1024 * 1024 } as const;
export type FsSize = keyof typeof FS_SIZES;

/** Median milliseconds of a read tool call and a write tool call per size, for `provider`. */
export async function fsCallMs(provider: 'reference' | 'remote', daemon: DaemonProcess, runs: number): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-fs-'));
  let fs: FsProvider;
  let close: () => Promise<void>;
  if (provider === 'reference') {
    const root = new Context();
    await root.plugin(LocalFileSystem, { cwd: dir });
    fs = (root as unknown as { fs: FsProvider }).fs;
    close = async () => {
      await root.fiber.dispose();
    };
  } else {
    const runtime = await connect(daemon.url, { token: daemon.token });
    fs = new RemoteFiles(runtime, { cwd: dir });
    close = () => runtime.dispose();
  }
  const figures: Record<string, number> = {};
  try {
    for (const [size, bytes] of Object.entries(FS_SIZES)) {
      const text = 'x'.repeat(bytes - 1) + '\n';
      writeFileSync(join(dir, 'read.txt'), text);
      const count = bytes > 1024 * 1024 ? Math.max(3, Math.floor(runs / 20)) : runs;
      const reads: number[] = [];
      const writes: number[] = [];
      for (let run = 0; run < count; run += 1) {
        let start = performance.now();
        const target = await fs.resolve('read.txt');
        await fs.stat(target);
        if ((await fs.readText(target)).length !== bytes) throw new Error('short read');
        reads.push(performance.now() - start);
        start = performance.now();
        await fs.writeText(await fs.resolve('write.txt'), text);
        writes.push(performance.now() - start);
      }
      figures[`read ${size}`] = median(reads);
      figures[`write ${size}`] = median(writes);
    }
  } finally {
    await close();
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
