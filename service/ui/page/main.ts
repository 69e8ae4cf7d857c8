/**
 * The daemon's browser view: asks for a token (or takes it from the address's
 * `#token=`), learns whose it is and whether it may write, then lists that
 * owner's terminals, processes and shells and shows the one chosen, live.
 * Everything goes through the daemon's own API with that token.
 */
import type { OperationResult } from '../../../sdk/src/protocol/operations.ts';
import { CallError, Link } from './link.ts';
import { outcomeText, ProcessView, TerminalView, type ProcessInfo, type TerminalInfo } from './views.ts';

type Identity = OperationResult<'identity.get'>;
type ShellInfo = OperationResult<'shell.get'>;

const TOKEN_KEY = 'execworld.token';
/** How often the lists are asked for again. */
const POLL_MS = 1500;

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
  new Page(link, identity.access === 'write').start();
}

type Selection = { kind: 'terminal' | 'process'; id: string };
type Row = { key: string; label: string; state: string; open: Selection | undefined };

/** A terminal's or process's line in its list: its command, then its id, status and outcome. */
function sessionRow(kind: Selection['kind'], info: TerminalInfo | ProcessInfo, note = ''): Row {
  const outcome = info.exit === null ? '' : ` · ${outcomeText(info.exit)}`;
  return { key: info.id, label: `${info.argv.join(' ')}${note}`, state: `${info.id} · ${info.status}${outcome}`, open: { kind, id: info.id } };
}

class Page {
  readonly #link: Link;
  readonly #writable: boolean;
  #selected: Selection | undefined;
  #view: TerminalView | ProcessView | undefined;
  #poll: ReturnType<typeof setTimeout> | undefined;

  constructor(link: Link, writable: boolean) {
    this.#link = link;
    this.#writable = writable;
  }

  start(): void {
    const state = $('link');
    this.#link.onState = (value, detail) => {
      state.dataset.state = value;
      state.textContent = detail;
    };
    this.#link.onOpen = () => {
      void this.#refresh();
      this.#view?.attach().catch((error: unknown) => this.#viewStatus(`could not attach: ${String(error)}`));
    };
    this.#link.start();
  }

  #viewStatus(text: string): void {
    $('view-status').textContent = text;
  }

  async #refresh(): Promise<void> {
    clearTimeout(this.#poll);
    if (this.#link.open) {
      try {
        const [terminals, processes, shells] = await Promise.all([
          this.#link.call('terminal.list', {}),
          this.#link.call('process.list', {}),
          this.#link.call('shell.list', {}),
        ]);
        this.#render(terminals.terminals, processes.processes, shells.shells);
      } catch (error) {
        if (!(error instanceof CallError && error.code === 'LINK_LOST')) this.#viewStatus(`could not list sessions: ${String(error)}`);
      }
    }
    this.#poll = setTimeout(() => void this.#refresh(), POLL_MS);
  }

  #render(terminals: TerminalInfo[], processes: ProcessInfo[], shells: ShellInfo[]): void {
    const shellOf = new Map(shells.filter((shell) => shell.terminalId !== null).map((shell) => [shell.terminalId!, shell]));
    this.#fill(
      'terminals',
      terminals.map((terminal) => sessionRow('terminal', terminal, shellOf.has(terminal.id) ? ` (shell ${shellOf.get(terminal.id)!.id})` : '')),
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
        state: `${shell.id} · ${shell.state}${shell.terminalId === null ? '' : ` · on ${shell.terminalId}`}`,
        open: shell.terminalId === null ? undefined : { kind: 'terminal', id: shell.terminalId },
      })),
    );
    const selected = this.#selected;
    if (selected?.kind === 'terminal') {
      const info = terminals.find((terminal) => terminal.id === selected.id);
      if (info !== undefined) (this.#view as TerminalView).update(info);
    } else if (selected?.kind === 'process') {
      const info = processes.find((process) => process.id === selected.id);
      if (info !== undefined) (this.#view as ProcessView).update(info);
    }
  }

  #fill(list: string, rows: Row[]): void {
    const ul = $(list);
    ul.replaceChildren(
      ...rows.map((row) => {
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
        const open = row.open;
        if (open === undefined) button.disabled = true;
        else {
          button.setAttribute('aria-current', String(this.#selected?.id === open.id && list !== 'shells'));
          button.addEventListener('click', () => void this.#open(open));
        }
        li.append(button);
        return li;
      }),
    );
    if (rows.length === 0) {
      const li = document.createElement('li');
      li.className = 'empty';
      li.textContent = 'none';
      ul.append(li);
    }
  }

  async #open(selection: Selection): Promise<void> {
    if (this.#selected?.kind === selection.kind && this.#selected.id === selection.id) return;
    this.#view?.dispose();
    this.#view = undefined;
    this.#selected = selection;
    const screen = $('screen');
    const streams = $('streams');
    screen.replaceChildren();
    const status = (text: string): void => this.#viewStatus(text);
    try {
      if (selection.kind === 'terminal') {
        const info = await this.#link.call('terminal.get', { id: selection.id });
        $('view-title').textContent = `Terminal ${info.id}: ${info.argv.join(' ')}${this.#writable ? '' : ' (read-only)'}`;
        screen.hidden = false;
        streams.hidden = true;
        this.#view = new TerminalView(this.#link, info.id, screen, info, this.#writable && info.status === 'running', status);
      } else {
        const info = await this.#link.call('process.get', { id: selection.id });
        $('view-title').textContent = `Process ${info.id}: ${info.argv.join(' ')}`;
        screen.hidden = true;
        streams.hidden = false;
        const view = new ProcessView(this.#link, info.id, $('stdout'), $('stderr'), status);
        view.update(info);
        this.#view = view;
      }
      await this.#view.attach();
    } catch (error) {
      // A view that was never made is not reopened by a reconnect: clicking it again must.
      if (this.#view === undefined) this.#selected = undefined;
      this.#viewStatus(`could not open ${selection.id}: ${error instanceof CallError ? `${error.code}: ${error.message}` : String(error)}`);
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
