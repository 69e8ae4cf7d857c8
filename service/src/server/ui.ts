/**
 * The browser view at `/ui`: a page, its script and its styles, served by the
 * daemon itself so that the page's WebSocket is same-origin. The files hold no
 * data of anyone's and need no token; everything the page shows it asks for
 * with the token its user gives it, through the same API as any client.
 *
 * The packed service carries the page's script built (`ui/page.js`); a
 * checkout bundles `ui/page/main.ts` the first time it is asked for.
 * @module
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { UI_PATH } from '@execworld/sdk/protocol';

const UI_DIR = new URL('../../ui/', import.meta.url);

/**
 * Only the daemon's own files run, and the page connects only to the daemon.
 * Styles may be inline: the terminal emulator writes its theme as a style
 * element. Nothing may frame the page, so no other site can dress it up.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  // A new daemon serves a new page: the browser asks again each time.
  'cache-control': 'no-cache',
};

interface Asset {
  readonly type: string;
  load(): Promise<Buffer | string>;
}

let pageScript: Promise<string | Buffer> | undefined;

function loadPageScript(): Promise<string | Buffer> {
  const built = fileURLToPath(new URL('page.js', UI_DIR));
  if (existsSync(built)) return readFile(built);
  // A checkout: bundled once, then served from memory. A failure is not kept, so a later request tries again.
  pageScript ??= import('../../ui/bundle.ts')
    .then(({ bundlePage }) => bundlePage())
    .catch((error: unknown) => {
      pageScript = undefined;
      throw error;
    });
  return pageScript;
}

const ASSETS: Readonly<Record<string, Asset>> = {
  '': { type: 'text/html; charset=utf-8', load: () => readFile(new URL('index.html', UI_DIR)) },
  'page.css': { type: 'text/css; charset=utf-8', load: () => readFile(new URL('page.css', UI_DIR)) },
  'page.js': { type: 'text/javascript; charset=utf-8', load: loadPageScript },
  'xterm.css': { type: 'text/css; charset=utf-8', load: () => readFile(createRequire(import.meta.url).resolve('@xterm/xterm/css/xterm.css')) },
};

async function send(reply: FastifyReply, asset: Asset): Promise<FastifyReply> {
  const body = await asset.load();
  return reply.headers(SECURITY_HEADERS).type(asset.type).send(body);
}

/** Adds the page's routes to `scope`; none of them needs a token. */
export function registerUi(scope: FastifyInstance): void {
  scope.route({ method: 'GET', url: UI_PATH, config: { auth: false }, handler: (_request, reply) => send(reply, ASSETS['']!) });
  for (const [name, asset] of Object.entries(ASSETS)) {
    scope.route({ method: 'GET', url: `${UI_PATH}/${name}`, config: { auth: false }, handler: (_request, reply) => send(reply, asset) });
  }
}
