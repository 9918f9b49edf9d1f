/**
 * The composition root: store, upstream client (or the built-in sandbox), scheduler, HTTP app.
 * `startServer()` / `stop()` on any port (0 under test), as in Practica's order-service.
 */
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { registerSecret } from './log.js';
import { openStore } from './checks/store/open.js';
import { Slots } from './checks/slots.js';
import { Scheduler } from './checks/scheduler.js';
import { PayerDurationBook } from './checks/payer-durations.js';
import { CheckService } from './checks/service.js';
import { PrevisitWorker } from './checks/previsit-worker.js';
import type { CheckStore } from './checks/store/check-store.js';
import { isStoreUnavailable, recentWriteFailure } from './checks/store/outage.js';
import type { Store } from './checks/store/appointment-store.js';
import type { UpstreamPort } from './upstream/port.js';
import { conformanceTypes } from './operations/conformance-read.js';
import { fhirDefinitionsLoaded, warmFhirDefinitions } from './fhir/validator.js';
import type { Express } from 'express';
import { createApp } from './http/app.js';
import type { ReadyReport } from './http/app.js';
import { fhirRoutes } from './http/fhir-routes.js';
import { appPageRouter } from './http/app-page.js';
import { FreshResults } from './operations/binary.js';
import { CerCache } from './operations/read.js';
import { metricsRoute } from './http/metrics-route.js';
import { createMetrics } from './metrics.js';
import { createFhirKitResolver } from './mapping/request/resolver.js';
import { UpstreamClient } from './upstream/client.js';
import { startSandbox } from './sandbox/index.js';
import { DeliveryWorker } from './notifications/worker.js';
import { AuditTrail } from './checks/audit.js';
import { AccessTokens } from './operations/auth/access-tokens.js';
import { ClientKeys } from './operations/auth/token-endpoint.js';
import { RefusalCounter, tokenRoute } from './http/security.js';
import { cdsRoutes } from './http/cds-routes.js';
import { GuardedFhirClient } from './operations/cds-hooks/fhir-server.js';
import { cerReadLane, type Lane } from './http/cer-read-lane.js';
import { identifier, requestFinished } from './http/middleware.js';
import type { RequestObserver } from './http/middleware.js';

export const VERSION = '0.1.0';

export interface RunningServer {
  url: string;
  /** The express app (route introspection in tests). */
  app: Express;
  store: Store;
  scheduler: Scheduler;
  checks: CheckService;
  /** Pre-visit re-checks (docs/previsit.md). */
  previsit: PrevisitWorker;
  /** Sends subscription notifications (docs/notifications.md). */
  notifications: DeliveryWorker;
  upstreamUrl: string;
  /** The audit trail (record() from other routes; flush() in tests). */
  audit: AuditTrail;
  /** The CER read lane ahead of the app (src/http/cer-read-lane.ts); absent when CORS is configured. */
  readLane?: Lane;
  stop(): Promise<void>;
}

export interface ServerOverrides {
  /** Replaces the upstream client (tests wrap it to count calls). */
  upstream?: (client: UpstreamClient) => UpstreamPort;
  now?: () => number;
  /** Replica identity for leases. */
  owner?: string;
}

/**
 * Whether the store can be read AND written now: a store that reads but cannot write (a full disk,
 * a standby after a failover) cannot take a check, so a load balancer must send work elsewhere. A
 * write that failed for a store reason in the last seconds counts too: on a full disk a one-row
 * probe can still fit where a check's CER does not (docs/operations.md, "When the store fails").
 */
async function storeReadiness(store: CheckStore, now: number): Promise<{ ok: boolean; detail?: string }> {
  try {
    await store.ping();
  } catch {
    return { ok: false, detail: 'store unreachable' };
  }
  try {
    await store.probeWrite(now);
  } catch {
    return { ok: false, detail: 'store cannot be written' };
  }
  if (recentWriteFailure(store.health(), now))
    return { ok: false, detail: 'store refused a write in the last seconds' };
  return { ok: true };
}

