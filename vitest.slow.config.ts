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
    // These files start daemons and CLI processes one after another, beside another file doing the same (the pwsh
    // stack, the image's replay): a test of several CLI commands may take more than the main suite's 30 s.
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
