/** A bare terminal of the POSIX provider, for tests of the pty itself. */
import { UnixPty, type PtyExit } from '../../service/src/provider/posix/pty.ts';

/** A bare `UnixPty` running `sh -c script`: what it printed so far, and its exit once it came. */
export interface ShellPty {
  readonly pty: UnixPty;
  readonly output: () => string;
  readonly exit: () => PtyExit | undefined;
}

/** Starts `sh -c script` on a `UnixPty` of its own, 80×24, with a plain PATH. */
export function shellPty(script: string): ShellPty {
  let seen = '';
  let exited: PtyExit | undefined;
  const pty = new UnixPty(
    { file: '/bin/sh', args: ['-c', script], env: { PATH: '/usr/bin:/bin' }, cwd: '/tmp', cols: 80, rows: 24 },
    { onData: (chunk) => (seen += chunk.toString('latin1')), onExit: (exit) => (exited = exit) },
  );
  return { pty, output: () => seen, exit: () => exited };
}
