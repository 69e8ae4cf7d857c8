/** The daemon in a child process, for the benchmarks. */
export { startDaemonProcess, type DaemonProcess } from '../../test/helpers/daemon-process.ts';
