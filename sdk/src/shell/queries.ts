/**
 * Answers a shell's terminal queries (the cursor position `ESC[6n`, device
 * attributes) when nothing else does: pwsh's line editor asks for the cursor
 * position at every prompt and reads nothing else until it is answered. The
 * answers come from a headless terminal emulator fed the shell's output, so
 * they reflect every cursor movement, wrap and control sequence printed so
 * far. The emulator keeps no scrollback; it is loaded only for a dialect that
 * needs it.
 * @module
 */
import xterm from '@xterm/headless';

export class QueryAnswerer {
  readonly #terminal: InstanceType<typeof xterm.Terminal>;

  /** @param reply - called with each answer, in order, to be typed into the terminal. */
  constructor(rows: number, cols: number, reply: (answer: string) => void) {
    this.#terminal = new xterm.Terminal({ rows, cols, scrollback: 0, allowProposedApi: true });
    this.#terminal.onData(reply);
  }

  /** Parses the next chunk of the shell's output (answers follow as it is parsed). */
  feed(chunk: Uint8Array): void {
    this.#terminal.write(chunk);
  }

  dispose(): void {
    this.#terminal.dispose();
  }
}
