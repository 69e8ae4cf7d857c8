/**
 * Windows: a process tree is the Job Object its session's cell is (see
 * `containment/job-object.ts`), or, where no job could be made, the top-level
 * process's tree ended with `taskkill /T /F`, as the reference does.
 * Environment names are case-insensitive; PATH is `;`-separated and a name
 * without an extension is tried with each PATHEXT extension.
 * @module
 */
import { win32 as path } from 'node:path';
import { lookupEnvironment } from '@execworld/sdk/seam';
import { windowsContainment } from '../containment/index.ts';
import { ProviderError } from '../errors.ts';
import { Win32Inspector } from '../inspect/win32.ts';
import { relativeCommandError } from '../resolve-executable.ts';
import { nodePtyConPty, type ConPtyFactory } from '../win32/conpty.ts';
import { hostTaskkill, WindowsProcesses, type Taskkill } from '../win32/processes.ts';
import { WindowsTerminal } from '../win32/terminal.ts';
import { HOST_PLATFORM, hostFacts } from './host.ts';
import type { Platform, PlatformOverrides, ShellDefaults, TerminalBackend, TreeControl } from './platform.ts';

const DEFAULT_PATHEXT = '.COM;.EXE;.BAT;.CMD';

/**
 * The tree is its job when its session has one, else the top-level process's own tree. Windows
 * has no signal a console program can be asked to end by: every signal ends the tree by force
 * (exit code 1), the job whole, escapees included.
 */
function jobTree(taskkill: Taskkill): TreeControl {
  return {
    detached: false,
    takesCells: true,
    signal(tree) {
      if (tree.cell !== undefined) {
        tree.cell.kill();
        return;
      }
      taskkill(tree.pid, true);
      // Where taskkill cannot end it (missing, or without /T as under Wine), the top-level process
      // is ended through Node's own handle of it, which names no other process.
      try {
        tree.child?.kill('SIGKILL');
      } catch (_error) {
        // Already gone.
      }
    },
    alive: (tree) => (tree.cell === undefined ? !tree.rootExited() : !tree.cell.isEmpty()),
  };
}

/**
 * Terminals on pseudoconsoles (ConPTY), their processes in the session's job. Windows 10 1809
 * and later have them (Node 20 runs on nothing older); the Windows rules applied elsewhere (a
 * test's) have none unless one is given.
 */
function conptyTerminals(conpty: ConPtyFactory | undefined): TerminalBackend {
  const available = conpty !== undefined || HOST_PLATFORM === 'win32';
  return {
    available,
    assertSupported() {
      if (!available) throw new ProviderError('UNSUPPORTED', 'terminals need a Windows pseudoconsole, and this host has none');
    },
    open: (options) => new WindowsTerminal(options, conpty ?? nodePtyConPty),
  };
}

/**
 * PowerShell: 7 on the PATH, then where its installer puts it, then Windows PowerShell 5.1 as
 * the last resort (it runs the dialect, without every promise of 7).
 */
const windowsShells: ShellDefaults = {
  dialect: 'pwsh',
  pwshCandidates(env = {}) {
    const programFiles = lookupEnvironment(env, 'ProgramFiles', true) ?? process.env.ProgramFiles ?? 'C:\\Program Files';
    return ['pwsh', `${programFiles.replace(/\\+$/, '')}\\PowerShell\\7\\pwsh.exe`, 'powershell'];
  },
};

/** The rules of Windows. */
export function win32Platform(overrides: PlatformOverrides = {}): Platform {
  const taskkill = overrides.taskkill ?? hostTaskkill;
  const kernel32 = overrides.kernel32;
  return {
    name: 'win32',
    host: HOST_PLATFORM === 'win32',
    signals: false,
    caseInsensitiveEnv: true,
    executableCandidates(command, env, cwd = process.cwd()) {
      if (path.isAbsolute(command)) return [command];
      if (/[\\/]/.test(command)) throw relativeCommandError(command);
      const directories = (lookupEnvironment(env, 'PATH', true) ?? '').split(path.delimiter);
      const extensions = path.extname(command) === '' ? (lookupEnvironment(env, 'PATHEXT', true) ?? DEFAULT_PATHEXT).split(';').filter(Boolean) : [''];
      return directories.flatMap((directory) => extensions.map((extension) => path.resolve(cwd, directory, command + extension)));
    },
    createInspector: () => (kernel32 === undefined ? new Win32Inspector() : new Win32Inspector(() => new WindowsProcesses(kernel32, taskkill))),
    // Auto takes a job where this host has Job Objects.
    selectContainment: (choice) => windowsContainment(choice, hostFacts.kernel32),
    // A job ends with the daemon that holds it (kill-on-close): nothing is left to recover.
    recoveryIdentity: () => undefined,
    // GetExtendedTcpTable would tell; it is not read.
    listeningSockets: () => undefined,
    shells: windowsShells,
    fileModesGuardPrivacy: false,
    sealDescriptors() {
      // Nothing to seal: close-on-exec is a POSIX matter.
    },
    tree: jobTree(taskkill),
    terminals: conptyTerminals(overrides.conpty),
  };
}
