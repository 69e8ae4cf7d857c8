/**
 * `execworld serve [options]`: the daemon, until SIGTERM or SIGINT.
 *
 * Exit status: 0 after SIGTERM or SIGINT once every session ended; 2 for a
 * bad setting; 1 when the daemon cannot start or stop (a port in use, an
 * unreadable file), with a message and no stack trace.
 * @module
 */
import { closeSync, realpathSync, rmSync, writeSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { networkInterfaces, userInfo } from 'node:os';
import { duplicateDescriptor, execve, keepAcrossExec, makeNonDumpable, setCloseOnExec } from '../provider/posix/libc.ts';
import { lookupUser } from '../provider/run-as.ts';
import { buildApp } from '../server/app.ts';
import { loadTokens } from '../server/auth.ts';
import { prepareTakeover } from '../server/daemon-runtime.ts';
import { readTakeoverState, TakeoverStateError, type TakeoverState } from '../server/takeover-state.ts';
import {
  giveBack,
  giveBackUnread,
  startTakeoverControl,
  takeoverSocketPath,
  withoutTakeoverOptions,
  type ExecCalls,
  type TakeoverControlOptions,
} from '../server/takeover.ts';
import { DaemonImage, freshImage, type ImageFacts } from '../server/image.ts';
import {
  CONFIG_FILE_ENV,
  CONFIG_FILE_HELP,
  ConfigError,
  DEFAULT_CONFIG,
  defaultStateDir,
  defaultTokenFile,
  LIST_SETTINGS,
  loadConfig,
  SETTINGS,
  shownDefault,
  type Config,
  type ConfigKey,
} from '../server/config.ts';
import {
  CliError,
  expectPositionals,
  HELP_OPTION,
  optionHelp,
  parseCommandLine,
  UsageError,
  type Command,
  type OptionRow,
  type OptionTable,
} from './command.ts';

/**
 * serve's options: the settings file and a row for each setting of the
 * daemon's table (server/config.ts), so its flags are parsed and listed from
 * the same rows, each with its default and environment variable.
 */
export const SERVE_OPTIONS: OptionTable = {
  config: { type: 'string', value: '<file>', help: CONFIG_FILE_HELP, env: CONFIG_FILE_ENV },
  takeover: {
    type: 'boolean',
    help:
      'upgrade the daemon running on this state directory in place: it becomes this build, keeping its port and its sessions (Linux); ' +
      'exits 1 when it refused, or when this build failed after the exec and gave the sessions back to the previous one',
  },
  'takeover-state': { type: 'string', value: '<file>', help: 'start as the new image of a daemon that handed over this state (the daemon passes it)' },
  'takeover-check': {
    type: 'string',
    value: '<file>',
    help: 'check that this build loads, reads this takeover state and takes the token file, then exit (the rehearsal)',
  },
  ...Object.fromEntries(
    (Object.keys(SETTINGS) as ConfigKey[]).map((key): [string, OptionRow] => {
      const setting = SETTINGS[key];
      const shown = shownDefault(key);
      return [
        setting.flag,
        {
          type: 'string',
          ...(LIST_SETTINGS.has(key) ? { multiple: true } : {}),
          value: '<value>',
          help: shown === '' ? setting.help : `${setting.help} (default ${shown})`,
          env: setting.env,
        },
      ];
    }),
  ),
};

const HELP = `Usage: execworld serve [options]

Runs the execworld daemon: processes and terminals of this host over HTTP and WebSocket.
A setting is taken from its flag, else its environment variable, else the settings file.

Options:
${optionHelp(SERVE_OPTIONS)}
`;

/**
 * The daemon's configuration from serve's command line and the environment.
 * @throws {UsageError} for a command line serve cannot take; {@link ConfigError} for a value a setting cannot take
 */
export function serveConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): { config: Config; help: boolean; takeover: TakeoverMode } {
  const { values, positionals, help } = parseCommandLine(argv, SERVE_OPTIONS);
  expectPositionals(positionals, []);
  if (help) return { config: DEFAULT_CONFIG, help: true, takeover: { kind: 'none' } };
  const { takeover: asked, 'takeover-state': state, 'takeover-check': check, ...settings } = values;
  // A boolean option's value; the table's type gives every option a string's.
  const takeover = (asked as unknown) === true;
  if ([takeover, state !== undefined, check !== undefined].filter(Boolean).length > 1)
    throw new UsageError('--takeover, --takeover-state and --takeover-check are each a start of its own: give one');
  const mode: TakeoverMode = takeover
    ? { kind: 'request' }
    : typeof state === 'string'
      ? { kind: 'adopt', path: state }
      : typeof check === 'string'
        ? { kind: 'check', path: check }
        : { kind: 'none' };
  return { config: loadConfig(settings, env), help: false, takeover: mode };
}

