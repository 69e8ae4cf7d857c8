import { configDefaults, defineConfig } from 'vitest/config';
import main, { SLOW_FILES } from './vitest.config.ts';

// The slow lane: the files the main suite leaves out (see SLOW_FILES), with its settings.
export default defineConfig({
  test: {
    ...main.test,
    include: SLOW_FILES,
    exclude: [...configDefaults.exclude],
    // The main suite checks the type tests.
    typecheck: { enabled: false },
  },
});
