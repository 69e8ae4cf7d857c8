/**
 * Privilege separation, attacked as a token holder would attack it: an owner
 * mapped to an OS user tries to act as root through what it controls (its
 * environment's loader variables, its working directory, its own files and
 * links, swapped while the daemon works), and tokens of every kind try to
 * reach the daemon's own secrets through the files API.
 *
 * The users are real, made by the test with useradd; the daemon runs as root
 * in this process, as it would on a host.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type Daemon } from '../../service/src/server/app.ts';
import { TokenTable } from '../../service/src/server/auth.ts';
import { DEFAULT_CONFIG, type Config } from '../../service/src/server/config.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, finished, makeUser, runAs } from '../helpers/os-users.ts';
import { isCi, requiredTool } from '../helpers/tools.ts';
import { waitFor } from '../helpers/wait.ts';

const MAL = 'mal-token-0123456789abcdefgh';
const ROOTY = 'rooty-token-0123456789abcdefg';
const READER = 'rooty-reader-0123456789abcdef';

// Users are made as root; CI runs as root, so there a daemon that is not root fails these instead of skipping them.
describe.skipIf(!canMakeUsers && !isCi())('an owner mapped to an OS user, on a daemon run by root', () => {
  let daemon: Daemon;
  let url: string;
  let mal: ReturnType<typeof makeUser>;
  let mallory: ReturnType<typeof makeUser>;
  let stateDir: string;
  let tokenFile: string;
  const scratch = mkdtempSync(join(tmpdir(), 'ew-privsep-'));

  beforeAll(async () => {
    mal = makeUser();
    mallory = makeUser();
    chmodSync(scratch, 0o755);
    tokenFile = join(scratch, 'tokens');
    writeFileSync(tokenFile, `mal ${MAL} ${mal.name}\nrooty ${ROOTY}\nrooty ${READER} access=read\n`, { mode: 0o600 });
    stateDir = join(scratch, 'state');
    mkdirSync(stateDir, { mode: 0o711 });
    const tokens = new TokenTable(
      [
        { owner: 'mal', token: MAL, user: mal },
        { owner: 'rooty', token: ROOTY },
        { owner: 'rooty', token: READER, access: 'read' },
      ],
      tokenFile,
    );
    const config = { ...DEFAULT_CONFIG, host: '127.0.0.1', port: 0, logLevel: 'silent', stateDir, tokenFile } as Config;
    daemon = buildApp({ config, tokens, logger: pino({ level: 'silent' }) });
    url = await daemon.app.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await daemon?.app.close();
    mal?.remove();
    mallory?.remove();
  });

  const call = async (token: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch (_error) {
      // Bytes, not JSON.
    }
    return { status: response.status, body: parsed };
  };

  /** Waits until terminal `id` of `token`'s owner has exited and its output ended; answers its output. */
  const terminalOutput = async (token: string, id: string): Promise<string> => {
    let text = '';
    let from = 0;
    await waitFor(`terminal ${id} to end`, async () => {
      const read = await call(token, 'GET', `/v1/terminals/${id}/output?from=${from}&waitMs=1000`);
      text += Buffer.from(read.body.data as string, 'base64').toString();
      from = read.body.next as number;
      return read.body.ended === true;
    });
    return text;
  };

  describe("a loader variable of the owner's runs only as its user", () => {
    let library: string;
    let log: string;

    beforeAll(async () => {
      requiredTool('cc', { installedBy: "CONTRIBUTING.md's development notes" }).require();
      // The owner's own program builds the library in its home directory, as an attacker would.
      const source = join(mal.home, 'l.c');
      writeFileSync(
        source,
        [
          '#include <fcntl.h>',
          '#include <stdio.h>',
          '#include <stdlib.h>',
          '#include <unistd.h>',
          '__attribute__((constructor)) static void mark(void) {',
          '  const char *log = getenv("EW_PRELOAD_LOG");',
          '  if (log == NULL) return;',
          '  int fd = open(log, O_WRONLY | O_APPEND);',
          '  if (fd < 0) return;',
          '  char line[64];',
          '  int n = snprintf(line, sizeof line, "euid=%d\\n", (int)geteuid());',
          '  if (write(fd, line, n) < 0) {}',
          '  close(fd);',
          '}',
          '',
        ].join('\n'),
      );
      chownSync(source, mal.uid, mal.gid);
      library = join(mal.home, 'l.so');
      await finished(runAs(mal, `cc -shared -fPIC -o ${library} ${source}`, mal.home));
    });

    /** A fresh log every process that loads the library appends its effective uid to. */
    const freshLog = (): string => {
      log = join(mkdtempSync(join(scratch, 'preload-')), 'log');
      chmodSync(join(log, '..'), 0o755);
      writeFileSync(log, '', { mode: 0o666 });
      chmodSync(log, 0o666);
      return log;
    };
    const loaders = (): string[] => readFileSync(log, 'utf8').split('\n').filter(Boolean);

    it('on a terminal: LD_PRELOAD never runs as root', async () => {
      const env = { LD_PRELOAD: library, EW_PRELOAD_LOG: freshLog() };
      const created = await call(MAL, 'POST', '/v1/terminals', { argv: ['/bin/sh', '-c', 'exit 0'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1000, env });
      expect(created.status).toBe(201);
      await terminalOutput(MAL, created.body.id as string);
      // It did load (the program ran with it), and only as the owner's user.
      expect(loaders().length).toBeGreaterThan(0);
      expect(loaders()).toEqual(loaders().map(() => `euid=${mal.uid}`));
    });

    it('on a shell: LD_PRELOAD never runs as root', async () => {
      const env = { LD_PRELOAD: library, EW_PRELOAD_LOG: freshLog() };
      const created = await call(MAL, 'POST', '/v1/shells', { dialect: 'bash', cwd: '/tmp', env });
      expect(created.status).toBe(201);
      const ran = await call(MAL, 'POST', `/v1/shells/${created.body.id}/run`, { command: 'id -u' });
      expect(ran.body.output).toBe(`${mal.uid}\n`);
      await call(MAL, 'DELETE', `/v1/shells/${created.body.id}`);
      expect(loaders().length).toBeGreaterThan(0);
      expect(loaders()).toEqual(loaders().map(() => `euid=${mal.uid}`));
    });

    it('on a process: LD_PRELOAD never runs as root', async () => {
      const env = { LD_PRELOAD: library, EW_PRELOAD_LOG: freshLog() };
      const created = await call(MAL, 'POST', '/v1/processes', {
        argv: ['/bin/sh', '-c', 'exit 0'],
        cwd: '/tmp',
        env,
        stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
        graceMs: 1000,
      });
      expect(created.status).toBe(201);
      await call(MAL, 'GET', `/v1/processes/${created.body.id}/done?timeoutMs=30000`);
      expect(loaders().length).toBeGreaterThan(0);
      expect(loaders()).toEqual(loaders().map(() => `euid=${mal.uid}`));
    });
  });

  describe("the owner's working directory is entered as its user", () => {
    let inner: string;

    beforeAll(() => {
      // A directory only root may enter, holding one anybody could read if they got there.
      const vault = mkdtempSync(join(scratch, 'vault-'));
      chmodSync(vault, 0o700);
      inner = join(vault, 'inner');
      mkdirSync(inner, { mode: 0o755 });
      writeFileSync(join(inner, 'secret'), 'the-vault-secret\n', { mode: 0o644 });
    });

    it('refuses a process whose cwd the user may not enter, and reads nothing', async () => {
      const created = await call(MAL, 'POST', '/v1/processes', {
        argv: ['/bin/cat', 'secret'],
        cwd: inner,
        stdio: { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: 'pipe' },
        graceMs: 1000,
      });
      expect(created.status).toBe(422);
      expect(created.body.error.code).toBe('CWD_NOT_FOUND');
      expect(created.body.error.errno).toBe('EACCES');
    });

    it('refuses a terminal whose cwd the user may not enter, and reads nothing', async () => {
      const created = await call(MAL, 'POST', '/v1/terminals', { argv: ['/bin/cat', 'secret'], cwd: inner, rows: 24, cols: 80, graceMs: 1000 });
      if (created.status === 201) expect(await terminalOutput(MAL, created.body.id as string)).not.toContain('the-vault-secret');
      expect(created.status).toBe(422);
      expect(created.body.error.code).toBe('CWD_NOT_FOUND');
      expect(created.body.error.errno).toBe('EACCES');
    });

    it('still starts in a cwd the user may enter, and says which program it cannot run', async () => {
      const created = await call(MAL, 'POST', '/v1/terminals', { argv: ['/bin/sh', '-c', 'pwd'], cwd: mal.home, rows: 24, cols: 80, graceMs: 1000 });
      expect(created.status).toBe(201);
      expect(await terminalOutput(MAL, created.body.id as string)).toContain(`${mal.home}\r\n`);
      const missing = await call(MAL, 'POST', '/v1/terminals', { argv: ['no-such-program-here'], cwd: mal.home, rows: 24, cols: 80, graceMs: 1000 });
      expect(missing.status).toBe(422);
      expect(missing.body.error.code).toBe('EXECUTABLE_NOT_FOUND');
    });
  });
  describe('spill files', () => {
    it("are the owner's to read, in a directory it cannot add to, rename in or link from", async () => {
      const created = await call(MAL, 'POST', '/v1/processes', {
        argv: ['/bin/sh', '-c', 'seq 1 2000'],
        cwd: '/tmp',
        stdio: { stdin: 'ignore', stdout: { maxBytes: 64, spill: { maxBytes: 1 << 20 } }, stderr: 'pipe' },
        graceMs: 1000,
      });
      expect(created.status).toBe(201);
      await call(MAL, 'GET', `/v1/processes/${created.body.id}/done?timeoutMs=30000`);
      const spillPath = (await call(MAL, 'GET', `/v1/processes/${created.body.id}`)).body.stdout.spillPath as string;
      expect(spillPath).toEqual(expect.any(String));
      const directory = join(spillPath, '..');
      const probe = [
        `head -1 ${spillPath}`,
        `mkdir ${directory}/x 2>/dev/null && echo mkdir:made || echo mkdir:refused`,
        `ln -s / ${directory}/link 2>/dev/null && echo link:made || echo link:refused`,
        `mv ${spillPath} ${spillPath}.moved 2>/dev/null && echo move:made || echo move:refused`,
      ].join('; ');
      const out = await finished(runAs(mal, probe));
      expect(out.split('\n')).toEqual(['1', 'mkdir:refused', 'link:refused', 'move:refused', '']);
    });
  });
  describe("an upload into a directory another user controls (the daemon's own user uploading)", () => {
    it("never follows that user's links: the stage swapped mid-upload reaches no file of root's", async () => {
      // Mallory's directory, and a file only root may read or write.
      const shared = join(scratch, 'mallory-dir');
      mkdirSync(shared, { mode: 0o755 });
      chownSync(shared, mallory.uid, mallory.gid);
      const victim = join(scratch, 'root-only');
      writeFileSync(victim, 'root-only-content\n', { mode: 0o600 });
      const created = await call(ROOTY, 'POST', '/v1/files/uploads', { path: join(shared, 'upload.bin'), mode: 0o644 });
      expect(created.status).toBe(201);
      // Mallory swaps whatever the daemon made in her directory for one of hers whose content is a link to the victim.
      const swap = [
        `cd ${shared}`,
        'for entry in .[!.]* *; do [ -e "$entry" ] || continue; mv "$entry" "$entry.away" && mkdir "$entry" && ' +
          `ln -s ${victim} "$entry/content" && ln -s ${victim} "$entry/$entry" && echo "swapped $entry"; done`,
      ].join('; ');
      const swapped = await finished(runAs(mallory, swap));
      expect(swapped).toMatch(/^swapped /);
      const put = await fetch(`${url}/v1/files/uploads/${created.body.id}?offset=0`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ROOTY}`, 'content-type': 'application/octet-stream' },
        body: 'uploaded bytes\n',
      });
      await put.text();
      await call(ROOTY, 'POST', `/v1/files/uploads/${created.body.id}/complete`, {});
      expect(readFileSync(victim, 'utf8')).toBe('root-only-content\n');
      expect(statSync(victim).mode & 0o7777).toBe(0o600);
      expect(statSync(victim).uid).toBe(0);
    });

    it('strips setuid, setgid and sticky bits a client asks for, as the daemon is root', async () => {
      const target = join(scratch, 'suid-upload');
      const created = await call(ROOTY, 'POST', '/v1/files/uploads', { path: target, mode: 0o7755 });
      expect(created.status).toBe(201);
      const put = await fetch(`${url}/v1/files/uploads/${created.body.id}?offset=0`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ROOTY}`, 'content-type': 'application/octet-stream' },
        body: '#!/bin/sh\n',
      });
      await put.text();
      const completed = await call(ROOTY, 'POST', `/v1/files/uploads/${created.body.id}/complete`, {});
      expect(completed.status).toBe(200);
      expect(statSync(target).mode & 0o7777).toBe(0o755);
    });
    it('strips them from the entries of an archive it unpacks, as the daemon is root', async () => {
      const source = mkdtempSync(join(scratch, 'suid-source-'));
      writeFileSync(join(source, 'tool'), '#!/bin/sh\n', { mode: 0o755 });
      chmodSync(join(source, 'tool'), 0o6755);
      mkdirSync(join(source, 'shared'), { mode: 0o755 });
      chmodSync(join(source, 'shared'), 0o1777);
      const archive = execFileSync('tar', ['-c', '-C', source, 'tool', 'shared']);
      const into = join(scratch, 'suid-unpacked');
      const response = await fetch(`${url}/v1/files/archive?path=${encodeURIComponent(into)}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ROOTY}`, 'content-type': 'application/x-tar' },
        body: archive,
      });
      expect(response.status).toBe(200);
      expect(statSync(join(into, 'tool')).mode & 0o7777).toBe(0o755);
      expect(statSync(join(into, 'shared')).isDirectory()).toBe(true);
      expect(statSync(join(into, 'shared')).mode & 0o7000).toBe(0);
    });
  });
  describe("the daemon's own secrets", () => {
    const refused = (answer: { status: number; body: any }): void => {
      expect(answer.status).toBe(403);
      expect(answer.body.error.code).toBe('FS_PERMISSION_DENIED');
    };

    it('are never served to a read token, a write token or a mapped owner, by any path to them', async () => {
      const journalDir = join(stateDir, 'sessions');
      mkdirSync(journalDir, { recursive: true, mode: 0o700 });
      const journal = join(journalDir, 'forged.json');
      writeFileSync(journal, '{}', { mode: 0o600 });
      // Other names for the token file: a link to it, a hard link to it, its directory with a link in the path.
      const aliases = join(scratch, 'aliases');
      mkdirSync(aliases, { recursive: true });
      symlinkSync(tokenFile, join(aliases, 'soft'));
      linkSync(tokenFile, join(aliases, 'hard'));
      symlinkSync(scratch, join(aliases, 'dir'));
      const paths = [tokenFile, join(aliases, 'soft'), join(aliases, 'hard'), join(aliases, 'dir', 'tokens'), journal];
      for (const token of [READER, ROOTY, MAL]) {
        for (const path of paths) {
          refused(await call(token, 'GET', `/v1/files/content?path=${encodeURIComponent(path)}`));
          refused(await call(token, 'POST', '/v1/fs/read-text', { path }));
          refused(await call(token, 'POST', '/v1/fs/digest', { path }));
        }
        refused(await call(token, 'POST', '/v1/fs/list', { path: journalDir }));
      }
      // Nor changed, by a write token that could otherwise write itself a token of another owner.
      refused(await call(ROOTY, 'POST', '/v1/fs/write-text', { path: tokenFile, content: `mal ${ROOTY}x\n` }));
      refused(await call(ROOTY, 'POST', '/v1/fs/remove', { path: journal }));
      refused(await call(ROOTY, 'POST', '/v1/fs/rename', { from: join(aliases, 'hard'), to: join(scratch, 'taken') }));
      refused(await call(ROOTY, 'POST', '/v1/fs/rename', { from: tokenFile, to: join(scratch, 'taken') }));
      refused(await call(ROOTY, 'POST', '/v1/files/uploads', { path: tokenFile }));
      expect(readFileSync(tokenFile, 'utf8')).toContain(`mal ${MAL}`);
      expect(lstatSync(journal).isFile()).toBe(true);
    });

    it('are left out of an archive of a directory that holds them', async () => {
      const response = await fetch(`${url}/v1/files/archive?path=${encodeURIComponent(scratch)}`, { headers: { authorization: `Bearer ${READER}` } });
      const tar = Buffer.from(await response.arrayBuffer());
      expect(response.status).toBe(200);
      const names = execFileSync('tar', ['-t'], { input: tar }).toString().split('\n');
      expect(names.some((name) => name.endsWith('/tokens') || name === 'tokens')).toBe(false);
      expect(names.some((name) => name.includes('sessions/'))).toBe(false);
      expect(tar.includes(Buffer.from(MAL))).toBe(false);
      expect(readdirSync(scratch)).toContain('tokens');
    });
  });
});

