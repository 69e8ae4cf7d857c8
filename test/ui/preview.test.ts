/**
 * A preview URL in Debian's Chromium: a dev server started inside the world
 * through the daemon, loaded at /v1/ports/{port}/ with the token in the
 * query (then kept in a cookie of the port's path): its page, its script (a
 * relative URL) and its WebSocket echo all come through, and the app sees no
 * cookie of the daemon's. The browser view lists the port with a link that
 * opens the preview. The page's load time through the preview and direct is
 * printed side by side. The link carries a token minted for the port alone.
 */
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, describe, expect } from 'vitest';
import { ALICE, type TestDaemon } from '../helpers/daemon.ts';
import { daemonTest } from '../helpers/daemon-test.ts';
import { requiredTool } from '../helpers/tools.ts';
import { freePort, startPreviewApp } from '../helpers/preview-app.ts';
import { waitFor } from '../helpers/wait.ts';

const CHROMIUM = requiredTool('chromium', { installedBy: '.ci/run (apt-get install chromium)' });
/** Generous: Chromium's first start on a loaded machine is slow. */
const DEADLINE = 60_000;

const test = daemonTest();

/** The page's own load time: from the navigation's start to its load event's end, redirects included. */
const loadMs = (page: Page): Promise<number> =>
  page.evaluate<number>(`(() => {
    const [entry] = performance.getEntriesByType('navigation');
    return entry === undefined ? Number.NaN : entry.loadEventEnd - entry.startTime;
  })()`);

describe.skipIf(CHROMIUM.skip)(`a preview URL in the browser${CHROMIUM.note}`, () => {
  let daemon: TestDaemon;
  let browser: Browser;
  let port: number;
  let prefix: string;

  test.beforeAll(async ({ daemon: fileDaemon }) => {
    daemon = fileDaemon;
    port = await freePort();
    prefix = `/v1/ports/${port}`;
    await startPreviewApp(daemon, port, DEADLINE);
    browser = await chromium.launch({
      executablePath: CHROMIUM.require(),
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
    });
  }, DEADLINE);

  afterAll(async () => {
    await browser?.close();
  });

  test(
    'loads the page, its script and its WebSocket echo through the preview, the token moved to a cookie the app never sees',
    async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      const script = page.waitForResponse((response) => response.url().endsWith(`${prefix}/app.js`));
      await page.goto(`${daemon.url}${prefix}/?token=${encodeURIComponent(ALICE)}`);
      // The redirect took the token out of the address.
      expect(page.url()).toBe(`${daemon.url}${prefix}/`);
      expect(await page.title()).toBe('preview app');
      expect((await script).status()).toBe(200);
      // The app's WebSocket echoes, and says which cookie reached it: none (the daemon's is stripped).
      await page.locator('#status', { hasText: 'echo ping-42 cookie=none' }).waitFor({ timeout: DEADLINE });
      const [cookie] = await context.cookies();
      expect(cookie).toMatchObject({ name: 'execworld_preview', path: prefix, httpOnly: true, sameSite: 'Lax' });
      expect(await page.evaluate('document.cookie')).toBe('');

      // One load each, side by side: through the preview (the cookie kept) and straight from the app.
      await page.reload();
      await page.locator('#status', { hasText: 'echo ping-42' }).waitFor({ timeout: DEADLINE });
      const preview = await loadMs(page);
      const direct = await context.newPage();
      await direct.goto(`http://127.0.0.1:${port}/`);
      await direct.locator('#status', { hasText: 'echo ping-42' }).waitFor({ timeout: DEADLINE });
      const straight = await loadMs(direct);
      console.log(`page load: preview ${preview.toFixed(1)} ms, direct ${straight.toFixed(1)} ms`);
      expect(problems).toEqual([]);
      await context.close();
    },
    DEADLINE * 2,
  );

  test(
    'the browser view lists the port with a link that opens its preview',
    async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${daemon.url}/ui#token=${ALICE}`);
      const link = page.locator(`#ports li[data-port="${port}"] a`);
      await link.waitFor({ timeout: DEADLINE });
      expect(await link.getAttribute('href')).toBe(`${prefix}/`);
      // The page mints the link's token as the port is listed: the link is followed once it has.
      await waitFor('the page to mint a token of the port', async () =>
        ((await daemon.request('GET', '/v1/tokens')).body.tokens as { port?: number }[]).some((token) => token.port === port),
      );
      expect(await page.locator(`#ports li[data-port="${port}"] .state`).textContent()).toMatch(/^127\.0\.0\.1 · pid \d+ · p_/);
      const [opened] = await Promise.all([context.waitForEvent('page'), link.click()]);
      await opened.locator('#status', { hasText: 'echo ping-42 cookie=none' }).waitFor({ timeout: DEADLINE });
      expect(opened.url()).toBe(`${daemon.url}${prefix}/`);
      // The link carried a token minted for this port alone, never the page's own.
      const [cookie] = await context.cookies();
      expect(cookie?.path).toBe(prefix);
      expect(decodeURIComponent(cookie?.value ?? '')).toMatch(/^ewm1\./);
      await context.close();
    },
    DEADLINE * 2,
  );
});
