/**
 * Limits and usage of Job Object containment over a replayed Windows
 * (test/helpers/fake-kernel32.ts): the values a limited job is given, the
 * arithmetic of the CPU rate and of 100 ns times, the layout of the structures
 * the calls take, usage and `limitHit` from the job's completion port, and
 * which limits a host that does not keep them (Wine) refuses. The same code
 * runs against Wine's kernel32 in the Windows lane (test/windows/).
 */
import { describe, expect, it } from 'vitest';
import { cpuRateFor, hundredNanosecondsToMs, JobObjectContainment } from '../../service/src/provider/containment/job-object.ts';
import { usageBetween, ZERO_COUNTERS } from '../../service/src/provider/containment/usage.ts';
import { LocalRuntime } from '../../service/src/provider/local-runtime.ts';
import {
  JOB_OBJECT_CPU_RATE_CONTROL_ENABLE,
  JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP,
  JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
  JOB_OBJECT_LIMIT_JOB_MEMORY,
  JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
  JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT,
  JOB_OBJECT_MSG_JOB_MEMORY_LIMIT,
  packJobCpuRate,
  packJobLimits,
  unpackJobAccounting,
  unpackJobLimits,
} from '../../service/src/provider/win32/kernel32.ts';
import { WindowsProcesses } from '../../service/src/provider/win32/processes.ts';
import { FakeKernel32 } from '../helpers/fake-kernel32.ts';
import { waitFor } from '../helpers/wait.ts';

const MiB = 1024 * 1024;
/** JOB_OBJECT_MSG_NEW_PROCESS: Windows queues one for every process a watched job gets. */
const JOB_OBJECT_MSG_NEW_PROCESS = 6;

function world(processors = 4): { kernel32: FakeKernel32; containment: JobObjectContainment } {
  const kernel32 = new FakeKernel32();
  kernel32.spawn(4, 0, 'System');
  kernel32.spawn(100, 4, 'node.exe');
  return { kernel32, containment: new JobObjectContainment(kernel32, new WindowsProcesses(kernel32, () => {}), { processors }) };
}

describe('the arithmetic of Windows limits', () => {
  it('maps cores to a CPU rate of the whole machine, rounded, between 1 and 10,000', () => {
    expect(cpuRateFor(1, 2)).toBe(5000);
    expect(cpuRateFor(0.25, 2)).toBe(1250);
    // 0.25 of 8 is 312.5 in 10,000ths: rounded to 313.
    expect(cpuRateFor(0.25, 8)).toBe(313);
    expect(cpuRateFor(1.5, 4)).toBe(3750);
    // More cores than the machine has: all of it.
    expect(cpuRateFor(3, 2)).toBe(10_000);
    // A hundredth of a core of 256 processors is 0.39: the least rate Windows takes is 1.
    expect(cpuRateFor(0.01, 256)).toBe(1);
  });

  it('turns 100 ns units into milliseconds, which usage rounds to the nearest', () => {
    expect(hundredNanosecondsToMs(0n)).toBe(0);
    expect(hundredNanosecondsToMs(10_000n)).toBe(1);
    const ms = (time: bigint) => usageBetween(ZERO_COUNTERS, { ...ZERO_COUNTERS, cpuUserMs: hundredNanosecondsToMs(time) }).cpuUserMs;
    expect(ms(15_625_000n)).toBe(1563);
    expect(ms(15_624_999n)).toBe(1562);
    expect(ms(36_000_000_000n)).toBe(3_600_000);
  });

  it('lays the structures out as the Windows SDK does on x64', () => {
    const limits = packJobLimits({ limitFlags: 0x2208, activeProcessLimit: 64, jobMemoryLimit: BigInt(100 * MiB) });
    expect(limits.length).toBe(144);
    expect(limits.readUInt32LE(16)).toBe(0x2208); // BasicLimitInformation.LimitFlags
    expect(limits.readUInt32LE(40)).toBe(64); // BasicLimitInformation.ActiveProcessLimit
    expect(limits.readBigUInt64LE(120)).toBe(BigInt(100 * MiB)); // JobMemoryLimit
    expect(limits.subarray(0, 16).every((byte) => byte === 0)).toBe(true);
    limits.writeBigUInt64LE(123_456_789n, 136); // PeakJobMemoryUsed
    expect(unpackJobLimits(limits)).toEqual({ limitFlags: 0x2208, activeProcessLimit: 64, jobMemoryLimit: BigInt(100 * MiB), peakJobMemoryUsed: 123_456_789n });
    const accounting = Buffer.alloc(48);
    accounting.writeBigInt64LE(11n, 0); // TotalUserTime
    accounting.writeBigInt64LE(22n, 8); // TotalKernelTime
    accounting.writeBigInt64LE(33n, 16); // ThisPeriodTotalUserTime
    accounting.writeUInt32LE(5, 36); // TotalProcesses
    accounting.writeUInt32LE(2, 40); // ActiveProcesses
    expect(unpackJobAccounting(accounting)).toEqual({ totalUserTime: 11n, totalKernelTime: 22n, totalProcesses: 5, activeProcesses: 2 });
    const rate = packJobCpuRate({ controlFlags: 5, cpuRate: 1250 });
    expect([rate.length, rate.readUInt32LE(0), rate.readUInt32LE(4)]).toEqual([8, 5, 1250]);
  });
});

