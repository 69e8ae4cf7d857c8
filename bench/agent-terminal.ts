/**
 * The agent-terminal benchmark: how well a tool knows that a command waits
 * for input, how exact its exit codes are, how much output it loses without
 * saying so, and whether its kill ends everything. Every case runs in the
 * same run, over the daemon's MCP tools, under four strategies:
 *
 * - `execworld`: shell_run's proofs (exited with the status, waiting_for_input
 *   proven from /proc, running at the wait limit), shell_interrupt and
 *   session_end;
 * - `silence-3s`: a terminal read until 3 s pass without output (the DeepSeek
 *   terminal tools' silence timer), then taken to wait;
 * - `timeout-60s`: a terminal read until the command's end marker or 60 s (as
 *   agent-sandbox's execute_command);
 * - `prompt-regex`: a terminal read until its cursor line, quiet for 1 s,
 *   matches the prompt patterns of VS Code's terminal tool (a line ending in
 *   `:` or `?`, `(y/n)` pairs, `password`, `(END)`, "press any key"), or the
 *   end marker, or 60 s.
 *
 * The three terminal strategies learn an exit code from a marker the shell
 * prints after the command (`printf __EW_%s__ $?`), and kill as a local tool
 * does: SIGKILL to the shell they started.
 *
 *   npm run bench:agent -- [--only execworld,silence-3s,…] [--cap-ms 60000] [--parallel 6]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDaemonProcess } from './lib/daemon.ts';
import { fmt, median, printTable } from './lib/stats.ts';

const { values: args } = parseArgs({
  options: {
    only: { type: 'string' },
    'cap-ms': { type: 'string', default: '60000' },
    parallel: { type: 'string', default: '6' },
  },
});
const CAP_MS = Number(args['cap-ms']);
const PARALLEL = Number(args.parallel);
const SILENCE_MS = 3000;
/** How long execworld's shell_run waits before it answers running: longer than the longest silence of a case. */
const EXECWORLD_WAIT_MS = 30_000;

type Truth = { readonly waits: true; readonly program: string } | { readonly waits: false; readonly exitCode: number };

interface Case {
  readonly name: string;
  readonly command: string;
  readonly truth: Truth;
  /** For an output case: the lines the command prints are 1..lines, one number a line. */
  readonly lines?: number;
  /** Markers of the processes the command leaves running (a sleep's unique duration), counted after the kill. */
  readonly leaves?: readonly string[];
}

/** A unique sleep a case leaves running, found again by its argument. */
let nextMarker = 7_100_000;
function marker(): string {
  nextMarker += 1;
  return String(nextMarker);
}

