/**
 * The provider interface: everything the daemon (`server/`) knows of the
 * provider that runs its sessions. It is the subprocess seam plus a few named
 * extensions the daemon needs and the seam does not carry: capabilities, the
 * OS user an owner runs as, live views of collected streams, tree state,
 * terminal resize, and disposal.
 *
 * `LocalRuntime` implements it on this host, POSIX or Windows (its platform
 * chosen once, in `provider/platform/`); the test double in
 * `test/helpers/memory-provider.ts` implements it too. The server
 * imports nothing else of `provider/` outside its composition root
 * (`server/daemon-runtime.ts`), which a lint rule enforces.
 * @module
 */
import type { Readable } from 'node:stream';
import type {
  SubprocessHandle,
  SubprocessSpawnSpec,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSpawnSpec,
} from '@execworld/sdk/seam';
import type { ArchiveResult, FileDigest, FsInfo, FsProvider, FsTarget, FsWriteIntent, FsWriteOutcome, PackedArchive } from '@execworld/sdk/fs';
import type { ContainmentMode, LimitSupport, SessionAccounting, SessionLimits, SessionUsage, UsageMeter } from './containment/containment.ts';
import type { RunAs } from './run-as.ts';
import type { ListeningSocket } from './inspect/listening.ts';

export type { ContainmentMode, LimitSupport, SessionAccounting, SessionLimits, SessionUsage, UsageMeter } from './containment/containment.ts';
export type { RunAs } from './run-as.ts';
export type { ListeningSocket } from './inspect/listening.ts';
export { CleanupError, ProviderError, type ProviderErrorCode } from './errors.ts';

/** What the provider can do on its host, as `/v1/health` reports it. */
export interface ProviderCapabilities {
  /** The platform whose rules the provider follows. */
  readonly platform: NodeJS.Platform;
  /** Whether terminals can be started. */
  readonly terminals: boolean;
  /** Whether a terminal's foreground group can be proven to wait for input. */
  readonly exactInputWait: boolean;
  /** How sessions are contained, so that nothing they start outlives them. */
  readonly containment: ContainmentMode;
  /** Whether processes take signals; false on Windows, where every signal of a tree ends it by force. */
  readonly signals: boolean;
}

/** The shells the daemon runs itself, as the provider's platform has them. */
export interface ShellDefaults {
  /** The dialect of a shell created without one: PowerShell on Windows, bash elsewhere. */
  readonly dialect: 'bash' | 'pwsh';
  /** Where PowerShell is looked for, in order, for a shell whose environment is `env`: each a command name or a path. */
  pwshCandidates(env?: Readonly<Record<string, string>>): string[];
}

/**
 * A collected stream's bounded tail, read live: the bytes in
 * [`windowStart`, `totalBytes`) are retained, earlier ones were dropped.
 */
export interface CollectedStreamView {
  /** Offset of the oldest retained byte. */
  readonly windowStart: number;
  /** Bytes the stream produced so far. */
  readonly totalBytes: number;
  /** The spill file holding the stream's head, if it spills. */
  readonly spillPath: string | undefined;
  /** Up to `maxBytes` retained bytes from `fromByte` (from `windowStart` when earlier). */
  slice(fromByte: number, maxBytes: number): { from: number; chunks: Buffer[] };
  /** Removes what the stream keeps outside memory (its spill file). */
  discard(): void;
}

/** Extensions of a process spawn beyond the seam. */
export interface ProcessExtensions {
  /** Called with every chunk of a collected stream, after it was collected. */
  onCollected?(stream: 'stdout' | 'stderr', chunk: Buffer): void;
  /** The OS user the process runs as; by default the provider's own. */
  readonly runAs?: RunAs | undefined;
  /** What the process tree may use (see containment/cgroup-limits.ts); refused where this host cannot enforce it. */
  readonly limits?: SessionLimits | undefined;
  /**
   * The group the session belongs to (the daemon's owner, as a cgroup name:
   * letters, digits, `_`, `-` and `.`, not `s-…`): all the sessions of one
   * group are held together to the provider's group total of pids
   * (`LimitSupport.groupPids`) where it can hold them.
   */
  readonly group?: string | undefined;
}

