/**
 * node-pty's native binding, loaded once: its `fork`, `open` and `resize`, which
 * `pty.ts` drives (it reads the master itself).
 * @module
 */
import { chmodSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { hostFacts } from '../platform/host.ts';

export interface NativePty {
  fork(
    file: string,
    args: string[],
    env: string[],
    cwd: string,
    cols: number,
    rows: number,
    uid: number,
    gid: number,
    utf8: boolean,
    helperPath: string,
    onexit: (code: number, signal: number) => void,
  ): { fd: number; pid: number; pty: string };
  /** openpty: a new terminal's two sides, neither close-on-exec, with the kernel's default modes. */
  open(cols: number, rows: number): { master: number; slave: number; pty: string };
  resize(fd: number, cols: number, rows: number): void;
}

let loaded: { native: NativePty; helperPath: string } | undefined;

/** Loads node-pty's native binding once, from its build output or its prebuilds. */
export function nativePty(): { native: NativePty; helperPath: string } {
  if (loaded !== undefined) return loaded;
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve('node-pty/package.json'));
  const failures: string[] = [];
  for (const dir of ['build/Release', 'build/Debug', `prebuilds/${hostFacts.ptyPrebuilds}`]) {
    const path = join(root, dir, 'pty.node');
    try {
      const native = require(path) as NativePty;
      const helperPath = join(root, dir, 'spawn-helper');
      ensureExecutable(helperPath);
      loaded = { native, helperPath };
      return loaded;
    } catch (error) {
      failures.push(`${path}: ${(error as Error).message}`);
    }
  }
  throw new Error(`cannot load node-pty's native module: ${failures.join('; ')}`);
}

/**
 * node-pty 1.1.0 ships macOS's spawn-helper without its exec bit, which makes
 * every macOS spawn fail with `posix_spawnp failed`. Linux never runs it.
 */
function ensureExecutable(path: string): void {
  if (!hostFacts.ptyHelperLacksExecBit) return;
  try {
    const mode = statSync(path).mode;
    if ((mode & 0o111) !== 0o111) chmodSync(path, mode | 0o755);
  } catch (_error) {
    // Missing helper: the spawn reports it.
  }
}
