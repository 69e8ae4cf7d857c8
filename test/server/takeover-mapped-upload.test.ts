/**
 * An upload under way of an owner mapped to another OS user is staged by that
 * user's worker, which ends with the image that started it: a takeover does
 * not keep it (the sender's next call answers NOT_FOUND, and it begins
 * again), and the new image removes its stage from disk and its record from
 * the state directory, rather than leaving them until the daemon's next start.
 */
import { chownSync, existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect } from 'vitest';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { requestTakeover } from '../helpers/takeover.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonProcessTest();

describe.runIf(canMakeUsers)('serve --takeover with an owner mapped to an OS user', { timeout: 120_000 }, () => {
  const users = osUsers(afterAll);

  test("keeps no upload of the owner's under way, and removes its stage and its record", async ({ spawnDaemon }) => {
    const user = users.make();
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const token = 'dave-token-0123456789abcdefgh';
    const tokenFile = join(stateDir, 'tokens');
    writeFileSync(tokenFile, `dave ${token} ${user.name}\n`, { mode: 0o600 });
    const directory = mkdtempSync(join(tmpdir(), 'execworld-upload-'));
    chownSync(directory, user.uid, user.gid);
    const daemon = await spawnDaemon(['--state-dir', stateDir, '--token-file', tokenFile]);
    const call = async (method: string, path: string, body?: Buffer | object): Promise<{ status: number; json: any }> => {
      const response = await fetch(`${daemon.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': Buffer.isBuffer(body) ? 'application/octet-stream' : 'application/json',
        },
        ...(body === undefined ? {} : { body: Buffer.isBuffer(body) ? body : JSON.stringify(body) }),
      });
      return { status: response.status, json: await response.json() };
    };
    const records = (): string[] => {
      const stages = join(stateDir, 'stages');
      return existsSync(stages) ? readdirSync(stages).filter((name) => name.startsWith(`${daemon.pid}-`)) : [];
    };
    const upload = await call('POST', '/v1/files/uploads', { path: join(directory, 'file.bin') });
    expect(upload.status).toBe(201);
    expect((await call('PUT', `/v1/files/uploads/${upload.json.id}?offset=0`, Buffer.alloc(64 * 1024, 7))).json).toMatchObject({ offset: 64 * 1024 });
    // Its stage beside the target, made by the user's worker, and recorded by the daemon.
    expect(readdirSync(directory)).toHaveLength(1);
    expect(records()).toHaveLength(1);

    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);

    expect(await call('GET', `/v1/files/uploads/${upload.json.id}`)).toMatchObject({ status: 404, json: { error: { code: 'NOT_FOUND' } } });
    await waitFor('the stage to be removed', () => readdirSync(directory).length === 0);
    expect(records()).toEqual([]);
    // The owner begins again, under the new image.
    expect((await call('POST', '/v1/files/uploads', { path: join(directory, 'file.bin') })).status).toBe(201);
  });
});
