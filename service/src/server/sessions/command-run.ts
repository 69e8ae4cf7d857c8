/**
 * `POST /v1/run`: one command run to completion on a process session of the
 * registry, so it is listed while it runs, counts against the owner's
 * sessions, is contained, and runs as the owner's OS user, as any process
 * does. The SDK's `runtime.run` and this share {@link finishRun}: the same
 * bounds, the same result, the same end (what the command left running is
 * ended with it).
 * @module
 */
import type { OperationParams, OperationResult } from '@execworld/sdk/protocol';
import { commandArgv, finishRun, MAX_WAIT_MS, spawnDefaults, type InvalidArgument, type RunningProcess } from '@execworld/sdk/seam';
import type { Principal } from '../auth.ts';
import { ServiceError } from '../errors.ts';
import { waitForBytes } from '../streams.ts';
import type { ProcessSession } from './process-session.ts';
import type { SessionRegistry } from './registry.ts';

/** The most one read of a ring hands over at a time. */
const READ_SLICE_BYTES = 1024 * 1024;

const invalid: InvalidArgument = (message) => new ServiceError('INVALID_ARGUMENT', message);

/** A process session as a run drives it: its rings read (and so freed) as they fill, by the daemon itself. */
function runningSession(session: ProcessSession): RunningProcess {
  const abandoned = new AbortController();
  return {
    done: session.handle.done,
    async read(name, onChunk) {
      const stream = session.stream(name);
      let offset = stream.start;
      while (!abandoned.signal.aborted) {
        await waitForBytes(stream, offset, MAX_WAIT_MS, abandoned.signal);
        const slice = stream.read(offset, READ_SLICE_BYTES);
        if (slice.data.length > 0) onChunk(slice.data);
        offset = slice.next;
        // Read, so the ring may drop it: a command printing more than the ring holds runs on instead of pausing.
        stream.consumed(offset);
        if (stream.ended && offset >= stream.end) return;
      }
    },
    abandon: () => abandoned.abort(),
    terminate: () => session.handle.terminate(),
    waitForExit: () => session.handle.waitForExit(),
  };
}

/**
 * Runs the command of `params` for `principal` and answers how it ended. A caller
 * that goes away (`signal`) ends its process tree, and the session is
 * forgotten once the run is answered or abandoned.
 */
export async function runCommandSession(
  registry: SessionRegistry,
  principal: Principal,
  params: OperationParams<'command.run'>,
  signal: AbortSignal,
): Promise<OperationResult<'command.run'>> {
  const { argv, command, cwd, env, stdin, timeoutMs, maxOutputBytes, graceMs, user, limits } = params;
  if ((argv === undefined) === (command === undefined)) throw invalid('give the program as argv or a command line as command, one of them');
  const startedAt = Date.now();
  const spec = spawnDefaults(
    {
      argv: commandArgv(command ?? argv!, registry.runtime.capabilities.platform, invalid),
      cwd,
      graceMs,
      ...(env === undefined ? {} : { env: Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value ?? undefined])) }),
      stdio: { stdin: stdin === undefined ? 'ignore' : { data: stdin }, stdout: 'pipe', stderr: 'pipe' },
    },
    () => registry.defaultCwd(principal, user),
  );
  const session = await registry.createProcess(principal, spec, { user, limits });
  session.endsWithCaller = true;
  // The caller went away: the command ends (TERM, KILL after the grace), and the answer goes to nobody.
  const onAbort = (): void => session.handle.terminate();
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) onAbort();
  try {
    const result = await finishRun(runningSession(session), { timeoutMs, maxOutputBytes, graceMs: spec.graceMs }, startedAt);
    const usage = session.handle.usage?.();
    return usage === undefined ? result : { ...result, usage };
  } finally {
    signal.removeEventListener('abort', onAbort);
    await registry.delete(principal.owner, session.id, 'process').catch(() => undefined);
  }
}
