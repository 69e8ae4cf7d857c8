/** The daemon in a child process, for the benchmarks. */
export { startDaemon, type DaemonProcess } from '../../test/helpers/daemon-process.ts';
