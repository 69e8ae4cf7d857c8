/**
 * A daemon terminal session seen as a seam terminal, for a shell the daemon
 * runs itself: its output is read from the session's ring (as any client
 * reads it), so the shell shares the terminal with attached clients and
 * never holds the ring full; input goes through the session.
 * @module
 */
import { Readable } from 'node:stream';
import type { SubprocessTerminalForeground, SubprocessTerminalHandle, SubprocessTerminalSignal, UsageMetering } from '@execworld/sdk/seam';
import type { TerminalSession } from './terminal-session.ts';

/** Largest piece pushed at once. */
const PIECE_BYTES = 64 * 1024;

/** @param from - where the shell reads on from (a takeover's: the offset its engine had read to); the ring's start by default. */
export function terminalView(session: TerminalSession, from?: number): SubprocessTerminalHandle & UsageMetering {
  const ring = session.output;
  let sent = from ?? ring.start;
  /** Offset up to which the shell's listeners were handed every byte (or the ring dropped it first). */
  let emitted = sent;
  const output = new Readable({ read: () => undefined });
  // First listener: it counts what the next ones (the shell's) got.
  output.on('data', (chunk: Buffer) => (emitted += chunk.length));
  const pump = (): void => {
    while (sent < ring.end) {
      const slice = ring.read(sent, PIECE_BYTES);
      if (slice.data.length === 0) break;
      // The pump reads each append at once, so the ring never drops a byte before the shell has it; were it
      // to, the shell would go on after the gap, and the dropped bytes count as handed over.
      if (slice.from > sent) emitted += slice.from - sent;
      output.push(slice.data);
      sent = slice.next;
      ring.consumed(sent);
    }
    if (ring.ended && sent >= ring.end) output.push(null);
  };
  const unsubscribe = ring.onChange(pump);
  output.once('close', unsubscribe);
  pump();
  return {
    pid: session.handle.pid,
    output,
    done: session.handle.done,
    write: async (data: string) => {
      // The shell's use of its terminal is use: the orphan sweep leaves it alone.
      session.lastTouched = Date.now();
      await session.input(data, undefined, undefined);
    },
    inspectForeground: async (): Promise<SubprocessTerminalForeground | undefined> => {
      const facts = await session.handle.inspectForeground();
      // A proven wait counts once the shell has every byte printed before it.
      if (facts?.inputWaiting === true && emitted < ring.end) return { processGroupId: facts.processGroupId, inputWaiting: false };
      return facts;
    },
    signalForeground: (signal: SubprocessTerminalSignal) => session.handle.signalForeground(signal),
    terminate: () => session.terminate(),
    // The shell measures each run from its session's cell, as it would a local terminal's.
    usageMeter: () => session.handle.usageMeter?.(),
  };
}
