import { defineConfig } from 'vitest/config';

// The Linux half of the Windows lane (scripts/windows/lane.sh): tests that drive the daemon
// running on Windows node.exe under Wine. They need the lane's prefix, so only the lane runs them.
export default defineConfig({
  test: {
    include: ['test/windows/**/*.test.ts'],
    pool: 'forks',
    // One Wine prefix: its processes share one wineserver and two cores.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    unstubEnvs: true,
  },
});
