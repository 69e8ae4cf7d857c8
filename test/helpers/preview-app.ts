/**
 * The preview tests' dev server (test/fixtures/preview-app.ts), started inside
 * the world through a daemon on a port the test picks.
 */
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { TestDaemon } from './daemon.ts';
import { waitFor } from './wait.ts';

const APP = join(import.meta.dirname, '../fixtures/preview-app.ts');

/** The app's argv: TypeScript through tsx's loader, named by its path, as the app's cwd is not the checkout. */
export const previewAppArgv = (port: number): string[] => [process.execPath, '--import', import.meta.resolve('tsx'), APP, String(port)];

/** A port of 127.0.0.1 free at the moment it is asked for. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts the app as a process of `daemon`'s (alice's) and waits until it answers on `port`; its process id and pid. */
export async function startPreviewApp(daemon: TestDaemon, port: number, deadlineMs: number): Promise<{ id: string; pid: number }> {
  const started = await daemon.request('POST', '/v1/processes', {
    body: { argv: previewAppArgv(port), cwd: tmpdir(), stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
  });
  expect(started.status).toBe(201);
  await waitFor('the app to listen', async () => (await fetch(`http://127.0.0.1:${port}/headers`).catch(() => undefined))?.ok === true, deadlineMs);
  return started.body as { id: string; pid: number };
}
