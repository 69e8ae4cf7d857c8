/**
 * Terminal screens: the daemon's headless emulator, its snapshots at exact
 * output offsets, and the answers it gives to the queries of a terminal's
 * program. Real programs on real terminals, a real daemon on 127.0.0.1; the
 * test checks the daemon's screens against an emulator of its own.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import xterm from '@xterm/headless';
import fc from 'fast-check';
import { describe, expect } from 'vitest';
import { connect, type RemoteRuntime } from '@execworld/sdk';
import { QueryScanner } from '../../service/src/provider/query-scanner.ts';
import { RingStream } from '../../service/src/server/streams.ts';
import { ALICE, TestSocket, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { waitFor } from '../helpers/wait.ts';

let daemon: TestDaemon;
let workDir: string;
const test = daemonTest();

test.beforeAll(({ daemon: fileDaemon }) => {
  daemon = fileDaemon;
  workDir = mkdtempSync(join(tmpdir(), 'execworld-screens-'));
});
test.afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

const XTERM_ENV = { TERM: 'xterm-256color', LANG: 'C.UTF-8', HISTFILE: '/dev/null' };

interface Screen {
  offset: number;
  complete: boolean;
  rows: number;
  cols: number;
  lines: string[];
  cursor: { row: number; col: number; visible: boolean };
  alternate: boolean;
  title: string;
}

async function createTerminal(
  target: TestDaemon,
  script: string,
  options: { rows?: number; cols?: number; answerQueries?: boolean; argv?: string[] } = {},
): Promise<{ id: string; info: any }> {
  const created = await target.request('POST', '/v1/terminals', {
    body: {
      argv: options.argv ?? ['/bin/bash', '--noprofile', '--norc', '-c', script],
      cwd: workDir,
      env: XTERM_ENV,
      rows: options.rows ?? 24,
      cols: options.cols ?? 80,
      graceMs: 500,
      ...(options.answerQueries === undefined ? {} : { answerQueries: options.answerQueries }),
    },
  });
  expect(created.status).toBe(201);
  return { id: created.body.id as string, info: created.body };
}

async function screenOf(id: string, target = daemon): Promise<Screen> {
  const answer = await target.request('GET', `/v1/terminals/${id}/screen`);
  expect(answer.status).toBe(200);
  return answer.body as Screen;
}

/** The terminal's output bytes from 0 up to what it produced so far (the ring must still hold them). */
async function outputOf(id: string, target = daemon): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let from = 0;
  for (;;) {
    const read = await target.request('GET', `/v1/terminals/${id}/output?from=${from}`);
    expect(read.body.gap).toBeNull();
    const data = Buffer.from(read.body.data as string, 'base64');
    chunks.push(data);
    from = read.body.next as number;
    if (data.length === 0) return Buffer.concat(chunks);
  }
}

/** Waits until the terminal's output, decoded, matches `pattern` (or holds it); returns it. */
async function waitForOutput(id: string, pattern: RegExp | string, target = daemon): Promise<string> {
  let text = '';
  await waitFor(`output matching ${JSON.stringify(String(pattern))}`, async () => {
    text = (await outputOf(id, target)).toString('utf8');
    return typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text);
  });
  return text;
}

async function deleteTerminal(id: string, target = daemon): Promise<void> {
  await target.request('DELETE', `/v1/terminals/${id}`);
}

/** A fresh emulator in the test, as the daemon's: no scrollback. */
function emulator(rows: number, cols: number): xterm.Terminal {
  return new xterm.Terminal({ rows, cols, scrollback: 0, allowProposedApi: true, logLevel: 'off' });
}

function write(term: xterm.Terminal, data: string | Uint8Array): Promise<void> {
  return new Promise((resolve) => term.write(data, resolve));
}

/** The test emulator's text rows and cursor, in the daemon's shape. */
function drawn(term: xterm.Terminal): { lines: string[]; cursor: { row: number; col: number } } {
  const buffer = term.buffer.active;
  const lines = Array.from({ length: term.rows }, (_unused, row) => (buffer.getLine(buffer.baseY + row)?.translateToString(true) ?? '').replace(/ +$/, ''));
  return { lines, cursor: { row: buffer.cursorY, col: Math.min(buffer.cursorX, term.cols - 1) } };
}

/** Bytes that draw `screen`'s text and put the cursor where it is, for an emulator in the normal screen. */
function redraw(screen: Screen): string {
  const rows = screen.lines.map((line, row) => `\x1b[${row + 1};1H${line}`).join('');
  return `\x1b[2J${rows}\x1b[${screen.cursor.row + 1};${screen.cursor.col + 1}H`;
}