/** What serve does about a takeover: ask the running daemon for one, start as the new image, rehearse, or nothing. */
type TakeoverMode = { kind: 'none' } | { kind: 'request' } | { kind: 'adopt'; path: string } | { kind: 'check'; path: string };

/** A failure an operator can act on: said in one line, exit status 1, no stack trace. */
class StartError extends CliError {
  override name = 'StartError';
}

/** The operator's words for an operating-system failure to listen on `host:port`. */
function listenFailure(error: NodeJS.ErrnoException, config: Config): StartError {
  const where = `${config.host}:${config.port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return new StartError(
        `port ${config.port} on ${config.host} is already in use (EADDRINUSE): stop what listens there, or choose another port with --port`,
      );
    case 'EACCES':
      return new StartError(`not allowed to listen on ${where} (EACCES): ports below 1024 need privileges; choose another with --port`);
    case 'EADDRNOTAVAIL':
      return new StartError(`${config.host} is not an address of this machine (EADDRNOTAVAIL); choose another with --host`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new StartError(`cannot resolve --host ${config.host} (${error.code})`);
    default:
      return new StartError(`cannot listen on ${where}: ${error.message}`);
  }
}

/** Whether `host` binds only this machine's loopback interface. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Whether `host` is the any-address of IPv4 or IPv6: every interface. */
function isUnspecified(host: string): boolean {
  return host === '0.0.0.0' || host === '::';
}

/** The URLs the daemon can be reached at: each interface address for an any-address bind, else the bound ones. */
function reachableAt(bound: readonly AddressInfo[], scheme: string): string[] {
  const urls = new Set<string>();
  for (const { address, family, port } of bound) {
    const addresses = isUnspecified(address)
      ? Object.values(networkInterfaces())
          .flat()
          // An IPv6 any-address takes IPv4 connections too (dual stack); an IPv4 one only IPv4. Link-local needs a zone, left out.
          .flatMap((entry) =>
            entry !== undefined && (family === 'IPv6' || entry.family === 'IPv4') && !entry.address.startsWith('fe80:') ? [entry.address] : [],
          )
      : [address];
    for (const each of addresses) urls.add(`${scheme}://${each.includes(':') ? `[${each}]` : each}:${port}`);
  }
  return [...urls];
}

/**
 * Starts the daemon, which runs until SIGTERM or SIGINT, then ends every
 * session and exits 0; false when it was asked for help instead; the exit
 * status of a takeover's request or rehearsal, which start no daemon.
 */
