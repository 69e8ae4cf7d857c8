/** Statistics and table printing for the benchmarks. */

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export const median = (values: readonly number[]): number => percentile(values, 50);

/** Figures of one workload: per peer, one value per round. */
export class RoundTable {
  readonly #values = new Map<string, number[]>();

  add(peer: string, value: number): void {
    const list = this.#values.get(peer);
    if (list === undefined) this.#values.set(peer, [value]);
    else list.push(value);
  }

  values(peer: string): number[] {
    return this.#values.get(peer) ?? [];
  }

  peers(): string[] {
    return [...this.#values.keys()];
  }

  /** Median over rounds of `peer / base`, each ratio taken within its round. */
  ratio(peer: string, base: string): { median: number; min: number; max: number } | undefined {
    const a = this.values(peer);
    const b = this.values(base);
    const ratios = a.flatMap((value, round) => (b[round] === undefined || !Number.isFinite(value) ? [] : [value / b[round]]));
    if (ratios.length === 0) return undefined;
    return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
  }
}

export function fmt(value: number, digits = 3): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (Math.abs(value) >= 1000) return value.toFixed(0);
  if (Math.abs(value) >= 100) return value.toFixed(1);
  return value.toFixed(digits);
}

/** Median [min–max] of a peer's round values. */
export function spread(values: readonly number[], digits = 3): string {
  const finite = values.filter(Number.isFinite);
  if (finite.length === 0) return 'n/a';
  return `${fmt(median(finite), digits)} [${fmt(Math.min(...finite), digits)}–${fmt(Math.max(...finite), digits)}]`;
}

export function printTable(title: string, header: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = header.map((cell, column) => Math.max(cell.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string => `| ${cells.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  console.log(`\n### ${title}\n`);
  console.log(line(header));
  console.log(`|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}
