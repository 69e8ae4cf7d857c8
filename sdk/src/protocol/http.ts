/**
 * What the protocol says about HTTP beside the operations: where a token may
 * travel, and the probes an orchestrator asks.
 * @module
 */

/**
 * The header that carries the bearer token for a client behind a proxy that
 * strips `Authorization` (the agent-sandbox router does). Lower case, as Node
 * names incoming headers.
 */
export const TOKEN_HEADER = 'x-execworld-token';

/** Liveness: answers 200 while the daemon's event loop runs. No token. */
export const LIVE_PATH = '/livez';

/** Readiness: 200 while the daemon listens with its tokens loaded, 503 once it is shutting down. No token. */
export const READY_PATH = '/readyz';

/** Metrics in Prometheus' text format; the token is needed unless the daemon runs with --metrics-auth none. */
export const METRICS_PATH = '/metrics';
/** The daemon's browser view: a page that lists the owner's sessions and shows them live. */
export const UI_PATH = '/ui';
