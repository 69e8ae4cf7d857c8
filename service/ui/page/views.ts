/**
 * What the page shows of one session: a terminal drawn by xterm.js, or a
 * process's two output streams. Each view knows the offset it has shown up
 * to, so after a reconnect it goes on from there; a terminal whose missed
 * bytes the daemon no longer holds is redrawn from its screen snapshot.
 */
import { Terminal } from '@xterm/xterm';
import type { OperationResult } from '../../../sdk/src/protocol/operations.ts';
import { CallError, type Link, type StreamListener, type StreamTarget } from './link.ts';

type Screen = OperationResult<'terminal.screen'>;
export type TerminalInfo = OperationResult<'terminal.get'>;
export type ProcessInfo = OperationResult<'process.get'>;
type Outcome = NonNullable<ProcessInfo['exit']>;

/** How a session ended, for a person: the exit code, or the signal. */
export function outcomeText(exit: Outcome | null): string {
  if (exit === null) return '';
  return exit.signal !== null ? `killed by ${exit.signal}` : `exit ${exit.exitCode}`;
}

export interface View<Info> {
  /** (Re)subscribes after the link opened; a first attach and a resume both come here. */
  attach(): Promise<void>;
  /** The session's latest facts, from the lists the page polls. */
  update(info: Info): void;
  dispose(): void;
}

/** Text the page keeps of one process stream; older text is cut, the offsets say how much. */
const MAX_STREAM_CHARS = 256 * 1024;

function randomWriter(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return `ui-${Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')}`;
}

function message(error: unknown): string {
  return error instanceof CallError ? `${error.code}: ${error.message}` : String(error);
}

/**
 * The page is a window on a terminal, not the terminal: the program's
 * queries (device attributes, cursor position, modes, colours, settings) are
 * the daemon's to answer, or nobody's. Were the page's emulator to answer
 * them, its answers would reach the program as typing, once per open page.
 * Handled here, they draw nothing and answer nothing.
 */
function silenceReports(term: Terminal): void {
  const handled = (): boolean => true;
  for (const prefix of [undefined, '>', '=']) term.parser.registerCsiHandler({ ...(prefix === undefined ? {} : { prefix }), final: 'c' }, handled);
  for (const prefix of [undefined, '?']) {
    term.parser.registerCsiHandler({ ...(prefix === undefined ? {} : { prefix }), final: 'n' }, handled);
    term.parser.registerCsiHandler({ ...(prefix === undefined ? {} : { prefix }), intermediates: '$', final: 'p' }, handled);
  }
  term.parser.registerCsiHandler({ prefix: '>', final: 'q' }, handled);
  term.parser.registerCsiHandler({ final: 't' }, handled);
  term.parser.registerDcsHandler({ intermediates: '$', final: 'q' }, handled);
  // Colour queries end in `?`; a colour being set is drawn as usual.
  for (const osc of [4, 10, 11, 12]) term.parser.registerOscHandler(osc, (data) => data.split(';').includes('?'));
}

export class TerminalView implements View<TerminalInfo> {
  readonly #link: Link;
  readonly #id: string;
  readonly #term: Terminal;
  readonly #status: (text: string) => void;
  readonly #target: StreamTarget;
  /** The offset of the next byte the emulator will be given. */
  #offset = 0;
  #sub: number | undefined;
  #ended = false;
  #disposed = false;
  /** Keystrokes not yet sent; sent one write at a time so that they arrive in order, each with the next sequence number. */
  #typed = '';
  #inFlight: { data: string; seq: number } | undefined;
  #seq = 0;
  readonly #writer = randomWriter();

