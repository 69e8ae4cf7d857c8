/**
 * What the page shows of one session: a terminal drawn by xterm.js, a
 * process's two output streams, or a shell's runs. A view subscribes once;
 * the link's client resumes its subscriptions after a reconnect from the
 * byte after the last one shown, and a terminal whose missed bytes the
 * daemon no longer holds is redrawn from its screen snapshot.
 */
import { Terminal } from '@xterm/xterm';
import { isExecworldError, RemoteError } from '@execworld/sdk/client';
import { schemas, type OperationResult } from '@execworld/sdk/protocol';
import { randomId, type Link, type StreamHandlers, type StreamTarget, type Subscription } from './link.ts';

type Screen = OperationResult<'terminal.screen'>;
export type TerminalInfo = OperationResult<'terminal.get'>;
export type ProcessInfo = OperationResult<'process.get'>;
export type ShellInfo = OperationResult<'shell.get'>;
type History = OperationResult<'shell.history'>;
type RunRecord = History['runs'][number];
type RunAnswer = OperationResult<'shell.run'>;
type Outcome = NonNullable<ProcessInfo['exit']>;

/** How a session ended, for a person: the exit code, or the signal. */
export function outcomeText(exit: Outcome | null): string {
  if (exit === null) return '';
  return exit.signal !== null ? `killed by ${exit.signal}` : `exit ${exit.exitCode}`;
}

export interface View<Info> {
  /** Shows the session from where it stands, and subscribes to what it prints. */
  attach(): Promise<void>;
  /** The link is open again (its client has resumed the view's subscriptions): what waited for it goes out. */
  resumed(): void;
  /** The session's latest facts, from the lists the page polls. */
  update(info: Info): void;
  dispose(): void;
}

/** Text the page keeps of one process stream; older text is cut, the offsets say how much. */
const MAX_STREAM_CHARS = 256 * 1024;

/** An error for a person: its code (the catalog's for the daemon's answers, the SDK's for the connection's own) and message. */
export function message(error: unknown): string {
  return isExecworldError(error) ? `${error.code}: ${error.message}` : String(error);
}

