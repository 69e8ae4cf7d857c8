/**
 * Finding this process's cgroup v2 directory from recorded /proc lines: a
 * hybrid host (this machine), a unified host (systemd), a container with its
 * own cgroup namespace, and the cases where no cgroup can be used.
 */
import { describe, expect, it } from 'vitest';
import { cgroupDirectories, parseMountInfo, parseProcCgroup } from '../../service/src/provider/containment/cgroup-fs.ts';

/** This machine: cgroup v1 controllers, and cgroup2 at /sys/fs/cgroup/unified. */
const HYBRID = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;
const HYBRID_CGROUP = `9:name=systemd:/
4:memory:/process_api/2e9dbf2723880853de656a888d25f9a1
1:cpu:/
0::/
`;

/** A systemd host: one unified hierarchy, optional fields before the separator. */
const UNIFIED = `24 30 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
26 24 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`;

/** A container with its own cgroup namespace: the mount's root is its namespace root. */
const CONTAINER = `700 650 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw
`;

describe('cgroup detection', () => {
  it('parses mountinfo, optional fields, octal escapes and read-only mounts', () => {
    expect(parseMountInfo(HYBRID).filter((mount) => mount.fsType === 'cgroup2')).toEqual([
      { root: '/', mountPoint: '/sys/fs/cgroup/unified', fsType: 'cgroup2', readOnly: false },
    ]);
    expect(parseMountInfo(UNIFIED)).toEqual([
      { root: '/', mountPoint: '/proc', fsType: 'proc', readOnly: false },
      { root: '/', mountPoint: '/sys/fs/cgroup', fsType: 'cgroup2', readOnly: false },
    ]);
    const escaped = '50 1 0:40 /a\\040b /mnt/with\\040space ro,relatime - cgroup2 cgroup2 rw\n51 1 0:41 / /x rw - cgroup2 cgroup2 ro\nnot a mountinfo line\n';
    expect(parseMountInfo(escaped)).toEqual([
      { root: '/a b', mountPoint: '/mnt/with space', fsType: 'cgroup2', readOnly: true },
      { root: '/', mountPoint: '/x', fsType: 'cgroup2', readOnly: true },
    ]);
  });

  it("reads the process's cgroup v2 path from the 0:: line only", () => {
    expect(parseProcCgroup(HYBRID_CGROUP)).toBe('/');
    expect(parseProcCgroup('0::/system.slice/execworld.service\n')).toBe('/system.slice/execworld.service');
    // cgroup v1 only, and a process outside its namespace's root: nothing usable.
    expect(parseProcCgroup('4:memory:/a\n1:cpu:/\n')).toBeUndefined();
    expect(parseProcCgroup('0::/../../user.slice\n')).toBeUndefined();
  });

  it('maps the path onto every writable cgroup2 mount that reaches it', () => {
    expect(cgroupDirectories(parseMountInfo(HYBRID), '/')).toEqual(['/sys/fs/cgroup/unified']);
    expect(cgroupDirectories(parseMountInfo(UNIFIED), '/system.slice/execworld.service')).toEqual(['/sys/fs/cgroup/system.slice/execworld.service']);
    expect(cgroupDirectories(parseMountInfo(CONTAINER), '/')).toEqual(['/sys/fs/cgroup']);
    // A bind mount of a subtree reaches only what is below its root.
    const subtree = parseMountInfo('60 1 0:50 /user.slice /srv/cg rw - cgroup2 cgroup2 rw\n');
    expect(cgroupDirectories(subtree, '/user.slice/u.service')).toEqual(['/srv/cg/u.service']);
    expect(cgroupDirectories(subtree, '/user.slice')).toEqual(['/srv/cg']);
    expect(cgroupDirectories(subtree, '/user.slicex')).toEqual([]);
    expect(cgroupDirectories(subtree, '/system.slice')).toEqual([]);
    // Read-only (an unprivileged container's usual mount) and cgroup v1 mounts are never used.
    expect(cgroupDirectories(parseMountInfo('61 1 0:51 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n'), '/')).toEqual([]);
    expect(cgroupDirectories(parseMountInfo(HYBRID), '/process_api')).toEqual(['/sys/fs/cgroup/unified/process_api']);
  });
});
