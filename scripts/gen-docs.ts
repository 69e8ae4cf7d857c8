/**
 * `npm run gen:docs`: writes docs/errors.md and docs/settings.md from the
 * error catalog and the settings table. A test fails while the committed files differ.
 */
import { writeFileSync } from 'node:fs';
import { generatedDocs } from './docs-documents.ts';

for (const [url, text] of generatedDocs()) {
  writeFileSync(url, text);
  console.log(`wrote ${url.pathname}`);
}
