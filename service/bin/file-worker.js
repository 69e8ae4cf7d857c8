// The entry of a file worker: a process the daemon starts for an owner that
// runs as another OS user (see src/provider/fs/file-worker.ts).
import { load } from './entry.js';

await load('provider/fs/file-worker');
