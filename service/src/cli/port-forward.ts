/**
 * `execworld port-forward [LOCAL:]REMOTE ...`: forwards local ports to ports
 * on 127.0.0.1 in the daemon's world, as `kubectl port-forward` does, over
 * the SDK's one WebSocket (see sdk/src/remote/forward.ts), until a signal.
 * @module
 */
import type { PortForward } from '@execworld/sdk';
import { CLIENT_OPTIONS, describeFailure, openRuntime } from './client.ts';
import { type Command, defineCommand, optionHelp, type OptionTable, UsageError } from './command.ts';

const OPTIONS = {
  address: { type: 'string', value: '<host>', help: 'the local address to listen on (default: 127.0.0.1)' },
  ...CLIENT_OPTIONS,
} as const satisfies OptionTable;

const HELP = `Usage: execworld port-forward [options] [LOCAL:]REMOTE ...

Listens on each LOCAL port of this machine and forwards every connection
accepted there to the REMOTE port on 127.0.0.1 in the daemon's world, made as
the owner's OS user. REMOTE alone listens on the same port here; :REMOTE or
0:REMOTE on a free port. Prints one line per port,
  Forwarding from 127.0.0.1:<local> -> <remote>
and runs until SIGINT, SIGTERM or SIGHUP.

Each connection's bytes travel on the command's one WebSocket with flow
control of their own (a slow reader holds back its own connection), both
directions closed apart (half-close), a reset passed on; a WebSocket that
breaks is dialed again and every connection resumes where it was, with
nothing lost or repeated. A connection the world refuses (nothing listens on
REMOTE: PORT_REFUSED) or the token may not make (READ_ONLY) is reset, and
why is said on stderr.

Options:
${optionHelp(OPTIONS)}

Exit status: 0 after a signal; 1 when execworld or the daemon failed (a local
port already in use among them); 2 for a usage error.
`;

/** One [LOCAL:]REMOTE argument. */
export function parsePortSpec(spec: string): { local: number; remote: number } {
  const match = /^(?:(\d*):)?(\d+)$/.exec(spec);
  const port = (text: string, min: number): number | undefined => {
    const value = Number(text);
    return /^\d{1,5}$/.test(text) && value >= min && value <= 65535 ? value : undefined;
  };
  const remote = match === null ? undefined : port(match[2]!, 1);
  const localText = match?.[1];
  const local = localText === undefined ? remote : localText === '' ? 0 : port(localText, 0);
  if (remote === undefined || local === undefined)
    throw new UsageError(`${spec} is not [LOCAL:]REMOTE: ports are 1 to 65535 (LOCAL 0, or empty, picks a free one)`);
  return { local, remote };
}

export const command: Command = defineCommand(HELP, OPTIONS, async (values, positionals) => {
  if (positionals.length === 0) throw new UsageError('missing [LOCAL:]REMOTE');
  const specs = positionals.map(parsePortSpec);
  const host = values.address ?? '127.0.0.1';
  const runtime = await openRuntime(values);
  const forwards: PortForward[] = [];
  try {
    for (const { local, remote } of specs) {
      const forward = await runtime.forwardPort({
        remotePort: remote,
        localPort: local,
        host,
        onError: (error) => process.stderr.write(`execworld: port-forward ${host}:${local === 0 ? '*' : local} -> ${remote}: ${describeFailure(error)}\n`),
      });
      forwards.push(forward);
      process.stdout.write(`Forwarding from ${forward.host}:${forward.port} -> ${remote}\n`);
    }
    await new Promise<void>((resolve) => {
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => resolve());
    });
    return 0;
  } finally {
    await Promise.all(forwards.map((forward) => forward.close()));
    runtime.close();
  }
});
