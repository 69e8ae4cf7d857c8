/**
 * The protocol client over a channel, without Node: what a browser page (the
 * daemon's own view) or any other runtime uses to speak `GET /v1/connect`.
 * The SDK's `RemoteRuntime` runs the same client over a Node `ws` channel.
 * Runtime-neutral: no node: imports, no socket library.
 * @module @execworld/sdk/client
 */
export type { Channel, ChannelCloseReason, ChannelState } from './channel.ts';
export { ProtocolClient } from './protocol-client.ts';
export type { Logger, ProtocolClientOptions } from './protocol-client.ts';
export type { StreamHandlers, Subscription } from './subscription.ts';
export { Redialer } from './redial.ts';
export type { RedialEvents, RedialOptions } from './redial.ts';
export { dialBrowser } from './browser.ts';
export type { BrowserChannel, BrowserDialOptions, DomWebSocket, DomWebSocketConstructor } from './browser.ts';
export { MemoryChannel } from './memory.ts';
export { ConnectionError, isExecworldError, RemoteError } from '../errors.ts';
export type { ClientErrorCode, ExecworldError } from '../errors.ts';
