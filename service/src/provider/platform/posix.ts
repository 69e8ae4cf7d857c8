/**
 * The POSIX platforms (Linux, macOS, and the others Node runs on): process
 * trees as process groups, terminals over a pty, case-sensitive environment
 * names, `:`-separated PATH.
 * @module
 */
import { delimiter, isAbsolute, resolve } from 'node:path';
import { lookupEnvironment } from '@execworld/sdk/seam';
import { linuxContainment, uncontained } from '../containment/index.ts';
import { DarwinInspector } from '../inspect/darwin.ts';
import { InspectionUnsupportedError } from '../inspect/inspector.ts';
import { LinuxInspector } from '../inspect/linux.ts';
import { listeningSockets } from '../inspect/listening.ts';
import { closeInheritedDescriptorsOnExec } from '../posix/libc.ts';
import { relativeCommandError } from '../resolve-executable.ts';
import { LocalTerminal } from '../posix/terminal.ts';
import { HOST_PLATFORM } from './host.ts';
import type { Platform, ShellDefaults, TerminalBackend } from './platform.ts';
import { processGroupTree } from '../posix/process-group-tree.ts';

/** Descriptors are sealed only where this host has POSIX descriptors too, whatever rules a test injects. */
const hostHasPosixDescriptors = HOST_PLATFORM !== 'win32';

/** bash; PowerShell where one installed it, on the PATH. */
const posixShells: ShellDefaults = { dialect: 'bash', pwshCandidates: () => ['pwsh'] };

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
  const linux = name === 'linux';
  return {
    name,
    host: name === HOST_PLATFORM,
    signals: true,
    caseInsensitiveEnv: false,
    executableCandidates(command, env, cwd = process.cwd()) {
      if (isAbsolute(command)) return [command];
      if (command.includes('/')) throw relativeCommandError(command);
      const path = lookupEnvironment(env, 'PATH', false) ?? '';
      return path.split(delimiter).map((directory) => resolve(cwd, directory, command));
    },
    createInspector() {
      if (linux) return new LinuxInspector();
      if (name === 'darwin') return new DarwinInspector();
      throw new InspectionUnsupportedError(`terminal inspection is unsupported on platform ${name}`);
    },
    // cgroups and the subreaper are Linux's; the other POSIX platforms contain nothing.
    selectContainment: (choice, options) => (linux ? linuxContainment(choice, options) : uncontained(choice, name)),
    // A dead daemon's sessions are recovered from /proc (their start times and uids): on Linux.
    recoveryIdentity: (pid) => (linux ? new LinuxInspector().identity(pid) : undefined),
    // /proc/net/tcp and the descriptors' links are Linux's; macOS would need lsof or libproc.
    listeningSockets: (pids) => (linux ? listeningSockets(pids) : undefined),
    shells: posixShells,
    fileModesGuardPrivacy: true,
    sealDescriptors() {
      // Children get exactly fds 0-2: every other descriptor of this process is made
      // close-on-exec before each spawn, those it inherited from whatever started it
      // and those a native module opened without the flag. (node-pty's masters are
      // marked right after their fork, before anything else can start.)
      if (hostHasPosixDescriptors) closeInheritedDescriptorsOnExec();
    },
    // The process table is read for a group of zombies on Linux (/proc) only; elsewhere
    // a group counts as live while kill(-pgid, 0) succeeds.
    tree: processGroupTree({ scanGroups: linux }),
    terminals: ptyTerminals,
  };
}