function cases(): Case[] {
  const waits = (name: string, program: string, command: string): Case => ({ name, command, truth: { waits: true, program } });
  const exits = (name: string, exitCode: number, command: string, extra: Partial<Case> = {}): Case => ({
    name,
    command,
    truth: { waits: false, exitCode },
    ...extra,
  });
  const bg = [marker(), marker(), marker()];
  const bg2 = marker();
  return [
    waits('read -p', 'bash', 'read -p "Your name? " name'),
    waits('read, no prompt', 'bash', 'read line'),
    waits('read -s password', 'bash', 'read -s -p "Password: " secret'),
    waits('y/N question', 'bash', 'printf "Delete everything? [y/N] "; read answer'),
    waits('python3 input()', 'python3', 'python3 -c \'input("Value: ")\''),
    waits('python3 getpass (echo off)', 'python3', 'python3 -c \'import getpass; getpass.getpass("root@host password: ")\''),
    waits('ssh-like host key prompt', 'bash', 'printf "Are you sure you want to continue connecting (yes/no/[fingerprint])? "; read reply'),
    waits('less', 'less', 'seq 1 1000 | less'),
    waits(
      'git log with a pager',
      'less',
      'cd "$(mktemp -d)" && git init -q && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m one && GIT_PAGER=less git log',
    ),
    waits('vim', 'vim', 'vim -u NONE -N /tmp/agent-terminal-vim.txt'),
    waits('python3 REPL', 'python3', 'python3 -q'),
    waits('node REPL', 'node', 'node'),
    waits('bc', 'bc', 'bc -q'),
    waits('cat', 'cat', 'cat'),
    waits('sort of stdin', 'sort', 'sort'),
    waits('prompt after 4 s silence', 'bash', 'sleep 4; read -p "Continue? " reply'),
    waits('prompt without punctuation', 'bash', 'printf "enter a number then press return > "; read n'),
    waits('head -n 1 of stdin', 'head', 'head -n 1'),
    exits('true', 0, 'true'),
    exits('false', 1, 'false'),
    exits('exit 42 in a subshell', 42, '(exit 42)'),
    exits('command not found', 127, 'no-such-command-here'),
    exits('ls of a missing path', 2, 'ls /no/such/path'),
    exits('python3 sys.exit(7)', 7, "python3 -c 'import sys; sys.exit(7)'"),
    exits('set -e script', 1, "bash -c 'set -e; echo one; false; echo never'"),
    exits('SIGTERM', 143, "bash -c 'kill -TERM $$'"),
    exits('SIGKILL', 137, "bash -c 'kill -KILL $$'"),
    exits('SIGINT', 130, "bash -c 'kill -INT $$'"),
    exits('ends on a question', 0, 'echo "Is this a question?"'),
    exits('ends on a colon', 0, 'echo "Files changed:"'),
    exits('build, 5 s silence', 0, 'echo compiling; sleep 5; echo done'),
    exits('build, 12 s silence', 3, 'echo linking; sleep 12; echo failed; (exit 3)'),
    exits('build, silences of 7 s', 0, 'for step in 1 2 3; do echo "step $step"; sleep 7; done'),
    exits('build, 20 s silence', 0, 'echo testing; sleep 20; echo passed'),
    exits('background jobs', 0, `sleep ${bg[0]} & nohup sleep ${bg[1]} >/dev/null 2>&1 & setsid sleep ${bg[2]} & echo started`, { leaves: bg }),
    exits('background job waited for', 0, `(sleep 1; echo late) & wait`),
    exits('disowned job', 0, `sleep ${bg2} & disown; echo ok`, { leaves: [bg2] }),
    exits('50 MB of output', 0, 'seq 1 6000000', { lines: 6_000_000 }),
  ];
}

interface Verdict {
  /** What the strategy said: the command waits (or may), ended with a code, or nothing by its cap. */
  readonly said: 'waiting' | 'exited' | 'running' | 'gave_up';
  readonly exitCode?: number | null;
  readonly program?: string | null;
  readonly ms: number;
  /** The output the strategy returned, and the bytes it said were cut. */
  readonly output: string;
  readonly cutBytes: number;
  /** Marked processes still running after the strategy's kill. */
  readonly left: number;
}

type Call = (name: string, args: Record<string, unknown>) => Promise<any>;

/** Processes whose argv holds `text`. */
function processesWith(text: string): number {
  let count = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(text)) count += 1;
    } catch (_error) {
      // Gone meanwhile.
    }
  }
  return count;
}

async function settleCount(markers: readonly string[] | undefined): Promise<number> {
  if (markers === undefined) return 0;
  // The kill's effect is read after a pause, the same for every strategy.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  return markers.reduce((sum, text) => sum + processesWith(text), 0);
}

async function execworld(call: Call, testCase: Case): Promise<Verdict> {
  const started = performance.now();
  const answer = await call('shell_run', { command: testCase.command, waitMs: EXECWORLD_WAIT_MS, maxOutputBytes: 64 * 1024 });
  const ms = performance.now() - started;
  const said = answer.status === 'waiting_for_input' ? 'waiting' : answer.status === 'running' ? 'running' : 'exited';
  await call('session_end', { id: answer.handle.shell });
  const left = await settleCount(testCase.leaves);
  return { said, exitCode: answer.exitCode, program: answer.program, ms, output: answer.output, cutBytes: answer.truncatedBytes, left };
}