describe('the query scanner', () => {
  const QUERIES = ['\x1b[6n', '\x1b[5n', '\x1b[?6n', '\x1b[c', '\x1b[0c', '\x1b[>c', '\x1b[?25$p', '\x1b[4$p', '\x1bP$qm\x1b\\', '\u009b6n', '\u0090$qm\u009c'];
  const HARMLESS = ['plain text ', '\x1b[31m', '\x1b[1;1H', '\x1b[2J', '\x1b[K', '\x1b]0;title\x07', '\x1b(B', '\x1b[?1049h', '\x1b[?25l', 'é ü ©', '\r\n'];

  test('finds each query the emulator answers, whole or split at any byte, and nothing in plain output', () => {
    const harmless = Buffer.from(HARMLESS.join(''));
    expect(new QueryScanner().scan(harmless)).toBe(false);
    for (const query of QUERIES) {
      const bytes = Buffer.from(`${HARMLESS.join('')}${query}`);
      for (let cut = 0; cut <= bytes.length; cut += 1) {
        const scanner = new QueryScanner();
        const found = [scanner.scan(bytes.subarray(0, cut)), scanner.scan(bytes.subarray(cut))];
        expect(found.includes(true), `${JSON.stringify(query)} cut at ${cut}`).toBe(true);
      }
    }
  });

  test('never misses output the emulator answers, over random sequences split at random places', async () => {
    // Fragments of control sequences, so that queries, near-queries and broken ones come up often.
    const pieces = ['\x1b', '\x1b[', '\x1b[?', '\x1b[>', '\x1bP', '\x1bP$q', '\x1b]', '\u009b', '\u0090', '\u009c', '\x1b\\', '\x07', '\x18'];
    pieces.push('$', 'p', 'n', 'c', 'q', 'm', '6', '5', '25', ';', 'a', 'é', '(', 'B', '\n');
    const seen = { answered: 0 };
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...pieces), { minLength: 1, maxLength: 24 }), fc.array(fc.nat(), { maxLength: 4 }), async (parts, cuts) => {
        const bytes = Buffer.from(parts.join(''));
        const term = emulator(5, 20);
        let answered = false;
        term.onData(() => (answered = true));
        await write(term, bytes);
        term.dispose();
        const scanner = new QueryScanner();
        let found = false;
        let from = 0;
        for (const cut of [...cuts.map((value) => value % (bytes.length + 1))].sort((a, b) => a - b)) {
          found = scanner.scan(bytes.subarray(from, Math.max(from, cut))) || found;
          from = Math.max(from, cut);
        }
        found = scanner.scan(bytes.subarray(from)) || found;
        if (answered) seen.answered += 1;
        expect(!answered || found).toBe(true);
      }),
      { numRuns: 400 },
    );
    // The property was tried on output the emulator does answer.
    expect(seen.answered).toBeGreaterThan(0);
  });
});

describe('RingStream.holdFrom', () => {
  test('keeps every held byte, stops the source once capacity of them wait, and says so when released', () => {
    const ring = new RingStream(8);
    ring.holdFrom(0);
    ring.append(Buffer.from('abcd'));
    ring.consumed(4);
    expect(ring.full).toBe(false);
    ring.append(Buffer.from('efgh'));
    ring.consumed(8);
    // Every byte was read by a client, but the hold still needs them all.
    expect(ring.full).toBe(true);
    ring.append(Buffer.from('ij'));
    expect(ring.start).toBe(0);
    expect(ring.read(0, 100).data.toString()).toBe('abcdefghij');
    let notified = 0;
    ring.onChange(() => (notified += 1));
    ring.holdFrom(6);
    expect(notified).toBe(1);
    expect(ring.full).toBe(false);
    // Held from 6, read to 10: the two bytes past capacity go.
    expect(ring.start).toBe(2);
    ring.holdFrom(undefined);
    expect(ring.full).toBe(false);
  });
});