/** An action that did not succeed, for a person: refused by the daemon, or failed on the way (its outcome unknown, say). */
export function failed(action: string, error: unknown): string {
  return `${action} ${error instanceof RemoteError ? 'refused' : 'failed'}: ${message(error)}`;
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
  /**
   * The offset up to which the emulator has taken the bytes in: set in xterm's write callbacks, which run in the
   * order of the writes, so the status never names a byte the screen has not been given.
   */
  #offset = 0;
  #subscription: Subscription | undefined;
  /**
   * From a screen snapshot until the subscription made at its offset delivers or the link reconnects: a gap
   * meanwhile is the ring having moved on between the two calls, taken as it is rather than redrawn again.
   */
  #fresh = false;
  #ended = false;
  #disposed = false;
  /** Keystrokes not yet sent; sent one write at a time so that they arrive in order, each with the next sequence number. */
  #typed = '';
  #inFlight: { data: string; seq: number } | undefined;
  #seq = 0;
  readonly #writer = randomId('ui');
  readonly #host: HTMLElement;
  readonly #writable: boolean;
  readonly #showControl: (text: string) => void;
  /** Whether this page sizes the terminal: it may write, and took the keyboard (or started the terminal). */
  #inControl = false;
  /** The size the pane fits, as last measured. */
  #fits: { rows: number; cols: number } | undefined;
  /** Polls in a row that found the terminal at a size this page did not give it: another client took control. */
  #overruled = 0;
  #resizing = false;
  readonly #onWindowResize = (): void => {
    clearTimeout(this.#resizeTimer);
    this.#resizeTimer = setTimeout(() => this.#fit(), RESIZE_DEBOUNCE_MS);
  };
  #resizeTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * @param host - the pane the terminal is drawn in, whose size it takes once in control.
   * @param control - where the page says whether it is in control or watching.
   * @param take - start in control (the page started the terminal) and take the keyboard.
   */
  constructor(
    link: Link,
    id: string,
    host: HTMLElement,
    info: Pick<TerminalInfo, 'rows' | 'cols' | 'status'>,
    writable: boolean,
    status: (text: string) => void,
    control: (text: string) => void,
    take = false,
  ) {
    this.#link = link;
    this.#id = id;
    this.#status = status;
    this.#host = host;
    this.#writable = writable && info.status === 'running';
    this.#showControl = control;
    this.#target = { kind: 'terminal', id, stream: 'output' };
    this.#term = new Terminal({
      rows: info.rows,
      cols: info.cols,
      disableStdin: !this.#writable,
      cursorBlink: this.#writable,
      scrollback: 5000,
      convertEol: false,
    });
    this.#term.open(host);
    silenceReports(this.#term);
    if (this.#writable) {
      // Taking the keyboard is taking control: the page a person types in is the one whose pane sizes the
      // terminal. Typing takes it back too, after another page took it while this one kept the focus.
      this.#term.onData((data) => {
        this.#take();
        this.#typed += data;
        this.#flush();
      });
      this.#term.textarea?.addEventListener('focus', () => this.#take());
    }
    addEventListener('resize', this.#onWindowResize);
    if (take && this.#writable) {
      this.#inControl = true;
      this.#term.focus();
    }
    this.#fit();
  }

  #take(): void {
    if (this.#inControl || this.#ended) return;
    this.#inControl = true;
    this.#fit();
  }

  /**
   * Measures the pane in cells of the emulator's font; in control, sizes the emulator and the remote terminal
   * to it. A watcher only says what would fit: the terminal keeps the size its controller gave it.
   */
  #fit(): void {
    if (this.#disposed) return;
    const fits = paneCells(this.#term, this.#host);
    if (fits !== undefined) this.#fits = fits;
    if (this.#inControl && !this.#ended && this.#fits !== undefined) {
      const { rows, cols } = this.#fits;
      if (rows !== this.#term.rows || cols !== this.#term.cols) this.#term.resize(cols, rows);
      this.#resize(rows, cols);
    }
    this.#reportControl();
  }

  #resize(rows: number, cols: number): void {
    if (!this.#link.open) return;
    this.#resizing = true;
    this.#overruled = 0;
    this.#link.call('terminal.resize', { id: this.#id, rows, cols }).then(
      () => {
        this.#resizing = false;
        this.#overruled = 0;
      },
      (error: unknown) => {
        this.#resizing = false;
        this.#status(failed('resize', error));
      },
    );
  }

  #reportControl(): void {
    const size = `${this.#term.cols}×${this.#term.rows}`;
    if (this.#ended) this.#showControl(`ended · ${size}`);
    else if (this.#inControl) this.#showControl(`in control · ${size}`);
    else {
      const fits = this.#fits === undefined ? '' : ` · the pane fits ${this.#fits.cols}×${this.#fits.rows}`;
      this.#showControl(`watching · ${size}${fits}${this.#writable ? ' · click the terminal to take control' : ''}`);
    }
  }

  async attach(): Promise<void> {
    await this.#redraw();
    this.#flush();
  }

  resumed(): void {
    this.#fresh = false;
    // Input typed while the link was down goes out now. The write in flight when it dropped the client sends
    // again itself, with its sequence number, which the daemon does not apply twice.
    this.#flush();
  }

  /** Draws the screen snapshot and reads on from the offset it reflects; without one, from the oldest byte the daemon holds. */
  async #redraw(): Promise<void> {
    this.#subscription?.close();
    this.#subscription = undefined;
    let from = 0;
    let screen: Screen | undefined;
    try {
      screen = await this.#link.call('terminal.screen', { id: this.#id });
    } catch (error) {
      // A daemon that keeps no screen for it: the terminal is drawn from its oldest byte held.
      if (!(error instanceof RemoteError)) throw error;
    }
    if (this.#disposed) return;
    this.#term.reset();
    if (screen !== undefined) {
      this.#draw(screen);
      from = screen.offset;
    }
    this.#fresh = true;
    const subscription = this.#subscribe(from);
    this.#subscription = subscription;
    this.#drawn(subscription, from);
    // The snapshot drew the terminal at its remote size; the page in control gives it its pane's again.
    this.#fit();
  }

  #draw(screen: Screen): void {
    this.#term.resize(screen.cols, screen.rows);
    let text = screen.alternate ? '\x1b[?1049h' : '';
    screen.lines.forEach((line, row) => (text += `\x1b[${row + 1};1H${line}`));
    text += `\x1b[${screen.cursor.row + 1};${screen.cursor.col + 1}H${screen.cursor.visible ? '' : '\x1b[?25l'}`;
    this.#term.write(text);
  }

  #subscribe(from: number): Subscription {
    const current = (): boolean => this.#subscription === subscription;
    const handlers: StreamHandlers = {
      onData: (chunk, offset) => {
        if (!current()) return;
        this.#fresh = false;
        const next = offset + chunk.length;
        // Acknowledged once drawn: the daemon sends no more than a window ahead of what the page has shown.
        this.#term.write(chunk.slice(), () => {
          subscription.ack(next);
          if (current()) {
            this.#offset = next;
            this.#report();
          }
        });
      },
      onGap: (_from, to) => {
        if (!current()) return;
        if (this.#fresh) {
          this.#drawn(subscription, to);
          return;
        }
        // The daemon dropped bytes this view had not shown: start again from the screen.
        this.#redraw().catch((error: unknown) => this.#status(message(error)));
      },
      onEnd: (offset) => {
        if (!current()) return;
        this.#ended = true;
        this.#inControl = false;
        this.#drawn(subscription, offset);
        this.#reportControl();
      },
      onError: (error) => {
        if (current()) this.#status(`the terminal's output stopped: ${message(error)}`);
      },
    };
    const subscription = this.#link.subscribe(this.#target, from, handlers);
    return subscription;
  }

  /** Reports `offset` once the emulator has taken every byte written before it, if `subscription` is still the view's. */
  #drawn(subscription: Subscription, offset: number): void {
    this.#term.write('', () => {
      if (this.#subscription !== subscription) return;
      this.#offset = offset;
      this.#report();
    });
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
    // With its writer and sequence number the write is idempotent: the client sends it again after a reconnect.
    this.#link.call('terminal.input', { id: this.#id, data: write.data, writer: this.#writer, seq: write.seq }).then(
      () => {
        this.#inFlight = undefined;
        this.#flush();
      },
      (error: unknown) => {
        this.#inFlight = undefined;
        this.#status(failed('input', error));
      },
    );
  }

  update(info: TerminalInfo): void {
    const { rows, cols } = info;
    const differs = rows !== this.#term.rows || cols !== this.#term.cols;
    if (this.#inControl) {
      // Twice in a row at a size this page did not give it, with none of its own resizes in flight: another
      // page took control. This one watches from now on rather than fight over the size.
      if (!differs || this.#resizing) this.#overruled = 0;
      else if (++this.#overruled >= 2) this.#inControl = false;
      if (this.#inControl) return;
    }
    if (differs) this.#term.resize(cols, rows);
    this.#reportControl();
  }

  dispose(): void {
    this.#disposed = true;
    clearTimeout(this.#resizeTimer);
    removeEventListener('resize', this.#onWindowResize);
    this.#subscription?.close();
    this.#subscription = undefined;
    this.#term.dispose();
  }
}

/** How long the window's size must hold before the terminal is resized to it: a drag resizes once, at its end. */
const RESIZE_DEBOUNCE_MS = 150;
/** Room xterm.js keeps at the right for its scroll bar. */
const SCROLLBAR_PX = 14;

/** The emulator's cell, in CSS pixels, as its renderer measured it (xterm.js exposes it to its add-ons only). */
function cellSize(term: Terminal): { width: number; height: number } | undefined {
  const core = (term as unknown as { _core?: { _renderService?: { dimensions?: { css?: { cell?: { width: number; height: number } } } } } })._core;
  const cell = core?._renderService?.dimensions?.css?.cell;
  return cell !== undefined && cell.width > 0 && cell.height > 0 ? cell : undefined;
}

/** The rows and columns of `term`'s cells that fit in `pane`'s content box; undefined while it is not laid out. */
function paneCells(term: Terminal, pane: HTMLElement): { rows: number; cols: number } | undefined {
  const cell = cellSize(term);
  if (cell === undefined || pane.clientWidth === 0) return undefined;
  const style = getComputedStyle(pane);
  const width = pane.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - SCROLLBAR_PX;
  const height = pane.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  return {
    cols: Math.min(schemas.MAX_TERMINAL_SIZE, Math.max(2, Math.floor(width / cell.width))),
    rows: Math.min(schemas.MAX_TERMINAL_SIZE, Math.max(1, Math.floor(height / cell.height))),
  };
}

/** One stream of a process, as text in a `<pre>`. */
class StreamPane {
  readonly #pre: HTMLElement;
  readonly #decoder = new TextDecoder();
  offset = 0;
  subscription: Subscription | undefined;
  ended = false;

  constructor(pre: HTMLElement) {
    this.#pre = pre;
    pre.textContent = '';
  }

  /** Says that bytes [from, to) are gone: the daemon no longer held them when this pane asked. */
  gap(from: number, to: number): void {
    this.append(`${this.#pre.textContent === '' ? '' : '\n'}[… ${to - from} bytes no longer held by the daemon …]\n`);
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

  attach(): Promise<void> {
    for (const stream of ['stdout', 'stderr'] as const) this.#attachStream(stream);
    return Promise.resolve();
  }

  resumed(): void {}

  #attachStream(stream: 'stdout' | 'stderr'): void {
    const pane = this.#panes[stream];
    if (pane.ended) return;
    const subscription = this.#link.subscribe({ kind: 'process', id: this.#id, stream }, pane.offset, {
      onData: (chunk, offset) => {
        pane.offset = offset + chunk.length;
        pane.append(pane.decode(chunk));
        subscription.ack(pane.offset);
        this.#report();
      },
      onGap: (from, to) => {
        pane.gap(from, to);
        pane.offset = to;
      },
      onEnd: (offset) => {
        pane.ended = true;
        pane.offset = offset;
        pane.append(pane.decode(new Uint8Array()));
        this.#report();
      },
      onError: (error) => {
        pane.ended = true;
        if (error.code === 'STREAM_NOT_AVAILABLE') pane.append('(not captured)');
        else this.#status(`${stream} stopped: ${message(error)}`);
      },
    });
    pane.subscription = subscription;
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
    for (const pane of Object.values(this.#panes)) pane.subscription?.close();
  }
}

/** A shell run's state for a person: running, its exit, the program that waits for input, or that it was interrupted. */
export function runOutcome(run: Pick<RunRecord, 'state' | 'exitCode' | 'signal' | 'waitingFor'>): string {
  const code = run.exitCode === null ? '' : ` ${run.exitCode}`;
  switch (run.state) {
    case 'running':
    case 'idle_timeout':
    case 'wait_limit':
      return 'running';
    case 'waiting_for_input':
      return `waiting for input: ${run.waitingFor?.command ?? 'a program'}`;
    case 'completed':
      // The status of a command a signal ended (128+n): SIGINT is what Ctrl-C and the page's Interrupt send.
      if (run.signal === 'SIGINT') return 'interrupted (SIGINT)';
      return run.signal !== null ? `killed by ${run.signal}` : `exited${code}`;
    case 'timeout':
      return 'interrupted (timed out)';
    case 'canceled':
      return 'interrupted';
    case 'shell_exited':
      return `shell exited${code}`;
  }
}

/** How often an open shell view asks for the shell's runs. */
const HISTORY_POLL_MS = 1000;
/**
 * A run the page drives answers after this much silence and is waited on again, so that its output shows as it
 * comes (each answer carries what was printed since the one before) and the page can interrupt it between calls.
 */
const DRIVE_IDLE_MS = 1000;

/**
 * A persistent shell, shown as its runs: each command with its state and its output as text, never the
 * terminal's raw stream, where the engine's markers are. A page that may write runs commands (or answers the
 * program that waits for input) through the shell's own calls, and interrupts them.
 */
export class ShellView implements View<ShellInfo> {
  readonly #link: Link;
  readonly #id: string;
  readonly #list: HTMLElement;
  readonly #status: (text: string) => void;
  #info: ShellInfo;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #disposed = false;
  /** A run this page started or answered, whose calls it makes until it completes or waits for input. */
  #driving = false;
  #interruptAsked = false;

  constructor(link: Link, info: ShellInfo, list: HTMLElement, status: (text: string) => void) {
    this.#link = link;
    this.#id = info.id;
    this.#info = info;
    this.#list = list;
    this.#status = status;
    list.replaceChildren();
  }

  async attach(): Promise<void> {
    await this.#load();
  }

  /** Its poll goes on by itself: a listing asked for while the link was down was held for it. */
  resumed(): void {}

  async #load(): Promise<void> {
    clearTimeout(this.#timer);
    if (this.#disposed) return;
    try {
      const history = await this.#link.call('shell.history', { id: this.#id });
      if (this.#disposed) return;
      this.#render(history);
    } catch (error) {
      if (this.#disposed) return;
      this.#status(`could not list the runs: ${message(error)}`);
      if (isExecworldError(error) && error.code === 'NOT_FOUND') return;
    }
    this.#timer = setTimeout(() => void this.#load(), HISTORY_POLL_MS);
  }

  #render(history: History): void {
    const atBottom = this.#list.scrollHeight - this.#list.scrollTop - this.#list.clientHeight < 8;
    this.#list.replaceChildren(
      ...history.runs.map((run) => {
        const li = document.createElement('li');
        li.dataset.state = run.state;
        li.dataset.failed = String(run.exitCode !== null && run.exitCode !== 0);
        const head = document.createElement('div');
        head.className = 'head';
        const command = document.createElement('code');
        command.className = 'command';
        command.textContent = run.command;
        const outcome = document.createElement('span');
        outcome.className = 'outcome';
        outcome.textContent = runOutcome(run);
        head.append(command, outcome);
        const output = document.createElement('pre');
        output.textContent = run.output;
        output.hidden = run.output === '';
        li.append(head, output);
        return li;
      }),
    );
    if (atBottom) this.#list.scrollTop = this.#list.scrollHeight;
    const kept = history.dropped === 0 ? '' : ` (the ${history.dropped} before them are no longer kept)`;
    this.#status(`${this.#info.state} · ${history.runs.length} runs${kept}`);
  }

  /**
   * Runs `text` as a command; when the last run waits for input (or went quiet), sends it to that run's
   * program as a line instead.
   */
  async submit(text: string): Promise<void> {
    if (this.#driving) {
      this.#status('a command of this page is still running: wait for it, or interrupt it');
      return;
    }
    this.#driving = true;
    try {
      // What the shell holds now, not what the last listing showed (a view made anew has none yet): a run that waits
      // for input or went quiet takes the line as its input; otherwise the line is a new command.
      const open = (await this.#link.call('shell.get', { id: this.#id })).state === 'open';
      let answer: RunAnswer = open
        ? await this.#link.call('shell.send', { id: this.#id, input: `${text}\r`, idleTimeoutMs: DRIVE_IDLE_MS })
        : await this.#link.call('shell.run', { id: this.#id, command: text, idleTimeoutMs: DRIVE_IDLE_MS });
      while (answer.reason === 'idle_timeout' && !this.#disposed) {
        void this.#load();
        answer = this.#interruptAsked
          ? await this.#link.call('shell.interrupt', { id: this.#id })
          : await this.#link.call('shell.wait', { id: this.#id, idleTimeoutMs: DRIVE_IDLE_MS });
      }
    } catch (error) {
      this.#status(failed('the command', error));
    } finally {
      this.#driving = false;
      this.#interruptAsked = false;
      void this.#load();
    }
  }

  /**
   * Interrupts the open run. One that a call holds (this page's, or another client's) gets SIGINT through the
   * shell's terminal at once, as Ctrl-C would, since the shell takes no second call meanwhile; one that waits
   * for input is interrupted by the shell's own call.
   */
  async interrupt(): Promise<void> {
    try {
      if ((this.#driving || this.#info.state === 'running') && this.#info.terminalId !== null) {
        this.#interruptAsked = true;
        await this.#link.call('terminal.signal', { id: this.#info.terminalId, signal: 'SIGINT' });
      } else {
        await this.#link.call('shell.interrupt', { id: this.#id });
      }
    } catch (error) {
      this.#status(failed('interrupt', error));
    }
    void this.#load();
  }

  update(info: ShellInfo): void {
    this.#info = info;
  }

  dispose(): void {
    this.#disposed = true;
    clearTimeout(this.#timer);
  }
}
