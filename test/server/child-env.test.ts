/**
 * Children of the daemon start from an allowlist of its environment, as sshd
 * resets a login's: what started the daemon (a database URL, a CI token, an
 * agent socket) does not reach them unless a setting passes it.
 */
import { afterEach, describe, expect, vi } from 'vitest';
import { type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const test = daemonTest();

const LEAKY = {
  DATABASE_URL: 'postgres://app:pw@db/app',
  GITHUB_PAT: 'ghp_leak',
  SSH_AUTH_SOCK: '/tmp/agent.sock',
  SENTRY_DSN: 'https://key@sentry/1',
  https_proxy: 'http://user:pw@proxy:3128',
  SERVICE_TOKEN: 'tok',
};
const NAMES = [...Object.keys(LEAKY), 'LANG', 'LC_ALL', 'EXTRA'];

async function childSees(daemon: TestDaemon): Promise<Record<string, string>> {
  const script = NAMES.map((name) => `printf '%s=%s\\n' ${name} "\${${name}-<unset>}"`).join('; ');
  const created = await daemon.request('POST', '/v1/processes', {
    body: {
      argv: ['/bin/sh', '-c', script],
      cwd: '/tmp',
      env: { EXTRA: 'from-request' },
      stdio: { stdin: 'ignore', stdout: { maxBytes: 65536 }, stderr: 'pipe' },
      graceMs: 1000,
    },
  });
  await daemon.request('GET', `/v1/processes/${created.body.id}/done?timeoutMs=20000`);
  const text = (await daemon.request('GET', `/v1/processes/${created.body.id}/collected/stdout?from=0`)).body.text as string;
  return Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map((line) => line.split(/=(.*)/s).slice(0, 2) as [string, string]),
  );
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("children's environment", () => {
  test('is the allowlist plus the request by default', async ({ startDaemon }) => {
    for (const [name, value] of Object.entries({ ...LEAKY, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' })) vi.stubEnv(name, value);
    const daemon = await startDaemon();
    const seen = await childSees(daemon);
    for (const name of Object.keys(LEAKY)) expect(seen[name], name).toBe('<unset>');
    expect(seen).toMatchObject({ LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', EXTRA: 'from-request' });
  });

  test('gets more names from passEnv, and with * everything but credential-shaped names', async ({ startDaemon }) => {
    for (const [name, value] of Object.entries(LEAKY)) vi.stubEnv(name, value);
    const named = await startDaemon({ passEnv: ['PATH', 'DATABASE_URL', 'SSH_*'] });
    const all = await startDaemon({ passEnv: ['*'] });
    expect(await childSees(named)).toMatchObject({ DATABASE_URL: LEAKY.DATABASE_URL, SSH_AUTH_SOCK: LEAKY.SSH_AUTH_SOCK, GITHUB_PAT: '<unset>' });
    expect(await childSees(all)).toMatchObject({ DATABASE_URL: LEAKY.DATABASE_URL, GITHUB_PAT: LEAKY.GITHUB_PAT, SERVICE_TOKEN: '<unset>' });
  });
});