/** Extensions of a terminal spawn beyond the seam. */
export interface TerminalExtensions {
  /** The OS user the terminal's program runs as; by default the provider's own. */
  readonly runAs?: RunAs | undefined;
  /** What the terminal's session may use; refused where this host cannot enforce it. */
  readonly limits?: SessionLimits | undefined;
  /** The group the session belongs to (see {@link ProcessExtensions.group}). */
  readonly group?: string | undefined;
}

/** A managed process tree, as the daemon holds it. */
export interface ProviderProcess extends SubprocessHandle {
  /** Whether every process of the tree is gone (not only the top-level one). */
  readonly treeExited: boolean;
  /** What the tree used (its cell's counters); undefined where its cell keeps none. */
  usage?(): SessionUsage | undefined;
  /** Its cell's counters for the daemon's metrics; undefined where its cell keeps none. */
  accounting?(): SessionAccounting | undefined;
  /** The pids of the tree's live processes now; undefined where they cannot be told. */
  members?(): number[] | undefined;
  /** The live view of a collected stream; undefined unless it was spawned in collect mode. */
  collector(stream: 'stdout' | 'stderr'): CollectedStreamView | undefined;
  /**
   * Writes to the stdin pipe; resolves once the pipe took the bytes, rejects with the pipe's
   * error. Input waiting for a program that does not read it is bounded here, as a terminal's is.
   * @throws {ProviderError} LIMIT_EXCEEDED when the bytes would take what waits past the input backlog bound.
   */
  writeStdin(data: Buffer): Promise<void>;
  /** Reads on after a takeover that did not happen (see `ExecutionProvider.handOverProcess`). */
  resumeAfterHandOver?(): void;
}

/** A terminal, as the daemon holds it. */
export interface ProviderTerminal extends SubprocessTerminalHandle {
  inspectForeground(): Promise<SubprocessTerminalForeground | undefined>;
  /** Sets the terminal's size; its foreground group gets SIGWINCH where the platform has it. */
  resize(cols: number, rows: number): void;
  /** What the terminal's session used; undefined where its cell keeps none. */
  usage?(): SessionUsage | undefined;
  /** Its cell's counters for the daemon's metrics; undefined where its cell keeps none. */
  accounting?(): SessionAccounting | undefined;
  /** The pids of the terminal's session's live processes now; undefined where they cannot be told. */
  members?(): number[] | undefined;
  /** Starts measuring one run in the terminal (a persistent shell's command). */
  usageMeter?(): UsageMeter | undefined;
  /** Reads on after a takeover that did not happen (see `ExecutionProvider.handOverTerminal`). */
  resumeAfterHandOver?(): void;
}

/** The provider the daemon runs its sessions on. */
export interface ExecutionProvider {
  readonly capabilities: ProviderCapabilities;
  /** The shells of the provider's platform. */
  readonly shells: ShellDefaults;
  /** The seam's lookup; as `runAs` would make it (its environment, its permissions) when given. */
  resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal, runAs?: RunAs): Promise<string>;
  /** Starts a managed process tree, answered once its program runs; rejects with why it could not start. */
  startProcess(spec: SubprocessSpawnSpec, extensions?: ProcessExtensions): Promise<ProviderProcess>;
  spawnTerminal(spec: SubprocessTerminalSpawnSpec, extensions?: TerminalExtensions): Promise<ProviderTerminal>;
  /** Which session limits this provider enforces, and why not the others. */
  limitSupport?(): LimitSupport;
  /** The TCP sockets the processes `pids` listen on; undefined where this host cannot tell. */
  listeningSockets?(pids: readonly number[]): ListeningSocket[] | undefined;
  /**
   * A takeover's: stops reading `terminal` and answers what the next image of
   * the daemon needs to adopt it; undefined when it cannot be handed over.
   * Absent where terminals cannot outlive their daemon's image.
   */
  handOverTerminal?(terminal: ProviderTerminal): TerminalHandOver | undefined;
  /** A takeover's: the terminal the previous image of the daemon handed over. */
  adoptTerminal?(record: TerminalHandOver, size: { rows: number; cols: number }): ProviderTerminal;
  /**
   * A takeover's: stops reading `process`'s output and answers what the next image needs to adopt it;
   * undefined once its program exited; why not, in an operator's words, when it cannot be handed over now.
   */
  handOverProcess?(process: ProviderProcess): ProcessHandOver | string | undefined;
  /** A takeover's: the process the previous image of the daemon handed over, spawned as `spec` says. */
  adoptProcess?(record: ProcessHandOver, spec: SubprocessSpawnSpec): ProviderProcess;
  /** Terminates everything still running and waits until it is gone; later spawns fail. */
  dispose(): Promise<void>;
}