/** The prompt patterns of VS Code's terminal tool, for the line the cursor is on. */
const PROMPT_PATTERNS = [
  /(?:\(|\[)\s*(?:y(?:es)?\s*\/\s*n(?:o)?|n(?:o)?\s*\/\s*y(?:es)?)\s*(?:\]|\))\s*$/i,
  /[?:]\s*(?:\(|\[)?\s*y(?:es)?\s*\/\s*n(?:o)?\s*(?:\]|\))?\s*$/i,
  /\(y\)\s*$/i,
  /:\s*$/,
  /\(END\)$/,
  /password[:]?$/i,
  /\?\s*(?:\([a-z\s]+\))?$/i,
  /press a(?:ny)? key/i,
];

const END = /__EW_(\d+)__/;

async function terminalStrategy(call: Call, testCase: Case, rule: 'silence' | 'timeout' | 'regex'): Promise<Verdict> {
  const opened = await call('terminal_open', { argv: ['bash', '--norc', '--noprofile'], rows: 40, cols: 200 });
  const terminal = opened.terminal as string;
  const pid = opened.pid as number;
  let from = 0;
  const read = async (waitMs: number): Promise<string> => {
    const chunk = await call('output_read', { terminal, from, waitMs, maxBytes: 4 * 1024 * 1024 });
    from = chunk.next;
    return chunk.text as string;
  };
  // Ready: the prompt shows, then the command with its end marker.
  await call('terminal_type', { terminal, data: "PS1='$ '; stty -echoctl\r" });
  let text = '';
  while (!text.includes('$ ')) text += await read(500);
  await read(100);
  const started = performance.now();
  await call('terminal_type', { terminal, data: `${testCase.command}; printf '\\n__EW_%s__\\n' $?\r` });
  let output = '';
  let lastOutput = performance.now();
  let verdict: Omit<Verdict, 'left' | 'output' | 'cutBytes'> | undefined;
  while (verdict === undefined) {
    const chunk = await read(100);
    const now = performance.now();
    if (chunk !== '') {
      output += chunk;
      lastOutput = now;
    }
    const end = END.exec(output.slice(-4096));
    if (end !== null) verdict = { said: 'exited', exitCode: Number(end[1]), ms: now - started };
    else if (rule === 'silence' && now - lastOutput >= SILENCE_MS) verdict = { said: 'waiting', ms: now - started };
    else if (rule === 'regex' && now - lastOutput >= 1000) {
      const cursorLine = output.replace(/\n+$/, '').split('\n').at(-1) ?? '';
      if (PROMPT_PATTERNS.some((pattern) => pattern.test(cursorLine))) verdict = { said: 'waiting', ms: now - started };
    }
    if (verdict === undefined && now - started >= CAP_MS) verdict = { said: 'gave_up', ms: now - started };
  }
  // The kill of a local tool: SIGKILL to the shell it started.
  try {
    process.kill(pid, 'SIGKILL');
  } catch (_error) {
    // Gone already.
  }
  const left = await settleCount(testCase.leaves);
  await call('session_end', { id: terminal });
  return { ...verdict, output, cutBytes: 0, left };
}

const STRATEGIES = {
  execworld,
  'silence-3s': (call: Call, testCase: Case) => terminalStrategy(call, testCase, 'silence'),
  'timeout-60s': (call: Call, testCase: Case) => terminalStrategy(call, testCase, 'timeout'),
  'prompt-regex': (call: Call, testCase: Case) => terminalStrategy(call, testCase, 'regex'),
} as const;

/**
 * Output bytes of 1..lines the strategy neither returned nor said it cut. A cut counts terminal bytes, a CR a
 * line more than the lines it stands for.
 */
function bytesLost(testCase: Case, verdict: Verdict): number {
  if (testCase.lines === undefined) return 0;
  const seen = new Set<number>();
  for (const line of verdict.output.split('\n')) if (/^\d+$/.test(line)) seen.add(Number(line));
  let missingBytes = 0;
  let missingLines = 0;
  for (let n = 1; n <= testCase.lines; n += 1) {
    if (seen.has(n)) continue;
    missingBytes += String(n).length + 1;
    missingLines += 1;
  }
  const counted = verdict.cutBytes === 0 ? 0 : verdict.cutBytes - missingLines;
  return Math.max(0, missingBytes - counted);
}

