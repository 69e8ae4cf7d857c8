/**
 * The CLI's follower of a run's output (RunOutput): whatever the order in
 * which the answer and the terminal's bytes arrive, the output is written
 * once.
 */
import { describe, expect, it } from 'vitest';
import { RunOutput, type RunAnswer } from '../../service/src/cli/shell-run.ts';

const START = '__EW_START_abc__\r\n';
const END = '__EW_END_abc__';

function answer(fields: Partial<RunAnswer>): RunAnswer {
  return { output: 'in /tmp\n', exitCode: 3, signal: null, reason: 'exited', terminalId: 't_1', ...fields } as RunAnswer;
}

describe('a run followed on its terminal', () => {
  it('writes the answer once when it came before the stream reached the run, and nothing the stream brings later', () => {
    const written: string[] = [];
    const output = new RunOutput(0, true, (text) => written.push(text));
    // The answer arrives while the reader has not seen the run's start marker yet.
    expect(output.finish(answer({ outputStart: 10, outputEnd: 18 }), 't_1')).toBe(true);
    expect(written.join('')).toBe('in /tmp\n');
    // A read that was in flight brings the run's bytes afterwards.
    const bytes = Buffer.from(`${START}in /tmp\r\n${END}`, 'latin1');
    output.push(bytes, 0);
    expect(written.join('')).toBe('in /tmp\n');
  });

  it('writes the stream once when it came first, and nothing from the answer', () => {
    const written: string[] = [];
    const output = new RunOutput(0, true, (text) => written.push(text));
    const bytes = Buffer.from(`${START}in /tmp\r\n${END}`, 'latin1');
    output.push(bytes, 0);
    const start = Buffer.byteLength(START);
    expect(output.finish(answer({ outputStart: start, outputEnd: start + 9 }), 't_1')).toBe(true);
    output.push(Buffer.from('more\r\n'), bytes.length);
    expect(written.join('')).toBe('in /tmp\n');
  });

  it('says how many bytes the daemon dropped once the run was under way, and goes on after them', () => {
    const written: string[] = [];
    const dropped: number[] = [];
    const output = new RunOutput(
      0,
      true,
      (text) => written.push(text),
      (bytes) => dropped.push(bytes),
    );
    const first = Buffer.from(`${START}line 1\r\nline 2\r\n`, 'latin1');
    output.push(first, 0);
    // The ring moved on: the next read starts 500 bytes later.
    const later = first.length + 500;
    const rest = Buffer.from(`line 90\r\n${END}`, 'latin1');
    output.push(rest, later);
    expect(dropped).toEqual([500]);
    const start = Buffer.byteLength(START);
    expect(output.finish(answer({ outputStart: start, outputEnd: later + 9 }), 't_1')).toBe(true);
    expect(written.join('')).toBe('line 1\nline 2\nline 90\n');
  });
});
