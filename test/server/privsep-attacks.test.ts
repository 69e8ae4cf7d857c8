/**
 * The privilege separation attacked by a local user with no token who
 * controls a directory the daemon works in, alone or with a token holder:
 * links planted or swapped (atomically, with renameat2's RENAME_EXCHANGE, as
 * fast as a C loop goes) under uploads, packs and unpacks, and paths through
 * another mount namespace's /proc/<pid>/root, which any user may make.
 *
 * Actors: `rooty` (a same-uid owner of a root daemon: acts as root) and its
 * read token, `jail` (a same-uid owner confined to a root=) and its read
 * token, `mal` (an owner mapped to an OS user), and `bob`, a local user with
 * no token who controls a directory the daemon works in.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Daemon } from '../../service/src/server/app.ts';
import { TokenTable } from '../../service/src/server/auth.ts';
import { DEFAULT_CONFIG, type Config } from '../../service/src/server/config.ts';
import { canMakeUsers, finished, makeUser, runAs, startFlipper } from '../helpers/os-users.ts';
import { isCi, requiredTool } from '../helpers/tools.ts';

const ROOTY = 'rooty-token-q8Zr3kP1xW7mN2vB';
const READER = 'rooty-reader-T5hJ9cL4sD6fG1aQ';
const JAIL = 'jail-token-Y3uI8oP2eR5tW9zX';
const JAIL_READER = 'jail-reader-K7jH4gF1dS8aL3mN';
const MAL = 'mal-token-B6vC9xZ2nM5qW8eR';
/** Packs and unpacks raced against a swap: the walks by name lost within the first few. */
const ROUNDS = 40;

