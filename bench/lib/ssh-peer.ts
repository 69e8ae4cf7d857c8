/**
 * OpenSSH on loopback, reached through the `ssh2` client: the trusted remote
 * reference (a C server with per-channel credit windows). A throwaway sshd on
 * 127.0.0.1 with its own keys and config, no rc files; installed from Debian
 * by this script when it is missing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, type ClientChannel } from 'ssh2';
import { BENCH_ENV, type TerminalPeer, type TerminalSession } from './peers.ts';

const SSHD = '/usr/sbin/sshd';

export interface Sshd {
  readonly port: number;
  readonly pid: number;
  readonly privateKey: Buffer;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** Starts sshd on 127.0.0.1, installing openssh-server first if needed; undefined when it cannot. */
export async function startSshd(): Promise<Sshd | undefined> {
  if (!existsSync(SSHD)) {
    console.log('installing openssh-server for the ssh2 peer…');
    const update = spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore', timeout: 300_000 });
    const install = spawnSync('apt-get', ['install', '-y', '-qq', 'openssh-server'], {
      stdio: 'ignore',
      timeout: 300_000,
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    if (update.status !== 0 || install.status !== 0 || !existsSync(SSHD)) {
      console.log('openssh-server is not available; the ssh2 peer is left out');
      return undefined;
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'execworld-sshd-'));
  for (const name of ['host_key', 'client_key']) spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, name)], { stdio: 'ignore' });
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'client_key.pub')));
  const port = await freePort();
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(dir, 'host_key')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'PrintMotd no',
      'PrintLastLog no',
      'StrictModes no',
      'UseDNS no',
      // Debian's bash reads ~/.bashrc for `bash -c` from sshd below SHLVL 2; keep every peer rc-free.
      'SetEnv SHLVL=5',
      // scp speaks SFTP by default: the transfer workload's peer.
      'Subsystem sftp internal-sftp',
      '',
    ].join('\n'),
  );
  spawnSync('mkdir', ['-p', '/run/sshd']);
  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', join(dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr!.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  const privateKey = readFileSync(join(dir, 'client_key'));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = await connectSsh(port, privateKey).catch(() => undefined);
    if (client !== undefined) {
      client.end();
      break;
    }
    if (Date.now() > deadline || child.exitCode !== null) {
      console.log(`sshd did not start (${errors.trim()}); the ssh2 peer is left out`);
      child.kill();
      return undefined;
    }
    await sleep(50);
  }
  return {
    port,
    pid: child.pid!,
    privateKey,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

function connectSsh(port: number, privateKey: Buffer): Promise<Client> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    client.once('ready', () => {
      // As OpenSSH's own client does for an interactive session: no Nagle delay on small packets.
      client.setNoDelay(true);
      resolve(client);
    });
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port, username: process.env.USER ?? 'root', privateKey, readyTimeout: 5000 });
  });
}

const quote = (arg: string): string => `'${arg.replaceAll("'", "'\\''")}'`;

function channelSession(channel: ClientChannel, onClose?: () => void): TerminalSession {
  const exited = new Promise<void>((resolve) => channel.once('close', () => resolve()));
  return {
    pid: 0,
    onData: (listener) => channel.on('data', (chunk: Buffer) => listener(chunk)),
    write: (data) => void channel.write(data),
    resize: (cols, rows) => {
      channel.setWindow(rows, cols, 0, 0);
      return Promise.resolve();
    },
    interrupt: () => {
      // Ctrl-C on the terminal, as an ssh user interrupts: sshd refuses signal requests for root's sessions.
      channel.write('\x03');
      return Promise.resolve();
    },
    pause: () => channel.pause(),
    resume: () => channel.resume(),
    close: async () => {
      // A terminal hang-up, as a real disconnect would give the remote shell.
      // sshd does not report the channel closed while the shell lives; like node-pty's kill, this does not wait.
      channel.signal('HUP');
      channel.close();
      await Promise.race([exited, sleep(100)]);
      onClose?.();
    },
    exited,
  };
}

function exec(client: Client, argv: readonly string[], env: Record<string, string> | undefined): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    // The environment rides on the command line through env(1): the same for every sshd configuration.
    const assignments = Object.entries({ ...BENCH_ENV, ...env }).map(([name, value]) => quote(`${name}=${value}`));
    const command = ['exec', 'env', ...assignments, ...argv.map(quote)].join(' ');
    client.exec(command, { pty: { rows: 24, cols: 80, term: 'xterm-256color' } }, (error, channel) => (error === undefined ? resolve(channel) : reject(error)));
  });
}

/** A new channel on one authenticated connection: the warm case. */
export async function ssh2Peer(sshd: Sshd): Promise<TerminalPeer> {
  const client = await connectSsh(sshd.port, sshd.privateKey);
  return {
    name: 'ssh2',
    closeIsQuiescence: false,
    open: async (argv, env) => channelSession(await exec(client, argv, env)),
    dispose: () => {
      client.end();
      return Promise.resolve();
    },
  };
}

/** A new connection, key exchange and authentication per terminal: the cold case. */
export function ssh2ColdPeer(sshd: Sshd): TerminalPeer {
  return {
    name: 'ssh2-cold',
    closeIsQuiescence: false,
    async open(argv, env) {
      const client = await connectSsh(sshd.port, sshd.privateKey);
      return channelSession(await exec(client, argv, env), () => client.end());
    },
    dispose: () => Promise.resolve(),
  };
}
