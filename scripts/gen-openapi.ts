/**
 * `npm run gen:openapi`: writes openapi/openapi.json and openapi/websocket.schema.json
 * from the protocol schemas. A test fails while the committed files differ.
 */
import { writeFileSync } from 'node:fs';
import { generatedDocuments } from './openapi-documents.ts';

for (const [url, text] of generatedDocuments()) {
  writeFileSync(url, text);
  console.log(`wrote ${url.pathname}`);
}
