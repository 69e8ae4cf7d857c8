/**
 * The `execworld` command.
 *
 *   execworld serve [options]   run the daemon (see `execworld serve --help`)
 *   execworld token-file        print where a local daemon keeps its token
 * @module
 */
import { makeNonDumpable } from './provider/libc.ts';
import { buildApp } from './server/app.ts';
import { loadTokens } from './server/auth.ts';
import { ConfigError, defaultTokenFile, loadConfig, serveHelp } from './server/config.ts';

const USAGE = `Usage: execworld <command>

Commands:
  serve        run the daemon (execworld serve --help for its options)
  token-file   print the path of the token file a local daemon uses by default
`;

/** Runs the daemon until SIGTERM or SIGINT, then ends every session and exits 0. */
export async function serve(argv: readonly string[]): Promise<void> {
  const { config, help } = loadConfig(argv);
  if (help) {
    process.stdout.write(serveHelp());
    return;
  }
  // Before anything secret is read: processes of this uid (the daemon's own children) cannot
  // read a non-dumpable process's environment or memory through /proc.
  const nonDumpable = makeNonDumpable();
  const { table, generated } = loadTokens(config.tokenFile, defaultTokenFile());
  const { app, registry } = buildApp({ config, tokens: table, ownsHostProcess: true });
  const address = await app.listen({ host: config.host, port: config.port });
  const containment = registry.runtime.containmentMode;
  app.log.info({ address, tokenFile: table.source, owners: table.owners, nonDumpable, containment }, generated ? 'listening; a new token was written to the token file' : 'listening');
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
}

export async function main(argv: readonly string[]): Promise<void> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve':
        await serve(rest);
        return;
      case 'token-file':
        process.stdout.write(`${defaultTokenFile()}\n`);
        return;
      case undefined:
      case '--help':
      case 'help':
        process.stdout.write(USAGE);
        return;
      default:
        process.stderr.write(`execworld: unknown command ${command}\n\n${USAGE}`);
        process.exitCode = 2;
    }
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`execworld: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw error;
  }
}
