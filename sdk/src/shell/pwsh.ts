/**
 * The PowerShell 7 dialect: `pwsh -NoLogo -NoProfile` with UTF-8 pinned, a
 * prompt function that prints the prompt marker, and each command run by
 * `Invoke-Expression` on a backtick-escaped double-quoted string, so `cd`,
 * `$env:` and functions take effect in the shell itself. PSReadLine draws
 * the line typed; that comes before the run's start marker and is never
 * output, and the markers are joined at run time, so it never holds them.
 * PSReadLine asks for the cursor position at each prompt: the engine answers
 * (see `queries.ts`).
 *
 * The status is the last native program's exit code when one ran in this
 * run (`$LASTEXITCODE` is cleared first, so an earlier run's never leaks in),
 * else 1 after a terminating error or an error the command wrote, else 0.
 * @module
 */
import type { ShellDialect } from './dialect.ts';

/** `text` for a double-quoted PowerShell string, with no control character left raw on the input line. */
export function quoteForPwsh(text: string): string {
  let quoted = '';
  for (const char of text) {
    if (char === '`') quoted += '``';
    else if (char === '"') quoted += '`"';
    else if (char === '$') quoted += '`$';
    else if (char === '\r') continue;
    else if (char === '\n') quoted += '`n';
    else if (char === '\t') quoted += '`t';
    else if (char === '\x1b') quoted += '`e';
    else if (char < ' ' || char === '\x7f') quoted += `$([char]${char.charCodeAt(0)})`;
    else quoted += char;
  }
  return quoted;
}

export const pwsh: ShellDialect = {
  name: 'pwsh',
  queriesCursorAtPrompt: true,
  argv: (shellPath = 'pwsh') => [shellPath, '-NoLogo', '-NoProfile'],
  // An xterm: the line editor draws its line with cursor movements, which the query answerer follows.
  environment: () => ({
    TERM: 'xterm-256color',
    NO_COLOR: '1',
    PAGER: 'cat',
    GIT_PAGER: 'cat',
    POWERSHELL_TELEMETRY_OPTOUT: '1',
    POWERSHELL_UPDATECHECK: 'Off',
  }),
  setup: (nonce) =>
    [
      // No suggestions from an earlier session's history, and none of this one's kept.
      'Set-PSReadLineOption -PredictionSource None -HistorySaveStyle SaveNothing -ErrorAction SilentlyContinue',
      '$PSStyle.OutputRendering = [System.Management.Automation.OutputRendering]::PlainText',
      '$__ew_utf8 = [System.Text.UTF8Encoding]::new($false)',
      '[Console]::OutputEncoding = $__ew_utf8',
      '$OutputEncoding = $__ew_utf8',
      // The marker's control bytes are made at run time: raw ESC on the input line is not reliable under PSReadLine.
      `function global:prompt { $s = if ($null -ne $global:LASTEXITCODE) { [int]$global:LASTEXITCODE } elseif ($?) { 0 } else { 1 }; [Console]::Out.Write("$([char]27)]133;D;$s;ew=" + '${nonce}' + "$([char]7)"); ' ' }`,
      `[Console]::Out.Write('__EW_READY' + '_${nonce}__' + [char]10)`,
    ].join('; '),
  wrap: (command, runNonce) =>
    [
      `[Console]::Out.Write('__EW_START' + '_${runNonce}__' + [char]10)`,
      '$global:LASTEXITCODE = $null',
      '$__ew_ok = $true',
      // Out-Default formats the output inside the run (a table is otherwise drawn after the end marker); the
      // errors the command wrote are collected apart, since $? would then be Out-Default's.
      `try { Invoke-Expression "${quoteForPwsh(command)}" -ErrorVariable __ew_errors | Out-Default; $__ew_ok = $__ew_errors.Count -eq 0 } catch { $__ew_ok = $false; Write-Host -Object $_ }`,
      '$__ew_s = if ($null -ne $global:LASTEXITCODE) { [int]$global:LASTEXITCODE } elseif ($__ew_ok) { 0 } else { 1 }',
      `[Console]::Out.Write('__EW_END' + '_${runNonce}:' + $__ew_s + [char]10)`,
    ].join('; '),
};
