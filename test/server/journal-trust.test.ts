/**
 * The session journal is trusted only as far as the daemon alone could have
 * written it: records forged as an attacker would (in a directory or file
 * another user owns or may write, naming another uid's process or a cgroup
 * that is not a dead daemon's beside ours, or a path that is no cgroup at all)
 * end nothing, and the start goes on.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cgroupEmpty, locateOwnCgroup } from '../../service/src/provider/containment/cgroup-fs.ts';
import { journalDirectoryProblem, recoverSessions } from '../../service/src/provider/containment/journal.ts';
import type { ProcessIdentity } from '../../service/src/provider/inspect/inspector.ts';
import { LinuxInspector } from '../../service/src/provider/inspect/linux.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { bystanders, treePids } from '../helpers/proc.ts';
import { isCi } from '../helpers/tools.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const inspector = new LinuxInspector();
const identity = (pid: number): ProcessIdentity => inspector.identity(pid)!;
const test = daemonProcessTest();
const users = osUsers(afterAll);
const sleepers = bystanders(afterEach);

/** The real uid of `pid`, undefined once it is gone. */
function realUid(pid: number): number | undefined {
  try {
    return Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1]);
  } catch (_error) {
    return undefined;
  }
}

/** The command name of `pid`, undefined once it is gone. */
function commOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
  } catch (_error) {
    return undefined;
  }
}

/** A daemon that runs no more: the pid of a process that exited, with a start time no process has. */
function deadDaemon(): ProcessIdentity {
  return { pid: spawnSync('true').pid, started: '1' };
}

/** A journal directory as the daemon makes it: root's, 0700. */
function journalDirectory(): string {
  const directory = join(mkdtempSync(join(tmpdir(), 'execworld-forged-')), 'sessions');
  mkdirSync(directory, { mode: 0o700 });
  return directory;
}

/** Writes a record of `daemon` into `directory` as an attacker would, with the file's owner and mode given. */
function forge(
  directory: string,
  daemon: ProcessIdentity,
  content: { cgroup?: string; sessions?: Record<string, ProcessIdentity[]> },
  file: { uid?: number; mode?: number } = {},
): string {
  const path = join(directory, `${daemon.pid}-${daemon.started}.json`);
  writeFileSync(path, JSON.stringify({ daemon, sessions: {}, ...content }), { mode: 0o600 });
  if (file.uid !== undefined) chownSync(path, file.uid, file.uid);
  if (file.mode !== undefined) chmodSync(path, file.mode);
  return path;
}