const test = daemonProcessTest();

// Users are made as root; CI runs as root, so there a daemon that is not root fails these instead of skipping them.
describe.skipIf(!canMakeUsers && !isCi())("a mapped owner's worker, on a daemon whose sessions are contained by the subreaper", () => {
  const TOKEN = 'worker-owner-token-0123456789';
  let user: ReturnType<typeof makeUser>;
  beforeAll(() => {
    user = makeUser();
  });
  // The test's daemon is stopped when the test ends, before the user its worker runs as is removed.
  afterAll(() => {
    user?.remove();
  });

  test('is none of the sessions: one that ran while it started ends, and the worker serves on', async ({ spawnDaemon }) => {
    const place = mkdtempSync(join(tmpdir(), 'ew-worker-'));
    const tokenFile = join(place, 'tokens');
    writeFileSync(tokenFile, `bob ${TOKEN} ${user.name}\n`, { mode: 0o600 });
    const stateDir = join(place, 'state');
    mkdirSync(stateDir, { mode: 0o711 });
    const daemon = await spawnDaemon(['--containment', 'subreaper', '--token-file', tokenFile, '--state-dir', stateDir]);
    const call = async (method: string, path: string, body?: unknown): Promise<any> => {
      const response = await fetch(`${daemon.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return response.json();
    };
    const session = await call('POST', '/v1/processes', {
      argv: ['/bin/sleep', '300'],
      cwd: '/tmp',
      stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
      graceMs: 1000,
    });
    // The owner's first file call starts its worker, while the session runs.
    expect((await call('POST', '/v1/fs/stat', { path: '/tmp' })).info.type).toBe('directory');
    const workerOf = (): number | undefined =>
      readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .map(Number)
        .find((pid) => {
          try {
            return (
              readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('file-worker') &&
              readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1] === String(daemon.pid)
            );
          } catch (_error) {
            return false;
          }
        });
    const worker = workerOf();
    expect(worker).toEqual(expect.any(Number));
    await call('POST', `/v1/processes/${session.id}/terminate`);
    await call('POST', `/v1/processes/${session.id}/wait`, { timeoutMs: 30_000 });
    expect((await call('POST', '/v1/fs/stat', { path: '/tmp' })).info.type).toBe('directory');
    expect(workerOf()).toBe(worker);
  });
});
