/**
 * The daemon's browser view: asks for a token (or takes it from the address's
 * `#token=`), learns whose it is and whether it may write, then lists that
 * owner's terminals, processes and shells and shows the one chosen, live,
 * and the ports they listen on, each a link to its preview.
 * A token that may write also starts terminals and shells, runs commands in a
 * shell, and ends sessions. Everything goes through the daemon's own API with
 * that token.
 */
import type { OperationResult } from '@execworld/sdk/protocol';
import { Link, randomId } from './link.ts';
import { message, outcomeText, ProcessView, ShellView, TerminalView, type ProcessInfo, type ShellInfo, type TerminalInfo } from './views.ts';

type Identity = OperationResult<'identity.get'>;
type PortList = OperationResult<'ports.list'>;

const TOKEN_KEY = 'execworld.token';
/** How often the lists are asked for again. */
const POLL_MS = 1500;
/** How long the token a preview link carries lasts; one is minted again once less than a tenth of this is left. */
const PREVIEW_TOKEN_TTL_MS = 3_600_000;

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;

/** The token from `#token=…` (then taken out of the address and the history), else the one this tab kept. */
function givenToken(): string | null {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get('token');
  if (fromHash !== null && fromHash !== '') {
    sessionStorage.setItem(TOKEN_KEY, fromHash);
    history.replaceState(null, '', location.pathname + location.search);
    return fromHash;
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

async function identify(token: string): Promise<Identity | string> {
  const response = await fetch('/v1/identity', { headers: { authorization: `Bearer ${token}` }, cache: 'no-store' });
  const body = (await response.json()) as Identity | { error: { code: string; message: string } };
  if ('error' in body) return `${body.error.code}: ${body.error.message}`;
  return body;
}

function askForToken(problem: string): void {
  $('main').hidden = true;
  $('forget').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = problem;
  $<HTMLInputElement>('token').focus();
}

async function begin(token: string): Promise<void> {
  let identity: Identity | string;
  try {
    identity = await identify(token);
  } catch (error) {
    askForToken(`the daemon did not answer: ${String(error)}`);
    return;
  }
  if (typeof identity === 'string') {
    sessionStorage.removeItem(TOKEN_KEY);
    askForToken(identity);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $('login').hidden = true;
  $('main').hidden = false;
  $('forget').hidden = false;
  $('who').textContent = `owner ${identity.owner} · ${identity.access === 'write' ? 'may write' : 'read-only'}`;
  const link = new Link(token);
  // A token the daemon stopped taking (it restarted with other tokens, say) sends the page back to the form instead of dialling forever.
  link.onDialFailed = () => {
    identify(token).then(
      (again) => {
        if (typeof again === 'string' && again.startsWith('UNAUTHORIZED')) {
          link.stop();
          sessionStorage.removeItem(TOKEN_KEY);
          askForToken(again);
        }
      },
      () => undefined,
    );
  };
  new Page(link, identity.access === 'write', token).start();
}

type Selection = { kind: 'terminal' | 'process' | 'shell'; id: string };
type Row = { key: string; label: string; state: string; ended: boolean; open: Selection };

/** What a session ran, for a person: an `sh -c` line as its line, else its argv. */
function commandLabel(argv: readonly string[]): string {
  if (argv.length >= 3 && /(^|\/)(ba|da)?sh$/.test(argv[0]!) && argv[1] === '-c') return argv[2]!;
  return argv.join(' ');
}

/** A terminal's or process's line in its list: its command, then its id, status and outcome. */
function sessionRow(kind: 'terminal' | 'process', info: TerminalInfo | ProcessInfo): Row {
  const outcome = info.exit === null ? '' : ` · ${outcomeText(info.exit)}`;
  return {
    key: info.id,
    label: commandLabel(info.argv),
    state: `${info.id} · ${info.status}${outcome}`,
    ended: info.status === 'exited',
    open: { kind, id: info.id },
  };
}

/**
 * What a terminal the page starts runs. Where it runs is the world's to say: the page sends no directory, so the
 * daemon's default applies (the home of an owner that runs as an OS user, else the daemon's directory), as for the
 * CLI and the SDK.
 */
interface Defaults {
  /** The owner's shell, interactive. */
  readonly shell: readonly string[];
  /** A command line the person typed. */
  line(text: string): string[];
}

function defaultsFor(platform: string): Defaults {
  if (platform === 'win32') {
    return {
      shell: ['powershell.exe', '-NoLogo'],
      line: (text) => ['cmd.exe', '/d', '/c', text],
    };
  }
  // The page does not know the owner's shell; the terminal's environment does (SHELL, the mapped user's own for an
  // owner that runs as one).
  return {
    shell: ['/bin/sh', '-c', 'exec "${SHELL:-/bin/sh}" -i'],
    line: (text) => ['/bin/sh', '-c', text],
  };
}

/** Rows and columns of a terminal the page starts, until the page in control fits it to its pane. */
const NEW_TERMINAL_SIZE = { rows: 24, cols: 80 };
const NEW_GRACE_MS = 2000;

class Page {
  readonly #link: Link;
  readonly #writable: boolean;
  #defaults: Defaults = defaultsFor('linux');
  #selected: Selection | undefined;
  #view: TerminalView | ProcessView | ShellView | undefined;
  #poll: ReturnType<typeof setTimeout> | undefined;
  /** The ended groups a person opened, kept open across the lists' refreshes. */
  readonly #unfolded = new Set<string>();

  /** The page's token, which a preview link carries where no token of the port alone could be minted. */
  readonly #token: string;
  /** A token minted for each port's preview (reaching that port and nothing else), and when it expires. */
  readonly #previewTokens = new Map<number, { token: string; expiresAt: number } | 'minting' | 'refused'>();

  constructor(link: Link, writable: boolean, token: string) {
    this.#link = link;
    this.#writable = writable;
    this.#token = token;
  }

  start(): void {
    const state = $('link');
    this.#link.onState = (value, detail) => {
      state.dataset.state = value;
      state.textContent = detail;
    };
    this.#link.onOpen = () => {
      this.#link.call('health.get', {}).then(
        (health) => (this.#defaults = defaultsFor(health.platform)),
        () => undefined,
      );
      void this.#refresh();
      this.#view?.resumed();
    };
    $('start').hidden = !this.#writable;
    if (this.#writable) {
      $('new-terminal').addEventListener('click', () => void this.#newTerminal());
      $('new-shell').addEventListener('click', () => void this.#newShell());
      $('end').addEventListener('click', () => void this.#end());
      $('run-form').addEventListener('submit', (event) => {
        event.preventDefault();
        const input = $<HTMLInputElement>('run-command');
        const text = input.value;
        if (text === '' || !(this.#view instanceof ShellView)) return;
        input.value = '';
        void this.#view.submit(text);
      });
      $('interrupt').addEventListener('click', () => {
        if (this.#view instanceof ShellView) void this.#view.interrupt();
      });
    }
    this.#link.start();
  }

  #viewStatus(text: string): void {
    $('view-status').textContent = text;
  }

  #failed(what: string, error: unknown): void {
    this.#viewStatus(`could not ${what}: ${message(error)}`);
  }

  async #newTerminal(): Promise<void> {
    const line = $<HTMLInputElement>('command').value.trim();
    const argv = line === '' ? [...this.#defaults.shell] : this.#defaults.line(line);
    try {
      // With a request id the create is sent again when the link drops before its answer: the daemon answers the
      // terminal the first sending made, or makes it if that sending never came.
      const info = await this.#link.call('terminal.create', { argv, ...NEW_TERMINAL_SIZE, graceMs: NEW_GRACE_MS, requestId: randomId('ui') });
      $<HTMLInputElement>('command').value = '';
      await this.#open({ kind: 'terminal', id: info.id }, true);
    } catch (error) {
      this.#failed('start a terminal', error);
    }
  }

  async #newShell(): Promise<void> {
    try {
      const info = await this.#link.call('shell.create', { requestId: randomId('ui') });
      await this.#open({ kind: 'shell', id: info.id });
      $('run-command').focus();
    } catch (error) {
      this.#failed('start a shell', error);
    }
  }

  /** Ends the selected session: a terminal or process is terminated (and listed as ended); a shell is ended and forgotten. */
  async #end(): Promise<void> {
    const selected = this.#selected;
    if (selected === undefined) return;
    const end = $<HTMLButtonElement>('end');
    end.disabled = true;
    try {
      if (selected.kind === 'terminal') await this.#link.call('terminal.terminate', { id: selected.id });
      else if (selected.kind === 'process') await this.#link.call('process.terminate', { id: selected.id });
      else {
        await this.#link.call('shell.delete', { id: selected.id });
        this.#close();
        this.#viewStatus(`shell ${selected.id} ended`);
      }
    } catch (error) {
      this.#failed(`end ${selected.id}`, error);
    } finally {
      end.disabled = false;
    }
    void this.#refresh();
  }

  async #refresh(): Promise<void> {
    clearTimeout(this.#poll);
    if (this.#link.open) {
      try {
        const [terminals, processes, shells, ports] = await Promise.all([
          this.#link.call('terminal.list', {}),
          this.#link.call('process.list', {}),
          this.#link.call('shell.list', {}),
          // A daemon without discovery lists no port.
          this.#link.call('ports.list', {}).catch((): PortList => ({ supported: false, ports: [] })),
        ]);
        this.#render(terminals.terminals, processes.processes, shells.shells);
        this.#fillPorts(ports);
      } catch (error) {
        this.#viewStatus(`could not list sessions: ${message(error)}`);
      }
    }
    this.#poll = setTimeout(() => void this.#refresh(), POLL_MS);
  }

  #render(terminals: TerminalInfo[], processes: ProcessInfo[], shells: ShellInfo[]): void {
    // A shell's terminal carries the engine's raw stream: the shell is shown as its runs instead, under Shells.
    const shellTerminals = new Set(shells.map((shell) => shell.terminalId).filter((id) => id !== null));
    this.#fill(
      'terminals',
      terminals.filter((terminal) => !shellTerminals.has(terminal.id)).map((terminal) => sessionRow('terminal', terminal)),
    );
    this.#fill(
      'processes',
      processes.map((process) => sessionRow('process', process)),
    );
    this.#fill(
      'shells',
      shells.map((shell) => ({
        key: shell.id,
        label: `${shell.dialect} in ${shell.cwd}`,
        state: `${shell.id} · ${shell.state}`,
        ended: shell.state === 'closed',
        open: { kind: 'shell', id: shell.id },
      })),
    );
    // A listing that comes while a selection's view is still being made (its get in flight) updates nothing:
    // the view is made from a fresh answer of its own.
    const selected = this.#selected;
    const view = this.#view;
    if (selected?.kind === 'terminal' && view instanceof TerminalView) {
      const info = terminals.find((terminal) => terminal.id === selected.id);
      if (info !== undefined) {
        view.update(info);
        this.#setLive(info.status === 'running');
      }
    } else if (selected?.kind === 'process' && view instanceof ProcessView) {
      const info = processes.find((process) => process.id === selected.id);
      if (info !== undefined) {
        view.update(info);
        this.#setLive(info.status === 'running');
      }
    } else if (selected?.kind === 'shell' && view instanceof ShellView) {
      const info = shells.find((shell) => shell.id === selected.id);
      if (info !== undefined) view.update(info);
      this.#setLive(info !== undefined && info.state !== 'closed');
    }
  }

  /** Live sessions, then the ended ones folded into a group a person may open. */
  #fill(list: string, rows: Row[]): void {
    const ul = $(list);
    const live = rows.filter((row) => !row.ended);
    const ended = rows.filter((row) => row.ended);
    ul.replaceChildren(...live.map((row) => this.#item(list, row)));
    if (live.length === 0) {
      const li = document.createElement('li');
      li.className = 'empty';
      li.textContent = 'none';
      ul.append(li);
    }
    if (ended.length > 0) {
      const li = document.createElement('li');
      const details = document.createElement('details');
      details.className = 'ended';
      details.open = this.#unfolded.has(list);
      details.addEventListener('toggle', () => (details.open ? this.#unfolded.add(list) : this.#unfolded.delete(list)));
      const summary = document.createElement('summary');
      summary.textContent = `ended (${ended.length})`;
      const inner = document.createElement('ul');
      inner.append(...ended.map((row) => this.#item(list, row)));
      details.append(summary, inner);
      li.append(details);
      ul.append(li);
    }
  }

  /**
   * The token a preview link of `port` carries: one minted for that port alone (it reaches nothing else of the daemon,
   * and expires), minted when the port is first listed; the page's own while none is, or where the daemon mints none
   * for this token (a minted one mints no other).
   */
  #previewToken(port: number): string {
    const held = this.#previewTokens.get(port);
    if (typeof held === 'object' && held.expiresAt - Date.now() > PREVIEW_TOKEN_TTL_MS / 10) return held.token;
    if (held !== 'minting' && held !== 'refused') {
      this.#previewTokens.set(port, 'minting');
      this.#link.call('token.create', { access: 'read', ttlMs: PREVIEW_TOKEN_TTL_MS, port }).then(
        (minted) => this.#previewTokens.set(port, { token: minted.token, expiresAt: Date.parse(minted.expiresAt) }),
        () => this.#previewTokens.set(port, 'refused'),
      );
    }
    return typeof held === 'object' ? held.token : this.#token;
  }

  /**
   * The ports the sessions listen on. A token that may write previews one in a new tab: the link carries a token of
   * that port (put on it only as it is followed, so it is never in the page's markup), which the daemon moves to a
   * cookie of the port's path and drops from the address. A read-only token may not reach a port: its ports are
   * listed as text.
   */
  #fillPorts(list: PortList): void {
    const ul = $('ports');
    const items = list.ports.map((entry) => {
      const li = document.createElement('li');
      li.dataset.port = String(entry.port);
      const label = document.createElement(this.#writable ? 'a' : 'span');
      label.textContent = `:${entry.port}`;
      if (label instanceof HTMLAnchorElement) {
        const preview = `/v1/ports/${entry.port}/`;
        label.href = preview;
        label.target = '_blank';
        label.rel = 'noopener noreferrer';
        this.#previewToken(entry.port);
        const carry = (): void => void (label.href = `${preview}?token=${encodeURIComponent(this.#previewToken(entry.port))}`);
        const drop = (): void => void setTimeout(() => (label.href = preview));
        label.addEventListener('mousedown', carry);
        label.addEventListener('keydown', carry);
        label.addEventListener('click', drop);
        label.addEventListener('auxclick', drop);
      }
      const state = document.createElement('div');
      state.className = 'state';
      state.textContent = `${entry.address} · pid ${entry.pid} · ${entry.session}`;
      li.append(label, state);
      return li;
    });
    if (items.length === 0) {
      const li = document.createElement('li');
      li.className = 'empty';
      li.textContent = list.supported ? 'none' : 'not told on this host';
      items.push(li);
    }
    ul.replaceChildren(...items);
  }

  #item(list: string, row: Row): HTMLLIElement {
    const li = document.createElement('li');
    const button = document.createElement('button');
    button.type = 'button';
    button.dataset.id = row.key;
    const label = document.createElement('div');
    label.textContent = row.label;
    const state = document.createElement('div');
    state.className = 'state';
    state.textContent = row.state;
    button.append(label, state);
    button.setAttribute('aria-current', String(this.#selected?.id === row.open.id));
    button.addEventListener('click', () => void this.#open(row.open));
    li.dataset.list = list;
    li.append(button);
    return li;
  }

  /** Offers to end the selected session while it runs. */
  #setLive(live: boolean): void {
    $('end').hidden = !this.#writable || !live;
  }

  #close(): void {
    this.#view?.dispose();
    this.#view = undefined;
    this.#selected = undefined;
    for (const id of ['screen', 'streams', 'shell', 'control']) $(id).hidden = true;
    $('screen').replaceChildren();
    $('view-title').textContent = 'Choose a terminal, process or shell.';
    this.#setLive(false);
  }

  /** @param take - the page started the terminal: it is in control and has the keyboard. */
  async #open(selection: Selection, take = false): Promise<void> {
    if (this.#selected?.kind === selection.kind && this.#selected.id === selection.id) return;
    this.#close();
    this.#selected = selection;
    const screen = $('screen');
    const status = (text: string): void => this.#viewStatus(text);
    try {
      if (selection.kind === 'terminal') {
        const info = await this.#link.call('terminal.get', { id: selection.id });
        $('view-title').textContent = `Terminal ${info.id}: ${commandLabel(info.argv)}${this.#writable ? '' : ' (read-only)'}`;
        screen.hidden = false;
        $('control').hidden = false;
        const control = (text: string): void => {
          $('control').textContent = text;
        };
        this.#view = new TerminalView(this.#link, info.id, screen, info, this.#writable, status, control, take);
        this.#setLive(info.status === 'running');
      } else if (selection.kind === 'process') {
        const info = await this.#link.call('process.get', { id: selection.id });
        $('view-title').textContent = `Process ${info.id}: ${commandLabel(info.argv)}`;
        $('streams').hidden = false;
        const view = new ProcessView(this.#link, info.id, $('stdout'), $('stderr'), status);
        view.update(info);
        this.#view = view;
        this.#setLive(info.status === 'running');
      } else {
        const info = await this.#link.call('shell.get', { id: selection.id });
        $('view-title').textContent = `Shell ${info.id}: ${info.dialect} in ${info.cwd}${this.#writable ? '' : ' (read-only)'}`;
        $('shell').hidden = false;
        $('run-form').hidden = !this.#writable;
        this.#view = new ShellView(this.#link, info, $('runs'), status);
        this.#setLive(info.state !== 'closed');
      }
      await this.#view.attach();
    } catch (error) {
      // A view that was never made is not reopened by a reconnect: clicking it again must.
      if (this.#view === undefined) this.#selected = undefined;
      this.#failed(`open ${selection.id}`, error);
    }
    void this.#refresh();
  }
}

function main(): void {
  $('login').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $<HTMLInputElement>('token').value.trim();
    if (token !== '') void begin(token);
  });
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  const token = givenToken();
  if (token === null) askForToken('');
  else void begin(token);
}

main();
