/**
 * Reads of the kernel's small text files: `/proc`, and the cgroup
 * filesystems' control files. The provider reads them on its hot paths: every
 * process's stat in a table scan, a session's counters when its program exits,
 * the cgroup's events and pids while sessions end.
 *
 * `readFileSync` asks the size with fstat first, and these files report 0 or a
 * page whatever they hold, so it reads in growing chunks into fresh buffers:
 * a cgroup file costs 35 to 85 µs that way on a 2-core machine, and 15 µs with
 * open, read and close into one buffer kept for every read. The reads are
 * synchronous and never overlap, so one buffer serves them all.
 * @module
 */
import { closeSync, openSync, readSync } from 'node:fs';

/** The buffer's size between reads: a read of a larger file grows it for that read only. */
const KEPT_BYTES = 16 * 1024;

let scratch = Buffer.allocUnsafe(KEPT_BYTES);

/**
 * The whole text of the kernel file at `path`, as latin1 (the files are
 * ASCII). It reads until the kernel says the end: a short read of a `/proc`
 * file is not its end.
 * @throws the open's or the read's error (ENOENT where it is missing).
 */
export function readKernelText(path: string): string {
  const fd = openSync(path, 'r');
  try {
    let length = 0;
    for (;;) {
      if (length === scratch.length) {
        const larger = Buffer.allocUnsafe(scratch.length * 2);
        scratch.copy(larger);
        scratch = larger;
      }
      const read = readSync(fd, scratch, length, scratch.length - length, null);
      if (read === 0) break;
      length += read;
    }
    return scratch.toString('latin1', 0, length);
  } finally {
    closeSync(fd);
    if (scratch.length > KEPT_BYTES) scratch = Buffer.allocUnsafe(KEPT_BYTES);
  }
}

/** {@link readKernelText}, or undefined where the file cannot be read. */
export function kernelTextOrUndefined(path: string): string | undefined {
  try {
    return readKernelText(path);
  } catch (_error) {
    return undefined;
  }
}
