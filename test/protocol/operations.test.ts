/**
 * The operation table says of every operation whether it may be resent after a
 * reconnect, whether it waits and whether a read-only token may make it; the
 * SDK's resending, the daemon's waiting calls and its READ_ONLY refusals are
 * all read from it.
 */
import { describe, expect, it } from 'vitest';
import { OPERATION_LIST, OPERATIONS, isIdempotentCall } from '@execworld/sdk/protocol';

describe('the operation table', () => {
  it('says of every operation whether it is idempotent and whether it waits', () => {
    for (const spec of OPERATION_LIST) {
      expect(typeof spec.waits, `${spec.name}.waits`).toBe('boolean');
      const rule = spec.idempotent;
      if (typeof rule === 'boolean') continue;
      // A condition names optional input fields (a required one would make the condition always hold).
      expect(rule.when.length, `${spec.name}.idempotent.when`).toBeGreaterThan(0);
      const shape = spec.input.shape as Record<string, { safeParse(value: unknown): { success: boolean } }>;
      for (const field of rule.when) {
        expect(Object.keys(shape), `${spec.name}.idempotent.when names ${field}`).toContain(field);
        expect(shape[field]!.safeParse(undefined).success, `${spec.name}.${field} is optional`).toBe(true);
      }
    }
  });

  it('marks as waiting exactly the calls the daemon must abort when their caller leaves', () => {
    const waiting = OPERATION_LIST.filter((spec) => spec.waits).map((spec) => spec.name);
    expect(waiting.sort()).toEqual(
      [
        'terminal.done',
        'process.done',
        'process.wait',
        'terminal.output',
        'process.output',
        'executable.resolve',
        'terminal.terminate',
        'terminal.delete',
        'process.delete',
        'command.run',
        'shell.create',
        'shell.run',
        'shell.send',
        'shell.wait',
        'shell.interrupt',
        'shell.delete',
        'upload.get',
      ].sort(),
    );
  });

  it('lets a read-only token make exactly the calls that change nothing and take nothing from other callers', () => {
    const reads = OPERATION_LIST.filter((spec) => spec.access === 'read').map((spec) => spec.name);
    expect(reads.sort()).toEqual(
      [
        'health.get',
        'identity.get',
        'executable.resolve',
        'files.content',
        'archive.pack',
        'terminal.list',
        'terminal.get',
        'terminal.foreground',
        'terminal.screen',
        'terminal.output',
        'terminal.done',
        'process.list',
        'process.get',
        'process.output',
        'process.collected',
        'process.done',
        'process.wait',
        'shell.list',
        'shell.get',
        'shell.history',
        'fs.resolve',
        'fs.stat',
        'fs.lstat',
        'fs.readText',
        'fs.listDir',
        'fs.digest',
        'upload.get',
        // Reached by a token scoped to the port whatever its access; any other token needs write (permitsPort, READ_ONLY).
        'port.connect',
        'port.shutdown',
        'port.close',
        'ports.list',
      ].sort(),
    );
    for (const spec of OPERATION_LIST) {
      expect(['read', 'write'], `${spec.name}.access`).toContain(spec.access);
      // Every create, and every call that writes, signals, ends or forgets, is a write.
      if (
        /\.(create|input|stdin|closeStdin|resize|signal|terminate|delete|run|send|wait|interrupt|complete)$/.test(spec.name) &&
        spec.name !== 'process.wait'
      ) {
        expect(spec.access, spec.name).toBe('write');
      }
      // A forward's calls are refused READ_ONLY by permitsPort, after the table let a token scoped to the port in.
      expect(spec.errors.includes('READ_ONLY'), `${spec.name} documents READ_ONLY`).toBe(
        spec.auth && (spec.access === 'write' || spec.name.startsWith('port.')),
      );
    }
  });

  it('marks every long poll as waiting', () => {
    const polls = OPERATION_LIST.filter((spec) => 'waitMs' in spec.input.shape || 'timeoutMs' in spec.input.shape).map((spec) => spec.name);
    expect(polls.length).toBeGreaterThan(0);
    for (const name of polls) expect(OPERATIONS[name as keyof typeof OPERATIONS].waits, name).toBe(true);
  });

  it('makes creates idempotent only with a requestId, and input only with a writer and a sequence number', () => {
    const argv = ['/bin/true'];
    expect(isIdempotentCall(OPERATIONS['process.create'], { argv })).toBe(false);
    expect(isIdempotentCall(OPERATIONS['process.create'], { argv, requestId: 'r1' })).toBe(true);
    expect(isIdempotentCall(OPERATIONS['terminal.create'], { argv })).toBe(false);
    expect(isIdempotentCall(OPERATIONS['terminal.create'], { argv, requestId: 'r1' })).toBe(true);
    for (const name of ['terminal.input', 'process.stdin'] as const) {
      expect(isIdempotentCall(OPERATIONS[name], { id: 't_1', data: 'x' }), name).toBe(false);
      expect(isIdempotentCall(OPERATIONS[name], { id: 't_1', data: 'x', seq: 1 }), name).toBe(false);
      expect(isIdempotentCall(OPERATIONS[name], { id: 't_1', data: 'x', writer: 'w', seq: 1 }), name).toBe(true);
    }
  });

  it('never resends a signal, and always resends reads, waits and terminates', () => {
    expect(isIdempotentCall(OPERATIONS['terminal.signal'], { id: 't_1', signal: 'SIGINT' })).toBe(false);
    for (const name of [
      'terminal.get',
      'process.list',
      'terminal.done',
      'process.wait',
      'terminal.terminate',
      'process.terminate',
      'process.closeStdin',
    ] as const) {
      expect(isIdempotentCall(OPERATIONS[name], { id: 't_1' }), name).toBe(true);
    }
  });
});
