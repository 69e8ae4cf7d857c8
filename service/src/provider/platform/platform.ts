/**
 * What differs between the operating systems the local provider runs on, as
 * one strategy object per platform family (`posix.ts`, `win32.ts`), chosen
 * once in `index.ts`. The rest of the provider asks its `Platform` and never
 * compares platform names itself.
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import type { ShellDefaults } from '../api.ts';
import type { SessionCell } from '../containment/containment.ts';
import type { ContainmentChoice, ContainmentSelection, SelectOptions } from '../containment/index.ts';
import type { ProcessIdentity, ProcessInspector } from '../inspect/inspector.ts';
import type { ListeningSocket } from '../inspect/listening.ts';
import type { HostTerminal, TerminalOptions } from '../host-terminal.ts';
import type { ConPtyFactory } from '../win32/conpty.ts';
import type { Kernel32 } from '../win32/kernel32.ts';
import type { Taskkill } from '../win32/processes.ts';

export type { ShellDefaults } from '../api.ts';

/** What a tree control sees of one managed process tree, read when asked. */
export interface ManagedTree {
  /** The top-level process; the tree control is asked only while it is positive. */
  readonly pid: number;
  /** The top-level process as spawned, for a direct signal when its group cannot take one. */
  readonly child: ChildProcess | undefined;
  /** The containment cell the tree was born into, when the tree control takes cells. */
  readonly cell: SessionCell | undefined;
  /** Whether the top-level process has exited (and was reaped). */
  rootExited(): boolean;
  /**
   * Whether a process group has a live (non-zombie) member; undefined when
   * that cannot be told.
   */
  groupHasLiveMembers(pgid: number): boolean | undefined;
  /** The process group of each live process, from one reading of the process table; undefined when not read. */
  processGroups(): ReadonlyMap<number, number | undefined> | undefined;
}

/**
 * How a managed process tree is spawned, signalled and told alive. A
 * containment (a cgroup, the subreaper's tracking) plugs in as the tree's
 * cell; a platform's own tree mechanism plugs in as another tree control.
 */
export interface TreeControl {
  /** Whether the top-level process is spawned detached, leading a process group of its own. */
  readonly detached: boolean;
  /** Whether a containment cell holds the tree; where not, the tree is spawned outside any cell. */
  readonly takesCells: boolean;
  /** Sends `signal` to the tree; called only while `alive(tree)`. */
  signal(tree: ManagedTree, signal: NodeJS.Signals): void;
  /** Whether anything of the tree may still run. */
  alive(tree: ManagedTree): boolean;
}

/** How terminals are made on a platform. */
export interface TerminalBackend {
  /** Whether terminals can be made here at all (`/v1/health` reports it). */
  readonly available: boolean;
  /**
   * Called before anything else of a terminal's spawn is done on the host.
   * @throws {ProviderError} UNSUPPORTED where the platform has no terminals.
   */
  assertSupported(): void;
  /** Starts `options.file` on a new terminal. */
  open(options: TerminalOptions): HostTerminal;
}

/** The rules of one platform, for the local provider. */
export interface Platform {
  /** The platform whose rules these are. */
  readonly name: NodeJS.Platform;
  /** Whether these are this host's own rules; a test's injected rules have none of this host's cgroups or jobs. */
  readonly host: boolean;
  /** Whether processes take signals (POSIX); where not, every signal of a tree ends it by force. */
  readonly signals: boolean;
  /** Whether environment names differ only in case name one variable (`Path` is `PATH`). */
  readonly caseInsensitiveEnv: boolean;
  /**
   * The paths to try for `command`, in order. PATH entries are resolved
   * against `cwd`, so an empty entry means that directory.
   * @throws {ProviderError} INVALID_ARGUMENT for a relative path.
   */
  executableCandidates(command: string, env: Readonly<Record<string, string>>, cwd?: string): string[];
  /**
   * The process inspector of this platform.
   * @throws {InspectionUnsupportedError} where there is none.
   */
  createInspector(): ProcessInspector;
  /**
   * The containment for `choice`, as this platform gives it (see `containment/index.ts`).
   * @throws when an explicit choice is not possible here.
   */
  selectContainment(choice: ContainmentChoice, options?: SelectOptions): ContainmentSelection;
  /**
   * The identity a session journal records `pid` by, for a later start to
   * recover with; undefined where sessions are not recovered (recovery reads
   * `/proc`).
   */
  recoveryIdentity(pid: number): ProcessIdentity | undefined;
  /**
   * The TCP sockets the processes `pids` listen on, from the kernel's socket tables; undefined where they cannot be
   * read (every platform but Linux).
   */
  listeningSockets(pids: readonly number[]): ListeningSocket[] | undefined;
  /** The shells the daemon runs itself. */
  readonly shells: ShellDefaults;
  /** Whether a file's POSIX mode bits tell who else may read it: everywhere but Windows. */
  readonly fileModesGuardPrivacy: boolean;
  /**
   * Run before each spawn: children start with exactly the descriptors they
   * are given, where the platform lets other descriptors leak into them.
   */
  sealDescriptors(): void;
  /** How a managed process tree is spawned, signalled and told alive. */
  readonly tree: TreeControl;
  /** How terminals are made. */
  readonly terminals: TerminalBackend;
}

/** Test hooks of a platform's strategy. */
export interface PlatformOverrides {
  /** How a Windows process tree is ended where it has no job. @default `taskkill /PID <pid> /T`, `/F` when forced */
  readonly taskkill?: Taskkill | undefined;
  /** The Windows system calls. @default kernel32 through koffi */
  readonly kernel32?: Kernel32 | undefined;
  /** How a Windows terminal's pseudoconsole is made. @default node-pty's ConPTY */
  readonly conpty?: ConPtyFactory | undefined;
}
