// The entry of a file worker: a process the daemon starts for an owner that
// runs as another OS user (see src/provider/fs/file-worker.ts). Like the
// daemon's own bin, it runs the TypeScript sources directly.
import { register } from 'tsx/esm/api';

register();
await import('../src/provider/fs/file-worker.ts');
