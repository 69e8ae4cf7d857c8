/**
 * Where the daemon's JSON log lines go: a file descriptor (standard output by
 * default), written synchronously so that nothing is lost at exit.
 *
 * A log reader must never stop the daemon. A reader that went away (EPIPE, a
 * closed descriptor) ends logging instead of failing every write; pino's own
 * destination retries such a write forever when it flushes at exit, and the
 * daemon then never exits. A non-blocking descriptor whose reader does not
 * keep up (EAGAIN) loses the rest of that line, not the daemon's time.
 * @module
 */
import { writeSync } from 'node:fs';

export class LogSink {
  readonly #fd: number;
  #broken = false;
  /** The last line was cut short: the next one starts on a new line. */
  #cut = false;

  constructor(fd = 1) {
    this.#fd = fd;
  }

  write(line: string): void {
    if (this.#broken) return;
    let bytes = Buffer.from(this.#cut ? `\n${line}` : line, 'utf8');
    this.#cut = false;
    while (bytes.length > 0) {
      let written: number;
      try {
        written = writeSync(this.#fd, bytes);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN') this.#cut = true;
        else this.#broken = true;
        return;
      }
      bytes = bytes.subarray(written);
    }
  }
}