describe('Job Object limits', () => {
  it('gives a limited job its memory, process and hard-capped CPU limits before anything is assigned to it', () => {
    const { kernel32, containment } = world(4);
    expect(containment.limitSupport()).toEqual({ supported: ['memoryBytes', 'pids', 'cpu'], unsupported: [] });
    const cell = containment.create('s-1', { memoryBytes: 100 * MiB, pids: 64, cpu: 0.5 })!;
    const job = [...kernel32.jobs.values()].find((candidate) => !candidate.closed)!;
    expect(job.limits).toEqual({
      limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_ACTIVE_PROCESS | JOB_OBJECT_LIMIT_JOB_MEMORY,
      activeProcessLimit: 64,
      jobMemoryLimit: BigInt(100 * MiB),
    });
    expect(job.cpuRate).toEqual({ controlFlags: JOB_OBJECT_CPU_RATE_CONTROL_ENABLE | JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, cpuRate: 1250 });
    const root = kernel32.spawn(200, 100);
    cell.attach(root.pid);
    expect(kernel32.jobOf(200)).toBe(job);
    cell.remove();
    expect(root.running).toBe(false);
  });

  it('gives a job without limits kill-on-close alone, no CPU rate and no port', () => {
    const { kernel32, containment } = world();
    const cell = containment.create('s-1')!;
    const job = [...kernel32.jobs.values()].find((candidate) => !candidate.closed)!;
    expect(job.limits).toEqual({ limitFlags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, activeProcessLimit: 0, jobMemoryLimit: 0n });
    expect(job.cpuRate).toBeUndefined();
    expect(job.port).toBeUndefined();
    cell.remove();
    expect(kernel32.open.size).toBe(0);
  });

  it('reports the job accounting as usage, and keeps the last reading once the job is closed', () => {
    const { kernel32, containment } = world();
    const cell = containment.create('s-1')!;
    cell.attach(kernel32.spawn(200, 100).pid);
    const job = kernel32.jobOf(200)!;
    job.userTime = 12_345_678n;
    job.kernelTime = 5_000_000n;
    job.peakMemory = BigInt(50 * MiB);
    expect(cell.usage?.()).toEqual({ cpuUserMs: 1235, cpuSystemMs: 500, peakMemoryBytes: 50 * MiB, limitHit: null, oomKilled: false });
    job.userTime = 20_000_000n;
    cell.remove();
    job.userTime = 90_000_000n;
    expect(cell.usage?.()).toEqual({ cpuUserMs: 2000, cpuSystemMs: 500, peakMemoryBytes: 50 * MiB, limitHit: null, oomKilled: false });
  });

  it('says which limit a job ran into from its completion port, memory first, and never oomKilled', () => {
    const { kernel32, containment } = world();
    const memoryCell = containment.create('s-1', { memoryBytes: 64 * MiB })!;
    memoryCell.attach(kernel32.spawn(200, 100).pid);
    const pidsCell = containment.create('s-2', { pids: 3 })!;
    pidsCell.attach(kernel32.spawn(300, 100).pid);
    const memoryJob = kernel32.jobOf(200)!;
    const pidsJob = kernel32.jobOf(300)!;
    kernel32.post(memoryJob, JOB_OBJECT_MSG_NEW_PROCESS, 200);
    kernel32.post(pidsJob, JOB_OBJECT_MSG_NEW_PROCESS, 300);
    expect(memoryCell.usage?.()?.limitHit).toBeNull();
    expect(pidsCell.usage?.()?.limitHit).toBeNull();
    kernel32.post(memoryJob, JOB_OBJECT_MSG_JOB_MEMORY_LIMIT, 200);
    kernel32.post(pidsJob, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT);
    expect(memoryCell.usage?.()).toMatchObject({ limitHit: 'memory', oomKilled: false });
    expect(pidsCell.usage?.()).toMatchObject({ limitHit: 'pids', oomKilled: false });
    kernel32.post(pidsJob, JOB_OBJECT_MSG_JOB_MEMORY_LIMIT, 300);
    expect(pidsCell.usage?.()?.limitHit).toBe('memory');
    memoryCell.remove();
    pidsCell.remove();
    expect(memoryCell.usage?.()?.limitHit).toBe('memory');
  });

  it("measures a run: its cpu and the limits hit during it, the session's peak", () => {
    const { kernel32, containment } = world();
    const cell = containment.create('s-1', { pids: 8 })!;
    cell.attach(kernel32.spawn(200, 100).pid);
    const job = kernel32.jobOf(200)!;
    job.userTime = 10_000_000n;
    job.peakMemory = BigInt(30 * MiB);
    kernel32.post(job, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT);
    const meter = cell.usageMeter?.();
    expect(meter?.usage()).toEqual({ cpuUserMs: 0, cpuSystemMs: 0, peakMemoryBytes: 30 * MiB, limitHit: null, oomKilled: false, peakScope: 'session' });
    job.userTime = 13_000_000n;
    job.kernelTime = 2_000_000n;
    kernel32.post(job, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT);
    expect(meter?.usage()).toEqual({ cpuUserMs: 300, cpuSystemMs: 200, peakMemoryBytes: 30 * MiB, limitHit: 'pids', oomKilled: false, peakScope: 'session' });
    cell.remove();
  });

  it('drains the port of a limited job on its own, so a busy job does not grow its queue', async () => {
    const { kernel32, containment } = world();
    const cell = containment.create('s-1', { pids: 8 })!;
    cell.attach(kernel32.spawn(200, 100).pid);
    const job = kernel32.jobOf(200)!;
    for (let index = 0; index < 5000; index += 1) kernel32.post(job, JOB_OBJECT_MSG_NEW_PROCESS, 1000 + index);
    kernel32.post(job, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT);
    await waitFor('the port drained', () => job.port!.queue.length === 0, 10_000);
    cell.remove();
    expect(cell.usage?.()?.limitHit).toBe('pids');
  });
});

