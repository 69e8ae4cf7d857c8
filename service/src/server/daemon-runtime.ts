/**
 * The daemon's composition root: the one place in `server/` that knows the
 * concrete provider. It builds the `LocalRuntime` the daemon runs its sessions
 * on, with the containment, the session journal and the spill directory its
 * configuration asks for; everything else in `server/` sees only the provider
 * interface (`provider/api.ts`).
 * @module
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { FastifyBaseLogger as Logger } from 'fastify';
import type { ExecutionProvider, FileProvider } from '../provider/api.ts';
import { HostFiles, type HostFilesOptions } from '../provider/fs/host-files.ts';
import { StageRecords } from '../provider/fs/stage-records.ts';
import { UserWorkers } from '../provider/fs/worker-files.ts';
import { portConnector, type PortConnect } from '../provider/port-connect.ts';
import { sweepStaleSpillDirectories } from '../provider/collector.ts';
import { journalDirectoryProblem, recoverSessions, recoveryScope, SessionJournal, type SessionRecorder } from '../provider/containment/journal.ts';
import { adoptPreviousImageCgroups } from '../provider/containment/cgroup.ts';
import { reapPreviousImageHelpers } from '../provider/posix/children.ts';
import { startSessionWatcher, type SessionWatcher } from '../provider/containment/session-watcher.ts';
import { LocalRuntime } from '../provider/local-runtime.ts';
import { hostPlatform } from '../provider/platform/index.ts';
import { lookupAccount } from '../provider/run-as.ts';
import { allowedEnvironment } from './child-env.ts';
import type { HostAccounts } from './sessions/registry.ts';
import { defaultStateDir, defaultTokenFile, type Config } from './config.ts';
import { signingKeyPath } from './minted.ts';

/**
 * This host's users, for the creates that name one: the passwd database
 * (where the token file's users are looked up too), and the daemon's uid.
 */
export function hostAccounts(): HostAccounts {
  const uid = process.getuid?.();
  return { uid, lookup: (nameOrUid) => (uid === undefined ? undefined : lookupAccount(nameOrUid)) };
}

/** The provider of a daemon, what must run before its first session, and what ends with it. */
export interface DaemonRuntime {
  readonly runtime: ExecutionProvider;
  readonly files: FileProvider;
  /** Its connections to ports in the world, a mapped owner's made by the same worker as its files. */
  readonly connect: PortConnect;
  /** Ends what daemons that died left; runs before the first session starts. */
  recover(): Promise<void>;
  /** Called once every session ended. */
  close(): void;
  /** Before a takeover's exec: the session watcher is told to exit (the next image starts its own); the journal stays. */
  handOver(): void;
  /** After a takeover that did not happen. */
  resumeAfterHandOver(): void;
  /**
   * In the image that took over, once it adopted the uploads whose stages are
   * `adopted` (by name): removes the stages its previous image left that no
   * one adopted, listed at the call.
   */
  sweepUnadoptedStages(adopted: ReadonlySet<string>): Promise<void>;
}

/**
 * The daemon's spill directory, made if missing. The spill files of daemons
 * that died without cleaning up (crashed, SIGKILLed) are removed by
 * {@link sweepSpill}, once their sessions were ended.
 */
function spillDirectory(config: Config): string {
  const directory = join(config.stateDir ?? defaultStateDir(), 'spill');
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  // Traversable, not listable: an owner run as another user reaches its own spill
  // files by name, in a directory of the daemon's (0711); every other directory in it stays 0700.
  chmodSync(directory, 0o711);
  return directory;
}

/** Removes the spill directories of dead daemons, following no link. */
async function sweepSpill(directory: string, log: Logger): Promise<void> {
  const removed = await sweepStaleSpillDirectories(directory, processExists);
  if (removed.length > 0) log.info({ removed }, 'removed spill files a previous daemon left');
}

/**
 * The daemon's runtime: its sessions contained as well as this host allows,
 * and recorded in the state directory, so that the next
 * daemon ends them if this one dies without doing so. `recover` ends what
 * daemons that died left, and must run before the first session starts.
 * `sessionUids` are the uids of the users the token file maps owners to.
 */
