/**
 * What disposing a runtime means on either side of the seam: every process
 * tree and terminal still owned is ended and waited for, and failures come
 * back as one error. Both the local provider and the remote runtime dispose
 * this way.
 * @module
 */
import type { SubprocessHandle, SubprocessTerminalHandle } from './types.ts';

/**
 * Asks every process tree and terminal to end. Each promise settles once its
 * handle is gone: a process once its done settled and its whole tree exited,
 * a terminal once its terminate settled.
 */
export function endAll(
  processes: Iterable<Pick<SubprocessHandle, 'terminate' | 'done' | 'waitForExit'>>,
  terminals: Iterable<Pick<SubprocessTerminalHandle, 'terminate'>>,
): Promise<unknown>[] {
  const pending: Promise<unknown>[] = [];
  for (const handle of processes) {
    handle.terminate();
    pending.push(handle.done.catch(() => undefined).then(() => handle.waitForExit()));
  }
  for (const terminal of terminals) pending.push(terminal.terminate());
  return pending;
}

/**
 * Waits until every promise settled. Resolves with undefined when all were
 * fulfilled, otherwise with the failure to throw: the one rejection reason as
 * it is, or an AggregateError of several with `message`.
 */
export async function settleAll(pending: Iterable<Promise<unknown>>, message: string): Promise<{ readonly error: unknown } | undefined> {
  const failures = (await Promise.allSettled(pending)).flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
  if (failures.length === 0) return undefined;
  return { error: failures.length === 1 ? failures[0] : new AggregateError(failures, message) };
}

/**
 * Runs `action` once and shares its promise with every later call, until it
 * fails: the next call after a failure runs it again. A terminal's terminate
 * is such an action, on both sides of the seam: done once it succeeded, worth
 * another try when it did not.
 */
export function retryableOnce<T>(action: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined;
  return () =>
    (running ??= action().catch((error: unknown) => {
      running = undefined;
      throw error;
    }));
}
