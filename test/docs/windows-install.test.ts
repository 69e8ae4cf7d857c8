/**
 * The Windows install script and its documentation (docs/platforms.md) say the
 * same: the page's `-PlanOnly` run of deploy/windows/install.ps1 prints exactly
 * the steps the page lists, and the task starts the daemon as its bin would.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../service/src/server/config.ts';
import { PWSH } from '../conformance/shell-pwsh-contract.ts';
import { DAEMON_NODE_FLAGS } from '../helpers/daemon-process.ts';

const ROOT = join(import.meta.dirname, '../..');
const PAGE = readFileSync(join(ROOT, 'docs/platforms.md'), 'utf8');
const SCRIPT = join(ROOT, 'deploy/windows/install.ps1');

/** The page's `-PlanOnly` command and the output block right after it. */
function documentedPlan(): { args: string[]; output: string } {
  const match = /```powershell\npwsh -File deploy\\windows\\install\.ps1 (-PlanOnly[^\n]*)\n```\s*```text\n([\s\S]*?)```/.exec(PAGE);
  if (match === null) throw new Error('docs/platforms.md has no -PlanOnly run of deploy\\windows\\install.ps1 followed by its output');
  return { args: match[1]!.split(' '), output: match[2]! };
}

function plan(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(PWSH.require(), ['-NoProfile', '-NonInteractive', '-File', SCRIPT, ...args], {
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1' },
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe.skipIf(PWSH.skip)(`deploy/windows/install.ps1${PWSH.note}`, () => {
  it("prints exactly the page's steps", () => {
    const { args, output } = documentedPlan();
    const run = plan(args);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(output);
  });

  it('starts the daemon as its bin does, on the default port, and opens the firewall only when asked', () => {
    const { output } = documentedPlan();
    expect(output).toContain(`"node.exe" ${DAEMON_NODE_FLAGS.join(' ')} "`);
    expect(output).toContain(`--port ${DEFAULT_CONFIG.port} `);
    const closed = plan(['-PlanOnly']);
    expect(closed.status).toBe(0);
    expect(closed.stdout).not.toContain('New-NetFirewallRule');
    expect(closed.stdout).toContain('plan: Start-ScheduledTask -TaskName execworld');
    expect(plan(['-PlanOnly', '-OpenFirewall']).stdout).toContain('-LocalPort 7878 -RemoteAddress Any -Action Allow');
  });

  it('removes the task and the rule on -Uninstall and keeps the data', () => {
    const run = plan(['-PlanOnly', '-Uninstall']);
    expect(run.status).toBe(0);
    expect(run.stdout.split('\n').filter((line) => line.startsWith('plan: '))).toEqual([
      'plan: Stop-ScheduledTask -TaskName execworld; Unregister-ScheduledTask -TaskName execworld',
      "plan: Remove-NetFirewallRule -DisplayName 'execworld daemon'",
    ]);
    expect(run.stdout).toContain('(token, state) is kept');
  });

  it('refuses a port out of range with a clear error', () => {
    const run = plan(['-PlanOnly', '-Port', '70000']);
    expect(run.status).not.toBe(0);
    expect(run.stderr + run.stdout).toMatch(/Port/);
  });
});
