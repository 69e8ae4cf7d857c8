/**
 * `execworld serve [options]`: the daemon, until SIGTERM or SIGINT.
 *
 * Exit status: 0 after SIGTERM or SIGINT once every session ended; 2 for a
 * bad setting; 1 when the daemon cannot start or stop (a port in use, an
 * unreadable file), with a message and no stack trace.
 * @module
 */
import type { AddressInfo } from 'node:net';
import { networkInterfaces, userInfo } from 'node:os';
import { makeNonDumpable } from '../provider/posix/libc.ts';
import { lookupUser } from '../provider/run-as.ts';
import { buildApp } from '../server/app.ts';
import { loadTokens } from '../server/auth.ts';
import {
  CONFIG_FILE_ENV,
  CONFIG_FILE_HELP,
  ConfigError,
  DEFAULT_CONFIG,
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
export function serveConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): { config: Config; help: boolean } {
  const { values, positionals, help } = parseCommandLine(argv, SERVE_OPTIONS);
  expectPositionals(positionals, []);
  if (help) return { config: DEFAULT_CONFIG, help: true };
  return { config: loadConfig(values, env), help: false };
}

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

/** Starts the daemon, which runs until SIGTERM or SIGINT, then ends every session and exits 0; false when it was asked for help instead. */
async function serve(argv: readonly string[]): Promise<boolean> {
  const { config, help } = serveConfig(argv);
  if (help) {
    process.stdout.write(HELP);
    return false;
  }
  // Before anything secret is read: processes of this uid (the daemon's own children) cannot
  // read a non-dumpable process's environment or memory through /proc.
  const nonDumpable = makeNonDumpable();
  let tokens: ReturnType<typeof loadTokens>;
  try {
    tokens = loadTokens(config.tokenFile, defaultTokenFile(), (name) => lookupUser(name));
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
  const { table, generated } = tokens;
  let daemon: ReturnType<typeof buildApp>;
  try {
    daemon = buildApp({ config, tokens: table, ownsHostProcess: true });
  } catch (error) {
    const { code, path } = error as NodeJS.ErrnoException;
    // The TLS certificate and key are read here.
    if (typeof code === 'string' && typeof path === 'string') throw new StartError(`cannot read ${path} (${code})`);
    throw error;
  }
  const { app, registry } = daemon;
  let address: string;
  try {
    address = await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await app.close();
    if (typeof (error as NodeJS.ErrnoException).code === 'string') throw listenFailure(error as NodeJS.ErrnoException, config);
    throw error;
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

export const command: Command = {
  help: HELP,
  options: { ...SERVE_OPTIONS, ...HELP_OPTION },
  async run(args) {
    try {
      // Once started, the daemon runs on: it exits on SIGTERM or SIGINT.
      return (await serve(args)) ? undefined : 0;
    } catch (error) {
      // A bad setting, of a flag, the environment, the config file or the token file.
      if (error instanceof ConfigError) throw new UsageError(error.message);
      throw error;
    }
  },
};
