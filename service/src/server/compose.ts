/**
 * What a daemon is made of, built once: the provider (or the one given), the
 * session registry, the owners' views of the files, uploads, the budget of
 * request bodies, the metrics, the one dispatcher every transport calls, and
 * the WebSocket hub. `buildApp` wires HTTP to it; nothing else builds these.
 * @module
 */
import type { Logger } from 'pino';
import type { ExecutionProvider, FileProvider, PortConnect } from '../provider/api.ts';
import type { TokenTable } from './auth.ts';
import { BodyBudget } from './body-budget.ts';
import { ByteBudget, TEXT_ANSWER_COPIES } from './byte-budget.ts';
import { defaultStateDir, type Config } from './config.ts';
import { daemonRuntime, hostAccounts, hostFiles, spareConnector } from './daemon-runtime.ts';
import { Dispatcher } from './dispatch.ts';
import { LiveGrants } from './grants.ts';
import { DaemonMetrics } from './metrics.ts';
import { TokenMinter } from './minted.ts';
import { OwnerRequests } from './owner-requests.ts';
import { SessionRegistry } from './sessions/registry.ts';
import { UploadRegistry } from './uploads.ts';
import { ForwardTable } from './forwards.ts';
import { WebSocketHub } from './ws.ts';
import { DaemonImage } from './image.ts';

export interface ComposeOptions {
  readonly config: Config;
  readonly tokens: TokenTable;
  readonly logger: Logger;
  readonly version: string;
  /** @default a LocalRuntime over this host, contained and journaled as `config` says */
  readonly runtime?: ExecutionProvider | undefined;
  /** @default this host's files */
  readonly files?: FileProvider | undefined;
  /** See AppOptions.ownsHostProcess. */
  readonly ownsHostProcess: boolean;
  /** See AppOptions.image. */
  readonly image?: DaemonImage | undefined;
}

export interface DaemonParts {
  readonly registry: SessionRegistry;
  readonly files: FileProvider;
  readonly uploads: UploadRegistry;
  /** The bytes of JSON bodies all requests hold, against --body-budget-bytes. */
  readonly bodies: BodyBudget;
  /** The bytes answers hold while they are read and sent, against --answer-budget-bytes. */
  readonly answers: ByteBudget;
  readonly metrics: DaemonMetrics;
  readonly dispatcher: Dispatcher;
  readonly hub: WebSocketHub;
  /** The HTTP requests each owner has in flight, against --max-requests. */
  readonly requests: OwnerRequests;
  /** What ends the connections and waits of minted tokens that expire or are revoked. */
  readonly grants: LiveGrants;
  /** How the daemon connects to a port in the world as an owner's user: a forward's, and a preview's. */
  readonly connect: PortConnect;
  /** Ends what daemons that died left; runs before the first session starts. */
  recover(): Promise<void>;
  /** Ends every session and upload, then what the provider holds. */
  close(): Promise<void>;
  /** Before a takeover's exec (see takeover.ts): what runs beside the daemon for its sessions is told. */
  handOver(): void;
  /** See DaemonRuntime.sweepUnadoptedStages; nothing for a daemon given its provider. */
  sweepUnadoptedStages(adopted: ReadonlySet<string>): Promise<void>;
  /** After a takeover that did not happen. */
  resumeAfterHandOver(): void;
}

export function composeDaemon(options: ComposeOptions): DaemonParts {
  const { config, tokens, logger, version } = options;
  // Before the runtime: the signing key exists when the files' guard takes the identities of the daemon's secrets.
  const minter = new TokenMinter(config.stateDir ?? defaultStateDir(), { log: logger });
  tokens.trust(minter);
  minter.watch();
  const grants = new LiveGrants(minter);
  const own = options.runtime === undefined ? daemonRuntime(config, logger, options.ownsHostProcess, tokens.uids) : undefined;
  const runtime = options.runtime ?? own!.runtime;
  const metrics = new DaemonMetrics();
  const registry = new SessionRegistry(runtime, { ...config, meter: metrics.streams }, logger, hostAccounts());
  const files = options.files ?? own?.files ?? hostFiles(config);
  const uploads = new UploadRegistry({ maxPerOwner: config.maxUploadsPerOwner, idleMs: config.uploadIdleMs });
  const bodies = new BodyBudget(config.bodyBudgetBytes, config.maxBodyBytes);
  const requests = new OwnerRequests(config.maxRequestsPerOwner);
  const answers = new ByteBudget(config.answerBudgetBytes, {
    what: (owner) => (owner === undefined ? 'the answers being read and sent' : `the answers to owner ${owner}'s calls being read and sent`),
    flag: '--answer-budget-bytes',
    largest: TEXT_ANSWER_COPIES * config.maxReadTextBytes,
    retry: 'retry once they are sent',
  });
  const spare = own === undefined ? spareConnector() : undefined;
  const connect = own?.connect ?? spare!.connect;
  const forwards = new ForwardTable({ maxPerOwner: config.maxForwardsPerOwner, graceMs: config.forwardGraceMs, connect });
  const image = options.image ?? new DaemonImage();
  const dispatcher = new Dispatcher(
    {
      registry,
      files,
      uploads,
      forwards,
      version,
      image,
      minter,
      grants,
      answers,
      maxTokenTtlMs: config.maxTokenTtlMs,
      maxReadTextBytes: config.maxReadTextBytes,
    },
    metrics,
  );
  const hub = new WebSocketHub({
    registry,
    forwards,
    dispatcher,
    windowBytes: config.windowBytes,
    heartbeatMs: config.heartbeatMs,
    connectionBufferBytes: config.connectionBufferBytes,
    maxConnectionsPerOwner: config.maxConnectionsPerOwner,
    maxSubscriptionsPerOwner: config.maxSubscriptionsPerOwner,
    messageTimeoutMs: config.messageTimeoutMs,
    messageBudgetBytes: config.messageBudgetBytes,
    maxMessageRate: config.maxMessageRate,
    maxOwnerMessageRate: config.maxOwnerMessageRate,
    log: logger,
    metrics,
    grants,
  });
  metrics.readFrom({
    sessions: () => registry.counts(),
    endings: () => registry.endings,
    memory: () => ({
      rings: registry.retainedBytes(),
      connections: hub.bufferedBytes(),
      bodies: bodies.held,
      answers: answers.held,
      messages: hub.messageBytes(),
    }),
    owners: tokens.owners,
    usage: () => registry.usage(),
    image: () => image.facts,
  });
  return {
    registry,
    files,
    uploads,
    bodies,
    answers,
    requests,
    metrics,
    dispatcher,
    hub,
    grants,
    connect,
    recover: async () => {
      await own?.recover();
    },
    handOver: () => own?.handOver(),
    sweepUnadoptedStages: async (adopted) => {
      await own?.sweepUnadoptedStages(adopted);
    },
    resumeAfterHandOver: () => own?.resumeAfterHandOver(),
    close: async () => {
      forwards.shutdown();
      await Promise.all([registry.shutdown(), uploads.shutdown()]);
      await files.close?.();
      // Every session ended: nothing is left for a later start to end.
      own?.close();
      await spare?.close();
      grants.close();
      minter.close();
    },
  };
}
