/**
 * A takeover whose exec fails, after the daemon stopped reading its sessions
 * and cleared close-on-exec on their descriptors: the same image serves on,
 * reads its terminals and its processes' pipes again from where it stopped,
 * and nothing printed meanwhile is lost. The daemon here is this process's
 * own, given an exec that fails (ENOEXEC); the rehearsal runs the real build.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { keepAcrossExec, setCloseOnExec } from '../../service/src/provider/posix/libc.ts';
import { DaemonImage } from '../../service/src/server/image.ts';
import { startTakeoverControl } from '../../service/src/server/takeover.ts';
import { BIN } from '../helpers/daemon-process.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { contiguous, control as ask, counter, processCounter } from '../helpers/takeover.ts';
import { waitFor } from '../helpers/wait.ts';

const test = daemonTest();

/** ENOEXEC: what execve answers for a file it cannot run. */
const ENOEXEC = 8;

describe('a takeover whose exec fails', () => {
  test('leaves the old image reading its terminals, processes and shells on, nothing lost', { timeout: 120_000 }, async ({ daemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-rollback-'));
    const stop = join(stateDir, 'stop');
    const execs: string[] = [];
    const control = await startTakeoverControl({
      daemon: daemon.daemon,
      stateDir,
      serveArgs: [],
      entry: BIN,
      image: new DaemonImage(),
      calls: {
        keepAcrossExec,
        setCloseOnExec,
        execve: (file) => {
          execs.push(file);
          return ENOEXEC;
        },
      },
      log: daemon.daemon.app.log,
    });
    try {
      const terminal = (await daemon.request('POST', '/v1/terminals', { body: counter(stop, 6) })).body;
      const printer = (await daemon.request('POST', '/v1/processes', { body: processCounter(stop, 7) })).body;
      const shell = (await daemon.request('POST', '/v1/shells', { body: { dialect: 'bash', cwd: stateDir } })).body;
      await waitFor('output to flow', async () => (await daemon.request('GET', `/v1/processes/${printer.id}`)).body.stdout.end > 100);

      const answer = await ask(stateDir, { op: 'takeover', entry: BIN });
      expect(answer.at(-1)!.error).toMatch(/^the exec failed: execve of .* failed with errno 8$/);
      expect(execs).toEqual([process.execPath]);

      // Read again from where the handover stopped: the streams go on, whole.
      const ends = [
        (await daemon.request('GET', `/v1/terminals/${terminal.id}`)).body.output.end,
        (await daemon.request('GET', `/v1/processes/${printer.id}`)).body.stdout.end,
      ];
      await waitFor('output after the failed exec', async () => {
        const [term, proc] = [
          (await daemon.request('GET', `/v1/terminals/${terminal.id}`)).body,
          (await daemon.request('GET', `/v1/processes/${printer.id}`)).body,
        ];
        return term.output.end > ends[0] + 100 && proc.stdout.end > ends[1] + 100 && proc.stderr.end > ends[1] + 100;
      });
      expect((await daemon.request('POST', `/v1/shells/${shell.id}/run`, { body: { command: '(exit 5)' } })).body).toMatchObject({
        reason: 'completed',
        exitCode: 5,
      });
      writeFileSync(stop, '');
      expect((await daemon.request('GET', `/v1/terminals/${terminal.id}/done?timeoutMs=20000`)).body.exit).toEqual({ exitCode: 6, signal: null });
      expect((await daemon.request('GET', `/v1/processes/${printer.id}/done?timeoutMs=20000`)).body.exit).toEqual({ exitCode: 7, signal: null });
      for (const stream of ['stdout', 'stderr'] as const) {
        const read = (await daemon.request('GET', `/v1/processes/${printer.id}/output/${stream}?from=0&maxBytes=1048576`)).body;
        expect([read.gap, read.ended]).toEqual([null, true]);
        contiguous(Buffer.from(read.data, 'base64').toString('utf8'));
      }
      const read = (await daemon.request('GET', `/v1/terminals/${terminal.id}/output?from=0&maxBytes=1048576`)).body;
      contiguous(Buffer.from(read.data, 'base64').toString('utf8'));
      await daemon.request('DELETE', `/v1/shells/${shell.id}`);
    } finally {
      control.close();
    }
  });
});
