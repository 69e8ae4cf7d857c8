/**
 * The browser view's bundle holds the SDK's protocol client, reached through
 * the package's exports, and nothing of Node: no `ws`, no built-in module,
 * no transport of the SDK's Node runtime (sdk/src/remote).
 */
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { bundlePage, PAGE_BUILD } from '../../service/ui/bundle.ts';

describe("the browser view's bundle", () => {
  it('carries the protocol client and nothing of Node', { timeout: 60_000 }, async () => {
    const { metafile } = await build({ ...PAGE_BUILD, write: false, metafile: true });
    const inputs = Object.keys(metafile.inputs);
    console.log(`the page's bundle: ${Object.values(metafile.outputs)[0]!.bytes} bytes from ${inputs.length} modules`);
    expect(inputs).toContain('sdk/src/client/protocol-client.ts');
    expect(inputs).toContain('sdk/src/client/browser.ts');
    expect(inputs.filter((input) => /(^|\/)node_modules\/ws\/|^node:|(^|\/)sdk\/src\/remote\//.test(input))).toEqual([]);
    // Anything of Node left for a runtime to resolve would show in the text.
    const text = await bundlePage();
    expect(text).not.toMatch(/require\(\s*["'][^"']+["']\s*\)/);
    expect(text).not.toMatch(/["']node:[a-z_/]+["']/);
    expect(text).not.toMatch(/from\s*["']ws["']/);
  });
});