// Users are made as root; CI runs as root, so there a daemon that is not root fails these instead of skipping them.
describe.skipIf(!canMakeUsers && !isCi())('the privilege separation, attacked by a local user', () => {
  let daemon: Daemon;
  let url = '';
  let bob: ReturnType<typeof makeUser>;
  let mal: ReturnType<typeof makeUser>;
  let stateDir: string;
  let tokenFile: string;
  let jail: string;
  let vault: string;
  const scratch = mkdtempSync(join(tmpdir(), 'ew-attack-'));
  const call = async (token: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any; raw: Buffer }> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const raw = Buffer.from(await response.arrayBuffer());
    let parsed: unknown = raw.toString();
    try {
      parsed = JSON.parse(raw.toString());
    } catch (_error) {
      // Bytes, not JSON.
    }
    return { status: response.status, body: parsed, raw };
  };
  const children: { kill(signal?: NodeJS.Signals): boolean }[] = [];

  beforeAll(async () => {
    requiredTool('cc', { installedBy: "CONTRIBUTING.md's development notes" }).require();
    bob = makeUser();
    mal = makeUser();
    chmodSync(scratch, 0o755);
    tokenFile = join(scratch, 'tokens');
    writeFileSync(
      tokenFile,
      `rooty ${ROOTY}\nrooty ${READER} access=read\njail ${JAIL} root=${scratch}/jail\njail ${JAIL_READER} access=read\nmal ${MAL} ${mal.name}\n`,
      {
        mode: 0o600,
      },
    );
    stateDir = join(scratch, 'state');
    mkdirSync(stateDir, { mode: 0o711 });
    jail = join(scratch, 'jail');
    mkdirSync(jail, { mode: 0o755 });
    // A root-only directory outside the jail, holding a secret.
    vault = join(scratch, 'vault');
    mkdirSync(vault, { mode: 0o700 });
    writeFileSync(join(vault, 'secret'), 'VAULT-SECRET-outside-the-jail\n', { mode: 0o600 });
    const tokens = new TokenTable(
      [
        { owner: 'rooty', token: ROOTY },
        { owner: 'rooty', token: READER, access: 'read' },
        { owner: 'jail', token: JAIL, root: jail },
        { owner: 'jail', token: JAIL_READER, access: 'read' },
        { owner: 'mal', token: MAL, user: mal },
      ],
      tokenFile,
    );
    const config = { ...DEFAULT_CONFIG, host: '127.0.0.1', port: 0, logLevel: 'silent', stateDir, tokenFile } as Config;
    daemon = buildApp({ config, tokens, logger: pino({ level: 'silent' }) });
    url = await daemon.app.listen({ host: '127.0.0.1', port: 0 });
  });

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await daemon?.app.close();
    bob?.remove();
    mal?.remove();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The bytes of GET /v1/files/archive of `path` (empty when the request failed: a pack cut by a change answers a broken response). */
  const archiveOf = async (token: string, path: string): Promise<Buffer> => {
    try {
      const response = await fetch(`${url}/v1/files/archive?path=${encodeURIComponent(path)}`, { headers: { authorization: `Bearer ${token}` } });
      return Buffer.from(await response.arrayBuffer());
    } catch (_error) {
      return Buffer.alloc(0);
    }
  };

  /** A directory of bob's at `path`. */
  const bobsDirectory = (path: string): string => {
    mkdirSync(path, { recursive: true, mode: 0o755 });
    chownSync(path, bob.uid, bob.gid);
    return path;
  };

  describe('an upload of a root-acting owner into a directory another user controls', () => {
    it('replaces a link that user put at the target, taking no setuid bit or owner from what it leads to', async () => {
      const shared = bobsDirectory(join(scratch, 'bob-bin'));
      // What the root-acting owner uploads: any program (here one that says its effective uid).
      const source = join(scratch, 'whoami.c');
      writeFileSync(source, '#include <stdio.h>\n#include <unistd.h>\nint main(void) { printf("euid=%d\\n", (int)geteuid()); return 0; }\n');
      const program = join(scratch, 'whoami');
      execFileSync('cc', ['-o', program, source]);
      const target = join(shared, 'tool');
      const created = await call(ROOTY, 'POST', '/v1/files/uploads', { path: target });
      expect(created.status).toBe(201);
      // Bob, who owns the directory, points the target's name at a setuid-root program.
      await finished(runAs(bob, `ln -s /usr/bin/passwd ${target}`));
      const put = await fetch(`${url}/v1/files/uploads/${created.body.id}?offset=0`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ROOTY}`, 'content-type': 'application/octet-stream' },
        body: readFileSync(program),
      });
      await put.text();
      const completed = await call(ROOTY, 'POST', `/v1/files/uploads/${created.body.id}/complete`, {});
      expect(completed.status).toBe(200);
      // The link was replaced, and nothing taken from what it led to: a new file of the uploader's, 0644.
      const published = lstatSync(target);
      expect(published.isFile()).toBe(true);
      expect(published.mode & 0o7777).toBe(0o644);
      expect(lstatSync('/usr/bin/passwd').isFile()).toBe(true);
    });
  });

  describe('an upload of a mapped owner (its worker, as its user) over a file in a directory another user may write', () => {
    it("takes no setuid bit from another user's file it replaces, so that user cannot run it as the owner's user", async () => {
      // A directory both may write (a shared project directory): bob's, world-writable without the sticky bit.
      const shared = bobsDirectory(join(scratch, 'shared-project'));
      chmodSync(shared, 0o777);
      const target = join(shared, 'tool');
      // Bob leaves a setuid file of his own (or a link to any setuid program) where mal's agent will upload its build.
      await finished(runAs(bob, `printf x > ${target} && chmod 4755 ${target}`));
      const program = join(scratch, 'whoami');
      if (!existsSync(program)) {
        const source = join(scratch, 'whoami.c');
        writeFileSync(source, '#include <stdio.h>\n#include <unistd.h>\nint main(void) { printf("euid=%d\\n", (int)geteuid()); return 0; }\n');
        execFileSync('cc', ['-o', program, source]);
      }
      const created = await call(MAL, 'POST', '/v1/files/uploads', { path: target });
      expect(created.status).toBe(201);
      const put = await fetch(`${url}/v1/files/uploads/${created.body.id}?offset=0`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${MAL}`, 'content-type': 'application/octet-stream' },
        body: readFileSync(program),
      });
      await put.text();
      const completed = await call(MAL, 'POST', `/v1/files/uploads/${created.body.id}/complete`, {});
      expect(completed.status).toBe(200);
      const published = lstatSync(target);
      const ranByBob = await finished(runAs(bob, target));
      expect(published.mode & 0o7000).toBe(0);
      expect(ranByBob.trim()).toBe(`euid=${bob.uid}`);
    });
  });

  describe("the daemon's secrets and a root=, through another mount namespace's /proc/<pid>/root", () => {
    let pid: number;

    beforeAll(async () => {
      // Bob, with no token, makes a mount namespace of his own in which / is bound inside the jail (at a directory of his).
      const mountPoint = bobsDirectory(join(jail, 'bob', 'mnt'));
      chownSync(join(jail, 'bob'), bob.uid, bob.gid);
      const child = runAs(bob, `exec unshare -Urm --propagation private sh -c 'mount --rbind / ${mountPoint} && echo ready && exec sleep 600'`);
      children.push(child);
      await new Promise<void>((resolve, reject) => {
        child.stdout?.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve());
        child.once('exit', (code) => reject(new Error(`unshare exited ${code}`)));
      });
      // unshare runs sh in the new namespaces under its own pid (no --fork), and sh execs sleep under it too.
      pid = child.pid!;
      // A journal record the daemon keeps in its state directory.
      mkdirSync(join(stateDir, 'sessions'), { recursive: true, mode: 0o700 });
      writeFileSync(join(stateDir, 'sessions', 'probe.json'), '{"journal":"STATE-DIR-CONTENT"}', { mode: 0o600 });
    });

    /** `path` as the daemon reaches it through bob's namespace, where / is bound at jail/bob/mnt. */
    const through = (path: string): string => `/proc/${pid}/root${jail}/bob/mnt${path}`;

    it("a read token of a root-acting owner gets nothing of the state directory (the journal) through bob's namespace", async () => {
      const direct = await call(READER, 'GET', `/v1/files/content?path=${encodeURIComponent(join(stateDir, 'sessions', 'probe.json'))}`);
      expect(direct.status).toBe(403);
      // The seam's calls resolve the path to a key (its real path, as the daemon's namespace names it) and open that again: ENOENT.
      const read = await call(READER, 'GET', `/v1/files/content?path=${encodeURIComponent(through(`${stateDir}/sessions/probe.json`))}`);
      expect([403, 404]).toContain(read.status);
      // The transfer calls take the path as given.
      const digest = await call(READER, 'POST', '/v1/fs/digest', { path: through(`${stateDir}/sessions/probe.json`) });
      const tar = await archiveOf(READER, through(`${stateDir}/sessions`));
      expect(digest.status).toBe(403);
      expect(tar.includes(Buffer.from('STATE-DIR-CONTENT'))).toBe(false);
    });

    it('the token file stays refused that way (by its identity)', async () => {
      expect((await call(READER, 'POST', '/v1/fs/digest', { path: through(tokenFile) })).status).toBe(403);
      const tar = await archiveOf(READER, through(scratch));
      expect(tar.includes(Buffer.from(MAL))).toBe(false);
    });

    it('a confined owner (and its read token) reads nothing outside its root through a path that reads back inside it', async () => {
      const plain = await call(JAIL_READER, 'GET', `/v1/files/content?path=${encodeURIComponent(join(vault, 'secret'))}`);
      expect(plain.status).toBe(403);
      for (const token of [JAIL_READER, JAIL]) {
        const tar = await archiveOf(token, through(vault));
        const digest = await call(token, 'POST', '/v1/fs/digest', { path: through(`${vault}/secret`) });
        expect(tar.includes(Buffer.from('VAULT-SECRET'))).toBe(false);
        expect(digest.status).toBe(403);
      }
    });

    it('nor changes anything outside its root that way (unpack, rename, remove, upload), as root', async () => {
      writeFileSync(join(vault, 'precious'), 'root data\n', { mode: 0o600 });
      const source = mkdtempSync(join(scratch, 'jail-src-'));
      writeFileSync(join(source, 'planted'), 'planted by the jailed owner\n');
      const archive = execFileSync('tar', ['-c', '-C', source, 'planted']);
      const unpacked = await fetch(`${url}/v1/files/archive?path=${encodeURIComponent(through(vault))}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${JAIL}`, 'content-type': 'application/x-tar' },
        body: archive,
      });
      await unpacked.text();
      await call(JAIL, 'POST', '/v1/fs/remove', { path: through(`${vault}/precious`) });
      expect(existsSync(join(vault, 'planted'))).toBe(false);
      expect(existsSync(join(vault, 'precious'))).toBe(true);
    });
  });

  describe('a pack (GET /v1/files/archive) of a directory a user controls, by a confined owner', () => {
    it('never leads the walk out of the root through a directory swapped for a link', async () => {
      const bobs = bobsDirectory(join(jail, 'bob-pack'));
      // Bob's directory holds "sub" (with a file named as the vault's), and a link to the vault: the flipper exchanges them.
      await finished(runAs(bob, `mkdir ${bobs}/sub && echo bob > ${bobs}/sub/secret && ln -s ${vault} ${bobs}/link`));
      const flipper = startFlipper(bob, `${bobs}/sub`, `${bobs}/link`, 200);
      children.push(flipper);
      let leaked = 0;
      for (let round = 0; round < ROUNDS && leaked === 0; round += 1) {
        const tar = await archiveOf(JAIL_READER, bobs);
        if (tar.includes(Buffer.from('VAULT-SECRET'))) leaked += 1;
      }
      flipper.kill('SIGKILL');
      expect(leaked).toBe(0);
    });

    it("never packs the state directory's files for a read token of a root-acting owner", async () => {
      const bobs = bobsDirectory(join(scratch, 'bob-pack-state'));
      await finished(runAs(bob, `mkdir ${bobs}/sub && echo bob > ${bobs}/sub/probe.json && ln -s ${stateDir}/sessions ${bobs}/link`));
      const flipper = startFlipper(bob, `${bobs}/sub`, `${bobs}/link`, 200);
      children.push(flipper);
      let leaked = 0;
      for (let round = 0; round < ROUNDS && leaked === 0; round += 1) {
        const tar = await archiveOf(READER, bobs);
        if (tar.includes(Buffer.from('STATE-DIR-CONTENT'))) leaked += 1;
      }
      flipper.kill('SIGKILL');
      expect(leaked).toBe(0);
    });
  });

  describe('an unpack of a confined owner (as root) whose hard-link entry goes through a link it made before', () => {
    it("makes no hard link to a file outside the root, nor to the state directory's files", async () => {
      const into = join(jail, 'hard');
      mkdirSync(into, { mode: 0o755 });
      const put = async (archive: Buffer): Promise<string> => {
        const response = await fetch(`${url}/v1/files/archive?path=${encodeURIComponent(into)}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${JAIL}`, 'content-type': 'application/x-tar' },
          body: archive,
        });
        return `${response.status} ${(await response.text()).slice(0, 300)}`;
      };
      // First archive: links out of the root (links may point anywhere; reading through them is refused).
      const first = mkdtempSync(join(scratch, 'hard-1-'));
      execFileSync('ln', ['-s', vault, join(first, 'out')]);
      execFileSync('ln', ['-s', join(stateDir, 'sessions'), join(first, 'state')]);
      await put(execFileSync('tar', ['-c', '-C', first, 'out', 'state']));
      // Second archive: hard-link entries whose targets go through those links.
      const second = mkdtempSync(join(scratch, 'hard-2-'));
      mkdirSync(join(second, 'out'));
      mkdirSync(join(second, 'state'));
      writeFileSync(join(second, 'out', 'secret'), 'x');
      writeFileSync(join(second, 'state', 'probe.json'), 'x');
      execFileSync('ln', [join(second, 'out', 'secret'), join(second, 'stolen')]);
      execFileSync('ln', [join(second, 'state', 'probe.json'), join(second, 'journal')]);
      // Only the link entries: tar names their targets out/secret and state/probe.json.
      const archive = execFileSync('tar', ['-c', '-C', second, 'out/secret', 'state/probe.json', 'stolen', 'journal']);
      const links = execFileSync('tar', ['--delete', 'out/secret', 'state/probe.json'], { input: archive });
      await put(links);
      const stolen = await call(JAIL_READER, 'GET', `/v1/files/content?path=${encodeURIComponent(join(into, 'stolen'))}`);
      const journal = await call(JAIL_READER, 'GET', `/v1/files/content?path=${encodeURIComponent(join(into, 'journal'))}`);
      expect(stolen.raw.toString()).not.toContain('VAULT-SECRET');
      expect(journal.raw.toString()).not.toContain('STATE-DIR-CONTENT');
    });
  });

  describe("a mapped owner's file worker, which runs as its user", () => {
    /** 127.0.0.1:9229, where Node's debugger listens once SIGUSR1 opens it, is listened on now. */
    const debuggerListens = (): boolean =>
      readFileSync('/proc/net/tcp', 'utf8')
        .split('\n')
        .slice(1)
        .some((line) => {
          const [, local, , state] = line.trim().split(/\s+/);
          return local === '0100007F:240D' && state === '0A';
        });

    it("opens no debugger when the user's programs send it SIGUSR1: code run in it would be trusted by root", async () => {
      expect((await call(MAL, 'POST', '/v1/fs/stat', { path: '/tmp' })).status).toBe(200);
      const worker = readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .map(Number)
        .find((pid) => {
          try {
            const status = readFileSync(`/proc/${pid}/status`, 'utf8');
            return (
              readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('file-worker') &&
              status.includes(`\nUid:\t${mal.uid}\t`) &&
              status.includes(`\nPPid:\t${process.pid}\n`)
            );
          } catch (_error) {
            return false;
          }
        });
      expect(worker).toEqual(expect.any(Number));
      expect(debuggerListens()).toBe(false);
      // The user's own program signals it, as the kernel lets a process of the same uid.
      await finished(runAs(mal, `kill -USR1 ${worker!}`));
      // It serves on, and for as long as a debugger takes to open (milliseconds), none does.
      expect((await call(MAL, 'POST', '/v1/fs/stat', { path: '/tmp' })).status).toBe(200);
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline) {
        expect(debuggerListens()).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(readFileSync(`/proc/${worker!}/cmdline`, 'utf8')).toContain('file-worker');
    });
  });

  describe("a mapped owner's programs", () => {
    const probe = [
      'id',
      'grep -E "^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)" /proc/self/status',
      'ls -l /proc/self/fd/ | tail -n +2 | sed "s/.*[0-9] \\([0-9]*\\) ->/fd \\1 ->/"',
      'T=$(tty); echo "tty=$T"; stat -c "tty-owner=%U:%G mode=%a" "$T" 2>&1',
      'ps -o pid,user,comm -p $PPID 2>&1 | tail -1',
    ].join('; ');

    it('hold no group, capability or descriptor of the daemon', async () => {
      const created = await call(MAL, 'POST', '/v1/terminals', { argv: ['/bin/sh', '-c', probe], cwd: '/tmp', rows: 50, cols: 200, graceMs: 1000 });
      expect(created.status).toBe(201);
      let text = '';
      let from = 0;
      for (let round = 0; round < 30; round += 1) {
        const read = await call(MAL, 'GET', `/v1/terminals/${created.body.id}/output?from=${from}&waitMs=1000`);
        text += Buffer.from(read.body.data as string, 'base64').toString();
        from = read.body.next as number;
        if (read.body.ended === true) break;
      }
      // Held: the user's ids everywhere, no group, no capability, only fds 0-2 (fd 3 is ls's own).
      expect(text).toContain(`Uid:\t${mal.uid}\t${mal.uid}\t${mal.uid}\t${mal.uid}`);
      expect(text).toMatch(/Groups:\s*\r?\n/);
      expect(text).toContain('CapEff:\t0000000000000000');
      expect(text).not.toMatch(/fd [4-9]/);
      // Its terminal is its own, as a login's is.
      expect(text).toContain(`tty-owner=${mal.name}:${mal.name}`);
    });
  });

  /**
   * Unpacks, with `token`, an archive of 400 files in d/ into a directory of
   * bob's while his program keeps exchanging d with a link to `victim`, until
   * something lands in the victim or the rounds are done; answers what did.
   */
  const raceUnpack = async (token: string, bobs: string, victim: string): Promise<string[]> => {
    const source = mkdtempSync(join(scratch, 'unpack-src-'));
    mkdirSync(join(source, 'd'));
    for (let index = 0; index < 400; index += 1) writeFileSync(join(source, 'd', `f${index}`), 'planted\n');
    const archive = execFileSync('tar', ['-c', '-C', source, 'd']);
    await finished(runAs(bob, `mkdir ${bobs}/d && chmod 777 ${bobs}/d && ln -s ${victim} ${bobs}/l`));
    const flipper = startFlipper(bob, `${bobs}/d`, `${bobs}/l`, 50);
    children.push(flipper);
    try {
      for (let round = 0; round < ROUNDS && readdirSync(victim).length === 0; round += 1) {
        const response = await fetch(`${url}/v1/files/archive?path=${encodeURIComponent(bobs)}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-tar' },
          body: archive,
        });
        await response.arrayBuffer();
      }
    } finally {
      flipper.kill('SIGKILL');
    }
    return readdirSync(victim);
  };

  describe('an unpack into a directory another user controls, who swaps a link in meanwhile', () => {
    it("of a root-acting owner writes nothing into root's directories", async () => {
      const victim = join(scratch, 'root-victim');
      mkdirSync(victim, { mode: 0o700 });
      expect(await raceUnpack(ROOTY, bobsDirectory(join(scratch, 'bob-unpack')), victim)).toEqual([]);
    });

    it("of a mapped owner (its worker, as its user) writes nothing into the user's own directories", async () => {
      const bobs = bobsDirectory(join(scratch, 'bob-unpack-mal'));
      chmodSync(bobs, 0o777);
      const victim = join(mal.home, 'private');
      mkdirSync(victim, { mode: 0o700 });
      chownSync(victim, mal.uid, mal.gid);
      expect(await raceUnpack(MAL, bobs, victim)).toEqual([]);
    });
  });
});