describe('GET /v1/terminals/{id}/screen', () => {
  test('shows what a program printed: rows, cursor, title and cursor visibility, from the first byte', async () => {
    const { id } = await createTerminal(
      daemon,
      String.raw`printf '\e[2J\e[Halpha\nbeta\n  gamma  \e]2;the title\a\e[?25l'; printf '\n  delta'; exec sleep 60`,
      { rows: 6, cols: 30 },
    );
    try {
      await waitForOutput(id, /delta/);
      const screen = await screenOf(id);
      expect(screen).toEqual({
        offset: (await outputOf(id)).length,
        complete: true,
        rows: 6,
        cols: 30,
        lines: ['alpha', 'beta', '  gamma', '  delta', '', ''],
        cursor: { row: 3, col: 7, visible: false },
        alternate: false,
        title: 'the title',
      });
    } finally {
      await deleteTerminal(id);
    }
  });

  test('answers over the WebSocket and through the SDK, with the same screen', async () => {
    const { id } = await createTerminal(daemon, String.raw`printf 'one\ntwo'; exec sleep 60`, { rows: 4, cols: 20 });
    const runtime: RemoteRuntime = await connect(daemon.url, { token: ALICE });
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    try {
      await waitForOutput(id, /two/);
      const rest = await screenOf(id);
      expect(rest.lines).toEqual(['one', 'two', '', '']);
      expect(await socket.call('terminal.screen', { id })).toEqual(rest);
      expect(await runtime.screen(id)).toEqual(rest);
      const terminal = await runtime.attachTerminal(id);
      expect(await terminal.screen()).toEqual(rest);
    } finally {
      socket.close();
      await runtime.dispose();
      await deleteTerminal(id);
    }
  });

  test('follows a resize at the output offset where it happened', async () => {
    const { id } = await createTerminal(daemon, String.raw`printf 'ready\n'; read -r; printf '%s' "$(stty size)"; exec sleep 60`, { rows: 5, cols: 20 });
    try {
      await waitForOutput(id, /ready/);
      expect((await daemon.request('POST', `/v1/terminals/${id}/resize`, { body: { rows: 7, cols: 33 } })).status).toBe(200);
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: '\r' } });
      await waitForOutput(id, /7 33/);
      const screen = await screenOf(id);
      expect(screen).toMatchObject({ rows: 7, cols: 33, complete: true });
      expect(screen.lines[0]).toBe('ready');
      expect(screen.lines.some((line) => line.endsWith('7 33'))).toBe(true);
    } finally {
      await deleteTerminal(id);
    }
  });

  test('shows a full-screen program in the alternate screen (less), and the normal screen after it quits', async () => {
    writeFileSync(join(workDir, 'lines.txt'), Array.from({ length: 200 }, (_unused, index) => `line ${index + 1}`).join('\n'));
    const { id } = await createTerminal(daemon, "printf 'before less\\n'; LESS= less lines.txt; printf 'after less'; exec sleep 60", { rows: 10, cols: 40 });
    try {
      let screen: Screen | undefined;
      await waitFor('less on the alternate screen', async () => {
        screen = await screenOf(id);
        return screen.alternate && screen.lines[8] === 'line 9';
      });
      expect(screen!.lines.slice(0, 9)).toEqual(Array.from({ length: 9 }, (_unused, index) => `line ${index + 1}`));
      expect(screen!.lines[9]).toMatch(/^(lines\.txt|:)/);
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'q' } });
      await waitForOutput(id, /after less/);
      screen = await screenOf(id);
      expect(screen.alternate).toBe(false);
      expect(screen.lines.join('\n')).toContain('before less');
      expect(screen.lines.join('\n')).not.toContain('line 9');
    } finally {
      await deleteTerminal(id);
    }
  });

  test('shows vim in the alternate screen, vim gets the answers to its queries, and quits', async () => {
    writeFileSync(join(workDir, 'poem.txt'), 'first line of the poem\nsecond line\n');
    const { id } = await createTerminal(daemon, '', { argv: ['vim', '-u', 'NONE', '-N', '-n', '-i', 'NONE', 'poem.txt'], rows: 12, cols: 60 });
    try {
      let screen: Screen | undefined;
      await waitFor('vim on the alternate screen', async () => {
        screen = await screenOf(id);
        return screen.alternate && screen.lines[0] === 'first line of the poem' && screen.lines[11]!.includes('poem.txt');
      });
      expect(screen!.lines[1]).toBe('second line');
      expect(screen!.lines[2]).toBe('~');
      // vim takes commands: it is not stuck waiting for an answer to a query.
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: ':q!\r' } });
      const done = await daemon.request('GET', `/v1/terminals/${id}/done?timeoutMs=20000`);
      expect(done.body).toMatchObject({ settled: true, exit: { exitCode: 0 } });
      expect((await screenOf(id)).alternate).toBe(false);
    } finally {
      await deleteTerminal(id);
    }
  });

  test('has an exact offset: the bytes before it draw the snapshot, and the snapshot with the bytes after it draws the final screen', async () => {
    // Numbers written all over the screen, then a pause for input, then more: every byte moves the cursor or changes a cell.
    const draw = (from: number, to: number): string =>
      `for i in $(seq ${from} ${to}); do printf '\\e[%d;%dH%d\\e[K' $((i % 20 + 1)) $((i * 7 % 50 + 1)) $i; done`;
    const { id } = await createTerminal(daemon, `${draw(1, 4000)}; printf '\\e[HPAUSE'; read -r; ${draw(4001, 8000)}; printf '\\e[HEND  '; exec sleep 60`, {
      rows: 20,
      cols: 60,
    });
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    try {
      // Snapshots while the program writes, as fast as they come, and one while it waits for input.
      const snapshots: Screen[] = [];
      const snapshotUntil = (what: string, mark: string): Promise<void> =>
        waitFor(
          what,
          async () => {
            const screen = (await socket.call('terminal.screen', { id })) as Screen;
            snapshots.push(screen);
            return screen.lines[0]!.startsWith(mark);
          },
          20_000,
        );
      await snapshotUntil('the pause', 'PAUSE');
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: '\r' } });
      await snapshotUntil('the end', 'END');
      const final = snapshots.at(-1)!;
      const output = await outputOf(id);
      expect(final.offset).toBe(output.length);
      // The snapshot taken at the pause lies strictly inside the output.
      expect(snapshots.some((screen) => screen.offset > 0 && screen.offset < final.offset && screen.lines[0]!.startsWith('PAUSE'))).toBe(true);

      for (const snapshot of snapshots) {
        // Every byte before the offset, and none after, draws the snapshot.
        const prefix = emulator(20, 60);
        await write(prefix, output.subarray(0, snapshot.offset));
        expect(drawn(prefix), `snapshot at ${snapshot.offset}`).toEqual({
          lines: snapshot.lines,
          cursor: { row: snapshot.cursor.row, col: snapshot.cursor.col },
        });
        prefix.dispose();
      }

      // A client that renders a snapshot and reads the stream from its offset ends with the final screen.
      const middle = snapshots.find((screen) => screen.offset > 0 && screen.offset < final.offset)!;
      const subscribed = await socket.subscribe({ target: { kind: 'terminal', id, stream: 'output' }, from: middle.offset, window: 16 * 1024 * 1024 });
      expect(subscribed).toMatchObject({ from: middle.offset, gap: null });
      const frames = await socket.until('the rest of the output', () => {
        const list = socket.data.get(subscribed.sub) ?? [];
        const received = list.reduce((sum, frame) => sum + frame.payload.length, 0);
        return received >= final.offset - middle.offset ? list : undefined;
      });
      expect(frames[0]!.offset).toBe(middle.offset);
      const rest = Buffer.concat(frames.map((frame) => frame.payload));
      expect(rest.equals(output.subarray(middle.offset))).toBe(true);
      const client = emulator(20, 60);
      await write(client, redraw(middle));
      await write(client, rest);
      expect(drawn(client)).toEqual({ lines: final.lines, cursor: { row: final.cursor.row, col: final.cursor.col } });
      client.dispose();
    } finally {
      socket.close();
      await deleteTerminal(id);
    }
  });

  test('says complete: false when the emulator starts after the ring dropped the first bytes', async ({ startDaemon }) => {
    const small = await startDaemon({ ringBytes: 4096 });
    const { id } = await createTerminal(small, String.raw`for i in $(seq 1 2000); do printf 'row %d\n' $i; done; exec sleep 60`, { rows: 5, cols: 20 });
    // A reader that has every byte lets the ring drop the oldest.
    let from = 0;
    let tail = '';
    await waitFor('the whole output read', async () => {
      const read = await small.request('GET', `/v1/terminals/${id}/output?from=${from}&waitMs=200`);
      from = read.body.next as number;
      tail = (tail + Buffer.from(read.body.data as string, 'base64').toString('latin1')).slice(-64);
      return tail.includes('row 2000');
    });
    // The last read may have taken all of it at once: reading on from its end tells the ring every byte was had.
    await small.request('GET', `/v1/terminals/${id}/output?from=${from}&waitMs=0`);
    const screen = await screenOf(id, small);
    expect(screen.complete).toBe(false);
    expect(screen.offset).toBe(from);
    expect(screen.lines.slice(0, 4)).toEqual(['row 1997', 'row 1998', 'row 1999', 'row 2000']);
  });

  test('answers 404 NOT_FOUND for an unknown id and 400 INVALID_ARGUMENT for bad input, over REST and the WebSocket', async () => {
    const unknown = await daemon.request('GET', '/v1/terminals/t_unknown0000/screen');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
    const sleeper = await daemon.request('POST', '/v1/processes', {
      body: { argv: ['/bin/sleep', '30'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 300 },
    });
    // A process is no terminal: it has no screen.
    expect((await daemon.request('GET', `/v1/terminals/${sleeper.body.id}/screen`)).body.error.code).toBe('NOT_FOUND');
    await daemon.request('DELETE', `/v1/processes/${sleeper.body.id}`);
    const bad = await daemon.request('GET', '/v1/terminals/t_unknown0000/screen?rows=5');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_ARGUMENT');
    const badCreate = await daemon.request('POST', '/v1/terminals', {
      body: { argv: ['/bin/sh'], cwd: '/tmp', rows: 5, cols: 5, graceMs: 100, answerQueries: 'yes' },
    });
    expect(badCreate.status).toBe(400);
    expect(badCreate.body.error.message).toMatch(/answerQueries/);
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    try {
      await expect(socket.call('terminal.screen', { id: 't_unknown0000' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(socket.call('terminal.screen', { id: 7 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    } finally {
      socket.close();
    }
  });
});

describe('terminal queries', () => {
  /** Asks for the cursor position, reads the answer, prints it, then prints one line of input. */
  const ASK =
    "stty -echo; printf 'asking\\n'; printf '\\e[6n'; read -rsdR answer; " +
    'printf \'got:%s;\\n\' "${answer#*[}"; read -r line; printf \'line:%s;\\n\' "$line"; exec sleep 60';

  test('are answered by the daemon by default: a program reading the cursor position does not hang', async () => {
    const { id, info } = await createTerminal(daemon, ASK, { rows: 10, cols: 40 });
    try {
      expect(info.answerQueries).toBe(true);
      // "asking" on row 1; the query comes with the cursor at row 2, column 1.
      await waitForOutput(id, /got:2;1;/);
    } finally {
      await deleteTerminal(id);
    }
  });

  test('are answered once: replaying the output from 0 to new readers answers nothing again', async () => {
    const { id } = await createTerminal(daemon, ASK, { rows: 10, cols: 40 });
    const socket = await TestSocket.open(daemon.wsUrl, { token: ALICE });
    try {
      await waitForOutput(id, /got:2;1;/);
      const end = (await outputOf(id)).length;
      // A new subscriber and a REST reader get the query again from offset 0, and a screen is taken of it all.
      const subscribed = await socket.subscribe({ target: { kind: 'terminal', id, stream: 'output' }, from: 0 });
      await socket.until('the replay', () => (socket.bytes(subscribed.sub).length >= end ? true : undefined));
      expect(socket.bytes(subscribed.sub).includes('\x1b[6n')).toBe(true);
      expect((await screenOf(id)).offset).toBeGreaterThanOrEqual(end);
      // Input typed now is read whole: no second answer came before it.
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: 'done\r' } });
      const text = await waitForOutput(id, /line:[^;]*;/);
      expect(/line:([^;]*);/.exec(text)![1]).toBe('done');
    } finally {
      socket.close();
      await deleteTerminal(id);
    }
  });

  test('are left to the client of a terminal made with answerQueries: false', async () => {
    const { id, info } = await createTerminal(daemon, ASK, { rows: 10, cols: 40, answerQueries: false });
    try {
      expect(info.answerQueries).toBe(false);
      await waitForOutput(id, '\x1b[6n');
      // The daemon's emulator has parsed the query: had it answered, its answer would be written before the client's.
      const screen = await screenOf(id);
      expect(screen.offset).toBeGreaterThan((await outputOf(id)).indexOf('\x1b[6n'));
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: '\x1b[42;7R' } });
      const text = await waitForOutput(id, /got:[^;]*;[^;]*;/);
      expect(/got:([^;]*;[^;]*);/.exec(text)![1]).toBe('42;7');
      expect((await daemon.request('GET', `/v1/terminals/${id}`)).body.answerQueries).toBe(false);
    } finally {
      await deleteTerminal(id);
    }
  });

  test('are answered for a terminal the SDK creates, and left to it with answerQueries: false', async () => {
    const runtime = await connect(daemon.url, { token: ALICE });
    try {
      const spec = { argv: ['/bin/bash', '--noprofile', '--norc', '-c', ASK], cwd: '/tmp', env: XTERM_ENV, rows: 10, cols: 40, graceMs: 500 };
      const answered = await runtime.spawnTerminal(spec);
      expect((await answered.info()).answerQueries).toBe(true);
      await waitForOutput(answered.id, /got:2;1;/);
      const left = await runtime.spawnTerminal(spec, { answerQueries: false });
      expect((await left.info()).answerQueries).toBe(false);
      await waitForOutput(left.id, '\x1b[6n');
      await left.write('\x1b[9;9R');
      await waitForOutput(left.id, /got:9;9;/);
    } finally {
      await runtime.dispose();
    }
  });
});
