#!/usr/bin/env -S node --single-threaded-gc --
// The daemon's and the CLI's program (see entry.js for what it runs).
//
// The V8 flags of the first line are part of how the daemon runs; whatever
// starts it another way (the image, the tests) passes the same ones. With
// --single-threaded-gc the collector works on the daemon's own thread: V8's
// parallel helpers would otherwise take cores from the programs the daemon
// serves (on two cores, a terminal streaming in bulk ran 8% faster with the
// flag, and the daemon used 28% less CPU). The `--` ends node's options: with
// an option before the script, node 20 also reads an --env-file after it as
// its own (loading the file into this process's environment, or exiting for a
// missing one), which would take `execworld exec --env-file` from the CLI.
import process from 'node:process';
import { load } from './entry.js';

const { main } = await load('cli');
await main(process.argv.slice(2));