/** A managed process as a takeover hands it to the next image of the daemon: its child, its pipes' descriptors (kept across the exec), its cell. */
export interface ProcessHandOver {
  readonly pid: number;
  readonly graceMs: number;
  /** The pipes still open; one that is closed, or is no pipe, is absent. */
  readonly stdin?: number | undefined;
  readonly stdout?: number | undefined;
  readonly stderr?: number | undefined;
  readonly cellKey: string;
  readonly cellPath?: string | undefined;
}

/**
 * A terminal as a takeover hands it to the next image of the daemon (an exec
 * in place: the pid, the children and the descriptors without close-on-exec stay).
 */
export interface TerminalHandOver {
  /** Its program, still a child of the daemon. */
  readonly pid: number;
  /** Its master descriptor, kept across the exec. */
  readonly fd: number;
  /** The slave's path, e.g. `/dev/pts/3`. */
  readonly device: string;
  /** Its grace between SIGTERM and SIGKILL when it is ended. */
  readonly graceMs: number;
  /** The key of its cell, which the journal names it by. */
  readonly cellKey: string;
  /** Where its cell is kept (a cgroup), where it has one. */
  readonly cellPath?: string | undefined;
}

export { FsFailure } from './fs/fs-error.ts';

// The files' vocabulary: what the files and transfer calls take and answer, whoever makes them.

/** A regular file's size, SHA-256 and version, all of one open file: what the wire answers. */
export type { FileDigest };
/** A directory's tar stream, and the special files it leaves out. */
export type { PackedArchive };

/** What an unpacked archive did, and the real path of the directory it went into. */
export type Unpacked = ArchiveResult & { readonly path: string };

/** An upload's staged bytes, from its start to its publication. */
export interface UploadStage {
  /** The target's absolute path, as asked for. */
  readonly path: string;
  /** Where its bytes wait (a directory beside the target), for the record that lets a later daemon remove it. */
  readonly identity: StageIdentity;
  offset(): Promise<number>;
  append(offset: number, body: Readable, signal: AbortSignal | undefined): Promise<number>;
  complete(expected: { size?: number | undefined; sha256?: string | undefined }): Promise<FileDigest>;
  discard(): Promise<void>;
  /**
   * For a takeover: what the next image of the daemon rebuilds the stage from,
   * its descriptors to keep across the exec among it; undefined when it cannot
   * be handed over (a worker's, or one over). The stage itself is left as it is.
   */
  handOver?(): UploadStageRecord | undefined;
}

/** An upload's stage as the previous image of the daemon held it (see {@link UploadStage.handOver}). */
export interface UploadStageRecord {
  readonly path: string;
  readonly identity: StageIdentity;
  /** The target's directory: the descriptor that holds it, and its real path. */
  readonly directory: { readonly fd: number; readonly real: string };
  /** The target's name in it. */
  readonly name: string;
  /** The stage directory: its name, the descriptor that holds it, and its real path. */
  readonly stage: { readonly name: string; readonly fd: number; readonly real: string };
  readonly overwrite: boolean;
  readonly mode?: number | undefined;
}

