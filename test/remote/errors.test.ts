/**
 * The SDK's errors: every daemon code arrives as the class its status names,
 * including a token refused while connecting, and the SDK's own shortcuts
 * throw what the daemon would have answered.
 */
import { describe, expect } from 'vitest';
import { ERROR_CATALOG, ERROR_CODES } from '@execworld/sdk/protocol';
import {
  AuthError,
  connect,
  DaemonError,
  FileSystemError,
  InvalidRequestError,
  LimitError,
  NotFoundError,
  REMOTE_ERROR_CLASSES,
  SpawnError,
  StateError,
} from '@execworld/sdk';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const test = daemonTest();

let daemon: TestDaemon;
test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
});

describe('SDK error classes', () => {
  test('maps every catalog code to the class of its status', () => {
    const classOf = (code: string, status: number): unknown => (code.startsWith('FS_') ? FileSystemError : classOfStatus(status));
    const classOfStatus = (status: number): unknown => {
      if (status === 401 || status === 403) return AuthError;
      if (status === 404) return NotFoundError;
      if (status === 409) return StateError;
      if (status === 422) return SpawnError;
      if (status === 429) return LimitError;
      if (status >= 500) return DaemonError;
      return InvalidRequestError;
    };
    for (const code of ERROR_CODES) expect(REMOTE_ERROR_CLASSES[code], code).toBe(classOf(code, ERROR_CATALOG[code].status));
  });

  test('rejects connect with an AuthError when the daemon refuses the token', async () => {
    const error = await connect(daemon.url, { token: 'not-the-token-at-all-xxxx' }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(AuthError);
    expect(error).toMatchObject({ code: 'UNAUTHORIZED', status: 401, message: 'the bearer token is not valid' });
  });

  test('rejects a write to an exited terminal with a StateError, as the daemon would', async () => {
    const runtime = await connect(daemon.url, { token: ALICE });
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh', '-c', 'exit 0'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 });
    await terminal.done;
    const error = await terminal.write('x').catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(StateError);
    expect(error).toMatchObject({ code: 'TERMINAL_EXITED', status: 409 });
    await runtime.dispose();
  });
});
