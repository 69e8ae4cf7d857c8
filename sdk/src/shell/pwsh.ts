/**
 * The PowerShell 7 dialect: `pwsh -NoLogo -NoProfile` with UTF-8 pinned, a
 * prompt function that prints the prompt marker, and each command run as a
 * script block dot-sourced into the global scope, so `cd`, `$env:`,
 * variables and functions take effect in the shell itself.
 *
 * PSReadLine is unloaded, and the wrapper is defined once at start
 * (`$__ew_run`): the line typed for a run is `. $__ew_run` alone, which the
 * console's line reader draws key by key (a redraw of the whole line per key,
 * so its cost grows with the square of the line's length). The run's nonce and
 * the command's UTF-8 in base64 follow on a line of their own, read by the
 * wrapper with `ReadKey` and not echoed: a run writes a few hundred bytes to
 * the terminal whatever its command. Markers are joined at run time, so
 * nothing drawn ever holds them. The line reader asks for the cursor position
 * at each prompt: the engine answers (see `queries.ts`).
 *
 * The status follows PowerShell's own rules, in this order:
 * - 1 when a terminating error escaped the command (`throw`, `-ErrorAction Stop`
 *   not caught), which is printed;
 * - else the last native program's exit code (`$LASTEXITCODE`, cleared
 *   first, so an earlier run's never leaks in) when a native program ran after
 *   the last error the command wrote;
 * - else 1 when the command wrote an error record to the error stream (a
 *   non-terminating error such as `Get-Item /missing`);
 * - else 0. An error caught by the command's own `try`/`catch` or `trap`
 *   never reaches the error stream and never counts.
 * To see the error records, the command's error stream is merged into its
 * output (`2>&1`), in order, and formatted with it by `Out-Default`: a native
 * program's standard error is therefore a pipe, not the terminal, and its
 * lines (which are not errors) come through as text.
 *
 * A prompt the command defines is kept: the wrapper puts its own back at the
 * end of the line and calls the user's for the text, so the prompt marker
 * keeps telling that the shell is back.
 * @module
 */
import type { ShellDialect } from './dialect.ts';

/**
 * `text` for a double-quoted PowerShell string, with no control character left
 * raw on the input line (for callers that type PowerShell; the dialect's own
 * wrapper sends the command in base64).
 */
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

/** An error record the command wrote, not a native program's standard error line (`2>&1` makes those records too). */
const IS_ERROR = "$_ -is [System.Management.Automation.ErrorRecord] -and $_.FullyQualifiedErrorId -notlike 'NativeCommandError*'";

/** The wrapper, dot-sourced with the run's nonce and the command: it prints the start marker, runs, prints the end marker. */
const RUN = [
  // The nonce and the command follow the line, typed after it: read key by key, unechoed, up to Enter.
  '$__ew_k = [System.Text.StringBuilder]::new()',
  'while (($__ew_key = [Console]::ReadKey($true)).Key -ne [ConsoleKey]::Enter) { [void]$__ew_k.Append($__ew_key.KeyChar) }',
  // The command comes as the base64 of its UTF-8: no character of it is a key on the way.
  "$__ew_n, $__ew_q = $__ew_k.ToString().Split(' ', 2)",
  '$__ew_c = [System.Text.Encoding]::UTF8.GetString([System.Convert]::FromBase64String($__ew_q))',
  "[Console]::Out.Write('__EW_START' + '_' + $__ew_n + '__' + [char]10)",
  '$global:LASTEXITCODE = $null',
  '$global:__ew_error = $false',
  '$global:__ew_errorExit = $null',
  // Each error record notes the $LASTEXITCODE object of that moment: a native program that ran later sets a new one.
  `try { . ([scriptblock]::Create($__ew_c)) 2>&1 | ForEach-Object { if (${IS_ERROR}) { $global:__ew_error = $true; $global:__ew_errorExit = $global:LASTEXITCODE }; $_ } | Out-Default } ` +
    'catch { $global:__ew_error = $true; $global:__ew_errorExit = $global:LASTEXITCODE; Write-Host -Object $_ }',
  '$__ew_x = $global:LASTEXITCODE',
  '$__ew_s = if ($null -ne $__ew_x -and -not ($global:__ew_error -and [object]::ReferenceEquals($__ew_x, $global:__ew_errorExit))) { [int]$__ew_x } elseif ($global:__ew_error) { 1 } else { 0 }',
  'if ($null -ne $global:__ew_resetProgress) { try { & $global:__ew_resetProgress } catch { } }',
  "[Console]::Out.Write('__EW_END' + '_' + $__ew_n + ':' + $__ew_s + [char]10)",
  // A prompt the command defined is called by the hook, which goes back in its place.
  'if ([string]$function:prompt -ne [string]$global:__ew_prompt) { $global:__ew_userPrompt = $function:prompt; $function:global:prompt = $global:__ew_prompt }',
].join('; ');

export const pwsh: ShellDialect = {
  name: 'pwsh',
  queriesCursorAtPrompt: true,
  // .NET reads keys with the terminal's signals off: Ctrl+C is a key to it, which stops the pipeline and keeps the shell.
  interruptInput: '\x03',
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
      // The console's own line reader reads the short line typed for a run: no PSReadLine drawing, suggestions or saved history.
      'Remove-Module PSReadLine -ErrorAction SilentlyContinue',
      '$PSStyle.OutputRendering = [System.Management.Automation.OutputRendering]::PlainText',
      // Progress bars are a drawing, not text: off. The console host erases its bars only at the next prompt, after
      // the run's end, so for a command that turns them on the wrapper has it erase them before (ResetProgress).
      "$global:ProgressPreference = 'SilentlyContinue'",
      "$global:__ew_resetProgress = try { $__ew_ui = $Host.UI.GetType().GetField('_externalUI', [Reflection.BindingFlags]'NonPublic,Instance').GetValue($Host.UI); $__ew_reset = $__ew_ui.GetType().GetMethod('ResetProgress', [Reflection.BindingFlags]'Public,NonPublic,Instance'); if ($null -ne $__ew_reset) { { $null = $__ew_reset.Invoke($__ew_ui, @()) }.GetNewClosure() } } catch { $null }",
      '$__ew_utf8 = [System.Text.UTF8Encoding]::new($false)',
      '[Console]::OutputEncoding = $__ew_utf8',
      '$OutputEncoding = $__ew_utf8',
      // The marker's control bytes are made at run time: nothing typed holds raw ESC.
      `$global:__ew_prompt = { $s = if ($null -ne $global:LASTEXITCODE) { [int]$global:LASTEXITCODE } elseif ($?) { 0 } else { 1 }; [Console]::Out.Write("$([char]27)]133;D;$s;ew=" + '${nonce}' + "$([char]7)"); if ($null -ne $global:__ew_userPrompt) { & $global:__ew_userPrompt } else { ' ' } }`,
      '$function:global:prompt = $global:__ew_prompt',
      `$global:__ew_run = { ${RUN} }`,
      `[Console]::Out.Write('__EW_READY' + '_${nonce}__' + [char]10)`,
    ].join('; '),
  // The line the prompt reads is the dot-sourcing only; the wrapper reads the rest.
  wrap: (command, runNonce) => `. $__ew_run\r${runNonce} ${Buffer.from(command, 'utf8').toString('base64')}`,
};