describe.skipIf(!canMakeUsers && !isCi())('a forged session journal', () => {
  it('is refused when the directory or the file is not the daemon’s or others may write it: nothing it names is killed', async () => {
    const other = users.make();
    const cases: { name: string; directory: string; victim: number; refusedPath: string }[] = [];
    // A file another uid owns, in the daemon's directory.
    {
      const directory = journalDirectory();
      const victim = sleepers.start();
      const path = forge(directory, deadDaemon(), { sessions: { 's-1': [identity(victim)] } }, { uid: other.uid });
      cases.push({ name: 'a file of another uid', directory, victim, refusedPath: path });
    }
    // The daemon's own file, writable by others.
    {
      const directory = journalDirectory();
      const victim = sleepers.start();
      const path = forge(directory, deadDaemon(), { sessions: { 's-1': [identity(victim)] } }, { mode: 0o646 });
      cases.push({ name: 'a file others may write', directory, victim, refusedPath: path });
    }
    // A directory others may write: whatever is in it may have been put there by anyone.
    {
      const directory = journalDirectory();
      chmodSync(directory, 0o733);
      const victim = sleepers.start();
      forge(directory, deadDaemon(), { sessions: { 's-1': [identity(victim)] } });
      cases.push({ name: 'a directory others may write', directory, victim, refusedPath: directory });
    }
    // A directory of another uid.
    {
      const directory = journalDirectory();
      chownSync(directory, other.uid, other.gid);
      const victim = sleepers.start();
      forge(directory, deadDaemon(), { sessions: { 's-1': [identity(victim)] } });
      cases.push({ name: 'a directory of another uid', directory, victim, refusedPath: directory });
    }
    for (const { name, directory, victim, refusedPath } of cases) {
      const before = readdirSync(directory).sort();
      const report = await recoverSessions(directory, { inspector });
      expect(report.killed, name).toEqual([]);
      expect(report.journals, name).toEqual([]);
      expect(
        report.refused.map((refusal) => refusal.path),
        name,
      ).toEqual([refusedPath]);
      expect(pidAlive(victim), name).toBe(true);
      // Refused, and left as it was for the operator to look at.
      expect(readdirSync(directory).sort(), name).toEqual(before);
    }
  });

  it('is kept only where the daemon alone may write: a directory others may write or another uid owns is not used', () => {
    const fresh = join(mkdtempSync(join(tmpdir(), 'execworld-state-')), 'sessions');
    expect(journalDirectoryProblem(fresh)).toBeUndefined();
    expect(statSync(fresh).mode & 0o777).toBe(0o700);
    const open = journalDirectory();
    chmodSync(open, 0o777);
    expect(journalDirectoryProblem(open)).toMatch(/group or others may write it \(mode 0777\)/);
    const theirs = journalDirectory();
    const other = users.make();
    chownSync(theirs, other.uid, other.gid);
    expect(journalDirectoryProblem(theirs)).toMatch(new RegExp(`belongs to uid ${other.uid}`));
  });

  it('SIGKILLs only processes of a uid a session could have run as', async () => {
    const mapped = users.make();
    const stranger = users.make();
    // A daemon of root whose owners run as root or as `mapped`: a process of `stranger` was never a session's.
    const directory = journalDirectory();
    const [ofRoot, ofMapped, ofStranger] = [sleepers.start(), sleepers.start(mapped), sleepers.start(stranger)];
    await waitFor('the sleeps to run as their users', () => [ofMapped, ofStranger].every((pid) => inspector.identity(pid) !== undefined));
    forge(directory, deadDaemon(), { sessions: { 's-1': [identity(ofStranger)], 's-2': [identity(ofRoot), identity(ofMapped)] } });
    const report = await recoverSessions(directory, { inspector, uids: [0, mapped.uid] });
    expect(report.killed.sort()).toEqual([ofRoot, ofMapped].sort());
    expect(pidAlive(ofStranger)).toBe(true);

    // A daemon that ran as `mapped` (so no session of it ran as root) recorded a process of root, and one of root that
    // started a process of `mapped` (as a login does): neither they nor what they started are ended.
    const second = journalDirectory();
    const [rootProcess, mappedProcess] = [sleepers.start(), sleepers.start(mapped)];
    const login = spawn('/bin/sh', ['-c', `setpriv --reuid=${mapped.uid} --regid=${mapped.gid} --clear-groups sleep 300 & wait`], {
      stdio: 'ignore',
      detached: true,
    });
    sleepers.track(login.pid!);
    let loginChild: number | undefined;
    await waitFor('the login to start its sleep as the user', () => {
      loginChild = treePids(login.pid!).find((pid) => pid !== login.pid && realUid(pid) === mapped.uid && commOf(pid) === 'sleep');
      return loginChild !== undefined && inspector.identity(mappedProcess) !== undefined;
    });
    sleepers.track(loginChild!);
    forge(second, deadDaemon(), { sessions: { 's-1': [identity(rootProcess), identity(mappedProcess)], 's-2': [identity(login.pid!)] } });
    const secondReport = await recoverSessions(second, { inspector, uids: [mapped.uid] });
    expect(secondReport.killed).toEqual([mappedProcess]);
    expect(pidAlive(rootProcess)).toBe(true);
    expect(pidAlive(login.pid!)).toBe(true);
    expect(pidAlive(loginChild!)).toBe(true);
  });

  it('never writes cgroup.kill or removes directories outside a dead daemon’s cgroup beside ours', async () => {
    // A plain directory named as a cgroup: a recovery that trusted it would write cgroup.kill into it and remove the
    // empty directories below it; a file, which would fail the start with ENOTDIR.
    const directory = journalDirectory();
    const place = mkdtempSync(join(tmpdir(), 'execworld-not-a-cgroup-'));
    mkdirSync(join(place, 'empty'));
    const file = join(place, 'file');
    writeFileSync(file, 'x');
    const journals = [forge(directory, deadDaemon(), { cgroup: place }), forge(directory, deadDaemon(), { cgroup: file })].sort();
    const report = await recoverSessions(directory, { inspector });
    expect(report.cgroups).toEqual([]);
    expect(existsSync(join(place, 'cgroup.kill'))).toBe(false);
    expect(existsSync(join(place, 'empty'))).toBe(true);
    // Each record's cgroup is refused, with a warning; what else it held was acted on, and it is gone.
    expect(report.refused.map((refusal) => refusal.path).sort()).toEqual(journals);
    expect(report.journals.sort()).toEqual(journals);
  });
});

