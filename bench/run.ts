/**
 * `npm run bench`: every workload in interleaved rounds, peers in rotating
 * order inside each round; each figure is the median over rounds [min–max],
 * and each ratio the median of per-round ratios against `local`.
 *
 *   npm run bench -- --rounds 5 --only echo,bulk --quick
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startDaemon } from './lib/daemon.ts';
import { idleTerminals, isolation, stallDaemon, stallRelay } from './lib/daemon-workloads.ts';
import { dshLocalPeer, localPeer, nodePtyPeer, type TerminalPeer } from './lib/peers.ts';
import { daemonRestPeer, daemonWsPeer, relayPeer, startRelay } from './lib/remote-peers.ts';
import { fmt, median, printTable, RoundTable, spread } from './lib/stats.ts';
import { bulk, bulkBytes, closeIdle, echo, inspect, promptMs, ptyCeilingMbps, tail } from './lib/terminal-workloads.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    only: { type: 'string' },
    peers: { type: 'string' },
    quick: { type: 'boolean', default: false },
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

const daemon = await startDaemon();
const relay = await startRelay();
const allPeers: TerminalPeer[] = [localPeer(), await dshLocalPeer(), nodePtyPeer(), relayPeer(relay), await daemonWsPeer(daemon), daemonRestPeer(daemon)];
const wanted = args.peers === undefined ? undefined : new Set(args.peers.split(','));
const peers = allPeers.filter((peer) => wanted === undefined || wanted.has(peer.name) || peer.name === 'local');
/** CPU seconds of the process serving a peer's terminals, for CPU per MB. */
const serverCpu: Record<string, () => number> = {
  local: () => process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
  'daemon-ws': () => daemon.cpuSeconds(),
  'daemon-rest': () => daemon.cpuSeconds(),
  'ws-relay': () => relayCpuSeconds(),
};
function relayCpuSeconds(): number {
  const fields = readFileSync(`/proc/${relay.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
const results: Record<string, unknown> = { rounds, quick, date: new Date().toISOString() };

/** The peers in a different order each round, so none always runs first. */
function rotation(round: number): TerminalPeer[] {
  return peers.map((_, index) => peers[(index + round) % peers.length]!);
}

async function eachRound(run: (peer: TerminalPeer, round: number) => Promise<void>): Promise<void> {
  for (let round = 0; round < rounds; round += 1) for (const peer of rotation(round)) await run(peer, round);
}

function ratioCell(table: RoundTable, peer: string, base = 'local'): string {
  if (peer === base) return '1.00×';
  const ratio = table.ratio(peer, base);
  return ratio === undefined ? 'n/a' : `${fmt(ratio.median, 2)}× [${fmt(ratio.min, 2)}–${fmt(ratio.max, 2)}]`;
}

const names = peers.map((peer) => peer.name);
console.log(`execworld benchmarks: ${rounds} rounds${quick ? ' (quick)' : ''}, peers ${names.join(', ')}`);

if (enabled('prompt')) {
  const table = new RoundTable();
  await eachRound(async (peer) => {
    const samples: number[] = [];
    for (let run = 0; run < PROMPT_RUNS + 1; run += 1) samples.push(await promptMs(peer));
    table.add(peer.name, median(samples.slice(1)));
  });
  printTable('B3 spawnTerminal → first prompt (ms, median of round p50s)', ['peer', 'ms', 'ratio vs local'], names.map((name) => [name, spread(table.values(name), 2), ratioCell(table, name)]));
  results.prompt = Object.fromEntries(names.map((name) => [name, table.values(name)]));
}

if (enabled('inspect')) {
  const p50 = new RoundTable();
  const p99 = new RoundTable();
  await eachRound(async (peer) => {
    const figures = await inspect(peer);
    p50.add(peer.name, figures?.p50 ?? Number.NaN);
    p99.add(peer.name, figures?.p99 ?? Number.NaN);
  });
  printTable('inspectForeground on an idle bash (ms per call)', ['peer', 'p50', 'p99', 'p50 ratio vs local'], names.map((name) => [name, spread(p50.values(name)), spread(p99.values(name)), ratioCell(p50, name)]));
  results.inspect = Object.fromEntries(names.map((name) => [name, { p50: p50.values(name), p99: p99.values(name) }]));
}

if (enabled('echo')) {
  const p50 = new RoundTable();
  const p99 = new RoundTable();
  await eachRound(async (peer) => {
    const figures = await echo(peer, ECHO_MEASURED);
    p50.add(peer.name, figures.p50);
    p99.add(peer.name, figures.p99);
  });
  printTable(`B1 echo round trip, ${ECHO_MEASURED} × 1 byte (ms)`, ['peer', 'p50', 'p99', 'p50 ratio vs local', 'p99 ratio vs local'], names.map((name) => [name, spread(p50.values(name)), spread(p99.values(name)), ratioCell(p50, name), ratioCell(p99, name)]));
  results.echo = Object.fromEntries(names.map((name) => [name, { p50: p50.values(name), p99: p99.values(name) }]));
}

if (enabled('bulk')) {
  const table = new RoundTable();
  const cpuPerMb = new RoundTable();
  const complete = new Map<string, number>();
  for (let round = 0; round < rounds; round += 1) {
    table.add('pty-ceiling', ptyCeilingMbps(BULK_INPUT));
    for (const peer of rotation(round)) {
      const cpu = serverCpu[peer.name];
      const cpuBefore = cpu?.() ?? 0;
      const figures = await bulk(peer, BULK_INPUT);
      if (cpu !== undefined) cpuPerMb.add(peer.name, ((cpu() - cpuBefore) * 1000) / (bulkBytes(BULK_INPUT) / 1e6));
      table.add(peer.name, figures.mbps);
      complete.set(peer.name, (complete.get(peer.name) ?? 0) + (figures.complete ? 1 : 0));
    }
  }
  const rows = [...names, 'pty-ceiling'].map((name) => [
    name,
    spread(table.values(name), 1),
    ratioCell(table, name),
    name === 'pty-ceiling' ? '' : ratioCell(table, name, 'pty-ceiling'),
    name === 'pty-ceiling' ? '' : `${complete.get(name) ?? 0}/${rounds}`,
    cpuPerMb.values(name).length === 0 ? '' : spread(cpuPerMb.values(name), 1),
    cpuPerMb.values(name).length === 0 || name === 'ws-relay' || cpuPerMb.values('ws-relay').length === 0 ? '' : ratioCell(cpuPerMb, name, 'ws-relay'),
  ]);
  printTable(`B2 bulk: ${(bulkBytes(BULK_INPUT) / 1e6).toFixed(1)} MB through the terminal (MB/s)`, ['peer', 'MB/s', 'ratio vs local', 'ratio vs PTY ceiling', 'complete', 'server CPU ms/MB', 'CPU ratio vs ws-relay'], rows);
  results.bulk = Object.fromEntries([...names, 'pty-ceiling'].map((name) => [name, table.values(name)]));
}

if (enabled('tail')) {
  const truncated = new Map<string, number>();
  const exitMs = new RoundTable();
  await eachRound(async (peer) => {
    const figures = await tail(peer, TAIL_RUNS);
    truncated.set(peer.name, (truncated.get(peer.name) ?? 0) + figures.truncated);
    exitMs.add(peer.name, figures.exitP50);
  });
  printTable(`B4 tail integrity: 41,054 bytes then exit, ${TAIL_RUNS * rounds} runs per peer`, ['peer', 'truncated runs', 'spawn → exit p50 (ms)'], names.map((name) => [name, `${truncated.get(name) ?? 0}/${TAIL_RUNS * rounds}`, spread(exitMs.values(name), 2)]));
  results.tail = Object.fromEntries(names.map((name) => [name, { truncated: truncated.get(name), exitP50: exitMs.values(name) }]));
}

if (enabled('close')) {
  const table = new RoundTable();
  const leftovers = new Map<string, number>();
  await eachRound(async (peer) => {
    const samples: number[] = [];
    for (let run = 0; run < CLOSE_RUNS; run += 1) {
      const figures = await closeIdle(peer);
      samples.push(figures.ms);
      leftovers.set(peer.name, (leftovers.get(peer.name) ?? 0) + figures.leftovers);
    }
    table.add(peer.name, median(samples));
  });
  printTable('terminate() of an idle interactive bash (ms)', ['peer', 'ms', 'ratio vs local', 'processes left', 'waits for quiescence'], peers.map((peer) => [peer.name, spread(table.values(peer.name), 1), ratioCell(table, peer.name), String(leftovers.get(peer.name) ?? 0), peer.closeIsQuiescence ? 'yes' : 'no (kill + exit event)']));
  results.close = Object.fromEntries(names.map((name) => [name, table.values(name)]));
}

if (enabled('stall')) {
  const sessions = 4;
  const input = quick ? 30_000_000 : 100_000_000;
  const stallMs = 3000;
  const figures = { daemon: [] as Awaited<ReturnType<typeof stallDaemon>>[], relay: [] as Awaited<ReturnType<typeof stallRelay>>[] };
  for (let round = 0; round < Math.min(rounds, 3); round += 1) {
    figures.daemon.push(await stallDaemon(daemon, sessions, input, stallMs));
    figures.relay.push(await stallRelay(relay, sessions, input, stallMs));
  }
  const row = (name: string, list: { rssGrowthPerSessionMiB: number; rssPeakMiB: number; blocked: boolean; complete: boolean; wallSeconds: number }[]) => [
    name,
    spread(list.map((f) => f.rssGrowthPerSessionMiB), 2),
    spread(list.map((f) => f.rssPeakMiB), 1),
    list.every((f) => f.blocked) ? 'yes' : 'no',
    `${list.filter((f) => f.complete).length}/${list.length}`,
    spread(list.map((f) => f.wallSeconds), 2),
  ];
  printTable(`B5 stalled consumers: ${sessions} sessions × ${(bulkBytes(input) / 1e6).toFixed(0)} MB, reading stops after 10 MB for ${stallMs / 1000} s`, ['server', 'RSS growth during the stall per session (MiB)', 'RSS peak (MiB)', 'producer blocked', 'complete', 'wall (s)'], [row('daemon-ws', figures.daemon), row('ws-relay', figures.relay)]);
  results.stall = figures;
}

if (enabled('isolation')) {
  const table: string[][] = [];
  const trips = quick ? 300 : 1000;
  const raw: Record<string, unknown> = {};
  for (const healthy of [1, 10]) {
    const unloaded: number[] = [];
    const loaded: number[] = [];
    for (let round = 0; round < Math.min(rounds, 3); round += 1) {
      unloaded.push((await isolation(daemon, healthy, false, trips)).p99);
      loaded.push((await isolation(daemon, healthy, true, trips)).p99);
    }
    const ratios = loaded.map((value, index) => value / unloaded[index]!);
    table.push([String(healthy), spread(unloaded), spread(loaded), `${fmt(median(ratios), 2)}× [${fmt(Math.min(...ratios), 2)}–${fmt(Math.max(...ratios), 2)}]`]);
    raw[healthy] = { unloaded, loaded };
  }
  printTable('B7 isolation: echo p99 of healthy sessions on one connection, without and with a stalled bulk session beside them (ms)', ['healthy sessions', 'p99 unloaded', 'p99 with one stalled', 'ratio'], table);
  results.isolation = raw;
}

if (enabled('idle')) {
  // A fresh daemon: the heap of one that just streamed gigabytes says nothing about idle terminals.
  const fresh = await startDaemon();
  const figures = await idleTerminals(fresh, 100);
  await fresh.stop();
  printTable('daemon memory with 100 idle bash terminals', ['daemon RSS (MiB)', 'per terminal (KiB)'], [[fmt(figures.totalMiB, 1), fmt(figures.perTerminalKiB, 0)]]);
  results.idle = figures;
}

for (const peer of allPeers) await peer.dispose();
await daemon.stop();
await relay.stop();
mkdirSync('.bench', { recursive: true });
writeFileSync('.bench/latest.json', `${JSON.stringify(results, null, 2)}\n`);
console.log('\nraw figures: .bench/latest.json');
