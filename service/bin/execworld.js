#!/usr/bin/env node
// Runs the TypeScript sources directly: there is no build step.
import process from 'node:process';
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
await main(process.argv.slice(2));