/** The transfer calls of one owner's view of the world. */
export interface OwnerTransfer {
  mkdir(path: string, options: { cwd?: string | undefined; parents: boolean }, signal?: AbortSignal): Promise<{ path: string; created: boolean }>;
  remove(path: string, options: { cwd?: string | undefined; recursive: boolean }, signal?: AbortSignal): Promise<{ removed: boolean }>;
  rename(from: string, to: string, options: { cwd?: string | undefined; overwrite: boolean }, signal?: AbortSignal): Promise<{ path: string }>;
  digest(path: string, options: { cwd?: string | undefined }, signal?: AbortSignal): Promise<FileDigest>;
  stageUpload(path: string, options: { cwd?: string | undefined; overwrite: boolean; mode?: number | undefined }): Promise<UploadStage>;
  /** The stage the previous image of the daemon handed over (a takeover), on the descriptors the exec kept. Absent where stages cannot be. */
  adoptUpload?(record: UploadStageRecord): UploadStage;
  pack(path: string, options: { cwd?: string | undefined }, signal?: AbortSignal): Promise<PackedArchive>;
  unpack(path: string, options: { cwd?: string | undefined }, body: Readable, signal?: AbortSignal): Promise<Unpacked>;
}

/** A stage as it was made: where, and which directory it is. */
export interface StageIdentity {
  /** The real path of the directory the stage is in (the target's). */
  readonly directory: string;
  /** The stage's name in it. */
  readonly name: string;
  readonly dev: string;
  readonly ino: string;
}

/** An open regular file to stream from, and what it was when opened. */
export interface OpenContent {
  readonly info: { readonly size: number; readonly version: string };
  /** Its bytes from `start` up to and including `end` (to its end without one); destroy it to stop early. */
  stream(start: number, end?: number): Readable;
  close(): Promise<void>;
}

/** One owner's view of the world's files: the filesystem seam, plus what the daemon streams and resolves with. */
export interface OwnerFiles extends FsProvider {
  /** The real path this view is confined to, if it is. */
  readonly root: string | undefined;
  /** Opens a regular file to stream its bytes from any offset. */
  openContent(target: FsTarget, signal?: AbortSignal): Promise<OpenContent>;
  /** The file's text, as {@link FsProvider.readText} reads it, and FS_TOO_LARGE past `maxBytes` when given (as opened or as read). */
  readText(target: FsTarget, signal?: AbortSignal, maxBytes?: number): Promise<string>;
  /**
   * Writes `bytes`, UTF-8 text the caller has checked, as {@link FsProvider.writeText}
   * writes the same text: as they are, with the same version checks and the
   * same `before`. No `after`: the caller has the text it sent.
   */
  writeBytes(target: FsTarget, bytes: Uint8Array, expected?: FsWriteIntent, signal?: AbortSignal): Promise<Omit<FsWriteOutcome, 'after'>>;
  /** What `target` is now and, when it is a text file of at most `textMaxBytes`, its text, both of one open file. */
  look(target: FsTarget, textMaxBytes: number | undefined, signal?: AbortSignal): Promise<{ info: FsInfo | undefined; text: string | null }>;
}

/** The world's files, as the daemon hands them to its owners. */
export interface FileProvider {
  /** The view of an owner confined to `root` (all of the world without one), whose calls the kernel checks as `runAs`'s when given. */
  view(options: { readonly root?: string | undefined; readonly runAs?: RunAs | undefined }): OwnerFiles;
  /** The transfer calls (beyond the seam) of such an owner. */
  transfer(options: { readonly root?: string | undefined; readonly runAs?: RunAs | undefined }): OwnerTransfer;
  /** Ends whatever serves the views (worker processes); later calls fail. */
  close?(): Promise<void>;
}

/** Spots terminal queries in output: the provider's terminals and the daemon's screens share it. */
export { QueryScanner } from './query-scanner.ts';
/** The one way the daemon reaches a port in the world (forwards, previews): as the owner's OS user. */
export { portConnector, PortConnectError, type PortConnect } from './port-connect.ts';
/** Whether a file carries an access control list beyond its mode (the token file's check, server/secret-file.ts). */
export { hasAccessAcl } from './posix/libc.ts';
