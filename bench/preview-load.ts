/**
 * A preview's page load against a direct one, side by side: the preview
 * tests' dev server (test/fixtures/preview-app.ts) started in the world of a
 * daemon in a child process, loaded in Debian's Chromium at
 * /v1/ports/{port}/ (the token in the query once, then in its cookie) and
 * straight at 127.0.0.1:{port}. Each load is the page's own navigation timing,
 * from its start to its load event's end (the page, its script), and the
 * WebSocket echo is waited for after it. A figure to print, not a test.
 *
 *   npx tsx bench/preview-load.ts [--runs 1]
 */
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { freePort, previewAppArgv } from '../test/helpers/preview-app.ts';
import { startDaemonProcess } from './lib/daemon.ts';
import { fmt, median } from './lib/stats.ts';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '1' } } });
const runs = Number(args.runs);
const CHROMIUM = '/usr/bin/chromium';

async function until(what: string, check: () => Promise<boolean>, deadlineMs = 60_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${deadlineMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Loads `url` afresh and answers its navigation's start to load-event end, in ms, once its WebSocket echoed. */
async function load(page: Page, url: string): Promise<number> {
  await page.goto(url, { waitUntil: 'load' });
  await page.locator('#status', { hasText: 'echo ping-42' }).waitFor({ timeout: 60_000 });
  return page.evaluate<number>(`(() => {
    const [entry] = performance.getEntriesByType('navigation');
    return entry.loadEventEnd - entry.startTime;
  })()`);
}

const daemon = await startDaemonProcess();
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
});
try {
  const port = await freePort();
  const started = await fetch(`${daemon.url}/v1/processes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${daemon.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ argv: previewAppArgv(port), cwd: tmpdir(), stdio: { stdin: 'ignore' }, graceMs: 1000 }),
  });
  if (started.status !== 201) throw new Error(`the app did not start: ${started.status} ${await started.text()}`);
  await until('the app to listen', async () => (await fetch(`http://127.0.0.1:${port}/headers`).catch(() => undefined))?.ok === true);
  const context = await browser.newContext();
  const page = await context.newPage();
  const prefix = `${daemon.url}/v1/ports/${port}/`;
  // The first load takes the token from the query and sets the cookie; it is counted apart.
  const first = await load(page, `${prefix}?token=${encodeURIComponent(daemon.token)}`);
  const preview: number[] = [];
  const direct: number[] = [];
  for (let run = 0; run < runs; run += 1) {
    preview.push(await load(page, prefix));
    direct.push(await load(page, `http://127.0.0.1:${port}/`));
  }
  console.log(`preview page load (${runs} run${runs === 1 ? '' : 's'}, Chromium ${browser.version()})`);
  console.log(`  direct   127.0.0.1:${port}/            ${fmt(median(direct))} ms`);
  console.log(`  preview  /v1/ports/${port}/ (cookie)   ${fmt(median(preview))} ms`);
  console.log(`  preview  first load (?token=, 303)  ${fmt(first)} ms`);
} finally {
  await browser.close();
  await daemon.stop();
}
