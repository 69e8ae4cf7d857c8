/**
 * The real DeepSeek file tools (dsh-tool-fs with dsh-fs-observation-policy)
 * and the persistent bash tool, composed over our RemoteWorld plugin: both
 * seams are the daemon's world, so what one tool writes the other sees, and
 * the policy's stale checks hold across them.
 */
import '../helpers/with-resolvers.ts';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from '@deepseek-ai/cordis';
import { describe, expect } from 'vitest';
import { RemoteWorld } from '@execworld/sdk/dsh';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { composeWithFiles, type FilesHarness } from '../helpers/dsh-harness.ts';

let daemon: TestDaemon;
let harness: FilesHarness;
const dir = mkdtempSync(join(tmpdir(), 'dsh-files-'));

const test = daemonTest();

test.beforeAll(async ({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  harness = await composeWithFiles((root: Context) => root.plugin(RemoteWorld, { url: daemon.url, token: ALICE }), dir);
});
test.afterAll(async () => {
  await harness.close();
  rmSync(dir, { recursive: true, force: true });
});

const exec = () => ({ agent: harness.owner, signal: AbortSignal.timeout(30_000) });
const bash = (command: string): Promise<string> => harness.bash.execute({ command }, exec());

describe('the file tools and the bash tool over one remote world', () => {
  test('the write tool creates a file the bash tool sees', async () => {
    const outcome = await harness.write.execute({ file_path: 'made-by-tool.txt', content: 'from the write tool\n' }, exec());
    expect(outcome).toMatchObject({ operation: 'create', before: null, after: 'from the write tool\n' });
    expect(await bash(`cat ${join(dir, 'made-by-tool.txt')}`)).toBe('from the write tool');
  });

  test('the read tool reads what the shell wrote', async () => {
    await bash(`cd ${dir} && printf 'first\\nsecond\\n' > made-by-shell.txt`);
    const read = await harness.read.execute({ file_path: 'made-by-shell.txt' }, exec());
    expect(read).toMatchObject({ path: join(dir, 'made-by-shell.txt'), totalLines: 2 });
    expect((read.lines as { text: string }[]).map((line) => line.text)).toEqual(['first', 'second']);
  });

  test('refuses an edit after the shell changed the file it read, and applies one after a fresh read', async () => {
    await bash(`printf 'alpha\\nbeta\\n' > ${join(dir, 'guarded.txt')}`);
    await harness.read.execute({ file_path: 'guarded.txt' }, exec());
    await bash(`printf 'alpha\\nBETA\\n' > ${join(dir, 'guarded.txt')}`);
    const stale = await harness.edit.execute({ file_path: 'guarded.txt', old_string: 'alpha', new_string: 'ALPHA' }, exec()).catch((error: unknown) => error);
    expect(stale).toMatchObject({ name: 'FsError', code: 'FS_STALE_VERSION' });
    expect(readFileSync(join(dir, 'guarded.txt'), 'utf8')).toBe('alpha\nBETA\n');
    await harness.read.execute({ file_path: 'guarded.txt' }, exec());
    expect(await harness.edit.execute({ file_path: 'guarded.txt', old_string: 'alpha', new_string: 'ALPHA' }, exec())).toMatchObject({
      after: 'ALPHA\nBETA\n',
    });
    expect(await bash(`cat ${join(dir, 'guarded.txt')}`)).toBe('ALPHA\nBETA');
  });

  test('refuses to overwrite a file the agent never read', async () => {
    await bash(`echo precious > ${join(dir, 'unread.txt')}`);
    const refused = await harness.write.execute({ file_path: 'unread.txt', content: 'clobbered' }, exec()).catch((error: unknown) => error);
    expect(refused).toMatchObject({ name: 'FsError', code: 'FS_NOT_OBSERVED' });
    expect(await bash(`cat ${join(dir, 'unread.txt')}`)).toBe('precious');
  });
});
