/**
 * The minimal WebSocket terminal relay of performance.md §2.1, the bar a
 * naive Node daemon sets: one WebSocket per terminal, node-pty in Buffer mode,
 * a channel byte per message (0 input, 1 output, 3 exit code), and
 * backpressure that pauses the pty above 1 MiB queued in the socket and
 * resumes below 256 KiB. Prints its port, then serves until killed.
 */
import * as nodePty from 'node-pty';
import { WebSocketServer } from 'ws';

const HIGH = 1024 * 1024;
const LOW = 256 * 1024;
const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
let peakQueued = 0;

server.on('connection', (socket, request) => {
  const argv = JSON.parse(new URL(request.url ?? '/', 'http://relay').searchParams.get('argv') ?? '[]') as string[];
  const env = JSON.parse(new URL(request.url ?? '/', 'http://relay').searchParams.get('env') ?? '{}') as Record<string, string>;
  const pty = nodePty.spawn(argv[0]!, argv.slice(1), { cols: 80, rows: 24, cwd: '/tmp', env, encoding: null });
  let paused = false;
  const check = (): void => {
    peakQueued = Math.max(peakQueued, socket.bufferedAmount);
    if (!paused && socket.bufferedAmount > HIGH) {
      paused = true;
      pty.pause();
    } else if (paused && socket.bufferedAmount < LOW) {
      paused = false;
      pty.resume();
    }
  };
  pty.onData((chunk) => {
    const data = chunk as unknown as Buffer;
    const frame = Buffer.allocUnsafe(data.length + 1);
    frame[0] = 1;
    data.copy(frame, 1);
    socket.send(frame, () => check());
    check();
  });
  pty.onExit(({ exitCode }) => {
    socket.send(Buffer.from([3, exitCode & 0xff]), () => socket.close());
  });
  socket.on('message', (message: Buffer) => {
    if (message[0] === 0) pty.write(message.subarray(1).toString('utf8'));
  });
  socket.on('close', () => {
    try {
      pty.kill();
    } catch (_error) {
      // Exited already.
    }
  });
});

server.on('listening', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address !== null ? address.port : 0}\n`);
});
process.on('SIGUSR2', () => process.stdout.write(`peak ${peakQueued}\n`));
