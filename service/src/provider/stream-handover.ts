/**
 * A takeover's stop and restart of the reads of a libuv stream: a process's
 * output pipe or a terminal's master, read by a `net.Socket` (or a
 * `tty.ReadStream`, which is one).
 *
 * Pausing a socket is not enough to leave the bytes in the kernel: a paused
 * socket's handle may read on into the socket's buffer. The handle itself is
 * stopped (libuv's readStop), and what the socket had read is handed to its
 * 'data' listeners first, in order, so that nothing read is left behind in
 * this image. Starting again takes the handle too: Node's stream believes a
 * read is under way (one was, when the handle was stopped) and would not ask
 * the handle to read by itself.
 * @module
 */
import type { Readable } from 'node:stream';

interface StreamHandle {
  reading: boolean;
  readStop(): number;
  readStart(): number;
}

function handleOf(socket: Readable): StreamHandle | undefined {
  return (socket as unknown as { _handle?: StreamHandle | null })._handle ?? undefined;
}

/** Stops reading `socket` at its descriptor, after its 'data' listeners had every byte it read. */
export function stopReading(socket: Readable): void {
  socket.pause();
  // read() hands each chunk the socket holds to its 'data' listeners.
  while (socket.read() !== null);
  const handle = handleOf(socket);
  if (handle === undefined) return;
  handle.readStop();
  handle.reading = false;
}

/** Reads `socket` again after {@link stopReading} (a takeover that did not happen). */
export function readAgain(socket: Readable): void {
  socket.resume();
  const handle = handleOf(socket);
  if (handle !== undefined && !handle.reading && handle.readStart() === 0) handle.reading = true;
}
