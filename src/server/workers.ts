/**
 * The background work of one replica: the scheduler that steps every check (docs/architecture.md),
 * the check service the routes call, the pre-visit re-checks (docs/previsit.md) and the delivery
 * of subscription notifications (docs/notifications.md), wired so that a check turning final
 * wakes the delivery at once.
 */
import type { Config, Tenant } from '../config.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { PayerDurationBook } from '../checks/payer-durations.js';
import { EvidenceWorker } from '../checks/evidence-worker.js';
import { EhrScheduleWorker } from '../checks/ehr-schedule-worker.js';
import { DEFAULT_EHR_LIMITS, EhrHttp } from '../ehr/http.js';
import { PrevisitWorker } from '../checks/previsit-worker.js';
import { Scheduler } from '../checks/scheduler.js';
import { CheckService } from '../checks/service.js';
import { Slots } from '../checks/slots.js';
import { deskSlotsOf } from '../mapping/request/queue-place.js';
import type { Store } from '../checks/store/appointment-store.js';
import { DeliveryWorker } from '../notifications/worker.js';
import type { UpstreamPort } from '../upstream/port.js';

export interface Workers {
  scheduler: Scheduler;
  checks: CheckService;
  previsit: PrevisitWorker;
  notifications: DeliveryWorker;
  /** Keeps the documents of final answers (docs/evidence.md). */
  evidence: EvidenceWorker;
  /** Reads the schedule of each clinic with an ehrSchedule from its EHR (docs/ehr-schedule.md). */
  ehrSchedule: EhrScheduleWorker;
  start(): void;
  stop(): Promise<void>;
}

export interface WorkerContext {
  config: Config;
  logger: Logger;
  store: Store;
  upstream: UpstreamPort;
  /** The upstream's base URL: its origin may serve document links over http (the sandbox). */
  upstreamUrl: string;
  metrics: Metrics;
  /** This replica's identity for leases. */
  owner: string;
  baseUrl: string;
  now: () => number;
  /** True when a test injects the clock: "is it due" then reads it instead of the database's. */
  injectedClock: boolean;
}

export function buildWorkers(context: WorkerContext): Workers {
  const { config, logger, store, upstream, metrics, owner, baseUrl, now } = context;
  const tenants = new Map<string, Tenant>(config.tenants.map((t) => [t.id, t]));
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
  // The documents of final answers, kept off the answer's path: woken when a check finishes with some.
  const evidence = new EvidenceWorker({
    store,
    upstream,
    tenant: (id) => tenants.get(id),
    logger,
    owner,
    now,
    leaseMs: config.leaseMs,
    idleMs: 1000,
    batchSize: 32,
    maxBytes: config.evidenceMaxBytes ?? 10 * 1024 * 1024,
    documentOrigins: [new URL(context.upstreamUrl).origin],
    retryMs: config.evidenceRetryMs ?? 30_000,
    maxAttempts: 8,
    onEvent: metrics.onEvidence,
  });
  // The payers' learned durations: adaptive polling, and a queued CER's wait (docs/queue.md).
  const durations = new PayerDurationBook(store);
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
        durations,
      },
      onEvent,
      onEvidence: () => evidence.wake(),
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
      deskSlots: (id) => deskSlotsOf(tenants.get(id)?.maxInFlight ?? 1, tenants.get(id)?.deskSlots),
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
    ...(config.backgroundDeadlineMinutes === undefined
      ? {}
      : { backgroundDeadlineMinutes: config.backgroundDeadlineMinutes }),
    durations,
  });
  const previsit = new PrevisitWorker({
    store,
    checks,
    tenant: (id) => tenants.get(id),
    logger,
    owner,
    // "Is it due" by the clock the replicas share (the database's), or a test's injected clock.
    clock: context.injectedClock ? () => Promise.resolve(now()) : () => store.appointments.clock(),
    leaseMs: config.leaseMs,
    idleMs: 1000,
    retryMs: Math.max(config.pollIntervalMs, 1000),
    batchSize: 100,
    onEvent: metrics.onPrevisit,
  });
  // A round is background work: an EHR slow to answer a page of 100 is waited for a while (10 s).
  const ehrHttp = new EhrHttp({ ...DEFAULT_EHR_LIMITS, timeoutMs: 10_000 });
  const ehrSchedule = new EhrScheduleWorker({
    store,
    checks,
    tenants: config.tenants,
    http: ehrHttp,
    logger,
    owner,
    now,
    clock: context.injectedClock ? () => Promise.resolve(now()) : () => store.appointments.clock(),
    // A round of a large schedule reads for a while: its lease outlasts it, or another replica
    // would take the same round.
    leaseMs: Math.max(config.leaseMs, 5 * 60_000),
    idleMs: 1000,
    onRound: metrics.onEhrScheduleRound,
    onEvent: metrics.onEhrScheduleEvent,
    onPrevisit: metrics.onPrevisit,
  });
  return {
    scheduler,
    checks,
    previsit,
    notifications,
    evidence,
    ehrSchedule,
    start() {
      scheduler.start();
      notifications.start();
      previsit.start();
      evidence.start();
      ehrSchedule.start();
    },
    async stop() {
      await ehrSchedule.stop();
      await ehrHttp.close();
      await previsit.stop();
      await scheduler.stop();
      await notifications.stop();
      await evidence.stop();
    },
  };
}
