import { processRuns } from '../../service/src/provider/containment/cgroup-fs.ts';
import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

/** Polls `predicate` until it holds; throws with `what` after `timeoutMs`. */
export async function waitFor(what: string, predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** True while `/proc/<pid>` names a process that is not a zombie. */
export const pidAlive = processRuns;

/** Collects a readable's bytes as they arrive. */
export function collect(stream: NodeJS.ReadableStream): { text: () => string; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer | string) => chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
  return { text: () => Buffer.concat(chunks).toString('utf8'), bytes: () => Buffer.concat(chunks) };
}
