/**
 * The browser view at /ui, in Debian's Chromium driven by playwright-core:
 * the page lists the owner's sessions, shows a terminal live from its screen
 * snapshot, takes typing when the token may write and none when it may only
 * read, shows a process's two streams, and resumes byte-exact after its
 * connection is cut. A page that may write starts terminals and shells and
 * ends sessions; the page in control fits the remote terminal to its pane
 * while a watching one never resizes it; ended sessions fold away; a shell is
 * shown as its runs. The daemon is reached through a proxy that can cut and
 * stall every connection, as a network failure would.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, describe, expect } from 'vitest';
import { ALICE, ALICE_READER, BOB, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { FaultProxy } from '../helpers/proxy.ts';
import { requiredTool } from '../helpers/tools.ts';
import { waitFor } from '../helpers/wait.ts';

const CHROMIUM = requiredTool('chromium', { installedBy: '.ci/run (apt-get install chromium)' });
/** Where the screenshots are left for a person to look at. */
export const SCREENSHOT = join(import.meta.dirname, '../../.cache/ui/terminal.png');
const DRIVING_SCREENSHOT = join(import.meta.dirname, '../../.cache/ui/driving.png');
const SHELL_SCREENSHOT = join(import.meta.dirname, '../../.cache/ui/shell.png');
const RING_BYTES = 64 * 1024;
/** Generous: Chromium's first start on a loaded machine is slow. */
const DEADLINE = 60_000;

// A small ring, so that output made while the page is away can outrun what the daemon keeps.
const test = daemonTest({ ringBytes: RING_BYTES });