/** The cgroup v2 directory of this process, where one can be written. */
function ownCgroup(): string | undefined {
  try {
    const origin = locateOwnCgroup();
    const probe = join(origin, `execworld-probe-${process.pid}`);
    mkdirSync(probe);
    rmdirSync(probe);
    return origin;
  } catch (_error) {
    return undefined;
  }
}
const origin = ownCgroup();

describe.skipIf(origin === undefined)('a forged cgroup in the session journal', () => {
  const made: string[] = [];
  afterEach(async () => {
    // Deepest first: each is emptied, then removed.
    for (const path of made.splice(0).reverse()) {
      if (!existsSync(path)) continue;
      writeFileSync(join(path, 'cgroup.kill'), '1');
      await waitFor(`${path} to empty`, () => cgroupEmpty(path));
      rmdirSync(path);
    }
  });

  /** A cgroup at `path` with a sleep in it. */
  function cgroupWithSleep(path: string): number {
    mkdirSync(path);
    made.push(path);
    const pid = sleepers.start();
    writeFileSync(join(path, 'cgroup.procs'), String(pid));
    return pid;
  }

  it('kills only the cgroup named after the dead daemon, directly under the cgroup we live in', async () => {
    const directory = journalDirectory();
    const base = origin!;
    const stamp = `${process.pid}-${Date.now()}`;
    const daemons = [deadDaemon(), deadDaemon(), deadDaemon(), deadDaemon()];
    // Not a daemon's name; a daemon's name, but another daemon's; one level too deep; and the real thing.
    const notNamed = join(base, `bystander-${stamp}`);
    const othersName = join(base, `execworld-${daemons[3]!.pid}`);
    const nested = join(base, `nest-${stamp}`);
    const deep = join(nested, `execworld-${daemons[2]!.pid}`);
    const real = join(base, `execworld-${daemons[3]!.pid}`);
    const inBystander = cgroupWithSleep(notNamed);
    mkdirSync(nested);
    made.push(nested);
    const inDeep = cgroupWithSleep(deep);
    const inReal = cgroupWithSleep(real);
    const forged = [
      forge(directory, daemons[0]!, { cgroup: notNamed }),
      forge(directory, daemons[1]!, { cgroup: othersName }),
      forge(directory, daemons[2]!, { cgroup: deep }),
    ];
    const realJournal = forge(directory, daemons[3]!, { cgroup: real });

    const report = await recoverSessions(directory, { inspector, cgroupParent: base });
    expect(report.cgroups).toEqual([real]);
    expect(report.journals.sort()).toEqual([...forged, realJournal].sort());
    expect(report.refused.map((refusal) => refusal.path).sort()).toEqual(forged.sort());
    expect(existsSync(real)).toBe(false);
    await waitFor('the real cgroup’s sleep to end', () => !pidAlive(inReal));
    expect(pidAlive(inBystander)).toBe(true);
    expect(pidAlive(inDeep)).toBe(true);
    expect(existsSync(notNamed)).toBe(true);
    expect(existsSync(deep)).toBe(true);
  });
});

describe.skipIf(!canMakeUsers && !isCi())('a daemon that starts on a forged journal', () => {
  test('ends only what a session of its owners could have been, and starts', async ({ spawnDaemon }) => {
    const mapped = users.make();
    const stranger = users.make();
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-forged-state-'));
    const directory = join(stateDir, 'sessions');
    mkdirSync(directory, { mode: 0o700 });
    const tokenFile = join(stateDir, 'tokens');
    writeFileSync(tokenFile, `alice alice-token-0123456789abcdef ${mapped.name}\n`, { mode: 0o600 });
    const [ofMapped, ofStranger] = [sleepers.start(mapped), sleepers.start(stranger)];
    await waitFor('the sleeps to run as their users', () => [ofMapped, ofStranger].every((pid) => inspector.identity(pid) !== undefined));
    const place = mkdtempSync(join(tmpdir(), 'execworld-not-a-cgroup-'));
    forge(directory, deadDaemon(), { cgroup: place, sessions: { 's-1': [identity(ofMapped), identity(ofStranger)] } });

    const daemon = await spawnDaemon(['--state-dir', stateDir, '--token-file', tokenFile]);
    await waitFor('the process of the mapped user to end', () => !pidAlive(ofMapped));
    const ended = daemon
      .log()
      .split('\n')
      .filter((line) => line.includes('ended the sessions of daemons that died'))
      .map((line) => JSON.parse(line) as { killed: number[]; cgroups: string[] });
    expect(ended).toHaveLength(1);
    expect(ended[0]!.killed).toEqual([ofMapped]);
    expect(pidAlive(ofStranger)).toBe(true);
    expect(existsSync(join(place, 'cgroup.kill'))).toBe(false);
  });
});
