/** The generated files of openapi/, path and exact text. */
import { readFileSync } from 'node:fs';
import { buildOpenApiDocument, buildWebSocketSchema } from './openapi.ts';

export function generatedDocuments(): [URL, string][] {
  const version = (JSON.parse(readFileSync(new URL('../service/package.json', import.meta.url), 'utf8')) as { version: string }).version;
  const text = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;
  return [
    [new URL('../openapi/openapi.json', import.meta.url), text(buildOpenApiDocument(version))],
    [new URL('../openapi/websocket.schema.json', import.meta.url), text(buildWebSocketSchema())],
  ];
}