async function serve(argv: readonly string[]): Promise<boolean | number> {
  const { config, help, takeover } = serveConfig(argv);
  if (help) {
    process.stdout.write(HELP);
    return false;
  }
  const stateDir = config.stateDir ?? defaultStateDir();
  if (takeover.kind === 'request') return requestTakeover(stateDir);
  if (takeover.kind === 'check') {
    // Every module of the daemon is loaded by now (imported above); the state and the tokens are what is left to check.
    try {
      const state = readTakeoverState(takeover.path);
      readTokens(config);
      process.stdout.write(
        `the takeover state of daemon ${state.pid} can be taken: ${state.terminals.length} terminals, ${state.processes.length} processes, ${state.shells.length} shells\n`,
      );
    } catch (error) {
      if (error instanceof TakeoverStateError) throw new StartError(error.message);
      throw error;
    }
    return 0;
  }
  let adopted: TakeoverState | undefined;
  let helpers: number[] = [];
  const entry = realpathSync(process.argv[1]!);
  const calls = { keepAcrossExec, setCloseOnExec, execve };
  const serveArgs = withoutTakeoverOptions(argv);
  let rollback: GiveBack | undefined;
  if (takeover.kind === 'adopt') {
    try {
      adopted = readTakeoverState(takeover.path);
    } catch (error) {
      if (error instanceof TakeoverStateError) throw new StartError(error.message);
      throw error;
    }
    if (adopted.pid !== process.pid) throw new StartError(`the takeover state is daemon ${adopted.pid}'s, not this process's (${process.pid})`);
    // From here until this image serves, any failure (thrown, uncaught, an exit) gives the sessions back to the previous build.
    rollback = new GiveBack(adopted, takeover.path, entry, calls);
    // Before the runtime is made, and before this image starts any child: the cgroup named after
    // this pid holds the sessions adopted, and every other child is the previous image's helper.
    const programs = [...adopted.terminals.map((record) => record.terminal?.pid), ...adopted.processes.map((record) => record.process?.pid)];
    helpers = prepareTakeover(new Set(programs.filter((pid) => pid !== undefined)));
  }
  try {
    return await start(config, stateDir, { adopted, helpers, entry, calls, serveArgs, rollback });
  } catch (error) {
    rollback?.failed(error);
    throw error;
  } finally {
    rollback?.end();
  }
}

/** What serve knows of a takeover it starts from, for {@link start}. */
interface StartFrom {
  readonly adopted: TakeoverState | undefined;
  readonly helpers: readonly number[];
  readonly entry: string;
  readonly calls: ExecCalls;
  readonly serveArgs: readonly string[];
  readonly rollback: GiveBack | undefined;
}

/** The token table of `config`, made with a new token where the daemon keeps none yet. */
function readTokens(config: Config): ReturnType<typeof loadTokens> {
  try {
    return loadTokens(config.tokenFile, defaultTokenFile(), (name) => lookupUser(name));
  } catch (error) {
    const { code, path } = error as NodeJS.ErrnoException;
    if (typeof code !== 'string' || typeof path !== 'string') throw error;
    if (config.tokenFile !== undefined) throw new StartError(`cannot read the token file ${config.tokenFile} (${code} at ${path})`);
    // Without a token file the daemon makes one: its directory must be the daemon user's to write.
    throw new StartError(
      `cannot write a new token to ${defaultTokenFile()} (${code} at ${path}): make that directory writable, ` +
        'point XDG_CONFIG_HOME elsewhere, or give a token file with --token-file',
    );
  }
}

