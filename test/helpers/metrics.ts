/** Reading a scrape of GET /metrics (Prometheus' text format) in tests. */

/** The value of sample `name{labels}` in `text`, its labels exactly those; undefined when it is not there. */
export function metricSample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match?.[1] !== name) continue;
    const have = (match[2] ?? '').split(',').filter(Boolean);
    if (have.length === wanted.length && wanted.every((label) => have.includes(label))) return Number(match[3]);
  }
  return undefined;
}
