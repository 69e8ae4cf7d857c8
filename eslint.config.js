import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['**/node_modules/**', '**/dist/**', 'coverage/**', '.cache/**'] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    files: ['sdk/src/**/*.ts'],
    rules: {
      // The sdk runs anywhere Node runs, never depends on the service, and ships no build scripts.
      'no-restricted-imports': ['error', { paths: ['node-pty', '@execworld/service'], patterns: ['**/service/src/**', '**/scripts/**'] }],
    },
  },
  {
    // The wire protocol is runtime-neutral: schemas, the operation table and the frame codec
    // run in any JavaScript runtime, so nothing of Node (or a socket library) is imported there.
    files: ['sdk/src/protocol/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: ['node-pty', 'ws', '@execworld/service'], patterns: ['node:*', '**/service/src/**', '**/scripts/**', '../remote/**', '../dsh/**'] },
      ],
    },
  },
  {
    // The protocol client runs wherever the protocol does, a browser page among them: its channels
    // come from the transports (remote/ws-channel.ts for Node), never from here.
    files: ['sdk/src/client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: ['node-pty', 'ws', '@execworld/service'], patterns: ['node:*', '**/service/src/**', '**/scripts/**', '../remote/**', '../dsh/**'] },
      ],
    },
  },
  {
    // The browser view takes the SDK through its package's exports (@execworld/sdk/client, /protocol),
    // as any consumer does, so the bundle holds only what those entries reach: nothing of Node.
    files: ['service/ui/page/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['ws', 'node-pty', '@execworld/sdk'],
          patterns: [
            { group: ['**/sdk/src/**'], message: 'the page imports the SDK through its package exports: @execworld/sdk/client, @execworld/sdk/protocol.' },
            { group: ['node:*'], message: 'the page runs in a browser: nothing of Node.' },
          ],
        },
      ],
    },
  },
  {
    // The seam's rules that the wire protocol reads are as runtime-neutral as the protocol.
    files: ['sdk/src/seam/limits.ts', 'sdk/src/seam/validate.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: ['node-pty', 'ws', '@execworld/service'], patterns: ['node:*', '**/service/src/**', '**/scripts/**', '../remote/**', '../dsh/**'] },
      ],
    },
  },
  {
    // The daemon knows its provider only through the provider interface (provider/api.ts); the
    // composition root (server/daemon-runtime.ts) alone builds the concrete one.
    files: ['service/src/server/**/*.ts'],
    ignores: ['service/src/server/daemon-runtime.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/provider/**', '!**/provider/api.ts'],
              message: 'server/ uses the provider through provider/api.ts; only server/daemon-runtime.ts (the composition root) imports the rest of provider/.',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests read JSON answers; typing every body would only restate the schemas they check.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // node:test's describe and it return promises the runner itself awaits.
    files: ['test/windows/**/*.win.ts'],
    rules: { '@typescript-eslint/no-floating-promises': 'off' },
  },
  { files: ['**/*.js'], extends: [tseslint.configs.disableTypeChecked] },
);
