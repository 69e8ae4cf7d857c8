/**
 * `npm start` until the daemon exists: opens a bash terminal with the local
 * provider, runs one command, shows the foreground facts and closes it.
 */
import { LocalRuntime } from './provider/local-runtime.ts';

const runtime = new LocalRuntime();
const terminal = await runtime.spawnTerminal({
  argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
  cwd: process.cwd(),
  env: { PS1: '$ ' },
  rows: 24,
  cols: 80,
  graceMs: 3000,
});
terminal.output.pipe(process.stdout);
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 300));
await settle();
console.log('\nforeground at the prompt:', await terminal.inspectForeground());
await terminal.write('echo "hello from $BASH_VERSION"\r');
await settle();
const started = performance.now();
await terminal.terminate();
console.log(`\nterminated in ${(performance.now() - started).toFixed(1)} ms:`, await terminal.done);
await runtime.dispose();
