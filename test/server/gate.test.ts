/**
 * The gate the daemon ends sessions through: never more than its width at
 * once, the others in the order they came; a task that fails passes its turn
 * on like one that succeeds, and one that takes long passes it on once it
 * held it its time.
 */
import { describe, expect, test } from 'vitest';
import { Gate } from '../../service/src/server/sessions/gate.ts';
import { waitFor } from '../helpers/wait.ts';

/** A task that runs until it is released, and says when it started. */
function heldTask(log: string[], name: string, outcome: 'resolve' | 'reject' = 'resolve') {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const task = async (): Promise<string> => {
    log.push(name);
    await released;
    if (outcome === 'reject') throw new Error(`${name} failed`);
    return name;
  };
  return { task, release };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('Gate', () => {
  test('runs at most its width at once, the others in the order they came', async () => {
    const gate = new Gate(2, 60_000);
    const started: string[] = [];
    const tasks = ['a', 'b', 'c', 'd', 'e'].map((name) => heldTask(started, name));
    const results = tasks.map(({ task }) => gate.run(task));
    await turn();
    expect(started).toEqual(['a', 'b']);
    expect(gate.load).toEqual({ running: 2, waiting: 3 });
    tasks[1]!.release();
    await turn();
    expect(started).toEqual(['a', 'b', 'c']);
    expect(gate.load).toEqual({ running: 2, waiting: 2 });
    for (const { release } of tasks) release();
    expect(await Promise.all(results)).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  test('passes the turn of a task that fails on, and the failure to its caller', async () => {
    const gate = new Gate(1, 60_000);
    const started: string[] = [];
    const failing = heldTask(started, 'fails', 'reject');
    const next = heldTask(started, 'next');
    const first = gate.run(failing.task);
    const second = gate.run(next.task);
    failing.release();
    await expect(first).rejects.toThrow('fails failed');
    await turn();
    expect(started).toEqual(['fails', 'next']);
    next.release();
    await expect(second).resolves.toBe('next');
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  test('passes the turn of a task that takes long on once it held it its time, and settles each as its task does', async () => {
    const gate = new Gate(1, 20);
    const started: string[] = [];
    const slow = heldTask(started, 'slow');
    const next = heldTask(started, 'next');
    const first = gate.run(slow.task);
    const second = gate.run(next.task);
    await turn();
    expect(started).toEqual(['slow']);
    await waitFor('the next task to start', () => started.length === 2);
    expect(gate.load).toEqual({ running: 1, waiting: 0 });
    next.release();
    await expect(second).resolves.toBe('next');
    // The slow one, still running, holds no turn any more.
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
    slow.release();
    await expect(first).resolves.toBe('slow');
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  test('is at least one wide, and holds a turn at least a millisecond', () => {
    expect(() => new Gate(0, 100)).toThrow(RangeError);
    expect(() => new Gate(1.5, 100)).toThrow(RangeError);
    expect(() => new Gate(1, 0)).toThrow(RangeError);
  });
});
