/**
 * The composition root: a list of small builders (src/server/), each wiring one part: the store,
 * the upstream (or the built-in sandbox), the workers, who may call, the HTTP side, housekeeping.
 * `startServer()` / `stop()` on any port (0 under test), as in Practica's order-service.
 */
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { Express } from 'express';
import type { Config } from './config.js';
import type { Logger } from './log.js';
import { registerSecret } from './log.js';
import { openStore } from './checks/store/open.js';
import type { Scheduler } from './checks/scheduler.js';
import type { CheckService } from './checks/service.js';
import type { PrevisitWorker } from './checks/previsit-worker.js';
import type { EvidenceWorker } from './checks/evidence-worker.js';
import type { EhrScheduleWorker } from './checks/ehr-schedule-worker.js';
import type { Store } from './checks/store/appointment-store.js';
import type { UpstreamPort } from './upstream/port.js';
import type { UpstreamClient } from './upstream/client.js';
import type { Lane } from './http/cer-read-lane.js';
import type { DeliveryWorker } from './notifications/worker.js';
import type { AuditTrail } from './checks/audit.js';
import { createMetrics } from './metrics.js';
import { buildHttp } from './server/app.js';
import { startMaintenance } from './server/maintenance.js';
import { buildSecurity } from './server/security.js';
import { connectUpstream } from './server/upstream.js';
import { buildWorkers } from './server/workers.js';

export { collectGarbage } from './server/maintenance.js';

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
  /** Keeps the documents of final answers (docs/evidence.md). */
  evidence: EvidenceWorker;
  /** Reads each clinic's schedule from its EHR (docs/ehr-schedule.md). */
  ehrSchedule: EhrScheduleWorker;
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

/** Listens on the configured host and port (0: any); resolves with the server and its port. */
async function listen(config: Config): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
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
  const metrics = createMetrics(store);
  const upstream = await connectUpstream(config, logger, metrics, overrides.upstream);

  // Listen first, so the default public base URL can name the real port (port 0 under test).
  const { server, port } = await listen(config);
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const url = `http://${host}:${port}`;
  const baseUrl = config.publicBaseUrl ?? `http://localhost:${port}`;

  const owner = overrides.owner ?? `replica-${randomUUID()}`;
  const common = { config, logger, store, metrics, baseUrl, now };
  const workers = buildWorkers({
    ...common,
    upstream: upstream.upstream,
    upstreamUrl: upstream.url,
    owner,
    injectedClock: overrides.now !== undefined,
  });
  const { checks } = workers;
  const security = await buildSecurity({ ...common, checks });
  const http = buildHttp({
    ...common,
    upstream: upstream.upstream,
    upstreamUrl: upstream.url,
    checks,
    security,
    wakeNotifications: () => workers.notifications.wake(),
    ehrSchedule: workers.ehrSchedule,
    version: VERSION,
  });
  server.on('request', http.handle);
  workers.start();
  const stopMaintenance = startMaintenance(config, logger, store, now);
  logger.info('listening', { url, store: store.kind, sandbox: upstream.sandbox });

  return {
    url,
    app: http.app,
    store,
    scheduler: workers.scheduler,
    checks,
    previsit: workers.previsit,
    notifications: workers.notifications,
    evidence: workers.evidence,
    ehrSchedule: workers.ehrSchedule,
    upstreamUrl: upstream.url,
    audit: security.audit,
    readLane: http.readLane,
    async stop() {
      stopMaintenance();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await workers.stop();
      await security.stop();
      await upstream.close();
      await store.close();
    },
  };
}