export function daemonRuntime(config: Config, log: Logger, ownsHostProcess: boolean, sessionUids: readonly number[] = []): DaemonRuntime {
  const stateDir = config.stateDir ?? defaultStateDir();
  const selection = hostPlatform.selectContainment(config.containment, { subreaperFallback: true, claimOrphans: ownsHostProcess });
  const containment = selection.containment;
  /** Where the sessions' cgroups are kept, when they are: what the journal records. */
  const cgroup = containment.recovery?.cgroup;
  const journalDirectory = join(stateDir, 'sessions');
  const self = hostPlatform.recoveryIdentity(process.pid);
  // Made only after the recovery: a dead daemon's record must be read before anything is written.
  let journal: SessionJournal | undefined;
  let watcher: SessionWatcher | undefined;
  let startWatcher: (() => void) | undefined;
  const recorder: SessionRecorder = {
    setCgroup: (directory) => journal?.setCgroup(directory),
    record: (key, members) => journal?.record(key, members),
  };
  // One worker per OS user owners run as, serving their files, the checks their spawns make as them, and their connections to ports.
  const users = new UserWorkers(hostFilesOptions(config), (pid) => containment.helperStarted?.(pid));
  const spill = spillDirectory(config);
  const stages = new StageRecords(join(stateDir, 'stages'));
  const runtime = new LocalRuntime({
    users,
    // A lookup of the daemon's says nothing of its own working directory.
    lookupCwd: '/',
    // Read once: children start from the allowlisted part of the daemon's environment as it started.
    ambientEnv: allowedEnvironment(process.env, config.passEnv),
    inputBacklogBytes: config.inputBacklogBytes,
    spillParent: spill,
    containment,
    journal: recorder,
    // Each owner's sessions together (the registry names the owner's group at each create).
    ...(config.maxOwnerPids === undefined ? {} : { groupPids: config.maxOwnerPids }),
  });
  const endLeftSessions = async (): Promise<void> => {
    if (containment.mode === 'job') {
      // A job ends with the daemon that holds it (kill-on-close): nothing of a dead daemon is left to recover.
      log.info({ containment: containment.mode }, 'sessions are contained: job');
      return;
    }
    if (self === undefined) {
      log.info(
        { containment: containment.mode, reason: selection.cgroupUnavailable },
        'sessions are not contained: no cgroup and no subreaper on this platform',
      );
      return;
    }
    const scope = recoveryScope(containment, sessionUids);
    const report = await recoverSessions(journalDirectory, { self, ...scope });
    for (const refusal of report.refused) log.warn(refusal, 'a session record was not acted on');
    const swept = (await containment.recovery?.sweepStale?.()) ?? [];
    if (report.journals.length > 0 || swept.length > 0)
      log.warn(
        { journals: report.journals, cgroups: [...report.cgroups, ...swept], killed: report.killed },
        'ended the sessions of daemons that died without ending them',
      );
    const untrusted = journalDirectoryProblem(journalDirectory);
    if (untrusted !== undefined) {
      log.warn({ directory: journalDirectory, reason: untrusted }, 'sessions are not recorded for a later start: the journal directory may not be trusted');
    } else {
      journal = new SessionJournal(journalDirectory, self);
      if (cgroup !== undefined) journal.setCgroup(cgroup);
      // Ends the sessions moments after this daemon dies, by any means; the next start stays the backstop.
      startWatcher = () => {
        watcher = startSessionWatcher(journalDirectory, self, scope, containment, (why) =>
          log.warn({ why }, 'no session watcher: only a later start will end what this daemon leaves if it dies'),
        );
      };
      startWatcher();
    }
    log.info(
      {
        containment: containment.mode,
        ...(cgroup === undefined ? {} : { cgroup }),
        ...(watcher === undefined ? {} : { watcher: watcher.pid }),
        ...(selection.cgroupUnavailable === undefined ? {} : { cgroupUnavailable: selection.cgroupUnavailable }),
      },
      `sessions are contained: ${containment.mode}`,
    );
  };
  const recover = async (): Promise<void> => {
    await endLeftSessions();
    // Only now: a dead daemon's programs no longer run to change what the sweeps remove.
    await sweepSpill(spill, log);
    const { removed, left } = await stages.sweep(processExists);
    if (removed.length > 0 || left.length > 0) log.info({ removed, left }, 'removed the upload stages a previous daemon left');
  };
  const close = (): void => {
    journal?.close();
    watcher?.close();
  };
  const handOver = (): void => {
    // The journal stays, for the next image, which is this process: its watcher starts another watcher.
    watcher?.close();
    watcher = undefined;
  };
  const resumeAfterHandOver = (): void => {
    if (watcher === undefined) startWatcher?.();
  };
  const sweepUnadoptedStages = async (adopted: ReadonlySet<string>): Promise<void> => {
    const { removed, left } = await stages.sweepUnadopted(adopted);
    if (removed.length > 0 || left.length > 0)
      log.info({ removed, left }, "removed the upload stages the previous image left that this one did not take (a mapped owner's)");
  };
  return {
    runtime,
    files: new HostFiles(hostFilesOptions(config), users, stages),
    sweepUnadoptedStages,
    connect: portConnector(() => users),
    recover,
    close,
    handOver,
    resumeAfterHandOver,
  };
}

/**
 * What the daemon's files (and its users' workers) are bound by, and the
 * daemon's own files, which no owner reaches through them: the token file,
 * the TLS key, and the state directory but for its spill directory (owners
 * read their spill files).
 */
function hostFilesOptions(config: Config): HostFilesOptions {
  const stateDir = config.stateDir ?? defaultStateDir();
  return {
    maxTextBytes: config.maxReadTextBytes,
    maxListEntries: config.maxListEntries,
    secrets: {
      // The signing key is in the state directory; named too, so that no other name for it (a hard link) reaches it.
      files: [config.tokenFile ?? defaultTokenFile(), signingKeyPath(stateDir), ...(config.tlsKey === undefined ? [] : [config.tlsKey])].map((path) =>
        resolve(path),
      ),
      directories: [resolve(stateDir)],
      except: [resolve(stateDir, 'spill')],
    },
  };
}

/**
 * Before the runtime of a daemon that took over from its previous image (an
 * exec in place) is made: the cgroup named after its pid holds the sessions it
 * adopts, and is not killed as one an earlier process with that pid left;
 * the previous image's children that are no session's (its watcher, its
 * workers) are collected once they exit. Returns their pids.
 */
export function prepareTakeover(sessionPids: ReadonlySet<number>): number[] {
  adoptPreviousImageCgroups();
  return reapPreviousImageHelpers(sessionPids);
}

/**
 * Connections to ports for a daemon given its provider (no workers of its
 * own): a mapped owner's are made by workers started at the first, which
 * `close` ends.
 */
export function spareConnector(): { readonly connect: PortConnect; close(): Promise<void> } {
  let workers: UserWorkers | undefined;
  return {
    connect: portConnector(() => (workers ??= new UserWorkers())),
    close: async () => {
      await workers?.close();
    },
  };
}

/** The files of this host, with the bounds of the daemon's configuration. */
export function hostFiles(config: Config): FileProvider {
  return new HostFiles(hostFilesOptions(config));
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