async function readiness(store: CheckStore, upstream: UpstreamPort): Promise<ReadyReport> {
  const [storeCheck, upstreamCheck] = await Promise.all([
    storeReadiness(store, Date.now()),
    upstream.health().then((r) => (r.ok ? { ok: true } : { ok: false, detail: 'upstream /health failed' })),
  ]);
  // No cold start on the request path: the first $submit would otherwise load the R4 definitions
  // (about a second of CPU) while it is answered, stalling every other request meanwhile.
  const definitions = fhirDefinitionsLoaded()
    ? { ok: true }
    : { ok: false, detail: 'loading FHIR definitions' };
  return {
    ready: storeCheck.ok && upstreamCheck.ok && definitions.ok,
    checks: { store: storeCheck, upstream: upstreamCheck, definitions },
  };
}

/** Starts the whole service. Resolves once it listens. */
export async function startServer(
  config: Config,
  logger: Logger,
  overrides: ServerOverrides = {},
): Promise<RunningServer> {
  const now = overrides.now ?? Date.now;
  for (const tenant of config.tenants) registerSecret(tenant.upstream.apiKey);

  const store = await openStore(config.databaseUrl);
  await store.migrate();

  let sandbox: Awaited<ReturnType<typeof startSandbox>> | null = null;
  let upstreamUrl: string;
  if (config.upstreamBaseUrl) {
    upstreamUrl = config.upstreamBaseUrl;
  } else {
    sandbox = await startSandbox({
      port: 0,
      host: '127.0.0.1',
      timeScale: config.sandboxTimeScale,
      apiKeys: config.tenants.map((t) => t.upstream.apiKey),
    });
    upstreamUrl = sandbox.url;
    logger.warn(
      'SANDBOX MODE: UPSTREAM_BASE_URL is not set; checks run against the built-in simulator, not real payers',
      {
        upstreamUrl,
      },
    );
  }
  // A step (one upstream call) must end well inside the lease, or another replica could take the
  // check over while create-task is still out and wrongly judge it ambiguous.
  const client = new UpstreamClient({
    baseUrl: upstreamUrl,
    requestTimeoutMs: Math.min(15_000, Math.floor(config.leaseMs / 2)),
  });
  const metrics = createMetrics(store);
  const upstream = metrics.instrument(overrides.upstream ? overrides.upstream(client) : client);

  // Listen first, so the default public base URL can name the real port (port 0 under test).
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const url = `http://${host}:${address.port}`;
  const baseUrl = config.publicBaseUrl ?? `http://localhost:${address.port}`;

  const tenants = new Map(config.tenants.map((t) => [t.id, t]));
  const owner = overrides.owner ?? `replica-${randomUUID()}`;
  // Subscription notifications: woken when a check turns final, so delivery follows at once.
  const notifications = new DeliveryWorker({
    store,
    logger,
    owner,
    now,
    fhirBase: `${baseUrl}/fhir`,
    retryMs: (config.subscriptionRetryMinutes ?? 60) * 60_000,
    idleMs: 100,
    concurrency: 32,
    metrics: metrics.deliveries,
  });
  const onEvent: typeof metrics.onLifecycle = (event) => {
    metrics.onLifecycle(event);
    if (event.type === 'done') notifications.wake();
  };
  const scheduler = new Scheduler(
    {
      store,
      upstream,
      tenant: (id) => tenants.get(id),
      logger,
      owner,
      now,
      baseUrl,
      pollIntervalMs: config.pollIntervalMs,
      timeoutMs: (isSearchAll) => (isSearchAll ? config.searchAllTimeoutMs : config.checkTimeoutMs),
      slowPollIntervalMs: Math.max(config.pollIntervalMs * 6, 30_000),
      backoffGuardMs: 15 * 60_000,
      createSlots: new Slots(10),
      polling: {
        settings: {
          strategy: config.pollStrategy,
          intervalMs: config.pollIntervalMs,
          minGapMs: config.minPollGapMs,
        },
        durations: new PayerDurationBook(store),
      },
      onEvent,
    },
    {
      leaseMs: config.leaseMs,
      batchSize: 200,
      // Steps wait for one of the upstream client's connections: 512 of them clear in a few
      // seconds, far inside a lease, while rounds stay large enough to be cheap per check.
      maxSteps: 512,
      // Poll lateness is bounded below by this wait (bench/README.md, figure 3).
      idleMs: Math.min(100, config.pollIntervalMs),
      maxInFlight: (id) => tenants.get(id)?.maxInFlight ?? 1,
    },
    logger,
  );
  const checks = new CheckService(store, scheduler, {
    baseUrl,
    checkTimeoutMs: config.checkTimeoutMs,
    searchAllTimeoutMs: config.searchAllTimeoutMs,
    waitPollMs: 1000,
    now,
    // A check refused by an open payer guard is final at insert: its events are delivered at once.
    onEvent,
    previsitLeadMinutes: config.previsitLeadMinutes,
    onPrevisit: metrics.onPrevisit,
  });
  const previsit = new PrevisitWorker({
    store,
    checks,
    tenant: (id) => tenants.get(id),
    logger,
    owner,
    // "Is it due" by the clock the replicas share (the database's), or a test's injected clock.
    clock: overrides.now ? () => Promise.resolve(now()) : () => store.appointments.clock(),
    leaseMs: config.leaseMs,
    idleMs: 1000,
    retryMs: Math.max(config.pollIntervalMs, 1000),
    batchSize: 100,
    onEvent: metrics.onPrevisit,
  });

  // SMART Backend Services and the audit trail (docs/auth.md).
  const { tokens, ephemeral } = await AccessTokens.create({
    keys: config.tokenSigningKeys,
    issuer: baseUrl,
    audience: `${baseUrl}/fhir`,
    ttlSeconds: config.accessTokenTtlSeconds,
    tenants: config.tenants,
  });
  if (ephemeral && config.tenants.some((t) => t.smartClients?.length)) {
    logger.warn(
      'ACCESS_TOKEN_KEYS_FILE is not set: access tokens are signed with an ephemeral key made at start-up',
    );
  }
  const audit = new AuditTrail(
    store,
    { enabled: config.auditEvents, flushMs: 1000, batchSize: 1000, maxQueued: 50_000, now },
    logger,
  );
  const refusals = new RefusalCounter(logger);
  const keys = new ClientKeys();
  const rememberJti = store.rememberJti.bind(store);
  const tokenRoutes = tokenRoute(
    { tenants: config.tenants, tokens, keys, tokenUrl: `${baseUrl}/auth/token`, rememberJti, now },
    { audit, refused: refusals.note },
  );
  // CDS Hooks (docs/cds-hooks.md): the EHR's FHIR server is read through one guarded client.
  const ehrFhir = new GuardedFhirClient();
  const cds = cdsRoutes({
    baseUrl,
    jwt: { tenants: config.tenants, keys, rememberJti, now },
    hooks: { checks, fhir: ehrFhir, baseUrl, now },
    audit,
    metrics: metrics.cds,
    refused: refusals.note,
  });

  const observe: RequestObserver = (method, route, status, seconds) =>
    metrics.httpDuration.observe({ method, route, status: String(status) }, seconds);
  const cerCache = new CerCache();
  const security = { tokens, refused: refusals.note, now, audit, auditStore: audit };
  const app = createApp({
    logger,
    ready: () => readiness(store, upstream),
    observe,
    extraRoutes: (express) => {
      metricsRoute(metrics, config.metricsToken)(express);
      tokenRoutes(express);
      cds(express);
    },
    corsOrigins: config.corsOrigins,
    appPage: appPageRouter({
      tenants: config.tenants,
      store,
      logger,
      now,
      audit,
      previsit: (tenant) => checks.previsitSettings(tenant),
    }),
    fhir: fhirRoutes({
      tenants: config.tenants,
      version: VERSION,
      features: {
        checks: true,
        conformance: conformanceTypes(),
        documents: true,
        cors: config.corsOrigins.length > 0,
        subscriptions: true,
        smartTokenUrl: `${baseUrl}/auth/token`,
        auditEvents: true,
      },
      subscriptions: { store, baseUrl, now, wake: () => notifications.wake() },
      checks,
      baseUrl,
      submitRatePerMinute: config.submitRatePerMinute,
      pollIntervalMs: config.pollIntervalMs,
      cerCache,
      security,
      freshResults: new FreshResults(upstream),
      documentOrigins: [new URL(upstreamUrl).origin],
      logger,
      onPrevisit: metrics.onPrevisit,
      submit: {
        checks,
        baseUrl,
        submitWaitMs: config.submitWaitMs,
        maxWaitMs: 60_000,
        resolver: config.sourceFhirBaseUrl ? createFhirKitResolver(config.sourceFhirBaseUrl) : undefined,
        now,
      },
    }),
  });

  // The plain CER read is answered ahead of express (src/http/cer-read-lane.ts); the cors
  // middleware's headers are the app's, so with CORS configured every request goes to the app.
  const readLane =
    config.corsOrigins.length === 0
      ? cerReadLane({
          identify: identifier(config.tenants, security),
          checks,
          cerCache,
          audit,
          finished: requestFinished(logger, observe),
          logger,
        })
      : undefined;
  server.on(
    'request',
    readLane
      ? (req, res) => {
          readLane(req, res, () => {
            app(req, res);
          });
        }
      : app,
  );
  scheduler.start();
  notifications.start();
  previsit.start();
  // Retention: finished checks older than RETENTION_DAYS are deleted (hourly).
  // An hourly purge that meets a store outage tries again next hour: a warning, not an error.
  const purgeFailed = (what: string, error: unknown) =>
    isStoreUnavailable(error)
      ? logger.warn(`${what} skipped: the store is unavailable`, { kind: error.kind })
      : logger.error(`${what} failed`, { error });
  const purge = () => {
    store.purgeBefore(now() - config.retentionDays * 86_400_000).then(
      (count: number) => {
        if (count > 0) logger.info('retention purge', { purged: count, retentionDays: config.retentionDays });
      },
      (error: unknown) => purgeFailed('retention purge', error),
    );
    store
      .purgeAuditBefore(now() - config.retentionDays * 86_400_000)
      .catch((error: unknown) => purgeFailed('audit retention purge', error));
  };
  // Not on the start-up path: the first purge a minute after start, then hourly.
  const firstPurge = setTimeout(purge, 60_000);
  firstPurge.unref();
  const purgeTimer = setInterval(purge, 3_600_000);
  purgeTimer.unref();
  // Loading them takes about a second of CPU: done at once, in steps, so /health and the scheduler
  // keep answering; /ready answers 200 only once they are loaded (a $submit before then finishes
  // the load itself). Then one full collection: the load leaves about 85 MB of garbage (the parsed
  // definition files), and a burst of $submit arriving on top of it ran RSS to 450-470 MB, against
  // 285-320 MB after the collection (bench/README.md, figure 3).
  const warmUp = setTimeout(() => {
    warmFhirDefinitions()
      .then(collectGarbage)
      .catch((error: unknown) => logger.error('loading FHIR definitions failed', { error }));
  }, 0);
  warmUp.unref();
  logger.info('listening', { url, store: store.kind, sandbox: Boolean(sandbox) });

  return {
    url,
    app,
    store,
    scheduler,
    checks,
    previsit,
    notifications,
    upstreamUrl,
    audit,
    readLane,
    async stop() {
      clearInterval(purgeTimer);
      clearTimeout(firstPurge);
      clearTimeout(warmUp);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await previsit.stop();
      await scheduler.stop();
      await notifications.stop();
      refusals.stop();
      await audit.stop();
      await client.close();
      await ehrFhir.close();
      await sandbox?.close();
      await store.close();
    },
  };
}

/**
 * One full garbage collection, now. V8 exposes `gc` only with --expose-gc; set at run time, the
 * flag makes `gc` a global of contexts created afterwards, so a new context hands it over (the
 * way jest-leak-detector does). The flag stays on for this process: nothing else calls gc.
 */
export function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as unknown;
  if (typeof gc === 'function') (gc as () => void)();
}
