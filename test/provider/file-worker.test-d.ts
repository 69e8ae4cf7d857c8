/**
 * The calls the daemon makes of a file worker are typed from the interfaces
 * the worker serves (OwnerFiles, OwnerTransfer, UploadStage, OpenContent): a
 * call the worker does not have, or arguments of the wrong type, fail the
 * type-check, and each call answers the type its interface answers. Vitest
 * runs this file as a type test (`typecheck` in vitest.config.ts), and
 * `tsc -p tsconfig.json` compiles it: a type error here is a failed test.
 */
import { describe, expectTypeOf, it } from 'vitest';
import type { FileDigest, FsInfo, FsTarget } from '@execworld/sdk/fs';
import type { FileWorker } from '../../service/src/provider/fs/worker-files.ts';

declare const worker: FileWorker;
const target: FsTarget = { targetKey: '/srv/a', displayPath: '/srv/a' };

describe('a file worker call', () => {
  it('is refused for a method the worker does not have', () => {
    // @ts-expect-error -- the worker has no unlink; removing is `remove`
    void worker.call('unlink', undefined, '/srv/a');
    // @ts-expect-error -- nor a call named by a string that is not one of its methods
    void worker.call('stat ', undefined, target);
  });

  it('is refused with arguments of the wrong type or number', () => {
    // @ts-expect-error -- stat takes a resolved target, not a path
    void worker.call('stat', undefined, '/srv/a');
    // @ts-expect-error -- the root comes first, and is a path
    void worker.call('stat', 7, target);
    // @ts-expect-error -- mkdir's options say whether parents are made
    void worker.call('mkdir', undefined, '/srv/a', { cwd: '/' });
    // @ts-expect-error -- a sink is written bytes, not text
    void worker.call('sinkWrite', 1, 'text');
    // @ts-expect-error -- an abort signal cannot cross the channel
    void worker.call('stat', undefined, target, new AbortController().signal);
    // @ts-expect-error -- the uid and gid a worker becomes are numbers
    void worker.call('become', 'nobody', 65534);
  });

  it('answers what the interface it serves answers', () => {
    expectTypeOf(worker.call('stat', undefined, target)).resolves.toEqualTypeOf<FsInfo | undefined>();
    expectTypeOf(worker.call('digest', '/srv', 'a', { cwd: undefined })).resolves.toEqualTypeOf<FileDigest>();
    expectTypeOf(worker.call('readBytes', undefined, target, undefined, 10)).resolves.toEqualTypeOf<Uint8Array>();
    expectTypeOf(worker.call('stageOffset', 1)).resolves.toEqualTypeOf<number>();
  });
});