describe('a Windows that does not keep job limits (Wine)', () => {
  it('says each limit is unsupported with the call and its answer, refuses a create asking for one, and makes unlimited jobs', () => {
    const { kernel32, containment } = world();
    kernel32.forgetLimits = true;
    kernel32.refuseCpuRate = true;
    const support = containment.limitSupport();
    expect(support.supported).toEqual([]);
    expect(support.unsupported).toEqual([
      { name: 'memoryBytes', reason: 'the job does not keep its JobMemoryLimit: QueryInformationJobObject read it back as 0 where it was set to 67108864' },
      { name: 'pids', reason: 'the job does not keep its ActiveProcessLimit: QueryInformationJobObject read it back as 0 where it was set to 64' },
      { name: 'cpu', reason: 'SetInformationJobObject(JobObjectCpuRateControlInformation) failed with error 87' },
    ]);
    expect(() => containment.create('s-1', { cpu: 1 })).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^limits\.cpu: this host cannot enforce it: SetInformationJobObject/),
      }),
    );
    expect(() => containment.create('s-2', { memoryBytes: 64 * MiB })).toThrow(/^limits\.memoryBytes: this host cannot enforce it/);
    // The probe's job and the refused creates left no handle open.
    expect(kernel32.open.size).toBe(0);
    const cell = containment.create('s-3')!;
    cell.attach(kernel32.spawn(200, 100).pid);
    expect(cell.usage?.()).toEqual({ cpuUserMs: 0, cpuSystemMs: 0, peakMemoryBytes: 0, limitHit: null, oomKilled: false });
    cell.remove();
  });

  it('is what a runtime on the job containment reports for health', () => {
    const { kernel32, containment } = world();
    kernel32.refuseCpuRate = true;
    const runtime = new LocalRuntime({ platform: 'win32', windows: { kernel32 }, containment });
    expect(runtime.limitSupport()).toEqual({
      supported: ['memoryBytes', 'pids'],
      unsupported: [{ name: 'cpu', reason: 'SetInformationJobObject(JobObjectCpuRateControlInformation) failed with error 87' }],
    });
    void runtime.dispose();
  });
});
