/**
 * The image without an engine: docker/Dockerfile is read instruction by
 * instruction and replayed under a temporary root, one directory per stage
 * (its COPY from the build context through .dockerignore, its WORKDIR, its
 * RUN lines as written, its paths moved under the stage's directory), and the
 * final stage's ENTRYPOINT and CMD run as the image's user, uid 1000, with
 * its ENV. The image and this file cannot drift apart: a change to the
 * Dockerfile is what runs here. Only the base image's system packages (the
 * apt-get lines) are not replayed.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { serveFrom, type DaemonProcess } from '../helpers/daemon-process.ts';
import { requiredTool } from '../helpers/tools.ts';
import { pidAlive, waitFor } from '../helpers/wait.ts';

const ROOT = join(import.meta.dirname, '../..');
const DOCKERFILE = readFileSync(join(ROOT, 'docker/Dockerfile'), 'utf8');
const TINI = requiredTool('tini', { installedBy: '.ci/run (apt-get install tini)' });
/** The official Node images' `node` user. */
const NODE_UID = 1000;

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

/** The Dockerfile's instructions: continuation lines joined, comments dropped. */
export function instructions(text: string): Instruction[] {
  const joined = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const [, keyword, args] = /^(\w+)\s+(.*)$/.exec(line)!;
      return { keyword: keyword!.toUpperCase(), args: args!.trim() };
    });
}