const daemon = await startDaemonProcess();
process.on('exit', () => {
  try {
    process.kill(daemon.pid, 'SIGTERM');
  } catch (_error) {
    // Gone already.
  }
});
const client = new Client({ name: 'agent-terminal-bench', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', daemon.url), { requestInit: { headers: { authorization: `Bearer ${daemon.token}` } } }));
const call: Call = async (name, callArgs) => {
  const result = (await client.callTool({ name, arguments: callArgs }, undefined, { timeout: 10 * 60_000 })) as {
    isError?: boolean;
    structuredContent?: unknown;
    content: { text?: string }[];
  };
  if (result.isError === true) throw new Error(`${name}: ${result.content[0]?.text ?? 'failed'}`);
  return result.structuredContent;
};

const only = args.only === undefined ? undefined : new Set(args.only.split(','));
const all = cases();
console.log(`agent-terminal benchmark: ${all.length} cases (${all.filter((c) => c.truth.waits).length} wait for input), cap ${CAP_MS} ms\n`);

const rows: string[][] = [];
const detail: string[][] = [];
for (const [name, strategy] of Object.entries(STRATEGIES)) {
  if (only !== undefined && !only.has(name)) continue;
  const verdicts: { testCase: Case; verdict: Verdict }[] = [];
  const queue = [...all];
  const worker = async (): Promise<void> => {
    for (let testCase = queue.shift(); testCase !== undefined; testCase = queue.shift()) {
      try {
        verdicts.push({ testCase, verdict: await strategy(call, testCase) });
      } catch (error) {
        console.error(`${name} / ${testCase.name}: ${(error as Error).message}`);
      }
    }
  };
  // The long cases first would leave the others waiting; a few at a time, in the table's order.
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  let correct = 0;
  let falsely = 0;
  let missed = 0;
  let programs = 0;
  let exact = 0;
  let exitCases = 0;
  let lost = 0;
  let left = 0;
  for (const { testCase, verdict } of verdicts) {
    const { truth } = testCase;
    if (truth.waits) {
      if (verdict.said === 'waiting') correct += 1;
      else missed += 1;
      if (verdict.program === truth.program) programs += 1;
    } else {
      exitCases += 1;
      if (verdict.said === 'waiting') falsely += 1;
      if (verdict.said === 'exited' && verdict.exitCode === truth.exitCode) exact += 1;
    }
    lost += bytesLost(testCase, verdict);
    left += verdict.left;
    detail.push([
      name,
      testCase.name,
      truth.waits ? `waits (${truth.program})` : `exit ${truth.exitCode}`,
      `${verdict.said}${verdict.said === 'exited' ? ` ${verdict.exitCode}` : ''}${verdict.program ? ` (${verdict.program})` : ''}`,
      fmt(verdict.ms),
    ]);
  }
  const waitCases = all.filter((c) => c.truth.waits).length;
  rows.push([
    name,
    `${correct}/${waitCases}`,
    String(falsely),
    String(missed),
    `${programs}/${waitCases}`,
    fmt(median(verdicts.map((v) => v.verdict.ms))),
    fmt(Math.max(...verdicts.map((v) => v.verdict.ms))),
    `${exact}/${exitCases}`,
    String(lost),
    String(left),
  ]);
}

printTable(
  'each case',
  ['case', 'strategy', 'truth', 'said', 'ms'],
  detail.map(([strategy, name, truth, said, ms]) => [name!, strategy!, truth!, said!, ms!]),
);
console.log('');
printTable(
  'per strategy',
  ['strategy', 'waiting detected', 'falsely', 'missed', 'program named', 'median ms', 'max ms', 'exit codes exact', 'bytes lost', 'processes left after kill'],
  rows,
);
await client.close();
await daemon.stop();
