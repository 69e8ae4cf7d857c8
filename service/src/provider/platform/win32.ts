/**
 * Windows: a process tree is the top-level process's tree, ended with
 * `taskkill /T /F`; environment names are case-insensitive; PATH is
 * `;`-separated and a name without an extension is tried with each PATHEXT
 * extension. Terminals and process inspection are not implemented yet.
 * @module
 */
import { spawnSync } from 'node:child_process';
import { win32 as path } from 'node:path';
import { lookupEnvironment } from '@execworld/sdk/seam';
import { ProviderError } from '../errors.ts';
import { createInspector } from '../inspect/index.ts';
import { relativeCommandError } from '../resolve-executable.ts';
import type { Platform, PlatformOverrides, TerminalBackend, TreeControl } from './platform.ts';

const DEFAULT_PATHEXT = '.COM;.EXE;.BAT;.CMD';

function taskkill(pid: number): void {
  // Every outcome is ignored: an absent tree, status 128, a missing binary.
  spawnSync('taskkill', ['/PID', String(pid), '/T', '/F'], { stdio: 'ignore', windowsHide: true });
}

/** The tree is the top-level process's own: it is not detached, and no cell holds it. */
function taskkillTree(kill: (pid: number) => void): TreeControl {
  return {
    detached: false,
    takesCells: false,
    // taskkill /F has no gentler form: every signal ends the tree.
    signal: (tree) => kill(tree.pid),
    alive: (tree) => !tree.rootExited(),
  };
}

function noTerminal(): never {
  throw new ProviderError('UNSUPPORTED', 'terminals are not implemented on Windows yet');
}

const noTerminals: TerminalBackend = { available: false, assertSupported: noTerminal, open: noTerminal };

/** The rules of Windows. */
export function win32Platform(overrides: PlatformOverrides = {}): Platform {
  return {
    name: 'win32',
    caseInsensitiveEnv: true,
    executableCandidates(command, env, cwd = process.cwd()) {
      if (path.isAbsolute(command)) return [command];
      if (/[\\/]/.test(command)) throw relativeCommandError(command);
      const directories = (lookupEnvironment(env, 'PATH', true) ?? '').split(path.delimiter);
      const extensions = path.extname(command) === '' ? (lookupEnvironment(env, 'PATHEXT', true) ?? DEFAULT_PATHEXT).split(';').filter(Boolean) : [''];
      return directories.flatMap((directory) => extensions.map((extension) => path.resolve(cwd, directory, command + extension)));
    },
    createInspector: () => createInspector('win32'),
    sealDescriptors() {
      // Nothing to seal: close-on-exec is a POSIX matter.
    },
    tree: taskkillTree(overrides.taskkill ?? taskkill),
    terminals: noTerminals,
  };
}