describe.skipIf(CHROMIUM.skip)(`the browser view${CHROMIUM.note}`, () => {
  let daemon: TestDaemon;
  let proxy: FaultProxy;
  let browser: Browser;
  let terminalId: string;
  let processId: string;

  test.beforeAll(async ({ daemon: fileDaemon }) => {
    daemon = fileDaemon;
    proxy = await FaultProxy.start(Number(new URL(daemon.url).port));
    browser = await chromium.launch({
      executablePath: CHROMIUM.require(),
      headless: true,
      // launch() gives Chromium a fresh profile of its own, removed on close. The machine has no network:
      // Chromium's own background traffic would only fail.
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
    });
    const terminal = await daemon.request('POST', '/v1/terminals', {
      body: {
        argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
        cwd: tmpdir(),
        rows: 20,
        cols: 90,
        env: { PS1: 'ui$ ', TERM: 'xterm-256color' },
        graceMs: 2000,
      },
    });
    expect(terminal.status).toBe(201);
    terminalId = terminal.body.id;
    await daemon.request('POST', `/v1/terminals/${terminalId}/input`, { body: { data: 'echo before-$((40+2))\r' } });
    await waitFor('the terminal to print before-42', async () => (await outputText(terminalId)).includes('before-42\r\n'), DEADLINE);
    const process = await daemon.request('POST', '/v1/processes', {
      body: {
        argv: ['/bin/sh', '-c', 'echo out-$((3*3)); echo err-$((4*4)) >&2; exec sleep 300'],
        cwd: tmpdir(),
        stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
        graceMs: 1000,
      },
    });
    expect(process.status).toBe(201);
    processId = process.body.id;
  }, DEADLINE);

  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
  });

  async function outputText(id: string): Promise<string> {
    const read = await daemon.request('GET', `/v1/terminals/${id}/output?from=0`);
    return Buffer.from(read.body.data, 'base64').toString('utf8');
  }

  /** A fresh context (no storage shared with another) on the page, with `token` in the address. */
  async function open(token: string): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    // A policy violation, an exception in the page or a failed request shows here.
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    await page.goto(`${proxy.url}/ui#token=${token}`);
    return { context, page, problems };
  }

  /** Waits for the session to be listed, then opens it. */
  async function choose(page: Page, list: 'terminals' | 'processes' | 'shells', id: string): Promise<void> {
    const row = page.locator(`#${list} button[data-id="${id}"]`);
    await row.waitFor({ timeout: DEADLINE });
    await row.click();
  }

  /** Takes a screenshot of the whole page to `path` and checks it is a PNG of the page's size. */
  async function screenshot(page: Page, path: string): Promise<void> {
    mkdirSync(join(path, '..'), { recursive: true });
    await page.screenshot({ path });
    const png = readFileSync(path);
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    // The header's first chunk (IHDR) gives the width and height.
    const viewport = page.viewportSize()!;
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([viewport.width, viewport.height]);
  }

  /** Calls of `operation` the daemon has answered over WebSockets, from its metrics. */
  async function callCount(operation: string): Promise<number> {
    const text = await (await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${ALICE}` } })).text();
    let count = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('execworld_call_duration_seconds_count{') && line.includes(`operation="${operation}"`) && line.includes('transport="websocket"')) {
        count += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
    return count;
  }

  async function terminalSize(id: string): Promise<{ rows: number; cols: number }> {
    const { rows, cols } = (await daemon.request('GET', `/v1/terminals/${id}`)).body as { rows: number; cols: number };
    return { rows, cols };
  }

  /**
   * The size of the page's emulator, and whether it fills its pane: the rows it draws, and its cell grid against the
   * pane's inner box, which must leave less than a cell (and the scroll bar's room) unused.
   */
  async function paneFit(page: Page): Promise<{ rows: number; cols: number; fills: boolean }> {
    // Run in the page (as text: this file is compiled without the DOM's types).
    return page.evaluate(`(() => {
      const pane = document.getElementById('screen');
      const style = getComputedStyle(pane);
      const innerWidth = pane.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      const innerHeight = pane.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
      const grid = pane.querySelector('.xterm-screen').getBoundingClientRect();
      const rows = pane.querySelectorAll('.xterm-rows > div').length;
      const cellHeight = pane.querySelector('.xterm-rows > div').getBoundingClientRect().height;
      const measure = document.createElement('span');
      measure.textContent = 'W'.repeat(100);
      pane.querySelector('.xterm-rows').append(measure);
      const cellWidth = measure.getBoundingClientRect().width / 100;
      measure.remove();
      const cols = Math.round(grid.width / cellWidth);
      const unusedWidth = innerWidth - grid.width;
      const unusedHeight = innerHeight - rows * cellHeight;
      const fills = unusedWidth >= 0 && unusedWidth < cellWidth + 20 && unusedHeight >= 0 && unusedHeight < cellHeight + 1;
      return { rows, cols, fills };
    })()`);
  }

  const screenText = (page: Page): Promise<string> => page.locator('#screen .xterm-rows').innerText();

  /** Screen snapshots the daemon has given over WebSockets, from its metrics. */
  async function screenSnapshots(): Promise<number> {
    const text = await (await fetch(`${daemon.url}/metrics`, { headers: { authorization: `Bearer ${ALICE}` } })).text();
    let count = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('execworld_call_duration_seconds_count{') && line.includes('operation="terminal.screen"') && line.includes('transport="websocket"')) {
        count += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
    return count;
  }

  /** Waits until the page's view shows every byte the terminal printed. */
  async function caughtUp(page: Page, id: string): Promise<void> {
    await waitFor(
      'the page to show every byte of the terminal',
      async () => {
        const end = (await daemon.request('GET', `/v1/terminals/${id}`)).body.output.end as number;
        return (await page.locator('#view-status').textContent()) === `live at byte ${end}`;
      },
      DEADLINE,
    );
  }

  /** Cuts every connection and holds new ones until `away` is done, then lets the page reconnect. */
  async function dropWhile(page: Page, away: () => Promise<void>): Promise<void> {
    proxy.stall();
    proxy.cut();
    await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).not.toBe('open');
    await away();
    proxy.resume();
    await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).toBe('open');
  }

  test('serves the page with a policy that runs only its own script and connects only to itself', async () => {
    const response = await fetch(`${proxy.url}/ui`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/html/);
    const policy = response.headers.get('content-security-policy') ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("connect-src 'self'");
    expect(policy).toContain("frame-ancestors 'none'");
    const script = await fetch(`${proxy.url}/ui/page.js`);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    // The bundle carries xterm.js from its npm package: nothing is fetched from elsewhere.
    expect(await script.text()).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)[a-z0-9.-]+\/[^"'\s]*\.(js|css)\b/i);
  });

  test('refuses a wrong token and says so', async () => {
    const { context, page, problems } = await open('not-a-token-of-anyone-000');
    await expect.poll(() => page.locator('#login-error').textContent(), { timeout: DEADLINE }).toContain('UNAUTHORIZED');
    expect(await page.locator('#main').isHidden()).toBe(true);
    // The token was taken out of the address.
    expect(page.url()).toBe(`${proxy.url}/ui`);
    // The one failure is the refused identity request.
    expect(problems.filter((problem) => !problem.includes('401'))).toEqual([]);
    await context.close();
  });

  test(
    "shows the owner's terminal live, takes typing, and resumes byte-exact after the connection is cut",
    async () => {
      const { context, page, problems } = await open(ALICE);
      await expect.poll(() => page.locator('#who').textContent(), { timeout: DEADLINE }).toBe('owner alice · may write');
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).toBe('open');
      // Listed with its state.
      const row = page.locator(`#terminals button[data-id="${terminalId}"]`);
      await row.waitFor({ timeout: DEADLINE });
      expect(await row.innerText()).toContain('running');
      await page.locator(`#processes button[data-id="${processId}"]`).waitFor({ timeout: DEADLINE });
      await row.click();
      // The screen snapshot draws what the terminal printed before the page opened.
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('before-42');

      await page.locator('#screen .xterm').click();
      await page.keyboard.type('echo typed-$((6*7))\n');
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('typed-42');
      expect(await outputText(terminalId)).toContain('typed-42\r\n');

      // The network fails: every connection is cut, and new ones hang until it comes back.
      const snapshots = await screenSnapshots();
      await dropWhile(page, async () => {
        // Typed while away: sent once the page is back.
        await page.keyboard.type('echo queued-$((5*5))\n');
        // Printed while away, by another client.
        await daemon.request('POST', `/v1/terminals/${terminalId}/input`, { body: { data: 'echo away-$((50+50))\r' } });
        await waitFor('the terminal to print away-100', async () => (await outputText(terminalId)).includes('away-100\r\n'), DEADLINE);
        expect(await screenText(page)).not.toContain('away-100');
      });
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('away-100');
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('queued-25');
      const output = await outputText(terminalId);
      // Typed once, run once.
      expect(output.match(/queued-25\r\n/g)).toHaveLength(1);
      // The view stands at the terminal's end: it resumed where it was, and nothing was skipped or shown twice.
      await caughtUp(page, terminalId);
      // It read on from its offset: the daemon still held the bytes, so no snapshot was asked for.
      expect(await screenSnapshots()).toBe(snapshots);
      const shown = await screenText(page);
      expect(shown.match(/away-100/g)).toHaveLength(1);
      expect(shown.match(/typed-42/g)).toHaveLength(1);

      mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT });
      const png = readFileSync(SCREENSHOT);
      expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
      expect(problems).toEqual([]);
      await context.close();
    },
    4 * DEADLINE,
  );

  test(
    'redraws from a fresh screen snapshot when the daemon no longer holds what the page missed',
    async () => {
      const { context, page, problems } = await open(ALICE);
      await choose(page, 'terminals', terminalId);
      await caughtUp(page, terminalId);
      const snapshots = await screenSnapshots();
      const missedFrom = (await daemon.request('GET', `/v1/terminals/${terminalId}`)).body.output.end as number;
      await dropWhile(page, async () => {
        // Three rings' worth of output, read by another client as it comes (a ring with unread output pauses its program).
        await daemon.request('POST', `/v1/terminals/${terminalId}/input`, { body: { data: 'seq 100001 130000; echo seq-$((1+1))-done\r' } });
        let from = missedFrom;
        let seen = '';
        await waitFor(
          'seq to finish',
          async () => {
            const read = await daemon.request('GET', `/v1/terminals/${terminalId}/output?from=${from}&waitMs=1000`);
            from = read.body.next;
            seen = (seen + Buffer.from(read.body.data, 'base64').toString('latin1')).slice(-64);
            return seen.includes('seq-2-done\r\n');
          },
          DEADLINE,
        );
        const state = (await daemon.request('GET', `/v1/terminals/${terminalId}`)).body.output;
        expect(state.start).toBeGreaterThan(missedFrom);
      });
      await caughtUp(page, terminalId);
      // Drawn by xterm on its next animation frame after the page has taken the bytes in.
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('seq-2-done');
      expect(await screenText(page)).toContain('130000');
      expect(await screenSnapshots()).toBe(snapshots + 1);
      expect(problems).toEqual([]);
      await context.close();
    },
    4 * DEADLINE,
  );

  test(
    "never answers a program's terminal queries itself, which would reach the program as typing",
    async () => {
      // A terminal whose queries the daemon leaves unanswered: any answer would have come from the page.
      const created = await daemon.request('POST', '/v1/terminals', {
        body: {
          argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
          cwd: tmpdir(),
          rows: 20,
          cols: 90,
          env: { PS1: 'q$ ' },
          answerQueries: false,
          graceMs: 2000,
        },
      });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      const { context, page, problems } = await open(ALICE);
      await choose(page, 'terminals', id);
      await caughtUp(page, id);
      // Device attributes and the cursor position, asked while the page shows the terminal and may write to it.
      const probe = `printf '\\033[c\\033[6n'; if read -rs -t 5 -n 1 c; then echo answered; else echo unanswered-$((2+2)); fi\r`;
      await daemon.request('POST', `/v1/terminals/${id}/input`, { body: { data: probe } });
      await waitFor('the probe to end', async () => /(unanswered-4|\banswered)\r\n/.test(await outputText(id)), DEADLINE);
      // The queries went out, and the read that followed them got nothing.
      expect(await outputText(id)).toContain('\x1b[c\x1b[6nunanswered-4\r\n');
      expect(await daemon.request('POST', `/v1/terminals/${id}/terminate`)).toMatchObject({ status: 200 });
      expect(problems).toEqual([]);
      await context.close();
    },
    2 * DEADLINE,
  );

  test("shows a process's stdout and stderr apart", async () => {
    const { context, page, problems } = await open(ALICE);
    await choose(page, 'processes', processId);
    await expect.poll(() => page.locator('#stdout').textContent(), { timeout: DEADLINE }).toBe('out-9\n');
    await expect.poll(() => page.locator('#stderr').textContent(), { timeout: DEADLINE }).toBe('err-16\n');
    expect(await page.locator('#view-status').textContent()).toMatch(/^running · stdout 6 bytes, stderr 7 bytes$/);
    expect(problems).toEqual([]);
    await context.close();
  });

  test(
    'shows a read-only token the same terminal and sends none of its typing',
    async () => {
      const { context, page, problems } = await open(ALICE_READER);
      await expect.poll(() => page.locator('#who').textContent(), { timeout: DEADLINE }).toBe('owner alice · read-only');
      await choose(page, 'terminals', terminalId);
      await daemon.request('POST', `/v1/terminals/${terminalId}/input`, { body: { data: 'echo seen-by-reader-$((8*8))\r' } });
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('seen-by-reader-64');
      await page.locator('#screen .xterm').click();
      await page.keyboard.type('echo reader-$((7*7))\n');
      // A write after the reader's typing comes through; the reader's typing never does.
      await daemon.request('POST', `/v1/terminals/${terminalId}/input`, { body: { data: 'echo after-reader\r' } });
      await expect.poll(() => screenText(page), { timeout: DEADLINE }).toContain('after-reader');
      expect(await outputText(terminalId)).not.toContain('reader-49');
      expect(problems).toEqual([]);
      await context.close();
    },
    2 * DEADLINE,
  );

  test(
    'starts a terminal and a shell from a page that may write, and ends them; a read-only page offers neither',
    async () => {
      const listed = async (path: string, key: string): Promise<{ id: string; status?: string; argv?: string[] }[]> =>
        (await daemon.request('GET', path)).body[key];
      const { context, page, problems } = await open(ALICE);
      await expect.poll(() => page.locator('#who').textContent(), { timeout: DEADLINE }).toBe('owner alice · may write');
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).toBe('open');
      const before = new Set((await listed('/v1/terminals', 'terminals')).map((terminal) => terminal.id));

      // The owner's own shell, in a terminal the page opens in control.
      await page.locator('#new-terminal').click();
      let started = '';
      await waitFor(
        'a new terminal',
        async () => {
          started = (await listed('/v1/terminals', 'terminals')).find((terminal) => !before.has(terminal.id))?.id ?? '';
          return started !== '';
        },
        DEADLINE,
      );
      await expect.poll(() => page.locator('#view-title').textContent(), { timeout: DEADLINE }).toContain(started);
      await expect.poll(() => page.locator('#control').textContent(), { timeout: DEADLINE }).toMatch(/^in control/);
      await page.keyboard.type('echo made-$((2+3))\n');
      await waitFor('the new terminal to run what was typed', async () => (await outputText(started)).includes('made-5\r\n'), DEADLINE);
      await page.locator('#end').click();
      await waitFor('the terminal to end', async () => (await daemon.request('GET', `/v1/terminals/${started}`)).body.status === 'exited', DEADLINE);

      // A command line of the person's own.
      const known = new Set((await listed('/v1/terminals', 'terminals')).map((terminal) => terminal.id));
      await page.locator('#command').fill('echo line-$((3+4)); exec sleep 600');
      await page.locator('#new-terminal').click();
      let lined = '';
      await waitFor(
        'the command line to run in a new terminal',
        async () => {
          lined = (await listed('/v1/terminals', 'terminals')).find((terminal) => !known.has(terminal.id))?.id ?? '';
          return lined !== '' && (await outputText(lined)).includes('line-7\r\n');
        },
        DEADLINE,
      );
      await expect.poll(() => page.locator('#view-title').textContent(), { timeout: DEADLINE }).toContain(lined);
      await page.locator('#end').click();
      await waitFor('the command line terminal to end', async () => (await daemon.request('GET', `/v1/terminals/${lined}`)).body.status === 'exited', DEADLINE);

      // A persistent shell, run from the page.
      const shells = new Set((await listed('/v1/shells', 'shells')).map((shell) => shell.id));
      await page.locator('#new-shell').click();
      let shellId = '';
      await waitFor(
        'a new shell',
        async () => {
          shellId = (await listed('/v1/shells', 'shells')).find((shell) => !shells.has(shell.id))?.id ?? '';
          return shellId !== '';
        },
        DEADLINE,
      );
      await expect.poll(() => page.locator('#view-title').textContent(), { timeout: DEADLINE }).toContain(shellId);
      await page.locator('#run-command').fill('echo via-page-$((4+4))');
      await page.locator('#run-command').press('Enter');
      await expect.poll(() => page.locator('#runs').innerText(), { timeout: DEADLINE }).toContain('via-page-8');
      expect(await page.locator('#runs li').first().innerText()).toContain('exited 0');
      await page.locator('#end').click();
      await waitFor('the shell to be ended', async () => !(await listed('/v1/shells', 'shells')).some((shell) => shell.id === shellId), DEADLINE);
      expect(problems).toEqual([]);
      await context.close();

      // A read token is offered nothing to start or end.
      const reader = await open(ALICE_READER);
      await expect.poll(() => reader.page.locator('#who').textContent(), { timeout: DEADLINE }).toBe('owner alice · read-only');
      await choose(reader.page, 'terminals', terminalId);
      await expect.poll(() => reader.page.locator('#control').textContent(), { timeout: DEADLINE }).toMatch(/^watching/);
      expect(await reader.page.locator('#new-terminal').isVisible()).toBe(false);
      expect(await reader.page.locator('#new-shell').isVisible()).toBe(false);
      expect(await reader.page.locator('#command').isVisible()).toBe(false);
      expect(await reader.page.locator('#end').isVisible()).toBe(false);
      expect(reader.problems).toEqual([]);
      await reader.context.close();
    },
    6 * DEADLINE,
  );

  test(
    'fits the remote terminal to the pane of the page in control, on open and on resize; a watching page never resizes it',
    async () => {
      const created = await daemon.request('POST', '/v1/terminals', {
        body: { argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: tmpdir(), rows: 12, cols: 50, env: { PS1: 'fit$ ' }, graceMs: 2000 },
      });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      const driver = await open(ALICE);
      await choose(driver.page, 'terminals', id);
      await caughtUp(driver.page, id);
      // Opened by another client's command: the page watches until it takes the keyboard.
      expect(await driver.page.locator('#control').textContent()).toMatch(/^watching/);
      expect(await terminalSize(id)).toEqual({ rows: 12, cols: 50 });
      await driver.page.locator('#screen .xterm').click();
      await expect.poll(() => driver.page.locator('#control').textContent(), { timeout: DEADLINE }).toMatch(/^in control/);
      let fit = { rows: 0, cols: 0, fills: false };
      await waitFor(
        'the remote terminal to take the size of the pane',
        async () => {
          fit = await paneFit(driver.page);
          const size = await terminalSize(id);
          return fit.fills && size.rows === fit.rows && size.cols === fit.cols;
        },
        DEADLINE,
      );
      console.log(`a 1280×720 page fits ${fit.cols}×${fit.rows}`);
      expect(fit.cols).toBeGreaterThan(50);
      expect(fit.rows).toBeGreaterThan(12);
      // The program in it sees that size.
      await driver.page.keyboard.type('stty size\n');
      await waitFor('stty to print the size', async () => (await outputText(id)).includes(`${fit.rows} ${fit.cols}\r\n`), DEADLINE);

      // The window shrinks: the terminal follows.
      await driver.page.setViewportSize({ width: 1000, height: 560 });
      let smaller = fit;
      await waitFor(
        'the remote terminal to follow the smaller pane',
        async () => {
          smaller = await paneFit(driver.page);
          const size = await terminalSize(id);
          return smaller.fills && smaller.cols < fit.cols && size.rows === smaller.rows && size.cols === smaller.cols;
        },
        DEADLINE,
      );
      await screenshot(driver.page, DRIVING_SCREENSHOT);

      // A second page, of a token that may write, watches in a window of another size.
      const resizes = await callCount('terminal.resize');
      const watcher = await open(ALICE);
      await watcher.page.setViewportSize({ width: 1200, height: 700 });
      await choose(watcher.page, 'terminals', id);
      await caughtUp(watcher.page, id);
      await expect.poll(() => watcher.page.locator('#control').textContent(), { timeout: DEADLINE }).toMatch(/^watching/);
      // It measures its pane (it says what would fit there) and shows the terminal at the size the controller gave it.
      await watcher.page.setViewportSize({ width: 1100, height: 650 });
      const watcherFit = await paneFit(watcher.page);
      await expect
        .poll(() => watcher.page.locator('#control').textContent(), { timeout: DEADLINE })
        .toMatch(new RegExp(`^watching · ${smaller.cols}×${smaller.rows} · the pane fits \\d+×\\d+`));
      expect(watcherFit).toMatchObject({ rows: smaller.rows, cols: smaller.cols });
      expect(await terminalSize(id)).toEqual({ rows: smaller.rows, cols: smaller.cols });
      expect(await callCount('terminal.resize')).toBe(resizes);
      // Taking the keyboard makes it the one in control, and the terminal takes its pane's size.
      await watcher.page.locator('#screen .xterm').click();
      let taken = { rows: 0, cols: 0, fills: false };
      await waitFor(
        "the remote terminal to take the new controller's pane",
        async () => {
          taken = await paneFit(watcher.page);
          const size = await terminalSize(id);
          return taken.fills && size.cols === taken.cols && size.rows === taken.rows;
        },
        DEADLINE,
      );
      expect(taken.cols).toBeGreaterThan(smaller.cols);
      expect(await watcher.page.locator('#control').textContent()).toBe(`in control · ${taken.cols}×${taken.rows}`);
      // The page that had control sees its terminal resized by another and goes back to watching, at the new size.
      await expect
        .poll(() => driver.page.locator('#control').textContent(), { timeout: DEADLINE })
        .toMatch(new RegExp(`^watching · ${taken.cols}×${taken.rows}`));
      expect(driver.problems).toEqual([]);
      expect(watcher.problems).toEqual([]);
      await driver.context.close();
      await watcher.context.close();
      expect(await daemon.request('POST', `/v1/terminals/${id}/terminate`)).toMatchObject({ status: 200 });
    },
    4 * DEADLINE,
  );

  test(
    'folds ended sessions away from the live ones',
    async () => {
      const created = await daemon.request('POST', '/v1/processes', {
        body: { argv: ['/bin/sleep', '300'], cwd: tmpdir(), stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1000 },
      });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      const { context, page, problems } = await open(ALICE);
      const live = page.locator(`#processes > li > button[data-id="${id}"]`);
      const ended = page.locator(`#processes details.ended button[data-id="${id}"]`);
      await live.waitFor({ timeout: DEADLINE });
      expect(await ended.count()).toBe(0);
      expect(await daemon.request('POST', `/v1/processes/${id}/terminate`)).toMatchObject({ status: 200 });
      await ended.waitFor({ state: 'attached', timeout: DEADLINE });
      expect(await live.count()).toBe(0);
      const summary = await page.locator('#processes details.ended summary').textContent();
      expect(summary).toMatch(/^ended \(\d+\)$/);
      // Folded until opened; opened, it stays open across the page's refreshes and shows how the process ended.
      expect(await ended.isVisible()).toBe(false);
      await page.locator('#processes details.ended summary').click();
      await expect.poll(() => ended.innerText(), { timeout: DEADLINE }).toContain('killed by SIGTERM');
      await expect.poll(() => ended.isVisible(), { timeout: DEADLINE }).toBe(true);
      expect(problems).toEqual([]);
      await context.close();
    },
    2 * DEADLINE,
  );

  test(
    'shows a shell as its runs, each with its status and output, never its markers, and offers no raw typing',
    async () => {
      const created = await daemon.request('POST', '/v1/shells', { body: { cwd: tmpdir() } });
      expect(created.status).toBe(201);
      const shellId = created.body.id as string;
      const shellTerminal = created.body.terminalId as string;
      const run = async (command: string): Promise<Record<string, unknown>> =>
        (await daemon.request('POST', `/v1/shells/${shellId}/run`, { body: { command } })).body;
      expect(await run('echo hi')).toMatchObject({ reason: 'completed', exitCode: 0, output: 'hi\n' });
      expect(await run('(exit 3)')).toMatchObject({ reason: 'completed', exitCode: 3 });
      expect(await run('read x')).toMatchObject({ reason: 'waiting_for_input', waitingFor: { command: 'bash' } });
      // The daemon lists them.
      const listed = (await daemon.request('GET', `/v1/shells/${shellId}/history`)).body;
      expect(listed.runs.map((entry: { command: string; state: string }) => [entry.command, entry.state])).toEqual([
        ['echo hi', 'completed'],
        ['(exit 3)', 'completed'],
        ['read x', 'waiting_for_input'],
      ]);

      const { context, page, problems } = await open(ALICE);
      await choose(page, 'shells', shellId);
      const runs = page.locator('#runs > li');
      await expect.poll(() => runs.count(), { timeout: DEADLINE }).toBe(3);
      expect(await runs.nth(0).locator('.command').textContent()).toBe('echo hi');
      expect(await runs.nth(0).locator('.outcome').textContent()).toBe('exited 0');
      expect(await runs.nth(0).locator('pre').textContent()).toBe('hi\n');
      expect(await runs.nth(1).locator('.command').textContent()).toBe('(exit 3)');
      expect(await runs.nth(1).locator('.outcome').textContent()).toBe('exited 3');
      expect(await runs.nth(2).locator('.command').textContent()).toBe('read x');
      expect(await runs.nth(2).locator('.outcome').textContent()).toBe('waiting for input: bash');
      // Not the terminal: nothing to type raw into, and the shell's terminal is not offered as one.
      expect(await page.locator('#screen').isVisible()).toBe(false);
      expect(await page.locator(`#terminals button[data-id="${shellTerminal}"]`).count()).toBe(0);
      const text = await page.locator('body').innerText();
      for (const marker of ['__EW', '__ew', '133;D', 'ew=']) expect(text).not.toContain(marker);
      await screenshot(page, SHELL_SCREENSHOT);

      // The run waiting for input is answered from the page, then another is interrupted.
      await page.locator('#run-command').fill('typed-answer');
      await page.locator('#run-command').press('Enter');
      await expect.poll(() => runs.nth(2).locator('.outcome').textContent(), { timeout: DEADLINE }).toBe('exited 0');
      await page.locator('#run-command').fill('sleep 600');
      await page.locator('#run-command').press('Enter');
      await expect.poll(() => runs.count(), { timeout: DEADLINE }).toBe(4);
      await expect.poll(() => runs.nth(3).locator('.outcome').textContent(), { timeout: DEADLINE }).toBe('running');
      await page.locator('#interrupt').click();
      await expect.poll(() => runs.nth(3).locator('.outcome').textContent(), { timeout: DEADLINE }).toMatch(/^interrupted/);
      expect(await run('echo $x')).toMatchObject({ reason: 'completed', output: 'typed-answer\n' });
      expect(problems).toEqual([]);
      await context.close();
      expect(await daemon.request('DELETE', `/v1/shells/${shellId}`)).toMatchObject({ status: 200 });
    },
    4 * DEADLINE,
  );

  /** Keeps every text the view's status line shows, in the page: a later one (the next poll's) soon replaces it. */
  async function recordStatuses(page: Page): Promise<() => Promise<string[]>> {
    await page.evaluate(`(() => {
      const line = document.getElementById('view-status');
      window.__statuses = [];
      new MutationObserver(() => window.__statuses.push(line.textContent)).observe(line, { childList: true, characterData: true, subtree: true });
    })()`);
    return () => page.evaluate<string[]>('window.__statuses');
  }

  test(
    'sends a create in flight when the connection drops again with its request id, and opens the one session it made',
    async () => {
      const listed = async (): Promise<string[]> =>
        ((await daemon.request('GET', '/v1/terminals')).body.terminals as { id: string }[]).map((terminal) => terminal.id);
      const { context, page, problems } = await open(ALICE);
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).toBe('open');
      const statuses = await recordStatuses(page);
      const before = new Set(await listed());
      const creates = await callCount('terminal.create');
      await page.locator('#command').fill('echo resent-$((6+6)); exec sleep 600');
      // Sent into a stalled network, then the connection is cut: the daemon never sees this sending.
      proxy.stall();
      await page.locator('#new-terminal').click();
      proxy.cut();
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).not.toBe('open');
      proxy.resume();
      let made: string[] = [];
      await waitFor(
        'the page to open a new terminal, or to say it could not',
        async () => {
          made = (await listed()).filter((id) => !before.has(id));
          const title = (await page.locator('#view-title').textContent()) ?? '';
          return (made.length > 0 && title.includes(made[0]!)) || (await statuses()).some((text) => text.startsWith('could not'));
        },
        DEADLINE,
      );
      expect((await statuses()).filter((text) => text.startsWith('could not'))).toEqual([]);
      // One terminal, made by the one create that reached the daemon: the sending after the reconnect.
      expect(made).toHaveLength(1);
      expect(await callCount('terminal.create')).toBe(creates + 1);
      await waitFor('the new terminal to run its line', async () => (await outputText(made[0]!)).includes('resent-12\r\n'), DEADLINE);
      expect(problems).toEqual([]);
      await context.close();
      expect(await daemon.request('POST', `/v1/terminals/${made[0]!}/terminate`)).toMatchObject({ status: 200 });
    },
    4 * DEADLINE,
  );

  test(
    "never sends again an interrupt in flight when the connection drops, and says its outcome is unknown with the SDK's OUTCOME_UNKNOWN",
    async () => {
      const created = await daemon.request('POST', '/v1/shells', { body: { cwd: tmpdir() } });
      expect(created.status).toBe(201);
      const shellId = created.body.id as string;
      expect((await daemon.request('POST', `/v1/shells/${shellId}/run`, { body: { command: 'read x' } })).body).toMatchObject({ reason: 'waiting_for_input' });
      const { context, page, problems } = await open(ALICE);
      await choose(page, 'shells', shellId);
      await expect.poll(() => page.locator('#runs > li .outcome').first().textContent(), { timeout: DEADLINE }).toBe('waiting for input: bash');
      const statuses = await recordStatuses(page);
      const interrupts = await callCount('shell.interrupt');
      proxy.stall();
      await page.locator('#interrupt').click();
      proxy.cut();
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).not.toBe('open');
      proxy.resume();
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).toBe('open');
      await expect.poll(async () => (await statuses()).filter((text) => text.startsWith('interrupt')), { timeout: DEADLINE }).toHaveLength(1);
      const said = (await statuses()).find((text) => text.startsWith('interrupt'))!;
      console.log(`the page said: ${said}`);
      expect(said).toMatch(/^interrupt failed: OUTCOME_UNKNOWN: the connection broke before the daemon answered shell\.interrupt/);
      // Not sent again: the daemon never got it, and the run still waits for its input.
      expect(await callCount('shell.interrupt')).toBe(interrupts);
      const history = (await daemon.request('GET', `/v1/shells/${shellId}/history`)).body;
      expect(history.runs.map((run: { state: string }) => run.state)).toEqual(['waiting_for_input']);
      expect(problems).toEqual([]);
      await context.close();
      expect(await daemon.request('DELETE', `/v1/shells/${shellId}`)).toMatchObject({ status: 200 });
    },
    4 * DEADLINE,
  );

  test("lists none of another owner's sessions", async () => {
    const { context, page, problems } = await open(BOB);
    await expect.poll(() => page.locator('#who').textContent(), { timeout: DEADLINE }).toBe('owner bob · may write');
    await expect.poll(() => page.locator('#terminals').innerText(), { timeout: DEADLINE }).toBe('none');
    expect(await page.locator('#processes').innerText()).toBe('none');
    expect(problems).toEqual([]);
    await context.close();
  });

  test('goes back to its form when the daemon no longer takes the token', async ({ startDaemon }) => {
    const CAROL = 'carol-token-0123456789abcdef';
    const other = await startDaemon({}, { owners: [{ owner: 'carol', token: CAROL }] });
    proxy.retarget(Number(new URL(other.url).port));
    try {
      const { context, page, problems } = await open(CAROL);
      await expect.poll(() => page.locator('#who').textContent(), { timeout: DEADLINE }).toBe('owner carol · may write');
      await expect.poll(() => page.locator('#link').getAttribute('data-state'), { timeout: DEADLINE }).toBe('open');
      // The daemon is replaced by one without carol's token.
      proxy.retarget(Number(new URL(daemon.url).port));
      proxy.cut();
      await expect.poll(() => page.locator('#login-error').textContent(), { timeout: DEADLINE }).toContain('UNAUTHORIZED');
      expect(await page.locator('#main').isHidden()).toBe(true);
      expect(await page.evaluate('sessionStorage.length')).toBe(0);
      // The failures are the refused redial and identity request.
      expect(problems.filter((problem) => !/401|Authentication failed/.test(problem))).toEqual([]);
      await context.close();
    } finally {
      proxy.retarget(Number(new URL(daemon.url).port));
    }
  });
});
