/**
 * The project's Markdown pages as the docs tests read them: README.md,
 * CONTRIBUTING.md and every page of docs/, found by listing the directory so
 * that a page added there is read without being named here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '../..');

/** Paths relative to the repository's root. */
export function docFiles(): string[] {
  const pages = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', 'CONTRIBUTING.md', ...pages];
}

export function readDoc(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8');
}

export interface CodeBlock {
  file: string;
  /** The line of the opening fence, 1-based. */
  line: number;
  lang: string;
  code: string;
}

/** The fenced blocks of a page: a fence opens and closes at the start of a line. */
export function codeBlocks(file: string, text = readDoc(file)): CodeBlock[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((match) => ({
    file,
    line: text.slice(0, match.index).split('\n').length,
    lang: match[1]!,
    code: match[2]!,
  }));
}

/** The page without its fenced blocks. */
export function withoutFences(text: string): string {
  return text.replace(/^```\w*\n[\s\S]*?^```$/gm, '');
}

/** The page without its fenced blocks and code spans: what remains is prose, where a link is a link. */
export function prose(text: string): string {
  return withoutFences(text).replace(/`+[^`\n]*`+/g, '');
}

/**
 * The anchors GitHub gives a page's headings: the heading's text in lower
 * case, without punctuation but hyphens and underscores, spaces made hyphens;
 * a repeated one gets -1, -2 and so on.
 */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of withoutFences(text).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const plain = match[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[*`]/g, '');
    const slug = plain
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replaceAll(' ', '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    result.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return result;
}
