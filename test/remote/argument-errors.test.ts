/**
 * An argument the SDK refuses itself is the error the daemon's refusal of an
 * argument arrives as: the class the catalog's INVALID_ARGUMENT maps to, of
 * that code. One condition, one class, whichever side finds it.
 */
import { expect } from 'vitest';
import { connect, InvalidRequestError, RemoteRuntime, REMOTE_ERROR_CLASSES, sandboxRouter, type ExecworldError } from '@execworld/sdk';
import { RemoteFiles, RemoteTransfer } from '@execworld/sdk/fs';
import { ALICE } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';

const test = daemonTest();

/** What `body` threw or rejected with. */
async function failure(body: () => unknown): Promise<ExecworldError> {
  try {
    await body();
  } catch (error) {
    return error as ExecworldError;
  }
  throw new Error('it did not fail');
}

/** A runtime that connects on its first call, which these checks never make. */
const unconnected = (): RemoteRuntime => new RemoteRuntime('http://127.0.0.1:9', { token: ALICE });

const LOCAL_CHECKS: readonly (readonly [string, () => unknown])[] = [
  ['a url that is not http(s)', () => connect('ftp://127.0.0.1:9', { token: ALICE })],
  ['a timeout that is not a positive integer', () => connect('http://127.0.0.1:9', { token: ALICE, requestTimeoutMs: -1 })],
  ['a token header of another name', () => connect('http://127.0.0.1:9', { token: ALICE, tokenHeader: 'cookie' as never })],
  ['an empty sandbox id', () => sandboxRouter('')],
  ['a spawn without a program', () => unconnected().spawn({ argv: [] })],
  ['a grace that is not positive', () => unconnected().spawn({ argv: ['true'], graceMs: -1 })],
  ['a transfer chunk of no bytes', () => new RemoteTransfer(unconnected(), { chunkBytes: 0 })],
  ['a negative number of retries', () => new RemoteTransfer(unconnected(), { retries: -1 })],
  ['a text prefetch past 4 MiB', () => new RemoteFiles(unconnected(), { prefetchTextBytes: 5 * 1024 * 1024 })],
];

test.for(LOCAL_CHECKS)('%s is refused as the daemon refuses an argument', async ([, body]) => {
  const error = await failure(body);
  expect(error).toBeInstanceOf(REMOTE_ERROR_CLASSES.INVALID_ARGUMENT);
  expect(error).toBeInstanceOf(InvalidRequestError);
  expect(error.code).toBe('INVALID_ARGUMENT');
});

test("the daemon's refusal of an argument is of the same class", async ({ daemon }) => {
  const runtime = await connect(daemon.url, { token: ALICE });
  try {
    // The call goes out as given: the daemon, not the SDK, finds the program missing.
    const error = await failure(() => runtime.call('process.create', { argv: [] }));
    expect(error.code).toBe('INVALID_ARGUMENT');
    const local = await failure(() => runtime.spawn({ argv: [] }));
    expect(error.constructor).toBe(local.constructor);
  } finally {
    runtime.close();
  }
});
