/**
 * The checks a spawn spec passes before any work, on both sides of the seam:
 * the local provider and the remote runtime refuse the same specs with the
 * same messages. Runtime-neutral: nothing of Node is imported.
 *
 * Each side throws its own error class, so a check takes `invalid`, which
 * makes the error (of code INVALID_ARGUMENT) from the message naming the field.
 * @module
 */
import { MAX_TIMER_DELAY_MS } from './limits.ts';

/** Makes the error a failed check throws, from the message that names what was wrong. */
export type InvalidArgument = (message: string) => Error;

/** A program at argv[0] (`message` when there is none), and every argument a string without NUL. */
export function assertProgram(argv: unknown, message: string, invalid: InvalidArgument): asserts argv is readonly [string, ...string[]] {
  if (!Array.isArray(argv) || typeof argv[0] !== 'string' || argv[0].length === 0) throw invalid(message);
  argv.forEach((arg: unknown, index) => {
    if (typeof arg !== 'string') throw invalid(`argv[${index}] must be a string`);
    if (arg.includes('\0')) throw invalid(`argv[${index}] must not contain a NUL character`);
  });
}

/** A grace a timer can hold: positive, finite, at most {@link MAX_TIMER_DELAY_MS}. */
export function assertGraceMs(graceMs: unknown, invalid: InvalidArgument): asserts graceMs is number {
  if (typeof graceMs !== 'number' || !Number.isFinite(graceMs) || graceMs <= 0 || graceMs > MAX_TIMER_DELAY_MS) {
    throw invalid(`graceMs must be a positive finite number no greater than ${MAX_TIMER_DELAY_MS}, got ${String(graceMs)}`);
  }
}

/** A working directory named by a non-empty string without NUL (whether it exists is the spawn's to find out). */
export function assertCwdString(cwd: unknown, invalid: InvalidArgument): asserts cwd is string {
  if (typeof cwd !== 'string' || cwd.length === 0) throw invalid('cwd must be a non-empty string');
  if (cwd.includes('\0')) throw invalid('cwd must not contain a NUL character');
}

/** A safe integer in [1, max]; `name` names the field in the message. */
export function assertPositiveInteger(name: string, value: unknown, max: number, invalid: InvalidArgument): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw invalid(`${name} must be a positive integer no greater than ${max}, got ${String(value)}`);
  }
}

/** Environment entries the operating system can carry: names without `=` or NUL, string (or unset) values without NUL. */
export function assertEnvironment(env: unknown, invalid: InvalidArgument): void {
  if (typeof env !== 'object' || env === null) throw invalid('env must be an object');
  for (const [name, value] of Object.entries(env)) {
    if (name.length === 0 || name.includes('=') || name.includes('\0')) throw invalid(`env name ${JSON.stringify(name)} is not valid`);
    if (value !== undefined && value !== null && typeof value !== 'string') throw invalid(`env.${name} must be a string`);
    if (typeof value === 'string' && value.includes('\0')) throw invalid(`env.${name} must not contain a NUL character`);
  }
}

/** The reason text of an aborted signal, `aborted` when it has none. */
export function abortReasonText(signal: { reason?: unknown }): string {
  const reason = signal.reason;
  if (reason === undefined || reason === null) return 'aborted';
  if (reason instanceof Error) return reason.message;
  if (typeof reason === 'object' || typeof reason === 'function' || typeof reason === 'symbol') return Object.prototype.toString.call(reason);
  return `${reason as string | number | boolean | bigint}`;
}
