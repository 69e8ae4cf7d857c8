// The entry of a session watcher: a process the daemon starts beside itself
// that ends the daemon's sessions once the daemon dies (see
// src/provider/containment/session-watcher.ts). While the daemon lives it only
// waits for its stdin, a pipe from the daemon, to end, with none of the
// daemon's modules loaded; the recovery is loaded when it is needed.
import process from 'node:process';
import { load } from './entry.js';

let said = '';
let done = false;
const finish = async () => {
  if (done) return;
  done = true;
  // A clean shutdown says so before it closes the pipe: its sessions are ended and its journal removed.
  if (said.startsWith('closed\n')) process.exit(0);
  try {
    const { afterDaemon } = await load('provider/containment/session-watcher');
    await afterDaemon();
    process.exit(0);
  } catch (error) {
    process.stderr.write(`execworld session watcher: ${error?.stack ?? error}\n`);
    process.exit(1);
  }
};
process.stdin.setEncoding('latin1');
process.stdin.on('data', (chunk) => {
  if (said.length < 64) said += chunk;
});
process.stdin.on('end', finish);
process.stdin.on('error', finish);
