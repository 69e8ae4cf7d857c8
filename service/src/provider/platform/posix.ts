/**
 * The POSIX platforms (Linux, macOS, and the others Node runs on): process
 * trees as process groups, terminals over a pty, case-sensitive environment
 * names, `:`-separated PATH.
 * @module
 */
import { delimiter, isAbsolute, resolve } from 'node:path';
import { lookupEnvironment } from '@execworld/sdk/seam';
import { createInspector } from '../inspect/index.ts';
import { closeInheritedDescriptorsOnExec } from '../posix/libc.ts';
import { relativeCommandError } from '../resolve-executable.ts';
import { LocalTerminal } from '../posix/terminal.ts';
import type { Platform, TerminalBackend } from './platform.ts';
import { processGroupTree } from '../posix/process-group-tree.ts';

/** Descriptors are sealed only where this host has POSIX descriptors too, whatever rules a test injects. */
const hostHasPosixDescriptors = process.platform !== 'win32';

const ptyTerminals: TerminalBackend = {
  available: true,
  assertSupported() {
    // Every POSIX platform has ptys.
  },
  open(options) {
    return new LocalTerminal(options);
  },
};

/** The rules of POSIX platform `name`. */
export function posixPlatform(name: NodeJS.Platform): Platform {
  return {
    name,
    signals: true,
    caseInsensitiveEnv: false,
    executableCandidates(command, env, cwd = process.cwd()) {
      if (isAbsolute(command)) return [command];
      if (command.includes('/')) throw relativeCommandError(command);
      const path = lookupEnvironment(env, 'PATH', false) ?? '';
      return path.split(delimiter).map((directory) => resolve(cwd, directory, command));
    },
    createInspector: () => createInspector(name),
    sealDescriptors() {
      // Children get exactly fds 0-2: every other descriptor of this process is made
      // close-on-exec before each spawn, those it inherited from whatever started it
      // and those a native module opened without the flag. (node-pty's masters are
      // marked right after their fork, before anything else can start.)
      if (hostHasPosixDescriptors) closeInheritedDescriptorsOnExec();
    },
    // The process table is read for a group of zombies on Linux (/proc) only; elsewhere
    // a group counts as live while kill(-pgid, 0) succeeds.
    tree: processGroupTree({ scanGroups: name === 'linux' }),
    terminals: ptyTerminals,
  };
}