  constructor(link: Link, id: string, host: HTMLElement, size: { rows: number; cols: number }, writable: boolean, status: (text: string) => void) {
    this.#link = link;
    this.#id = id;
    this.#status = status;
    this.#target = { kind: 'terminal', id, stream: 'output' };
    this.#term = new Terminal({ rows: size.rows, cols: size.cols, disableStdin: !writable, cursorBlink: writable, scrollback: 5000, convertEol: false });
    this.#term.open(host);
    silenceReports(this.#term);
    if (writable) {
      this.#term.onData((data) => {
        this.#typed += data;
        this.#flush();
      });
    }
  }

  async attach(): Promise<void> {
    this.#sub = undefined;
    if (this.#offset > 0 || this.#ended) {
      // A resume: the emulator already shows every byte before #offset.
      const resumed = await this.#subscribe(this.#offset);
      if (resumed.gap !== null) {
        this.#link.unsubscribe(resumed.sub);
        await this.#redraw();
      }
    } else {
      await this.#redraw();
    }
    // Input typed while the link was down goes out now; the write in flight when it dropped goes again with its
    // sequence number, which the daemon does not apply twice.
    if (this.#inFlight !== undefined) this.#send();
    else this.#flush();
  }

  /** Draws the screen snapshot and reads on from the offset it reflects; without one, from the oldest byte the daemon holds. */
  async #redraw(): Promise<void> {
    let from = 0;
    let screen: Screen | undefined;
    try {
      screen = await this.#link.call('terminal.screen', { id: this.#id });
    } catch (error) {
      if (error instanceof CallError && error.code === 'LINK_LOST') throw error;
    }
    this.#term.reset();
    if (screen !== undefined) {
      this.#draw(screen);
      from = screen.offset;
    }
    const subscribed = await this.#subscribe(from);
    this.#offset = subscribed.from;
    this.#sub = subscribed.sub;
    this.#report();
  }

  #draw(screen: Screen): void {
    this.#term.resize(screen.cols, screen.rows);
    let text = screen.alternate ? '\x1b[?1049h' : '';
    screen.lines.forEach((line, row) => (text += `\x1b[${row + 1};1H${line}`));
    text += `\x1b[${screen.cursor.row + 1};${screen.cursor.col + 1}H${screen.cursor.visible ? '' : '\x1b[?25l'}`;
    this.#term.write(text);
  }

  async #subscribe(from: number): Promise<{ sub: number; gap: { from: number; to: number } | null; from: number }> {
    let subscription = 0;
    const listener: StreamListener = {
      data: (offset, bytes, done) => {
        if (this.#sub !== subscription || offset !== this.#offset) return;
        this.#offset = offset + bytes.length;
        this.#term.write(bytes.slice(), () => {
          done();
          this.#report();
        });
      },
      gap: () => {
        // The daemon dropped bytes this view had not shown: start again from the screen.
        if (this.#sub !== subscription) return;
        this.#link.unsubscribe(subscription);
        this.#sub = undefined;
        this.#redraw().catch((error: unknown) => this.#status(message(error)));
      },
      end: (offset) => {
        if (this.#sub !== subscription) return;
        this.#ended = true;
        this.#offset = offset;
        this.#report();
      },
    };
    const subscribed = await this.#link.subscribe(this.#target, from, listener);
    subscription = subscribed.sub;
    if (subscribed.gap === null) this.#sub = subscription;
    return subscribed;
  }

  #report(): void {
    this.#status(this.#ended ? `ended at byte ${this.#offset}` : `live at byte ${this.#offset}`);
  }

  #flush(): void {
    if (this.#disposed || this.#inFlight !== undefined || !this.#link.open) return;
    if (this.#typed === '') return;
    this.#inFlight = { data: this.#typed, seq: ++this.#seq };
    this.#typed = '';
    this.#send();
  }

  #send(): void {
    const write = this.#inFlight!;
    this.#link.call('terminal.input', { id: this.#id, data: write.data, writer: this.#writer, seq: write.seq }).then(
      () => {
        this.#inFlight = undefined;
        this.#flush();
      },
      (error: unknown) => {
        // A lost link keeps the write in flight: attach() sends it again with its sequence number.
        if (error instanceof CallError && error.code === 'LINK_LOST') return;
        this.#inFlight = undefined;
        this.#status(`input refused: ${message(error)}`);
      },
    );
  }

  update(info: TerminalInfo): void {
    const { rows, cols } = info;
    if (rows !== this.#term.rows || cols !== this.#term.cols) this.#term.resize(cols, rows);
  }

  dispose(): void {
    this.#disposed = true;
    if (this.#sub !== undefined) this.#link.unsubscribe(this.#sub);
    this.#term.dispose();
  }
}

/** One stream of a process, as text in a `<pre>`. */
class StreamPane {
  readonly #pre: HTMLElement;
  readonly #decoder = new TextDecoder();
  offset = 0;
  sub: number | undefined;
  ended = false;

  constructor(pre: HTMLElement) {
    this.#pre = pre;
    pre.textContent = '';
  }

  append(text: string): void {
    const whole = (this.#pre.textContent ?? '') + text;
    this.#pre.textContent = whole.length > MAX_STREAM_CHARS ? whole.slice(whole.length - MAX_STREAM_CHARS) : whole;
  }

  decode(bytes: Uint8Array): string {
    return this.#decoder.decode(bytes, { stream: true });
  }
}

export class ProcessView implements View<ProcessInfo> {
  readonly #link: Link;
  readonly #id: string;
  readonly #panes: Record<'stdout' | 'stderr', StreamPane>;
  readonly #status: (text: string) => void;
  #facts = '';

  constructor(link: Link, id: string, stdout: HTMLElement, stderr: HTMLElement, status: (text: string) => void) {
    this.#link = link;
    this.#id = id;
    this.#panes = { stdout: new StreamPane(stdout), stderr: new StreamPane(stderr) };
    this.#status = status;
  }

  async attach(): Promise<void> {
    await Promise.all((['stdout', 'stderr'] as const).map((stream) => this.#attachStream(stream)));
  }

  async #attachStream(stream: 'stdout' | 'stderr'): Promise<void> {
    const pane = this.#panes[stream];
    if (pane.ended) return;
    pane.sub = undefined;
    let subscription = 0;
    const listener: StreamListener = {
      data: (offset, bytes, done) => {
        if (pane.sub !== subscription || offset !== pane.offset) return;
        pane.offset = offset + bytes.length;
        pane.append(pane.decode(bytes));
        done();
        this.#report();
      },
      gap: (from, to) => {
        if (pane.sub !== subscription) return;
        pane.append(`\n[… ${to - from} bytes no longer held by the daemon …]\n`);
        pane.offset = to;
      },
      end: (offset) => {
        if (pane.sub !== subscription) return;
        pane.ended = true;
        pane.offset = offset;
        pane.append(pane.decode(new Uint8Array()));
        this.#report();
      },
    };
    try {
      const subscribed = await this.#link.subscribe({ kind: 'process', id: this.#id, stream }, pane.offset, listener);
      subscription = subscribed.sub;
      pane.sub = subscription;
      if (subscribed.gap !== null) pane.append(`[… ${subscribed.gap.to - subscribed.gap.from} bytes no longer held by the daemon …]\n`);
      pane.offset = subscribed.from;
    } catch (error) {
      if (error instanceof CallError && error.code === 'STREAM_NOT_AVAILABLE') {
        pane.ended = true;
        pane.append('(not captured)');
        return;
      }
      throw error;
    }
  }

  #report(): void {
    const { stdout, stderr } = this.#panes;
    this.#status(
      `${this.#facts}stdout ${stdout.offset} bytes${stdout.ended ? ' (ended)' : ''}, stderr ${stderr.offset} bytes${stderr.ended ? ' (ended)' : ''}`,
    );
  }

  update(info: ProcessInfo): void {
    const outcome = outcomeText(info.exit);
    this.#facts = `${info.status}${outcome === '' ? '' : ` (${outcome})`} · `;
    this.#report();
  }

  dispose(): void {
    for (const pane of Object.values(this.#panes)) if (pane.sub !== undefined) this.#link.unsubscribe(pane.sub);
  }
}
