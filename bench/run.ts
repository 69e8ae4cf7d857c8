/**
 * `npm run bench`: every workload in interleaved rounds, peers in rotating
 * order inside each round; each figure is the median over rounds [min–max],
 * and each ratio the median of per-round ratios against `local`.
 *
 *   npm run bench -- --rounds 5 --only echo,bulk --quick
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { dshLocalPeer, localPeer, nodePtyPeer, type TerminalPeer } from './lib/peers.ts';
import { fmt, median, printTable, RoundTable, spread } from './lib/stats.ts';
import { bulk, bulkBytes, closeIdle, echo, inspect, promptMs, ptyCeilingMbps, tail } from './lib/terminal-workloads.ts';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    only: { type: 'string' },
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

const peers: TerminalPeer[] = [localPeer(), await dshLocalPeer(), nodePtyPeer()];
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
  const complete = new Map<string, number>();
  for (let round = 0; round < rounds; round += 1) {
    table.add('pty-ceiling', ptyCeilingMbps(BULK_INPUT));
    for (const peer of rotation(round)) {
      const figures = await bulk(peer, BULK_INPUT);
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
  ]);
  printTable(`B2 bulk: ${(bulkBytes(BULK_INPUT) / 1e6).toFixed(1)} MB through the terminal (MB/s)`, ['peer', 'MB/s', 'ratio vs local', 'ratio vs PTY ceiling', 'complete'], rows);
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

for (const peer of peers) await peer.dispose();
mkdirSync('.bench', { recursive: true });
writeFileSync('.bench/latest.json', `${JSON.stringify(results, null, 2)}\n`);
console.log('\nraw figures: .bench/latest.json');
