/**
 * `npm run bench`: the workloads of performance.md Part 3 (B1–B8) and the
 * harness's own `echo hi` and pwsh `$null` calls, in interleaved rounds with the peers in rotating
 * order inside each round. Each figure is the median over rounds [min–max];
 * each ratio the median of per-round ratios, taken within the round.
 *
 *   npm run bench -- --rounds 5 --only echo,bulk --peers remote,ws-relay --quick
 *
 * Workloads (--only): prompt, inspect, echo, bulk, screen, tail, control, close, dsh, dsh-bulk, fs, transfer,
 * budgets, resume, stall, isolation, busy, idle, forward, scale (`--sizes 10,100,1000`; terminals, then processes).
 *
 * Peers: local (LocalRuntime in process), dsh-local (@deepseek-ai/dsh-subprocess-local),
 * node-pty (raw), ws-relay (minimal relay), remote (the SDK over one connection
 * to the daemon), remote-cold (a connection per terminal), daemon-rest (REST
 * only), ssh2 and ssh2-cold (OpenSSH on loopback). Servers run in child processes.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startDaemonProcess } from './lib/daemon.ts';
import { idleTerminals, isolation, resume, stallDaemon, stallRelay, type StallFigures } from './lib/daemon-workloads.ts';
import { collectFlood, inputFlood, nonReadingClient } from './lib/budget-workloads.ts';
import { chunkCounts, dshBulkMs, type BulkProvider } from './lib/dsh-bulk.ts';
import { fsCallMs } from './lib/fs-workloads.ts';
import { FORWARD_PATHS, forwardFigures } from './lib/forward-workloads.ts';
import { TRANSFER_PATHS, transferMbps } from './lib/transfer-workloads.ts';
import { dshPwsh, findPwsh, type PwshProvider } from './lib/dsh-pwsh.ts';
import { dshEcho } from './lib/dsh-workload.ts';
import { dshToolFigures, engineFigures, pwshFigures, type ShellFigures } from './lib/shell.ts';
import { closeFailures, dshLocalPeer, guardClose, localPeer, nodePtyPeer, type TerminalPeer } from './lib/peers.ts';
import { daemonRestPeer, relayPeer, remoteColdPeer, remotePeer, startRelay } from './lib/remote-peers.ts';
import { RUNNING_MS, scale, TERMINATE_IN_FLIGHT, type ScaleFigures, type ScaleKind } from './lib/scale-workloads.ts';
import { SCREEN_MODES, screenPeers, snapshotLatency } from './lib/screen-workloads.ts';
import { ssh2ColdPeer, ssh2Peer, startSshd } from './lib/ssh-peer.ts';
import { healthBesideBulk, type BusyFigures } from './lib/busy-workloads.ts';
import { fmt, median, percentile, printTable, RoundTable, spread } from './lib/stats.ts';
import { bulk, bulkBytes, closeIdle, echo, inspect, interruptLatency, promptMs, ptyCeilingMbps, resizeLatency, tail } from './lib/terminal-workloads.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    only: { type: 'string' },
    peers: { type: 'string' },
    quick: { type: 'boolean', default: false },
    sizes: { type: 'string', default: '10,100,1000' },
  },
});
const rounds = Number(args.rounds);
const quick = args.quick === true;
const only = args.only === undefined ? undefined : new Set(args.only.split(','));
const enabled = (name: string): boolean => only === undefined || only.has(name);

const BULK_INPUT = quick ? 10_000_000 : 100_000_000;
const TAIL_RUNS = quick ? 20 : 50;
const PROMPT_RUNS = quick ? 3 : 10;
const ECHO_MEASURED = quick ? 500 : 2000;
const CLOSE_RUNS = 2;

const daemon = await startDaemonProcess();
const relay = await startRelay();
const sshd = await startSshd();
// The servers go down with the run, even when a workload throws: SIGTERM makes the daemon close its sessions.
process.on('exit', () => {
  for (const pid of [daemon.pid, relay.pid, sshd?.pid]) {
    try {
      if (pid !== undefined) process.kill(pid, 'SIGTERM');
    } catch (_error) {
      // Already stopped.
    }
  }
});
// A peer whose close fails is reported at the end (guardClose); the run goes on.
const everyPeer: TerminalPeer[] = [
  localPeer(),
  await dshLocalPeer(),
  nodePtyPeer(),
  relayPeer(relay),
  await remotePeer(daemon),
  daemonRestPeer(daemon),
  ...(sshd === undefined ? [] : [await ssh2Peer(sshd)]),
].map(guardClose);
const coldPeers: TerminalPeer[] = [remoteColdPeer(daemon), ...(sshd === undefined ? [] : [ssh2ColdPeer(sshd)])].map(guardClose);
const wanted = args.peers === undefined ? undefined : new Set(args.peers.split(','));
const pick = (list: TerminalPeer[]): TerminalPeer[] => list.filter((peer) => wanted === undefined || wanted.has(peer.name) || peer.name === 'local');
const peers = pick(everyPeer);
const promptPeers = [...peers, ...pick(coldPeers).filter((peer) => peer.name !== 'local')];

/** CPU seconds of the process serving a peer's terminals, for CPU per MB. */
const cpuOf = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const serverCpu: Record<string, () => number> = {
  local: () => (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
  remote: () => cpuOf(daemon.pid),
  'daemon-rest': () => cpuOf(daemon.pid),
  'ws-relay': () => cpuOf(relay.pid),
};
const results: Record<string, unknown> = { rounds, quick, date: new Date().toISOString(), peers: promptPeers.map((peer) => peer.name) };

/** The peers in a different order each round, so none always runs first. */
function rotation(list: TerminalPeer[], round: number): TerminalPeer[] {
  return list.map((_, index) => list[(index + round) % list.length]!);
}

/** Workloads that threw, per peer: reported at the end; the run goes on without that peer's figure. */
const workloadFailures = new Map<string, string[]>();

async function eachRound(list: TerminalPeer[], run: (peer: TerminalPeer, round: number) => Promise<void>): Promise<void> {
  for (let round = 0; round < rounds; round += 1) for (const peer of rotation(list, round)) await attempt(peer, run(peer, round));
}

/** The workload's figures, or undefined (and the failure recorded) when it threw. */
async function attempt<T>(peer: TerminalPeer, workload: Promise<T>): Promise<T | undefined> {
  try {
    return await workload;
  } catch (error) {
    workloadFailures.set(peer.name, [...(workloadFailures.get(peer.name) ?? []), (error as Error).message]);
    return undefined;
  }
}

function ratioCell(table: RoundTable, peer: string, base: string): string {
  if (peer === base) return '1.00×';
  const ratio = table.ratio(peer, base);
  return ratio === undefined ? 'n/a' : `${fmt(ratio.median, 2)}× [${fmt(ratio.min, 2)}–${fmt(ratio.max, 2)}]`;
}

function differenceCell(table: RoundTable, peer: string, base: string): string {
  const a = table.values(peer);
  const b = table.values(base);
  const differences = a.flatMap((value, round) => (b[round] === undefined ? [] : [value - b[round]]));
  if (differences.length === 0) return 'n/a';
  const difference = median(differences);
  return `${difference >= 0 ? '+' : ''}${fmt(difference, 2)}`;
}

const names = (list: TerminalPeer[]): string[] => list.map((peer) => peer.name);
console.log(`execworld benchmarks: ${rounds} rounds${quick ? ' (quick)' : ''}; peers ${names(promptPeers).join(', ')}`);

if (enabled('prompt')) {
  const table = new RoundTable();
  await eachRound(promptPeers, async (peer) => {
    const samples: number[] = [];
    for (let run = 0; run < PROMPT_RUNS + 1; run += 1) samples.push(await promptMs(peer));
    table.add(peer.name, median(samples.slice(1)));
  });
  printTable(
    'B3 new terminal → first prompt (ms; warm peers open a terminal on an existing connection)',
    ['peer', 'ms', 'vs local (ms)', 'ratio vs local'],
    names(promptPeers).map((name) => [name, spread(table.values(name), 2), differenceCell(table, name, 'local'), ratioCell(table, name, 'local')]),
  );
  results.prompt = Object.fromEntries(names(promptPeers).map((name) => [name, table.values(name)]));
}

if (enabled('inspect')) {
  const p50 = new RoundTable();
  const p99 = new RoundTable();
  await eachRound(peers, async (peer) => {
    const figures = await inspect(peer);
    p50.add(peer.name, figures?.p50 ?? Number.NaN);
    p99.add(peer.name, figures?.p99 ?? Number.NaN);
  });
  printTable(
    'inspectForeground round trip on an idle bash (ms)',
    ['peer', 'p50', 'p99', 'p50 ratio vs local'],
    names(peers).map((name) => [name, spread(p50.values(name)), spread(p99.values(name)), ratioCell(p50, name, 'local')]),
  );
  results.inspect = Object.fromEntries(names(peers).map((name) => [name, { p50: p50.values(name), p99: p99.values(name) }]));
}

if (enabled('echo')) {
  const p50 = new RoundTable();
  const p99 = new RoundTable();
  await eachRound(peers, async (peer) => {
    const figures = await echo(peer, ECHO_MEASURED);
    p50.add(peer.name, figures.p50);
    p99.add(peer.name, figures.p99);
  });
  printTable(
    `B1 echo round trip, ${ECHO_MEASURED} × 1 byte (ms)`,
    ['peer', 'p50', 'p99', 'p50 vs local', 'p50 vs ws-relay', 'p99 vs ws-relay'],
    names(peers).map((name) => [
      name,
      spread(p50.values(name)),
      spread(p99.values(name)),
      ratioCell(p50, name, 'local'),
      ratioCell(p50, name, 'ws-relay'),
      ratioCell(p99, name, 'ws-relay'),
    ]),
  );
  results.echo = Object.fromEntries(names(peers).map((name) => [name, { p50: p50.values(name), p99: p99.values(name) }]));
}

if (enabled('bulk')) {
  const table = new RoundTable();
  const cpuPerMb = new RoundTable();
  const complete = new Map<string, number>();
  for (let round = 0; round < rounds; round += 1) {
    table.add('pty-ceiling', ptyCeilingMbps(BULK_INPUT));
    for (const peer of rotation(peers, round)) {
      const cpu = serverCpu[peer.name];
      const cpuBefore = cpu?.() ?? 0;
      const figures = await bulk(peer, BULK_INPUT);
      if (cpu !== undefined) cpuPerMb.add(peer.name, ((cpu() - cpuBefore) * 1000) / (bulkBytes(BULK_INPUT) / 1e6));
      table.add(peer.name, figures.mbps);
      complete.set(peer.name, (complete.get(peer.name) ?? 0) + (figures.complete ? 1 : 0));
    }
  }
  const rows = [...names(peers), 'pty-ceiling'].map((name) => [
    name,
    spread(table.values(name), 1),
    ratioCell(table, name, 'local'),
    name === 'pty-ceiling' ? '' : ratioCell(table, name, 'pty-ceiling'),
    name === 'pty-ceiling' ? '' : `${complete.get(name) ?? 0}/${rounds}`,
    cpuPerMb.values(name).length === 0 ? '' : spread(cpuPerMb.values(name), 1),
    cpuPerMb.values(name).length === 0 || name === 'ws-relay' ? '' : ratioCell(cpuPerMb, name, 'ws-relay'),
  ]);
  printTable(
    `B2 bulk: ${(bulkBytes(BULK_INPUT) / 1e6).toFixed(1)} MB through the terminal (MB/s)`,
    ['peer', 'MB/s', 'vs local', 'vs PTY ceiling', 'complete', 'server CPU ms/MB', 'CPU vs ws-relay'],
    rows,
  );
  results.bulk = Object.fromEntries([...names(peers), 'pty-ceiling'].map((name) => [name, { mbps: table.values(name), cpuMsPerMb: cpuPerMb.values(name) }]));
}

if (enabled('screen')) {
  // B2 through the daemon three ways in one run, rotated within each round: what the screen machinery costs.
  const { peers: modes, runtime: screenRuntime } = await screenPeers(daemon);
  const table = new RoundTable();
  const cpuPerMb = new RoundTable();
  const complete = new Map<string, number>();
  for (let round = 0; round < rounds; round += 1) {
    for (const peer of rotation(modes, round)) {
      const cpuBefore = cpuOf(daemon.pid);
      const figures = await attempt(peer, bulk(peer, BULK_INPUT));
      if (figures === undefined) continue;
      cpuPerMb.add(peer.name, ((cpuOf(daemon.pid) - cpuBefore) * 1000) / (bulkBytes(BULK_INPUT) / 1e6));
      table.add(peer.name, figures.mbps);
      complete.set(peer.name, (complete.get(peer.name) ?? 0) + (figures.complete ? 1 : 0));
    }
  }
  const base = 'no emulator';
  printTable(
    `terminal screens: B2 bulk, ${(bulkBytes(BULK_INPUT) / 1e6).toFixed(1)} MB through the daemon (MB/s), with no emulator, the default query scanner, and the emulator fed`,
    ['mode', 'MB/s', `ratio vs ${base}`, 'daemon CPU ms/MB', `CPU vs ${base}`, 'complete'],
    Object.keys(SCREEN_MODES).map((name) => [
      name,
      spread(table.values(name), 1),
      ratioCell(table, name, base),
      spread(cpuPerMb.values(name), 1),
      ratioCell(cpuPerMb, name, base),
      `${complete.get(name) ?? 0}/${rounds}`,
    ]),
  );
  const latency = { idle: { p50: [] as number[], p99: [] as number[] }, busy: { p50: [] as number[], p99: [] as number[], count: [] as number[] } };
  for (let round = 0; round < Math.min(rounds, 3); round += 1) {
    const idle = await snapshotLatency(screenRuntime, 'idle', quick ? 200 : 1000, 0);
    latency.idle.p50.push(idle.p50);
    latency.idle.p99.push(idle.p99);
    const busy = await snapshotLatency(screenRuntime, 'busy', 0, quick ? 10_000_000 : 30_000_000);
    latency.busy.p50.push(busy.p50);
    latency.busy.p99.push(busy.p99);
    latency.busy.count.push(busy.count);
  }
  printTable(
    'terminal screens: snapshot round trip through the SDK (ms), on an idle 80×24 terminal and back to back during bulk output',
    ['terminal', 'p50', 'p99', 'snapshots'],
    [
      ['idle', spread(latency.idle.p50), spread(latency.idle.p99), String(quick ? 200 : 1000)],
      ['during bulk', spread(latency.busy.p50), spread(latency.busy.p99), spread(latency.busy.count, 0)],
    ],
  );
  results.screen = {
    bulk: Object.fromEntries(Object.keys(SCREEN_MODES).map((name) => [name, { mbps: table.values(name), cpuMsPerMb: cpuPerMb.values(name) }])),
    snapshotLatency: latency,
  };
  await screenRuntime.dispose();
}

if (enabled('tail')) {
  const truncated = new Map<string, number>();
  const exitMs = new RoundTable();
  await eachRound(peers, async (peer) => {
    const figures = await tail(peer, TAIL_RUNS);
    truncated.set(peer.name, (truncated.get(peer.name) ?? 0) + figures.truncated);
    exitMs.add(peer.name, figures.exitP50);
  });
  printTable(
    `B4 tail integrity: 41,054 bytes then exit, ${TAIL_RUNS * rounds} runs per peer`,
    ['peer', 'truncated runs', 'spawn → exit p50 (ms)'],
    names(peers).map((name) => [name, `${truncated.get(name) ?? 0}/${TAIL_RUNS * rounds}`, spread(exitMs.values(name), 2)]),
  );
  results.tail = Object.fromEntries(names(peers).map((name) => [name, { truncated: truncated.get(name), exitP50: exitMs.values(name) }]));
}

if (enabled('control')) {
  const resize = new RoundTable();
  const interrupt = new RoundTable();
  await eachRound(peers, async (peer) => {
    // Each half fails on its own, so the other keeps its figure for the round.
    const resizes = await attempt(peer, resizeLatency(peer, quick ? 20 : 50));
    resize.add(peer.name, resizes === undefined ? Number.NaN : median(resizes));
    const interrupts = await attempt(peer, interruptLatency(peer, quick ? 3 : 10));
    interrupt.add(peer.name, interrupts === undefined ? Number.NaN : median(interrupts));
  });
  printTable(
    'B8 control path: resize → SIGWINCH seen, and SIGINT → exit seen (ms, p50)',
    ['peer', 'resize', 'resize vs local', 'SIGINT → exit', 'SIGINT vs local'],
    names(peers).map((name) => [
      name,
      spread(resize.values(name)),
      ratioCell(resize, name, 'local'),
      spread(interrupt.values(name)),
      ratioCell(interrupt, name, 'local'),
    ]),
  );
  results.control = Object.fromEntries(names(peers).map((name) => [name, { resize: resize.values(name), interrupt: interrupt.values(name) }]));
}

if (enabled('close')) {
  const table = new RoundTable();
  const leftovers = new Map<string, number>();
  await eachRound(peers, async (peer) => {
    const samples: number[] = [];
    for (let run = 0; run < CLOSE_RUNS; run += 1) {
      const figures = await closeIdle(peer);
      samples.push(figures.ms);
      leftovers.set(peer.name, (leftovers.get(peer.name) ?? 0) + figures.leftovers);
    }
    table.add(peer.name, median(samples));
  });
  printTable(
    'terminate() of an idle interactive bash (ms)',
    ['peer', 'ms', 'ratio vs local', 'processes left', 'waits for quiescence'],
    peers.map((peer) => [
      peer.name,
      spread(table.values(peer.name), 1),
      ratioCell(table, peer.name, 'local'),
      Number.isNaN(leftovers.get(peer.name)) ? 'n/a' : String(leftovers.get(peer.name) ?? 0),
      peer.closeIsQuiescence ? 'yes' : 'no (hang-up only)',
    ]),
  );
  results.close = Object.fromEntries(names(peers).map((name) => [name, table.values(name)]));
}

if (enabled('dsh')) {
  const figures = { local: [] as Awaited<ReturnType<typeof dshEcho>>[], remote: [] as Awaited<ReturnType<typeof dshEcho>>[] };
  for (let round = 0; round < Math.min(rounds, 3); round += 1) {
    for (const kind of round % 2 === 0 ? (['local', 'remote'] as const) : (['remote', 'local'] as const)) figures[kind].push(await dshEcho(kind, daemon));
  }
  const row = (name: 'local' | 'remote') => [
    `dsh-terminal-bash over ${name}`,
    spread(
      figures[name].map((f) => f.startMs),
      1,
    ),
    spread(
      figures[name].map((f) => f.sendMs),
      1,
    ),
    name === 'local' ? '' : `+${fmt(median(figures.remote.map((f, index) => f.sendMs - figures.local[index]!.sendMs)), 2)}`,
    spread(
      figures[name].map((f) => f.closeMs),
      1,
    ),
  ];
  printTable(
    'the harness: dsh-terminal-bash start, `echo hi` send to stdin_read, close (ms)',
    ['path', 'start', 'echo hi', 'vs local', 'close'],
    [row('local'), row('remote')],
  );
  results.dsh = figures;
}

if (enabled('dsh-bulk')) {
  const providers: BulkProvider[] = ['reference', 'local', 'remote'];
  const table = new RoundTable();
  const incomplete = new Map<string, number>();
  const firstLines = new Map<string, number[]>();
  for (let round = 0; round < Math.min(rounds, 3); round += 1) {
    // Rotated so no provider always runs first.
    for (const provider of [...providers.slice(round % 3), ...providers.slice(0, round % 3)]) {
      const figure = await dshBulkMs(provider, daemon);
      table.add(provider, figure.ms);
      if (!figure.complete) incomplete.set(provider, (incomplete.get(provider) ?? 0) + 1);
      firstLines.set(provider, [...(firstLines.get(provider) ?? []), figure.firstLine]);
    }
  }
  const chunks = await chunkCounts(daemon);
  printTable(
    'the harness: 5 MB (`seq 1 660000`) through dsh-tool-bash-persistent, and the chunks a terminal consumer gets for it',
    ['provider', 'tool call (ms)', 'ratio vs reference', 'next command out of step', 'first line returned', 'chunks', 'bytes per chunk'],
    providers.map((name) => [
      name,
      spread(table.values(name), 0),
      name === 'reference' ? '' : ratioCell(table, name, 'reference'),
      `${incomplete.get(name) ?? 0}/${table.values(name).length}`,
      (firstLines.get(name) ?? []).join(', '),
      String(chunks[name].chunks),
      fmt(chunks[name].bytes / chunks[name].chunks, 0),
    ]),
  );
  results.dshBulk = { ms: Object.fromEntries(providers.map((name) => [name, table.values(name)])), chunks };
}

if (enabled('fs')) {
  const table = new RoundTable();
  const calls = ['read 4 KiB', 'write 4 KiB', 'read 10 MiB', 'write 10 MiB'];
  for (let round = 0; round < rounds; round += 1) {
    // Alternated so neither provider always runs first.
    for (const provider of round % 2 === 0 ? (['reference', 'remote'] as const) : (['remote', 'reference'] as const)) {
      const figures = await fsCallMs(provider, daemon, quick ? 100 : 400);
      for (const call of calls) table.add(`${provider} ${call}`, figures[call]!);
    }
  }
  printTable(
    'files: a read tool call (resolve, stat, readText) and a write (resolve, writeText), the reference dsh-fs-local against RemoteFiles over loopback (ms, median per round)',
    ['call', 'reference', 'remote', 'remote − reference', 'ratio'],
    calls.map((call) => [
      call,
      spread(table.values(`reference ${call}`), 3),
      spread(table.values(`remote ${call}`), 3),
      differenceCell(table, `remote ${call}`, `reference ${call}`),
      ratioCell(table, `remote ${call}`, `reference ${call}`),
    ]),
  );
  results.fs = Object.fromEntries(table.peers().map((peer) => [peer, table.values(peer)]));
}

if (enabled('transfer')) {
  const table = new RoundTable();
  const bytes = (quick ? 64 : 1024) * 1024 * 1024;
  for (let round = 0; round < rounds; round += 1) {
    const figures = await transferMbps(daemon, sshd, bytes);
    for (const [path, mbps] of Object.entries(figures)) table.add(path, mbps);
  }
  const row = (path: string, base: string): string[] => [
    path,
    spread(table.values(path), 1),
    table.values(base).length === 0 ? 'n/a' : ratioCell(table, path, base),
    ratioCell(table, path, 'local cp'),
  ];
  printTable(
    `files: one ${bytes / 1024 / 1024} MiB file of random bytes copied up and down, RemoteTransfer over loopback (SHA-256 checked both sides) against scp to a sshd on loopback, and a local cp (MB/s)`,
    ['path', 'MB/s', 'vs scp the same way', 'vs local cp'],
    TRANSFER_PATHS.filter((path) => table.values(path).length > 0).map((path) =>
      row(path, path.startsWith('execworld') ? path.replace('execworld', 'scp') : path),
    ),
  );
  results.transfer = Object.fromEntries(table.peers().map((peer) => [peer, table.values(peer)]));
}

if (enabled('forward')) {
  const throughput = new RoundTable();
  const rtt = new RoundTable();
  const fresh = new RoundTable();
  const bytes = (quick ? 64 : 512) * 1024 * 1024;
  for (let round = 0; round < rounds; round += 1) {
    const figures = await forwardFigures(daemon, sshd, bytes, quick ? 200 : 1000);
    for (const [path, one] of Object.entries(figures)) {
      throughput.add(path, one.mbps);
      rtt.add(path, one.rttMs);
      fresh.add(path, one.connectMs);
    }
  }
  const added = (table: RoundTable, path: string): string => {
    const own = table.values(path);
    const direct = table.values('direct');
    return path === 'direct'
      ? ''
      : spread(
          own.map((value, round) => value - direct[round]!),
          3,
        );
  };
  printTable(
    `port forward: a ${bytes / 1024 / 1024} MiB download, and a small request kept-alive and on a fresh connection, from an HTTP server in the world directly, through forwardPort() (the SDK's WebSocket) and through ssh -L to a sshd on loopback`,
    ['path', 'MB/s', 'vs ssh -L', 'request ms', 'added ms', 'fresh connection ms', 'added ms'],
    FORWARD_PATHS.filter((path) => throughput.values(path).length > 0).map((path) => [
      path,
      spread(throughput.values(path), 1),
      throughput.values('ssh -L').length === 0 || path === 'ssh -L' ? '' : ratioCell(throughput, path, 'ssh -L'),
      spread(rtt.values(path), 3),
      added(rtt, path),
      spread(fresh.values(path), 3),
      added(fresh, path),
    ]),
  );
  results.forward = Object.fromEntries(
    throughput.peers().map((path) => [path, { mbps: throughput.values(path), rttMs: rtt.values(path), connectMs: fresh.values(path) }]),
  );
}

if (enabled('shell')) {
  const runs = quick ? 50 : 200;
  const figures: Record<string, ShellFigures> = {};
  // Interleaved so no path always runs first on a warming machine.
  for (const kind of ['local', 'remote'] as const) {
    figures[`engine ${kind}`] = await engineFigures(kind, daemon, runs);
    figures[`dsh tool ${kind}`] = await dshToolFigures(kind, daemon, Math.min(runs, 50));
  }
  const row = (name: string, base: string): string[] => {
    const own = figures[name]!;
    const ref = figures[base]!;
    return [
      name,
      fmt(percentile(own.trueMs, 50), 2),
      fmt(percentile(own.trueMs, 99), 2),
      name === base ? '' : `${fmt(percentile(own.trueMs, 50) / percentile(ref.trueMs, 50), 3)}×`,
      fmt(own.bulkMs, 0),
      name === base ? '' : `${fmt(own.bulkMs / ref.bulkMs, 2)}×`,
    ];
  };
  printTable(
    `persistent shell: run('true') (${runs} runs; the dsh tool ${Math.min(runs, 50)}) and one run printing 10 MB (seq 1 1250000)`,
    ['path', 'true p50 (ms)', 'true p99 (ms)', 'p50 vs dsh tool', '10 MB run (ms)', 'vs dsh tool'],
    [
      row('engine local', 'dsh tool local'),
      row('dsh tool local', 'dsh tool local'),
      row('engine remote', 'dsh tool remote'),
      row('dsh tool remote', 'dsh tool remote'),
    ],
  );
  const pwshRows: string[][] = [];
  const pwshRaw: Record<string, unknown> = {};
  for (const kind of ['local', 'remote'] as const) {
    const figure = await pwshFigures(kind, daemon, Math.min(runs, 50));
    pwshRaw[kind] = figure ?? null;
    const bashP50 = percentile(figures[`engine ${kind}`]!.trueMs, 50);
    pwshRows.push(
      figure === undefined
        ? [kind, 'pwsh is not installed', '', '', '']
        : [
            kind,
            fmt(percentile(figure.nullMs, 50), 2),
            fmt(percentile(figure.nullMs, 99), 2),
            `${fmt(percentile(figure.nullMs, 50) / bashP50, 1)}×`,
            fmt(figure.startMs, 0),
          ],
    );
  }
  printTable(
    "persistent pwsh: run('$null') beside bash's run('true'), and the shell's start",
    ['runtime', '$null p50 (ms)', '$null p99 (ms)', 'p50 vs bash true', 'start (ms)'],
    pwshRows,
  );
  results.shell = { ...figures, pwsh: pwshRaw };
}

if (enabled('pwsh')) {
  const pwshPath = findPwsh();
  if (pwshPath === undefined) {
    console.log('\npwsh: skipped, pwsh not found (see the development notes in CONTRIBUTING.md)');
  } else {
    const providers: PwshProvider[] = ['reference', 'local', 'remote'];
    const calls = quick ? 5 : 20;
    const first = new RoundTable();
    const call = new RoundTable();
    const slow = new Map<string, number>();
    for (let round = 0; round < Math.min(rounds, 3); round += 1) {
      // Rotated so no provider always runs first.
      for (const provider of [...providers.slice(round % 3), ...providers.slice(0, round % 3)]) {
        const figures = await dshPwsh(provider, daemon, pwshPath, calls);
        first.add(provider, figures.firstCallMs);
        call.add(provider, median(figures.callMs));
        for (const ms of figures.callMs) call.add(`${provider}:all`, ms);
        slow.set(provider, (slow.get(provider) ?? 0) + figures.callMs.filter((ms) => ms >= 3000).length);
      }
    }
    printTable(
      `the harness: dsh-tool-pwsh-persistent over dsh-terminal-bash (pwsh dialect), cursor requests answered; ${calls} \`$null\` calls per round after the first`,
      ['provider', 'first call: shell start-up + $null (ms)', '$null call p50 (ms)', '$null call min–max (ms)', 'calls settled by silence (≥ 3 s)'],
      providers.map((name) => {
        const all = call.values(`${name}:all`);
        return [
          name,
          spread(first.values(name), 0),
          spread(call.values(name), 0),
          `${fmt(Math.min(...all), 0)}–${fmt(Math.max(...all), 0)}`,
          `${slow.get(name) ?? 0}/${all.length}`,
        ];
      }),
    );
    results.pwsh = Object.fromEntries(providers.map((name) => [name, { firstCallMs: first.values(name), callMs: call.values(`${name}:all`) }]));
  }
}

if (enabled('budgets')) {
  // Each on a fresh daemon with the default settings: the figures are the bounds a user gets.
  const floods = [
    ['a client that sends calls and never reads (16 MiB connection buffer)', await nonReadingClient(quick ? 10 : 45)],
    ['500 concurrent 1 MiB inputs to a program that does not read (4 MiB backlog)', await inputFlood(500)],
    ['collect-mode processes printing 300 MB each, 256 MiB tails (1 GiB collect budget)', await collectFlood()],
  ] as const;
  printTable(
    'daemon memory under floods its budgets bound',
    ['flood', 'RSS before (MiB)', 'RSS peak (MiB)', 'outcome'],
    floods.map(([name, f]) => [name, fmt(f.beforeMiB, 0), fmt(f.peakMiB, 0), f.outcome]),
  );
  results.budgets = Object.fromEntries(floods);
}

if (enabled('resume')) {
  const list: Awaited<ReturnType<typeof resume>>[] = [];
  for (let round = 0; round < Math.min(rounds, 3); round += 1) list.push(await resume(daemon, quick ? 1_000_000 : 3_000_000, 5));
  printTable(
    'B6 resume: the connection cut mid-bulk and mid-echo',
    ['cuts', 'bytes lost or repeated', 'byte-exact', 'cut → next byte (ms)', 'echo across a cut (ms)'],
    [
      [
        String(list.reduce((sum, f) => sum + f.cuts, 0)),
        String(list.reduce((sum, f) => sum + Math.abs(f.byteDifference), 0)),
        `${list.filter((f) => f.exact).length}/${list.length}`,
        spread(
          list.map((f) => f.reattachMs),
          2,
        ),
        spread(
          list.map((f) => f.echoAcrossCutMs),
          2,
        ),
      ],
    ],
  );
  results.resume = list;
}

if (enabled('stall')) {
  const sessions = 4;
  const input = quick ? 30_000_000 : 100_000_000;
  const stallMs = 3000;
  const figures = { remote: [] as StallFigures[], relay: [] as StallFigures[] };
  for (let round = 0; round < Math.min(rounds, 3); round += 1) {
    figures.remote.push(await stallDaemon(daemon, sessions, input, stallMs));
    figures.relay.push(await stallRelay(relay, sessions, input, stallMs));
  }
  const row = (name: string, list: StallFigures[]) => [
    name,
    spread(
      list.map((f) => f.rssGrowthPerSessionMiB),
      2,
    ),
    spread(
      list.map((f) => f.rssPeakMiB),
      1,
    ),
    spread(
      list.map((f) => f.clientGrowthPerSessionMiB),
      2,
    ),
    list.every((f) => f.blocked) ? 'yes' : 'no',
    `${list.filter((f) => f.complete).length}/${list.length}`,
    spread(
      list.map((f) => f.wallSeconds),
      2,
    ),
  ];
  printTable(
    `B5 stalled consumers: ${sessions} sessions × ${(bulkBytes(input) / 1e6).toFixed(0)} MB, reading stops after 10 MB for ${stallMs / 1000} s`,
    [
      'server',
      'server RSS growth per stalled session during the stall (MiB)',
      'server RSS peak (MiB)',
      'client RSS growth per session (MiB)',
      'producer blocked',
      'complete',
      'wall (s)',
    ],
    [row('remote (daemon)', figures.remote), row('ws-relay', figures.relay)],
  );
  results.stall = figures;
}

if (enabled('isolation')) {
  const table: string[][] = [];
  const trips = quick ? 300 : 1000;
  const raw: Record<string, unknown> = {};
  for (const healthy of [1, 10, 50]) {
    const unloaded: number[] = [];
    const loaded: number[] = [];
    for (let round = 0; round < Math.min(rounds, 3); round += 1) {
      unloaded.push((await isolation(daemon, healthy, false, trips)).p99);
      loaded.push((await isolation(daemon, healthy, true, trips)).p99);
    }
    const ratios = loaded.map((value, index) => value / unloaded[index]!);
    table.push([
      String(healthy),
      spread(unloaded),
      spread(loaded),
      `${fmt(median(ratios), 2)}× [${fmt(Math.min(...ratios), 2)}–${fmt(Math.max(...ratios), 2)}]`,
    ]);
    raw[healthy] = { unloaded, loaded };
  }
  printTable(
    'B7 isolation: echo p99 of healthy sessions on one SDK connection, without and with a stalled bulk session beside them (ms)',
    ['healthy sessions', 'p99 unloaded', 'p99 with one stalled', 'ratio'],
    table,
  );
  results.isolation = raw;
}

if (enabled('busy')) {
  const figures: BusyFigures[] = [];
  for (let round = 0; round < rounds; round += 1) figures.push(await healthBesideBulk(daemon, quick ? 20_000_000 : 60_000_000));
  const column = (key: keyof BusyFigures): number[] => figures.map((figure) => figure[key]);
  printTable(
    "busy: the daemon's health, asked by a probe of its own every 10 ms, while it idles and while one terminal streams base64 to an SDK reader (ms)",
    ['health p50 idle', 'health p99 idle', 'health p50 beside the stream', 'health p99 beside the stream', 'stream MB/s'],
    [[spread(column('idleP50Ms')), spread(column('idleP99Ms')), spread(column('bulkP50Ms')), spread(column('bulkP99Ms')), spread(column('mbps'), 1)]],
  );
  results.busy = figures;
}

if (enabled('idle')) {
  // A fresh daemon: the heap of one that just streamed gigabytes says nothing about idle terminals.
  const fresh = await startDaemonProcess();
  const figures = await idleTerminals(fresh, 100);
  await fresh.stop();
  printTable(
    'daemon memory with 100 idle bash terminals',
    ['daemon RSS (MiB)', 'per terminal (KiB)'],
    [[fmt(figures.totalMiB, 1), fmt(figures.perTerminalKiB, 0)]],
  );
  results.idle = figures;
}

if (enabled('scale')) {
  // A fresh daemon per size and kind: creates of idle sessions over REST one after another, then all ended at once.
  const figures: ScaleFigures[] = [];
  for (const kind of ['terminal', 'process'] as const satisfies readonly ScaleKind[]) {
    const rows: ScaleFigures[] = [];
    for (const size of (args.sizes ?? '').split(',').map(Number)) rows.push(await scale(size, { kind }));
    const base = rows[0]!;
    printTable(
      `scale: idle ${kind === 'terminal' ? 'sh terminals' : 'sleep processes'} on one daemon, created one after another over REST, left to run ${String(RUNNING_MS / 1000)} s, then all ended at once (${String(TERMINATE_IN_FLIGHT)} DELETEs in flight); health over the whole run, then while they are made, run and are ended`,
      [
        'sessions',
        'create p50 (ms)',
        'create p99 (ms)',
        'last tenth p50 (ms)',
        `p50 vs ${String(base.sessions)}`,
        'terminate all (ms)',
        'RSS per session (KiB)',
        'health p50 (ms)',
        'health p99 (ms)',
        'health p50 creating (ms)',
        'health p99 creating (ms)',
        'health p50 running (ms)',
        'health p99 running (ms)',
        'health p50 ending (ms)',
        'health p99 ending (ms)',
      ],
      rows.map((row) => [
        String(row.sessions),
        fmt(row.createP50Ms),
        fmt(row.createP99Ms),
        fmt(row.lastTenthP50Ms),
        `${fmt(row.createP50Ms / base.createP50Ms, 2)}×`,
        fmt(row.terminateAllMs, 0),
        fmt(row.rssPerSessionKiB, 0),
        fmt(row.healthP50Ms),
        fmt(row.healthP99Ms),
        fmt(row.healthCreatingP50Ms),
        fmt(row.healthCreatingP99Ms),
        fmt(row.healthRunningP50Ms),
        fmt(row.healthRunningP99Ms),
        fmt(row.healthEndingP50Ms),
        fmt(row.healthEndingP99Ms),
      ]),
    );
    for (const row of rows)
      if (row.healthFailures.length > 0) console.log(`health failures at ${String(row.sessions)} ${kind} sessions: ${row.healthFailures.join('; ')}`);
    figures.push(...rows);
  }
  results.scale = figures;
}

for (const peer of [...everyPeer, ...coldPeers]) await peer.dispose();
await daemon.stop();
await relay.stop();
await sshd?.stop();
for (const [title, failures] of [
  ['close() that failed (the survivors were killed by the benchmark)', closeFailures],
  ['workloads that failed (that round has no figure for the peer)', workloadFailures],
] as const) {
  if (failures.size > 0)
    printTable(
      title,
      ['peer', 'failures', 'first message'],
      [...failures].map(([name, messages]) => [name, String(messages.length), messages[0]!]),
    );
}
results.closeFailures = Object.fromEntries(closeFailures);
results.workloadFailures = Object.fromEntries(workloadFailures);
mkdirSync('.bench', { recursive: true });
writeFileSync('.bench/latest.json', `${JSON.stringify(results, null, 2)}\n`);
console.log('\nraw figures: .bench/latest.json');
