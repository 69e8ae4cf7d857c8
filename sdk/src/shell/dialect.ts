/**
 * The boundary between the shell engine and a shell language: how a shell is
 * started, prepared, and made to run one command between two markers that
 * carry a nonce and the exit status. Markers are printed by the shell from
 * pieces joined at run time, so an echo of the line typed never contains them.
 * @module
 */

export interface ShellDialect {
  readonly name: 'bash' | 'pwsh';
  /**
   * Whether the shell asks the terminal for the cursor position at each
   * prompt and reads nothing else until it is answered: the engine then
   * answers its queries, and waits for the answer before typing a line.
   */
  readonly queriesCursorAtPrompt: boolean;
  /**
   * What is typed to interrupt the shell itself while it reads its terminal
   * (pwsh's `Read-Host`, where SIGINT does nothing); undefined when SIGINT to
   * the foreground group does it.
   */
  readonly interruptInput?: string | undefined;
  /** The program and arguments that start an interactive shell. */
  argv(shellPath?: string): string[];
  /** Environment entries the shell starts with (under the caller's). */
  environment(): Record<string, string>;
  /**
   * The text typed once at start, which prepares the shell (no echo, no
   * history, the prompt hook that prints the prompt marker) and ends by
   * printing the ready marker `readyMarker(nonce)`.
   */
  setup(nonce: string): string;
  /** The line typed to run `command`: start marker, the command, end marker with its status. */
  wrap(command: string, runNonce: string, sessionNonce: string): string;
}

/** Printed once the shell is prepared. */
export const readyMarker = (nonce: string): string => `__EW_READY_${nonce}__`;
/** Printed, on a line of its own, before a command's output. */
export const startMarker = (nonce: string): string => `__EW_START_${nonce}__`;
/** Printed right after a command's output, followed by its exit status and a line end. */
export const endMarker = (nonce: string): string => `__EW_END_${nonce}:`;
/**
 * Printed by the prompt hook each time the shell is back at its prompt:
 * OSC 133;D (command finished) with the status, and the session's nonce.
 */
export const promptMarkerPrefix = '\x1b]133;D;';
export const promptMarkerSuffix = (sessionNonce: string): string => `;ew=${sessionNonce}\x07`;
