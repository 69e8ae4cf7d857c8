/** The wire protocol version; the daemon reports it on /v1/health. */
export const PROTOCOL_VERSION = 1;
