/**
 * The browser view through a takeover (`execworld serve --takeover`): the
 * daemon closes the page's WebSocket with 1012 and execs its new build; the
 * page dials again, resumes the terminal it shows from its offset, and shows
 * what the terminal prints under the new image, nothing twice. Debian's
 * Chromium, driven by playwright-core, on a daemon process.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, describe, expect } from 'vitest';
import { callDaemon } from '../helpers/daemon-process.ts';
import { daemonProcessTest } from '../helpers/daemon-test.ts';
import { requestTakeover } from '../helpers/takeover.ts';
import { requiredTool } from '../helpers/tools.ts';
import { waitFor } from '../helpers/wait.ts';

const CHROMIUM = requiredTool('chromium', { installedBy: '.ci/run (apt-get install chromium)' });
/** Generous: Chromium's first start and a takeover's two new builds are slow on a loaded machine. */
const DEADLINE = 60_000;

const test = daemonProcessTest();

describe.skipIf(CHROMIUM.skip)(`the browser view through a takeover${CHROMIUM.note}`, { timeout: 180_000 }, () => {
  let browser: Browser | undefined;

  afterAll(async () => {
    await browser?.close();
  });

  test('dials again after the 1012, resumes the terminal from its offset, and shows what comes under the new build once', async ({ spawnDaemon }) => {
    const stateDir = mkdtempSync(join(tmpdir(), 'execworld-takeover-'));
    const daemon = await spawnDaemon(['--state-dir', stateDir]);
    browser = await chromium.launch({
      executablePath: CHROMIUM.require(),
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
    });
    const terminal = await callDaemon(daemon, 'POST', '/v1/terminals', {
      argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
      cwd: stateDir,
      rows: 20,
      cols: 90,
      env: { PS1: 'ui$ ', TERM: 'xterm-256color' },
    });
    await callDaemon(daemon, 'POST', `/v1/terminals/${terminal.id}/input`, { data: 'echo before-$((40+2))\r' });
    const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    await page.goto(`${daemon.url}/ui#token=${daemon.token}`);
    const row = page.locator(`#terminals button[data-id="${terminal.id}"]`);
    await row.waitFor({ timeout: DEADLINE });
    await row.click();
    const screen = (): Promise<string> => page.locator('#screen .xterm-rows').innerText();
    await waitFor('the page to show before-42', async () => (await screen()).includes('before-42'), DEADLINE);
    const link = (): Promise<string | null> => page.locator('#link').getAttribute('data-state');
    expect(await link()).toBe('open');

    const outcome = await requestTakeover(stateDir);
    expect(outcome.stderr).toBe('');
    expect(outcome.status).toBe(0);

    await callDaemon(daemon, 'POST', `/v1/terminals/${terminal.id}/input`, { data: 'echo after-$((50+5))\r' });
    await waitFor('the page to show after-55', async () => (await screen()).includes('after-55'), DEADLINE);
    await expect.poll(link, { timeout: DEADLINE }).toBe('open');
    // Resumed from its offset: each line once, as the terminal printed it.
    const end = (await callDaemon(daemon, 'GET', `/v1/terminals/${terminal.id}`)).output.end as number;
    await expect.poll(() => page.locator('#view-status').textContent(), { timeout: DEADLINE }).toBe(`live at byte ${end}`);
    const text = await screen();
    expect(text.split('\n').filter((line) => line.trim() === 'before-42')).toHaveLength(1);
    expect(text.split('\n').filter((line) => line.trim() === 'after-55')).toHaveLength(1);
    expect(problems).toEqual([]);
    await context.close();
    await callDaemon(daemon, 'DELETE', `/v1/terminals/${terminal.id}`);
  });
});