/** The build context as .dockerignore leaves it: a path is out when a pattern names it or a directory above it. */
function ignoredBy(patterns: readonly string[]): (path: string) => boolean {
  const matchers = patterns.map((pattern) => {
    const anywhere = pattern.startsWith('**/');
    const body = anywhere ? pattern.slice(3) : pattern;
    const regex = new RegExp(`^${body.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
    return (segments: string[]): boolean =>
      anywhere ? segments.some((segment) => regex.test(segment)) : regex.test(segments.slice(0, body.split('/').length).join('/'));
  });
  return (path) => {
    const segments = path.split('/');
    return matchers.some((matches) => matches(segments));
  };
}

const DOCKERIGNORE = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'));
const ignored = ignoredBy(DOCKERIGNORE);

function contextBytes(dir = ROOT): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (ignored(relative(ROOT, path))) continue;
    if (entry.isDirectory()) bytes += contextBytes(path);
    else if (entry.isFile()) bytes += statSync(path).size;
  }
  return bytes;
}

interface Stage {
  readonly name: string | undefined;
  readonly root: string;
  workdir: string;
  uid: number;
  env: Record<string, string>;
  entrypoint: string[];
  cmd: string[];
  healthcheck: string[];
  expose: number[];
}

const INSTRUCTIONS = instructions(DOCKERFILE);

/** Where the stages put things of their own; every other absolute path is the base image's. */
const STAGE_DIRS = [...new Set(INSTRUCTIONS.filter((instruction) => instruction.keyword === 'WORKDIR').map((instruction) => instruction.args)), '/home/node'];

function inStage(stage: Stage, text: string): string {
  let moved = text;
  for (const dir of STAGE_DIRS) moved = moved.replace(new RegExp(`(^|[\\s="'])${dir}(?=[/\\s"']|$)`, 'g'), `$1${stage.root}${dir}`);
  return moved.replace(/\bnode:node\b/g, `${NODE_UID}:${NODE_UID}`);
}

const skipped: string[] = [];
let work: string;
let stages: Stage[];

function replay(): Stage[] {
  const built: Stage[] = [];
  let stage: Stage | undefined;
  for (const { keyword, args: text } of INSTRUCTIONS) {
    // The base image's name is the one build argument, and the host stands in for that image.
    if (keyword === 'ARG') continue;
    if (keyword === 'FROM') {
      const name = / AS (\S+)$/i.exec(text)?.[1];
      const root = join(work, `stage-${built.length}`);
      mkdirSync(root, { mode: 0o755 });
      stage = { name, root, workdir: '/', uid: 0, env: {}, entrypoint: [], cmd: [], healthcheck: [], expose: [] };
      built.push(stage);
      continue;
    }
    if (stage === undefined) throw new Error(`${keyword} before FROM`);
    switch (keyword) {
      case 'WORKDIR':
        stage.workdir = text;
        mkdirSync(join(stage.root, text), { recursive: true, mode: 0o755 });
        break;
      case 'COPY': {
        const words = text.split(/\s+/);
        const from = words[0]!.startsWith('--from=') ? built.find((each) => each.name === words.shift()!.slice('--from='.length)) : undefined;
        const destination = words.pop()!;
        const target = destination.startsWith('/') ? join(stage.root, destination) : join(stage.root, stage.workdir, destination);
        for (const source of words) {
          const path = from === undefined ? join(ROOT, source) : join(from.root, source);
          const into = destination.endsWith('/') && statSync(path).isFile() ? join(target, source.split('/').pop()!) : target;
          mkdirSync(dirname(into), { recursive: true, mode: 0o755 });
          cpSync(path, into, { recursive: true, filter: (copied) => from !== undefined || !ignored(relative(ROOT, copied)) });
        }
        break;
      }
      case 'RUN': {
        // The base image's system packages are the one thing not replayed (the host has its own).
        if (text.startsWith('apt-get update')) {
          skipped.push(text);
          break;
        }
        const command = inStage(stage, text);
        const result = spawnSync('/bin/sh', ['-c', command], {
          cwd: join(stage.root, stage.workdir),
          env: { PATH: process.env.PATH, HOME: process.env.HOME, ...stage.env },
          encoding: 'utf8',
          maxBuffer: 64 << 20,
        });
        if (result.status !== 0) throw new Error(`RUN ${command} failed (${result.status}): ${result.stderr}`);
        break;
      }
      case 'USER':
        stage.uid = text === 'node' ? NODE_UID : Number(text);
        break;
      case 'ENV':
        for (const pair of text.split(/\s+/)) {
          const [name, value] = pair.split('=');
          stage.env[name!] = value!;
        }
        break;
      case 'EXPOSE':
        stage.expose = text.split(/\s+/).map(Number);
        break;
      case 'HEALTHCHECK':
        stage.healthcheck = JSON.parse(/\bCMD\s+(\[.*\])$/.exec(text)![1]!) as string[];
        break;
      case 'ENTRYPOINT':
        stage.entrypoint = JSON.parse(text) as string[];
        break;
      case 'CMD':
        stage.cmd = JSON.parse(text) as string[];
        break;
      case 'STOPSIGNAL':
        expect(text).toBe('SIGTERM');
        break;
      default:
        throw new Error(`the replay does not know ${keyword}`);
    }
  }
  return built;
}

beforeAll(() => {
  if (TINI.skip) return;
  work = mkdtempSync(join(tmpdir(), 'execworld-image-'));
  // The image's user walks into the stages as the daemon would walk into /.
  chmodSync(work, 0o755);
  stages = replay();
}, 600_000);

afterAll(() => {
  if (work !== undefined && process.env.KEEP_IMAGE_ROOT === undefined) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(TINI.skip)(`docker/Dockerfile replayed as the node user${TINI.note}`, () => {
  let daemon: DaemonProcess | undefined;
  let runtime: RemoteRuntime | undefined;
  afterAll(async () => {
    // The sessions end with the daemon; the client only lets go of its connection.
    runtime?.close();
    await daemon?.stop();
  });

  const final = (): Stage => stages[stages.length - 1]!;
  const env = (port: string): Record<string, string> => ({
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: join(final().root, 'home/node'),
    ...final().env,
    // Loopback only here, on a free port.
    EXECWORLD_HOST: '127.0.0.1',
    EXECWORLD_PORT: port,
    // tini is PID 1 in the image, where orphans come to it; here it registers as their subreaper instead.
    TINI_SUBREAPER: '1',
  });
  const asNode = (argv: readonly string[]): string[] => ['setpriv', `--reuid=${NODE_UID}`, `--regid=${NODE_UID}`, '--clear-groups', '--', ...argv];

  it('is built from a maintained Node LTS, in two stages, with the build context .dockerignore leaves small', () => {
    expect(DOCKERFILE).toMatch(/^ARG NODE_IMAGE=node:(22|24)-bookworm-slim$/m);
    expect(stages.map((stage) => stage.name)).toEqual(['build', undefined]);
    expect(skipped).toEqual([expect.stringMatching(/install .*python3 make g\+\+/), expect.stringMatching(/install .*tini procps/)]);
    // The repository is far larger with its node_modules and caches; the context is the sources.
    expect(contextBytes()).toBeLessThan(16 << 20);
  });

  it('holds the packed packages and their production dependencies, no sources, compilers or dev tools', () => {
    const tree = join(final().root, 'opt/execworld');
    for (const pkg of ['sdk', 'service']) {
      const files = readdirSync(join(tree, pkg), { recursive: true, encoding: 'utf8' });
      expect(files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
      expect(files).toContain('dist/index.js');
    }
    const modules = readdirSync(join(tree, 'node_modules'));
    expect(modules).toEqual(expect.arrayContaining(['fastify', 'node-pty', 'ws']));
    for (const dev of ['tsx', 'typescript', 'vitest', 'esbuild']) expect(modules).not.toContain(dev);
    // node-pty's binaries for other systems stay behind; the one compiled for this one is there (a terminal below uses it).
    expect(readdirSync(join(tree, 'node_modules/node-pty'))).not.toContain('prebuilds');
    expect(readdirSync(join(tree, 'node_modules/node-pty/build/Release'))).toContain('pty.node');
    // Only /opt/execworld and the user's directories are the image's own; the build stage stayed behind.
    expect(readdirSync(final().root).sort()).toEqual(['home', 'opt']);
  });

  it('creates the config and state directories, the daemon user’s and private, before anything is mounted on them', () => {
    for (const dir of ['home/node/.config/execworld', 'home/node/.local/state/execworld']) {
      const stat = statSync(join(final().root, dir));
      expect({ dir, uid: stat.uid, gid: stat.gid, mode: stat.mode & 0o777 }).toEqual({ dir, uid: NODE_UID, gid: NODE_UID, mode: 0o700 });
    }
  });

  it('serves as uid 1000 under tini, answers its health check, and a SIGTERM to tini ends every session', async () => {
    const image = final();
    expect(image.uid).toBe(NODE_UID);
    expect(image.env).toMatchObject({ EXECWORLD_PORT: String(image.expose[0]) });
    const argv = [...image.entrypoint, ...image.cmd].map((word) => inStage(image, word));
    expect(argv[0]).toBe('/usr/bin/tini');
    argv[0] = TINI.require();
    // By hand: the image's own command (tini, then the daemon), replayed from its stage (test/lint/daemon-fixtures.test.ts lists it).
    daemon = await serveFrom(asNode(argv), { env: env('0') });
    const port = new URL(daemon.url).port;

    const token = statSync(join(image.root, 'home/node/.config/execworld/token'));
    expect({ uid: token.uid, mode: token.mode & 0o777 }).toEqual({ uid: NODE_UID, mode: 0o600 });
    // The probes, and the browser view's page and built script (the image holds no bundler).
    for (const path of ['/livez', '/readyz', '/ui', '/ui/page.js']) expect((await fetch(`${daemon.url}${path}`)).status, path).toBe(200);
    // The image's own health check, run as the image runs it.
    const health = spawnSync(image.healthcheck[0]!, image.healthcheck.slice(1), { env: env(port) });
    expect(health.status).toBe(0);
    const unhealthy = spawnSync(image.healthcheck[0]!, image.healthcheck.slice(1), { env: env('1') });
    expect(unhealthy.status).toBe(1);

    runtime = await connect(daemon.url, { token: daemon.token });
    const stdio = { stdin: 'ignore', stdout: { maxBytes: 4096 }, stderr: { maxBytes: 4096 } } as const;
    const id = runtime.spawn({ argv: ['/bin/sh', '-c', 'id -u; id -G'], cwd: '/', stdio, graceMs: 1000 });
    await id.done;
    expect(id.collected.stdout!.readFrom(0).text).toBe(`${NODE_UID}\n${NODE_UID}\n`);
    const sleeper = runtime.spawn({ argv: ['/bin/sleep', '600'], cwd: '/', stdio, graceMs: 1000 });
    const { pid } = await sleeper.started;
    const terminal = await runtime.spawnTerminal({ argv: ['/bin/sh'], cwd: '/', rows: 24, cols: 80, graceMs: 1000 });
    const shell = terminal.pid;

    // docker stop: SIGTERM to PID 1, which passes it on; the daemon ends every session and exits 0.
    expect(await daemon.stop({ via: 'launcher' })).toBe(0);
    daemon = undefined;
    await waitFor('the sessions to end', () => !pidAlive(pid) && !pidAlive(shell), 10_000);
  }, 120_000);

  it('is what the README and the compose file run: its port and its config volume', () => {
    const image = final();
    const port = image.expose[0]!;
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const volume = '-v execworld-config:/home/node/.config/execworld';
    expect(readme).toContain(`docker run --rm -p 127.0.0.1:${port}:${port} ${volume} execworld`);
    expect(DOCKERFILE).toContain(`docker run --rm -p 127.0.0.1:${port}:${port} ${volume} execworld`);
    const compose = readFileSync(join(ROOT, 'docker/compose.yaml'), 'utf8');
    expect(compose).toContain(`"127.0.0.1:${port}:${port}"`);
    expect(compose).toContain('execworld-config:/home/node/.config/execworld');
    expect(compose).toMatch(/stop_grace_period: \d+s/);
  });
});

describe('the replay itself', () => {
  it('reads continued lines as one instruction and drops comments', () => {
    expect(instructions('# c\nFROM a AS b\nRUN x \\\n  && y\n# d\nCMD ["z"]\n')).toEqual([
      { keyword: 'FROM', args: 'a AS b' },
      { keyword: 'RUN', args: 'x    && y' },
      { keyword: 'CMD', args: '["z"]' },
    ]);
  });

  it('leaves node_modules, caches and the tests out of the context', () => {
    expect(['node_modules/x', 'sdk/node_modules/y', '.cache/pack', 'test/a.ts', 'x.log'].filter((path) => ignored(path))).toHaveLength(5);
    expect(['sdk/src/index.ts', 'service/bin/execworld.js', 'package.json', 'scripts/pack.ts'].filter((path) => ignored(path))).toEqual([]);
  });
});
