/**
 * Numbers both sides of the seam hold to: the local provider, the daemon, the
 * wire schemas and the remote runtime all read them from here. Runtime-neutral
 * (the wire protocol imports it): nothing of Node is imported.
 * @module
 */

/** The largest delay a timer takes, 2^31-1 ms (Node fires a longer one at once): the bound of every graceMs. */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/** The signals a terminal's foreground group can be sent through the seam. */
export const TERMINAL_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGTSTP', 'SIGHUP'] as const;

/** The largest terminal dimension (`struct winsize` fields are 16-bit). */
export const MAX_TERMINAL_SIZE = 65_535;

/**
 * The longest one waiting call waits: the bound of a long poll's `waitMs` and
 * a wait's `timeoutMs`, what a done or wait without a timeout waits at most
 * over REST, and the slice a remote `waitForExit` loops over.
 */
export const MAX_WAIT_MS = 60_000;

/** TERM-to-KILL grace of a spawn or terminal created without one: 5 s. */
export const DEFAULT_GRACE_MS = 5000;

/** Output kept of each stream of a run without `maxOutputBytes`: 1 MiB. */
export const DEFAULT_RUN_OUTPUT_BYTES = 1024 * 1024;

/** The largest `maxOutputBytes` a run takes: 64 MiB per stream. */
export const MAX_RUN_OUTPUT_BYTES = 64 * 1024 * 1024;
