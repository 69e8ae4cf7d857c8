import '../test/helpers/with-resolvers.ts';
import { writeFileSync, readFileSync } from 'node:fs';
import { connect } from '@execworld/sdk';
import { RemoteFiles } from '@execworld/sdk/fs';
import { startDaemonProcess } from './lib/daemon.ts';
const daemon = await startDaemonProcess([]);
const runtime = await connect(daemon.url, { token: daemon.token });
const fs = new RemoteFiles(runtime, { cwd: '/tmp' });
writeFileSync('/tmp/read10.txt', 'x'.repeat(10 * 1024 * 1024 - 1) + '\n');
const ph: Record<string, number[]> = { local: [], readBytes: [], readText: [], decode: [] };
for (let i = 0; i < 31; i++) {
  let s = performance.now(); readFileSync('/tmp/read10.txt', 'utf8'); ph.local.push(performance.now() - s);
  const t = await fs.resolve('read10.txt');
  s = performance.now(); const b = await fs.readBytes(t, undefined, Number.MAX_SAFE_INTEGER); ph.readBytes.push(performance.now() - s);
  s = performance.now(); Buffer.from(b.buffer).toString('latin1'); ph.decode.push(performance.now() - s);
  const t2 = await fs.resolve('read10.txt');
  s = performance.now(); await fs.readText(t2); ph.readText.push(performance.now() - s);
}
const med = (x: number[]) => [...x].sort((p, q) => p - q)[15]!.toFixed(2);
console.log(Object.fromEntries(Object.entries(ph).map(([k, v]) => [k, med(v)])));
await runtime.dispose(); await daemon.stop();