async function start(config: Config, stateDir: string, from: StartFrom): Promise<true> {
  const { adopted, helpers, rollback } = from;
  // Before anything secret is read: processes of this uid (the daemon's own children) cannot
  // read a non-dumpable process's environment or memory through /proc.
  const nonDumpable = makeNonDumpable();
  const { table, generated } = readTokens(config);
  const fresh = freshImage();
  // After a takeover the daemon's start is its first image's; this image's start is this exec's.
  // A build that took its sessions back from a failed one counts no takeover.
  const image = new DaemonImage(
    adopted === undefined
      ? fresh
      : { ...fresh, startedAt: adopted.startedAt ?? fresh.startedAt, takeovers: adopted.takeovers + (adopted.rollback === undefined ? 1 : 0) },
  );
  let daemon: ReturnType<typeof buildApp>;
  try {
    daemon = buildApp({ config, tokens: table, ownsHostProcess: true, image });
  } catch (error) {
    const { code, path } = error as NodeJS.ErrnoException;
    // The TLS certificate and key are read here.
    if (typeof code === 'string' && typeof path === 'string') throw new StartError(`cannot read ${path} (${code})`);
    throw error;
  }
  const { app, registry } = daemon;
  const control = { daemon, stateDir, serveArgs: from.serveArgs, entry: from.entry, image, calls: from.calls, log: app.log };
  rollback?.built(control);
  let address: string;
  try {
    if (adopted === undefined) address = await app.listen({ host: config.host, port: config.port });
    else {
      // Recovery runs first (onReady): it leaves this process's own record and cgroup alone.
      await app.ready();
      // One synchronous stretch: no session is read before each is adopted.
      registry.adoptSessions(adopted.terminals, adopted.processes, adopted.shells);
      daemon.uploads.adopt(adopted.uploads ?? [], daemon.parts.files);
      rollback?.adopted();
      // Listed now, before any upload of this image begins; removed meanwhile.
      const swept = daemon.parts.sweepUnadoptedStages(new Set((adopted.uploads ?? []).map((record) => record.stage.identity.name)));
      swept.catch((error: unknown) => app.log.warn({ err: error }, "the previous image's unadopted upload stages could not be swept"));
      // The socket the previous image listened on, inherited across the exec, with the connections its backlog holds.
      address = await app.listen({ host: config.host, fd: adopted.listenFd } as unknown as { host: string; port: number });
      rollback?.served();
      rmSync(from.rollback?.statePath ?? '', { force: true });
    }
  } catch (error) {
    // An image that took sessions over gives them back, or ends them: it never leaves them to nobody.
    rollback?.failed(error);
    await app.close();
    if (typeof (error as NodeJS.ErrnoException).code === 'string') throw listenFailure(error as NodeJS.ErrnoException, config);
    throw error;
  }
  // Where the listening socket has a descriptor to copy (not on Windows, where the one handle accepts alone).
  try {
    daemon.lanes.start(duplicateDescriptor, (error) => app.log.warn({ err: error }, 'a connection could not be accepted'));
  } catch (error) {
    app.log.warn({ err: error }, 'connections are accepted one per turn of the event loop: no accept lanes');
  }
  // Before the line that says where the daemon listens, which whoever started it waits for: from then on a
  // takeover may be asked for.
  try {
    await startTakeoverControl(control);
  } catch (error) {
    app.log.warn({ err: error, stateDir }, 'no takeover control socket: this daemon cannot be upgraded in place');
  }
  // A string is a Unix socket path, which the daemon never binds.
  const bound = app.addresses().flatMap((entry) => (typeof entry === 'string' ? [] : [entry]));
  const addresses = reachableAt(bound, config.tlsCert === undefined ? 'http' : 'https');
  const containment = registry.runtime.capabilities.containment;
  app.log.info(
    { address, addresses, tokenFile: table.source, owners: table.owners, users: table.users, nonDumpable, containment },
    generated ? 'listening; a new token was written to the token file' : 'listening',
  );
  if (!isLoopback(config.host)) {
    app.log.warn(
      { host: config.host, addresses, tls: config.tlsCert !== undefined },
      `the daemon is reachable from the network on ${addresses.join(', ')}: anyone with a token can run programs as ${userInfo().username}` +
        (config.tlsCert === undefined ? '; tokens and output cross the network unencrypted (serve TLS with --tls-cert and --tls-key)' : ''),
    );
  }
  if (adopted !== undefined) {
    const { rollback: back } = adopted;
    image.tookOver({
      at: adopted.handedOverAt,
      pauseMs: Date.now() - adopted.handedOverAt,
      sessions: adopted.terminals.length + adopted.processes.length,
      ...(back === undefined ? {} : { rolledBack: back }),
    });
    if (back === undefined) {
      app.log.info(
        { ...image.facts.lastTakeover, takeovers: image.facts.takeovers, helpers },
        'took over from the previous image of this daemon: its sessions run on',
      );
    } else {
      app.log.error(
        { ...image.facts.lastTakeover, takeovers: image.facts.takeovers, helpers },
        `the takeover was rolled back: the new build (${back.entry}) failed after the exec (${back.reason}); this build took its sessions back`,
      );
    }
  }
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down: ending every session');
    app.close().then(
      () => {
        app.log.info('every session ended; exiting');
        process.exit(0);
      },
      (error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return true;
}

/**
 * From the exec until a new image serves, what gives its sessions back to the
 * previous build when the image fails (docs/lifecycle.md): a thrown error, a
 * rejection, an uncaught exception or any exit. Before the sessions are
 * adopted (adoption is one synchronous stretch, so none was read yet) the
 * state goes back as it came; after, this image hands over what it holds, as
 * in any takeover. When giving back is not possible, the failure runs its
 * course: this image ends what it adopted, and its session watcher, or the
 * next start, ends the rest.
 */
class GiveBack {
  readonly statePath: string;
  readonly #adopted: TakeoverState;
  readonly #entry: string;
  readonly #calls: ExecCalls;
  #control: TakeoverControlOptions | undefined;
  #phase: 'unread' | 'adopted' | 'over' = 'unread';
  /** A copy of the listening socket, made before this image used it: a failed listen may close the one inherited. */
  readonly #listenCopy: number | undefined;
  #uncaught: unknown;
  readonly #onUncaught = (error: unknown): void => {
    this.#uncaught = error;
  };
  readonly #onExit = (code: number): void => {
    const cause = this.#uncaught === undefined ? `it exited with status ${code} before it served` : describe(this.#uncaught);
    this.failed(cause);
  };

  constructor(adopted: TakeoverState, statePath: string, entry: string, calls: ExecCalls) {
    this.#adopted = adopted;
    this.statePath = statePath;
    this.#entry = entry;
    this.#calls = calls;
    try {
      this.#listenCopy = duplicateDescriptor(adopted.listenFd);
    } catch (_error) {
      // Given back with the one inherited, then.
      this.#listenCopy = undefined;
    }
    process.on('uncaughtExceptionMonitor', this.#onUncaught);
    // Before every other listener: an exec here is the end of this image, and nothing may end a session before it.
    process.prependListener('exit', this.#onExit);
  }

  /** The daemon is built: its session watcher runs, and a handover can be made from it. */
  built(control: TakeoverControlOptions): void {
    this.#control = control;
  }

  /** Every session is adopted: from now on this image may have read them. */
  adopted(): void {
    if (this.#phase !== 'unread') return;
    this.#phase = 'adopted';
    // First again: the runtime's last resort, which ends what it owns at an exit, was put first as it adopted them.
    process.off('exit', this.#onExit);
    process.prependListener('exit', this.#onExit);
  }

  /** This image serves: nothing is given back any more. */
  served(): void {
    this.end();
    if (this.#listenCopy !== undefined) closeSync(this.#listenCopy);
  }

  /** This image serves or gave up: nothing is given back any more. */
  end(): void {
    this.#phase = 'over';
    process.off('uncaughtExceptionMonitor', this.#onUncaught);
    process.off('exit', this.#onExit);
  }

  /** This image failed with `cause`: gives the sessions back, which returns only when that could not be done. */
  failed(cause: unknown): void {
    const phase = this.#phase;
    if (phase === 'over') return;
    this.end();
    const reason = typeof cause === 'string' ? cause : describe(cause);
    const log = (message: string, error?: Error): void => {
      const facts = { reason, ...(error === undefined ? {} : { err: error.message }) };
      // Before the daemon's logger exists, a line in its shape, written at once: an exec may follow.
      if (this.#control === undefined) writeSync(1, `${JSON.stringify({ level: 50, time: Date.now(), pid: process.pid, ...facts, msg: message })}\n`);
      else this.#control.log.error(facts, message);
    };
    log('this build failed before it served: giving the sessions back to the previous build');
    const control = this.#control;
    const copy = this.#listenCopy;
    if (phase === 'adopted' && copy !== undefined) {
      // The inherited descriptor is not handed back (the copy is): it ends with this image.
      try {
        this.#calls.setCloseOnExec(this.#adopted.listenFd);
      } catch (_error) {
        // Closed already.
      }
    }
    const error =
      phase === 'adopted' && control !== undefined
        ? giveBack(control, this.#adopted, copy ?? this.#adopted.listenFd, this.#entry, reason)
        : giveBackUnread(this.#calls, this.statePath, this.#adopted, this.#entry, reason, () => control?.daemon.parts.handOver());
    log('the sessions could not be given back', error);
    // Its session watcher was told this image closed cleanly: it is started again, to end what is left when this image exits.
    if (phase === 'unread') control?.daemon.parts.resumeAfterHandOver();
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** One request on the daemon's control socket; resolves with each line it answers, in order, once it closed. */
function control(path: string, request: object, onLine: (line: Record<string, unknown>) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    let buffered = '';
    socket.on('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
        onLine(JSON.parse(buffered.slice(0, end)) as Record<string, unknown>);
        buffered = buffered.slice(end + 1);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve());
  });
}

/** How long `serve --takeover` waits for the new image to answer. */
const TAKEOVER_WAIT_MS = 60_000;

/**
 * `serve --takeover`: asks the daemon on `stateDir` to become this build, and
 * waits until its new image answers. Exit status 0 once it did; 1 when the
 * daemon refused (the reason is printed; it serves on unchanged).
 */
async function requestTakeover(stateDir: string): Promise<number> {
  const path = takeoverSocketPath(stateDir);
  const status = async (): Promise<ImageFacts | undefined> => {
    let facts: ImageFacts | undefined;
    try {
      await control(path, { op: 'status' }, (line) => (facts = line as unknown as ImageFacts));
    } catch (_error) {
      return undefined;
    }
    return facts;
  };
  const before = await status();
  if (before === undefined) throw new StartError(`no daemon answers on ${path}: is one running with --state-dir ${stateDir}?`);
  let refused: string | undefined;
  let execed = false;
  await control(path, { op: 'takeover', entry: realpathSync(process.argv[1]!) }, (line) => {
    if (typeof line.error === 'string') refused = line.error;
    if (line.step === 'rehearsed') process.stdout.write('the new build passed its rehearsal\n');
    if (line.step === 'exec') execed = true;
  });
  if (refused !== undefined) throw new StartError(`daemon ${before.pid} did not take over: ${refused}; it serves on`);
  if (!execed) throw new StartError(`daemon ${before.pid} closed the request without an answer; it serves on`);
  const deadline = Date.now() + TAKEOVER_WAIT_MS;
  for (;;) {
    const after = await status();
    if (after !== undefined && after.imageStartedAt !== before.imageStartedAt) {
      const last = after.lastTakeover;
      if (last?.rolledBack !== undefined) {
        throw new StartError(
          `daemon ${after.pid} did not take over: this build failed after the exec (${last.rolledBack.reason}); ` +
            `the previous build took its ${last.sessions} sessions back and serves on`,
        );
      }
      process.stdout.write(
        `daemon ${after.pid} runs this build now: ${last?.sessions ?? 0} sessions kept, ${last?.pauseMs ?? 0} ms from the old image's last read to the new one's listening\n`,
      );
      return 0;
    }
    if (Date.now() > deadline) throw new StartError(`daemon ${before.pid} did not answer as the new build within ${TAKEOVER_WAIT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export const command: Command = {
  help: HELP,
  options: { ...SERVE_OPTIONS, ...HELP_OPTION },
  async run(args) {
    try {
      // Once started, the daemon runs on: it exits on SIGTERM or SIGINT.
      const outcome = await serve(args);
      return outcome === true ? undefined : outcome === false ? 0 : outcome;
    } catch (error) {
      // A bad setting, of a flag, the environment, the config file or the token file.
      if (error instanceof ConfigError) throw new UsageError(error.message);
      throw error;
    }
  },
};
