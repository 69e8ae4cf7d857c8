#Requires -Version 7.0
<#
.SYNOPSIS
Installs the execworld daemon on a Windows machine as a task that starts at
boot and is restarted when it fails.

.DESCRIPTION
Needs Node.js 20.19+ and, for shells, PowerShell 7 (pwsh). Run it as an
Administrator. It

  1. installs the daemon's package with npm into -InstallDir;
  2. writes a fresh token to <DataDir>\token, readable only by the account
     the daemon runs as, Administrators and SYSTEM (an existing token is kept);
  3. registers the scheduled task "execworld": at startup, as -Account, with
     no time limit, restarted every minute after a failure;
  4. opens -Port in the Windows firewall only with -OpenFirewall
     (from -AllowFrom only, when given);
  5. starts the task.

-PlanOnly prints every step instead of taking it (it runs anywhere pwsh
does). -Uninstall ends the task, removes it and its firewall rule, and keeps
the data directory (token, state).

.EXAMPLE
pwsh -File install.ps1 -Source .\execworld-service-0.1.0.tgz -OpenFirewall -AllowFrom 10.0.0.0/8
#>
[CmdletBinding()]
param(
  # What npm installs: a packed tarball of @execworld/service, or a registry spec.
  [string]$Source = '@execworld/service',
  [string]$InstallDir = "$($env:ProgramFiles ?? 'C:\Program Files')\execworld",
  [string]$DataDir = "$($env:ProgramData ?? 'C:\ProgramData')\execworld",
  # The address the daemon binds: every interface by default, so that clients outside the machine reach it.
  [string]$ListenHost = '0.0.0.0',
  [ValidateRange(1, 65535)][int]$Port = 7878,
  # The account the daemon and every session it starts run as.
  [string]$Account = 'NT AUTHORITY\SYSTEM',
  [switch]$OpenFirewall,
  # Remote addresses the firewall admits (with -OpenFirewall); any when empty.
  [string[]]$AllowFrom = @(),
  [switch]$Uninstall,
  [switch]$PlanOnly
)
Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

$TaskName = 'execworld'
$RuleName = 'execworld daemon'
# Windows paths, joined as text: -PlanOnly runs where no drive C: exists.
$TokenFile = "$($DataDir.TrimEnd('\'))\token"
$StateDir = "$($DataDir.TrimEnd('\'))\state"
$Entry = "$($InstallDir.TrimEnd('\'))\node_modules\@execworld\service\bin\execworld.js"

# Every step that changes the machine goes through here: -PlanOnly prints it instead.
function Step([string]$Text, [scriptblock]$Action) {
  if ($PlanOnly) { Write-Output "plan: $Text"; return }
  Write-Output "execworld: $Text"
  & $Action
  if ($LASTEXITCODE -is [int] -and $LASTEXITCODE -ne 0) { throw "failed ($LASTEXITCODE): $Text" }
}

if (-not $PlanOnly) {
  $principal = [Security.Principal.WindowsPrincipal][Security.Principal.WindowsIdentity]::GetCurrent()
  if (-not $principal.IsInRole([Security.Principal.WindowsBuiltInRole]::Administrator)) { throw 'run this script as an Administrator' }
  $node = Get-Command node -ErrorAction SilentlyContinue
  if ($null -eq $node) { throw 'Node.js 20.19 or later is needed: node is not on PATH' }
  $version = [version]((& $node.Source --version).TrimStart('v'))
  if ($version -lt [version]'20.19.0') { throw "Node.js 20.19 or later is needed, found $version" }
  if ($null -eq (Get-Command pwsh -ErrorAction SilentlyContinue)) { Write-Warning 'PowerShell 7 (pwsh) is not on PATH: shells will fall back on Windows PowerShell 5.1' }
  $NodePath = $node.Source
} else {
  $NodePath = 'node.exe'
}

if ($Uninstall) {
  Step "Stop-ScheduledTask -TaskName $TaskName; Unregister-ScheduledTask -TaskName $TaskName" {
    Stop-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue
    Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false -ErrorAction SilentlyContinue
  }
  Step "Remove-NetFirewallRule -DisplayName '$RuleName'" { Remove-NetFirewallRule -DisplayName $RuleName -ErrorAction SilentlyContinue }
  Write-Output "execworld: removed; $DataDir (token, state) is kept"
  return
}

Step "npm install --prefix `"$InstallDir`" --omit=dev --no-audit --no-fund $Source" {
  New-Item -ItemType Directory -Force -Path $InstallDir | Out-Null
  npm install --prefix $InstallDir --omit=dev --no-audit --no-fund $Source
}

Step "New-Item -ItemType Directory `"$StateDir`"" { New-Item -ItemType Directory -Force -Path $StateDir | Out-Null }

Step "write a new token to `"$TokenFile`" unless one is there" {
  if (-not (Test-Path $TokenFile)) {
    $bytes = [byte[]]::new(32)
    [Security.Cryptography.RandomNumberGenerator]::Fill($bytes)
    Set-Content -Path $TokenFile -Value ([Convert]::ToHexString($bytes).ToLowerInvariant()) -NoNewline -Encoding ascii
  }
}

# Only the daemon's account, Administrators (S-1-5-32-544) and SYSTEM (S-1-5-18) may read the token.
Step "icacls `"$TokenFile`" /inheritance:r /grant:r `"${Account}:(R)`" *S-1-5-32-544:(F) *S-1-5-18:(F)" {
  icacls $TokenFile /inheritance:r /grant:r "${Account}:(R)" '*S-1-5-32-544:(F)' '*S-1-5-18:(F)' | Out-Null
}

$Arguments = "--single-threaded-gc `"$Entry`" serve --host $ListenHost --port $Port --token-file `"$TokenFile`" --state-dir `"$StateDir`""
Step "Register-ScheduledTask -TaskName ${TaskName}: at startup, as $Account, restarted every minute after a failure: `"$NodePath`" $Arguments" {
  $action = New-ScheduledTaskAction -Execute $NodePath -Argument $Arguments -WorkingDirectory $DataDir
  $trigger = New-ScheduledTaskTrigger -AtStartup
  $settings = New-ScheduledTaskSettingsSet -RestartCount 9999 -RestartInterval (New-TimeSpan -Minutes 1) -ExecutionTimeLimit ([TimeSpan]::Zero) -StartWhenAvailable -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries
  $principal = New-ScheduledTaskPrincipal -UserId $Account -LogonType ServiceAccount -RunLevel Highest
  Register-ScheduledTask -TaskName $TaskName -Action $action -Trigger $trigger -Settings $settings -Principal $principal -Force | Out-Null
}

if ($OpenFirewall) {
  $from = if ($AllowFrom.Count -gt 0) { $AllowFrom -join ',' } else { 'Any' }
  Step "New-NetFirewallRule -DisplayName '$RuleName' -Direction Inbound -Protocol TCP -LocalPort $Port -RemoteAddress $from -Action Allow" {
    Remove-NetFirewallRule -DisplayName $RuleName -ErrorAction SilentlyContinue
    New-NetFirewallRule -DisplayName $RuleName -Direction Inbound -Protocol TCP -LocalPort $Port -RemoteAddress ($AllowFrom.Count -gt 0 ? $AllowFrom : 'Any') -Action Allow | Out-Null
  }
}

Step "Start-ScheduledTask -TaskName $TaskName" { Start-ScheduledTask -TaskName $TaskName }

Write-Output "execworld: the daemon listens on ${ListenHost}:$Port; its token is in $TokenFile"
