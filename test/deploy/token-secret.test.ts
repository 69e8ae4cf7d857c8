/**
 * The token file as Kubernetes mounts it from a Secret with `defaultMode:
 * 0440` and `fsGroup`: `<mount>/token` a link to `..data/token`, `..data` a
 * link to a timestamped directory, the file root's with the pod's group and
 * mode 0440, the mount a sticky tmpfs root. The real daemon, started as a
 * fresh user whose group is the file's (as uid 1000 with fsGroup 1000 is in
 * the pod), serves with that token; every layout another user could write,
 * swap or read is refused in one line naming the fault; and after the Secret
 * rotates (`..data` swapped to a new directory) the files API still refuses
 * the token, at its new real path and through the mount.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, lchownSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { daemonArgv } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { requiredTool } from '../helpers/tools.ts';

const test = daemonProcessTest();
const users = osUsers(afterAll);
const TOKEN = 'k8s-mounted-token-3f9a1c07b2e845d6';
const ROTATED = 'k8s-rotated-token-8c41d2e9a07f5b36';
let stamps = 0;

/**
 * A Secret volume as the kubelet's atomic writer leaves it, for the pod
 * group `group`: the mount directory root's and the group's, mode 3777 (the
 * tmpfs root, sticky, with fsGroup's setgid); `..<timestamp>` root's and the
 * group's, 2755; the token in it 0440; then the two links. `rotate` writes a
 * new timestamped directory, swaps `..data` to it by rename, and removes the
 * old one, as a Secret update does. With `folder` the token is the item
 * `<folder>/token` of the volume (a Secret's `items: [{key, path:
 * <folder>/token}]`): the writer puts it in a directory of that name in the
 * timestamped one, and links only the top entry, `<mount>/<folder>` to
 * `..data/<folder>`.
 */
function secretVolume(group: number, token: string, folder?: string): { mount: string; file: string; current(): string; rotate(next: string): void } {
  const base = mkdtempSync(join(tmpdir(), 'execworld-k8s-'));
  chmodSync(base, 0o755);
  const mount = join(base, 'execworld');
  mkdirSync(mount);
  chownSync(mount, 0, group);
  chmodSync(mount, 0o3777);
  const write = (content: string): string => {
    stamps += 1;
    const name = `..2026_12_05_23_10_0${stamps}.${1_000_000_000 + stamps}`;
    const directory = join(mount, name);
    mkdirSync(directory);
    chownSync(directory, 0, group);
    chmodSync(directory, 0o2755);
    const holder = folder === undefined ? directory : join(directory, folder);
    if (folder !== undefined) {
      mkdirSync(holder);
      chownSync(holder, 0, group);
      chmodSync(holder, 0o2755);
    }
    writeFileSync(join(holder, 'token'), `${content}\n`);
    chownSync(join(holder, 'token'), 0, group);
    chmodSync(join(holder, 'token'), 0o440);
    return name;
  };
  const item = folder === undefined ? 'token' : join(folder, 'token');
  let current = write(token);
  symlinkSync(current, join(mount, '..data'));
  if (folder === undefined) symlinkSync('..data/token', join(mount, 'token'));
  else symlinkSync(join('..data', folder), join(mount, folder));
  return {
    mount,
    file: join(mount, item),
    current: () => join(mount, current, item),
    rotate(next) {
      const previous = current;
      current = write(next);
      symlinkSync(current, join(mount, '..data_tmp'));
      renameSync(join(mount, '..data_tmp'), join(mount, '..data'));
      rmSync(join(mount, previous), { recursive: true });
    },
  };
}

