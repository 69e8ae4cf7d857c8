/**
 * A daemon's connection to a port in the world (portConnector), made as the owner's OS
 * user. The peer looks its connection up in the kernel's socket table: the
 * uid column of /proc/net/tcp is the uid stamped on the socket when it was
 * made, which is what an iptables owner rule matches.
 */
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { UserWorkers } from '../../service/src/provider/fs/worker-files.ts';
import { portConnector, PortConnectError } from '../../service/src/provider/port-connect.ts';
import { canMakeUsers, osUsers } from '../helpers/os-users.ts';
import { socketUid, treePids } from '../helpers/proc.ts';

/** The real uid of a process, from the Uid line of its /proc/<pid>/status (undefined once it is gone). */
function realUid(pid: number): number | undefined {
  try {
    const line = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return line === null ? undefined : Number(line[1]);
  } catch (_error) {
    return undefined;
  }
}

/** A server that answers each connection with its peer's uid, as the kernel's table says, then echoes. */
async function uidServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket: Socket) => {
    socket.write(`uid ${socketUid(socket.remotePort!, socket.localPort!)}\n`);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

function firstLine(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')));
    });
    socket.once('error', reject);
    socket.resume();
  });
}

const servers: Server[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

// The workers the connections of mapped owners are made by, as a daemon's are.
const workers = new UserWorkers();
afterAll(() => workers.close());
const connectToPort = portConnector(() => workers);

describe("a daemon's connections to ports", () => {
  it('connects as the daemon when the owner has no OS user of its own', async () => {
    const { server, port } = await uidServer();
    servers.push(server);
    const socket = await connectToPort(undefined, port);
    expect(await firstLine(socket)).toBe(`uid ${process.getuid!()}`);
    socket.destroy();
  });

  it('refuses a port nothing listens on with ECONNREFUSED', async () => {
    const { server, port } = await uidServer();
    await new Promise((resolve) => server.close(resolve));
    const refused = await connectToPort(undefined, port).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PortConnectError);
    expect((refused as PortConnectError).errno).toBe('ECONNREFUSED');
  });

  describe.runIf(canMakeUsers)('for an owner mapped to an OS user', () => {
    const users = osUsers(afterAll);

    it("makes the socket the user's: the peer sees the user's uid, not root's", async () => {
      const user = users.make();
      const { server, port } = await uidServer();
      servers.push(server);
      const socket = await connectToPort(user, port);
      expect(await firstLine(socket)).toBe(`uid ${user.uid}`);
      // The daemon reads and writes it as its own: the echo comes back.
      const echoed = new Promise<string>((resolve) => socket.on('data', (chunk: string) => chunk.includes('ping') && resolve(chunk)));
      socket.write('ping\n');
      expect(await echoed).toContain('ping');
      socket.destroy();
      // A second connection reuses the user's worker and is the user's too.
      const again = await connectToPort(user, port);
      expect(await firstLine(again)).toBe(`uid ${user.uid}`);
      again.destroy();
    });

    it('refuses for the user a port nothing listens on', async () => {
      const user = users.make();
      const { server, port } = await uidServer();
      await new Promise((resolve) => server.close(resolve));
      const refused = await connectToPort(user, port).catch((error: unknown) => error);
      expect((refused as PortConnectError).errno).toBe('ECONNREFUSED');
    });

    it("serves the user's files and connections from one process of that user", async () => {
      const user = users.make();
      const started: number[] = [];
      const own = new UserWorkers({}, (pid) => started.push(pid));
      const connect = portConnector(() => own);
      try {
        const { server, port } = await uidServer();
        servers.push(server);
        expect(await own.of(user)!.call('lstat', undefined, '/', {})).toBeDefined();
        const socket = await connect(user, port);
        expect(await firstLine(socket)).toBe(`uid ${user.uid}`);
        socket.destroy();
        // Every process under this one that runs as the user: the worker that served both, and nothing else.
        const ofUser = treePids(process.pid).filter((pid) => realUid(pid) === user.uid);
        console.log(`processes of user ${user.name}: ${ofUser.join(', ')} (worker ${started.join(', ')})`);
        expect(started).toHaveLength(1);
        expect(ofUser).toEqual(started);
      } finally {
        await own.close();
      }
    });
  });
});
