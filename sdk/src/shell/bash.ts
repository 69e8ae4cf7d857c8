/**
 * The bash dialect: an interactive bash without profiles, its input not
 * echoed, a prompt hook that prints the prompt marker and survives a user's
 * own PROMPT_COMMAND, and each command run by `eval` in the shell itself, so
 * `cd`, variables, functions and `exec` take effect there.
 * @module
 */
import type { ShellDialect } from './dialect.ts';

/**
 * A bash ANSI-C string (`$'…'`) holding `text` exactly, in printable ASCII
 * only: a raw control character would be a key to readline (TAB completes), so
 * every byte outside printable ASCII is written as `\xHH`.
 */
export function quoteForBash(text: string): string {
  let quoted = "$'";
  for (const byte of Buffer.from(text, 'utf8')) {
    if (byte === 0x5c) quoted += '\\\\';
    else if (byte === 0x27) quoted += "\\'";
    else if (byte === 0x0a) quoted += '\\n';
    else if (byte >= 0x20 && byte < 0x7f) quoted += String.fromCharCode(byte);
    else quoted += `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `${quoted}'`;
}

export const bash: ShellDialect = {
  name: 'bash',
  queriesCursorAtPrompt: false,
  argv: (shellPath = '/bin/bash') => [shellPath, '--noprofile', '--norc', '-i'],
  environment: () => ({ TERM: 'dumb', PAGER: 'cat', GIT_PAGER: 'cat', PS1: '', PS2: '', HISTFILE: '', BASH_SILENCE_DEPRECATION_WARNING: '1' }),
  setup: (nonce) =>
    [
      // readline echoes nothing once the terminal does not.
      'stty -echo 2>/dev/null',
      'set +H +o history',
      "bind 'set enable-bracketed-paste off' 2>/dev/null",
      'PS1=',
      'PS2=',
      // The hook keeps $? for whatever runs after it (a user's PROMPT_COMMAND).
      `__ew_prompt() { local s=$?; printf '\\033]133;D;%s;ew=%s\\007' "$s" ${nonce}; return "$s"; }`,
      '__ew_status() { return "$1"; }',
      'PROMPT_COMMAND=__ew_prompt',
      `printf '%s_%s__\\n' __EW_READY ${nonce}`,
    ].join('; '),
  wrap: (command, runNonce) =>
    [
      `printf '%s_%s__\\n' __EW_START ${runNonce}`,
      `eval -- ${quoteForBash(command)}`,
      '__ew_s=$?',
      `printf '%s_%s:%s\\n' __EW_END ${runNonce} "$__ew_s"`,
      // A PROMPT_COMMAND the command set keeps running, after the hook, which it must not replace.
      '[[ "$PROMPT_COMMAND" == *__ew_prompt* ]] || PROMPT_COMMAND="__ew_prompt${PROMPT_COMMAND:+; $PROMPT_COMMAND}"',
      '__ew_status "$__ew_s"',
    ].join('; '),
};