/** `execworld serve` with the token file `file`, as `uid` and group `gid` with no other group: its exit status and what it wrote to stderr. */
async function refusal(file: string, uid: number, gid: number): Promise<{ status: number | null; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), 'execworld-home-'));
  chownSync(home, uid, gid);
  const child = spawn(
    'setpriv',
    [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', process.execPath, ...daemonArgv(['serve', '--port', '0', '--token-file', file])],
    { env: { ...process.env, XDG_CONFIG_HOME: home, XDG_STATE_HOME: home }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const status = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { status, stderr };
}

describe.runIf(canMakeUsers)('the token file of a Kubernetes Secret volume', () => {
  test('is taken by a daemon running as a user whose group is the file’s, and stays out of the files API after a rotation', async ({ spawnDaemon }) => {
    const user = users.make();
    const volume = secretVolume(user.gid, TOKEN);
    const firstReal = volume.current();
    const daemon = await spawnDaemon(['--token-file', volume.file], [], { uid: user.uid, gid: user.gid });
    expect(daemon.token).toBe(TOKEN);
    const call = async (token: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
      const response = await fetch(`${daemon.url}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: await response.json() };
    };
    expect(await call(TOKEN, '/v1/identity')).toMatchObject({ status: 200, body: { owner: 'default' } });
    const refusedEverywhere = async (paths: string[]): Promise<void> => {
      for (const path of paths) {
        const answer = await call(TOKEN, '/v1/fs/read-text', { path });
        expect({ path, status: answer.status, code: answer.body.error?.code }).toEqual({ path, status: 403, code: 'FS_PERMISSION_DENIED' });
      }
    };
    // The daemon's user may read the file (its group may): only the daemon's own rule keeps it from owners.
    await refusedEverywhere([volume.file, firstReal, join(volume.mount, '..data', 'token')]);
    const listing = await call(TOKEN, '/v1/fs/list', { path: volume.mount });
    expect(listing.status).toBe(403);

    volume.rotate(ROTATED);
    const rotatedReal = volume.current();
    expect(rotatedReal).not.toBe(firstReal);
    await refusedEverywhere([volume.file, rotatedReal, join(volume.mount, '..data', 'token')]);
    // The tokens were read once, at start: the rotated one is not taken until the daemon restarts.
    expect((await call(TOKEN, '/v1/identity')).status).toBe(200);
    expect((await call(ROTATED, '/v1/identity')).status).toBe(401);
  });

  test('stays out of the files API after a rotation when it is an item in a folder of the volume (items: path: execworld/token)', async ({ spawnDaemon }) => {
    const user = users.make();
    const volume = secretVolume(user.gid, TOKEN, 'execworld');
    const daemon = await spawnDaemon(['--token-file', volume.file], [], { uid: user.uid, gid: user.gid });
    expect(daemon.token).toBe(TOKEN);
    const read = async (path: string): Promise<{ path: string; status: number; code: unknown }> => {
      const response = await fetch(`${daemon.url}/v1/fs/read-text`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ path }),
      });
      const body = (await response.json()) as { error?: { code?: string } };
      return { path, status: response.status, code: body.error?.code };
    };
    const refused = (path: string) => ({ path, status: 403, code: 'FS_PERMISSION_DENIED' });
    const paths = (): string[] => [volume.file, volume.current(), join(volume.mount, '..data', 'execworld', 'token')];
    for (const path of paths()) expect(await read(path)).toEqual(refused(path));
    volume.rotate(ROTATED);
    // The rotated copy lies in a new timestamped directory, reached through ..data or by its real path: neither is served.
    for (const path of paths()) expect(await read(path)).toEqual(refused(path));
  });

  test('is taken when its group is one of the daemon’s supplementary groups (fsGroup apart from runAsGroup)', async ({ spawnDaemon }) => {
    const user = users.make();
    const pod = users.make();
    const volume = secretVolume(pod.gid, TOKEN);
    const daemon = await spawnDaemon(['--token-file', volume.file], [], { uid: user.uid, gid: user.gid, groups: [pod.gid] });
    const response = await fetch(`${daemon.url}/v1/identity`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(response.status).toBe(200);
  });

  // A start refused for each case, nine in all: a few seconds each on a busy machine.
  test('is refused, in one line naming the fault, where another user could read, write or swap it', async () => {
    const setfacl = requiredTool('setfacl', { installedBy: ".ci/run (Debian's acl)" }).require();
    const user = users.make();
    const other = users.make();
    const cases: Array<{ what: string; spoil: (volume: ReturnType<typeof secretVolume>) => void; fault: RegExp }> = [
      { what: 'world-readable', spoil: (volume) => chmodSync(volume.current(), 0o444), fault: /\/token is readable by other users \(mode 0444\)/ },
      { what: 'world-writable', spoil: (volume) => chmodSync(volume.current(), 0o442), fault: /\/token may be written by other users \(mode 0442\)/ },
      { what: 'group-writable', spoil: (volume) => chmodSync(volume.current(), 0o460), fault: /\/token may be written by its group \d+ \(mode 0460\)/ },
      {
        what: 'owned by another user',
        spoil: (volume) => chownSync(volume.current(), other.uid, user.gid),
        fault: new RegExp(`/token belongs to uid ${other.uid}, neither root nor the daemon's uid ${user.uid}`),
      },
      {
        what: "a group that is not the daemon's",
        spoil: (volume) => chownSync(volume.current(), 0, other.gid),
        fault: new RegExp(`/token is readable by its group ${other.gid} \\(mode 0440\\), which is none of the daemon's groups \\(${user.gid}\\)`),
      },
      {
        // The group bits show the list's mask (0640 here), which alone would pass for a group of the daemon's.
        what: 'an access control list that lets another user read it',
        spoil: (volume) => {
          chownSync(volume.current(), 0, user.gid);
          execFileSync(setfacl, ['-m', `u:${other.uid}:r`, volume.current()]);
        },
        fault: /\/token has an access control list \(getfacl shows it\), which may let other users read it; remove it with setfacl -b/,
      },
      {
        what: 'a directory on the path owned by another user',
        spoil: (volume) => {
          // The mount not sticky but closed (else the sticky rule names the entry first): the other user owns a directory in it.
          chmodSync(volume.mount, 0o2755);
          chownSync(join(volume.current(), '..'), other.uid, user.gid);
        },
        fault: new RegExp(`the directory \\S+/\\.\\.2026_\\S+ belongs to uid ${other.uid}, neither root nor the daemon's uid ${user.uid}`),
      },
      {
        what: 'a directory on the path others may write, not sticky',
        spoil: (volume) => chmodSync(volume.mount, 0o2777),
        fault: /the directory \S+\/execworld may be written by its group or other users \(mode 2777\)/,
      },
      {
        // No group write in the mode it had: the list's mask, which the group bits then show, holds the named user's write.
        what: 'a directory on the path that an access control list lets another user write',
        spoil: (volume) => execFileSync(setfacl, ['-m', `u:${other.uid}:rwx`, join(volume.current(), '..')]),
        fault:
          /the directory \S+\/\.\.2026_\S+ may be written by its group or other users \(mode 2775\) \(its access control list, which getfacl shows, names who\)/,
      },
      {
        what: 'a link in the sticky mount owned by another user',
        spoil: (volume) => lchownSync(join(volume.mount, '..data'), other.uid, other.gid),
        fault: new RegExp(`/execworld/\\.\\.data belongs to uid ${other.uid}, who may rename or remove it`),
      },
    ];
    for (const { what, spoil, fault } of cases) {
      const volume = secretVolume(user.gid, TOKEN);
      spoil(volume);
      const { status, stderr } = await refusal(volume.file, user.uid, user.gid);
      // The fault in one line (a setting's refusal, then the pointer to serve --help), and no start.
      const [line, ...rest] = stderr.trim().split('\n');
      expect({ what, status, rest }).toEqual({ what, status: 2, rest: ["Run 'execworld serve --help' for the usage."] });
      expect(line, what).toMatch(new RegExp(`^execworld: token file ${volume.file.replaceAll('.', '\\.')}: `));
      expect(line, what).toMatch(fault);
    }
  }, 180_000);
});
