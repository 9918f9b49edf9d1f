/**
 * Prometheus metrics (prom-client). Labels never carry patient data: tenant ids, routes
 * (patterns, not URLs), upstream endpoints, statuses and outcomes only.
 */
import client from 'prom-client';
import type { CheckStore } from './checks/store/check-store.js';
import { isStoreUnavailable, STORE_ERROR_KINDS } from './checks/store/outage.js';
import type { LifecycleEvent } from './checks/lifecycle.js';
import type { UpstreamPort, UpstreamResult } from './upstream/port.js';
import { describeFailure } from './upstream/port.js';
import { QUEUE_CLASSES } from './mapping/request/queue-place.js';
import type { DeliveryMetrics } from './notifications/worker.js';
import type { PrevisitEvent } from './checks/previsit.js';
import type { EvidenceEvent } from './checks/evidence-worker.js';

export interface Metrics {
  registry: client.Registry;
  httpDuration: client.Histogram<'method' | 'route' | 'status'>;
  onLifecycle: (event: LifecycleEvent) => void;
  /** Wraps the upstream port to count calls and time them by endpoint and result. */
  instrument: (upstream: UpstreamPort) => UpstreamPort;
  /** Subscription notifications: sent, failed, retried, lag from CER final to delivery. */
  deliveries: DeliveryMetrics;
  /** Pre-visit checks (docs/previsit.md): re-checks run, skipped, cancelled; check-ins answered by reuse. */
  onPrevisit: (event: PrevisitEvent) => void;
  /** CDS Hooks calls, cards and feedback (docs/cds-hooks.md). */
  cds: CdsMetrics;
  /** Evidence (docs/evidence.md): documents kept, not kept, retried; bytes; time to kept. */
  onEvidence: (event: EvidenceEvent) => void;
  /** The EHR's schedule (docs/ehr-schedule.md): rounds by outcome. */
  onEhrScheduleRound: (tenantId: string, outcome: string) => void;
  /** The EHR's schedule: appointments booked, moved, cancelled, not checked. */
  onEhrScheduleEvent: (tenantId: string, event: string) => void;
}

/** CDS Hooks: calls per service and outcome, cards per indicator, feedback per outcome. */
export interface CdsMetrics {
  call: (service: string, outcome: string) => void;
  card: (service: string, indicator: string) => void;
  feedback: (service: string, outcome: string) => void;
}

/** Creates a registry whose store-backed gauges are read at scrape time. */
export function createMetrics(store: CheckStore): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });

  const httpDuration = new client.Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route pattern',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const upstreamCalls = new client.Histogram({
    name: 'upstream_request_duration_seconds',
    help: 'Upstream calls by endpoint and result',
    labelNames: ['endpoint', 'result'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const pollLag = new client.Histogram({
    name: 'poll_lateness_seconds',
    help: 'Actual minus scheduled poll time',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const finished = new client.Counter({
    name: 'checks_finished_total',
    help: 'Checks finished, by tenant and upstream or adapter outcome',
    labelNames: ['tenant', 'outcome'] as const,
    registers: [registry],
  });
  const reused = new client.Counter({
    name: 'checks_reused_total',
    help: 'Recent answers given again instead of a new check, by tenant (docs/batch-and-reuse.md)',
    labelNames: ['tenant'] as const,
    registers: [registry],
  });
  new client.Gauge({
    name: 'checks',
    help: 'Stored checks by tenant, state and CER outcome',
    labelNames: ['tenant', 'state', 'outcome'] as const,
    registers: [registry],
    async collect() {
      // While the store is unavailable the last counts stay: /metrics must answer in an outage.
      const rows = await storeOrNull(() => store.countByState());
      if (!rows) return;
      this.reset();
      for (const row of rows) {
        this.set({ tenant: row.tenantId, state: row.state, outcome: row.outcome }, row.count);
      }
    },
  });
  // The desk first (docs/queue.md): the line per class, and how long a check waited in it.
  new client.Gauge({
    name: 'eligibility_checks_waiting',
    help: 'Checks waiting for a tenant slot (nothing sent upstream yet), by class: desk or background',
    labelNames: ['class'] as const,
    registers: [registry],
    async collect() {
      const counts = await storeOrNull(() => store.countWaitingByClass());
      if (!counts) return;
      for (const queueClass of QUEUE_CLASSES) this.set({ class: queueClass }, counts[queueClass]);
    },
  });
  const queueWait = new client.Histogram({
    name: 'eligibility_queue_wait_seconds',
    help: 'From a check accepted to its create-task sent, by class: desk or background',
    labelNames: ['class'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
    registers: [registry],
  });
  new client.Gauge({
    name: 'payer_guards_open',
    help: 'Open payer-account guards by tenant and kind',
    labelNames: ['tenant', 'kind'] as const,
    registers: [registry],
    async collect() {
      const guards = await storeOrNull(() => store.listGuards());
      if (!guards) return;
      this.reset();
      const now = Date.now();
      for (const guard of guards) {
        if (guard.until === null || guard.until > now) this.inc({ tenant: guard.tenantId, kind: guard.kind });
      }
    },
  });

  new client.Counter({
    name: 'store_errors_total',
    help: 'Store operations that failed because the database could not be used, by kind (docs/operations.md)',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      const health = store.health();
      if (!health) return;
      this.reset();
      for (const kind of STORE_ERROR_KINDS) this.inc({ kind }, health.errors[kind]);
    },
  });
  new client.Gauge({
    name: 'store_seconds_since_writable',
    help: 'Seconds since the store last took a write (/ready writes one row); -1 before the first',
    registers: [registry],
    collect() {
      const last = store.health()?.lastWritableAt;
      this.set(last == null ? -1 : (Date.now() - last) / 1000);
    },
  });

  const notificationsSent = new client.Counter({
    name: 'subscription_notifications_sent_total',
    help: 'Subscription notifications the endpoint acknowledged (2xx), by type',
    labelNames: ['type'] as const,
    registers: [registry],
  });
  const notificationsFailed = new client.Counter({
    name: 'subscription_notifications_failed_total',
    help: 'Subscription notification attempts that failed (not 2xx, timeout, unreachable), by type',
    labelNames: ['type'] as const,
    registers: [registry],
  });
  const notificationsRetried = new client.Counter({
    name: 'subscription_notifications_retried_total',
    help: 'Failed subscription notifications scheduled for another attempt (backoff)',
    registers: [registry],
  });
  const notificationLag = new client.Histogram({
    name: 'subscription_notification_lag_seconds',
    help: "From a CER's final write to the endpoint's acknowledgement of its event",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
    registers: [registry],
  });

  const cdsCalls = new client.Counter({
    name: 'cds_hook_calls_total',
    help: 'CDS Hooks calls by service and outcome (answered, refused, bad-request, prefetch-failed, error)',
    labelNames: ['service', 'outcome'] as const,
    registers: [registry],
  });
  const cdsCards = new client.Counter({
    name: 'cds_cards_total',
    help: 'CDS Hooks cards answered, by service and indicator',
    labelNames: ['service', 'indicator'] as const,
    registers: [registry],
  });
  const cdsFeedback = new client.Counter({
    name: 'cds_feedback_total',
    help: 'CDS Hooks card feedback received, by service and outcome (accepted, overridden)',
    labelNames: ['service', 'outcome'] as const,
    registers: [registry],
  });
  const rechecks = new client.Counter({
    name: 'previsit_rechecks_total',
    help: 'Pre-visit re-checks by tenant and result: run, skipped (an answer still reusable at the start), cancelled',
    labelNames: ['tenant', 'result'] as const,
    registers: [registry],
  });
  const checkinsReused = new client.Counter({
    name: 'previsit_checkins_reused_total',
    help: 'Check-ins ($submit) answered by reuse of a pre-visit check (booking or re-check), by tenant',
    labelNames: ['tenant'] as const,
    registers: [registry],
  });
  const RECHECK_RESULTS = {
    'recheck-run': 'run',
    'recheck-skipped': 'skipped',
    'recheck-cancelled': 'cancelled',
  };

  const evidenceDocuments = new client.Counter({
    name: 'evidence_documents_total',
    help: 'Documents of final answers: kept, not kept (by reason), download retried',
    labelNames: ['tenant', 'result'] as const,
    registers: [registry],
  });
  const evidenceBytes = new client.Counter({
    name: 'evidence_bytes_total',
    help: 'Bytes of the documents kept (before deduplication)',
    labelNames: ['tenant'] as const,
    registers: [registry],
  });
  const evidenceLag = new client.Histogram({
    name: 'evidence_kept_seconds',
    help: "From a check's final answer to its document kept",
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
    registers: [registry],
  });

  const scheduleRounds = new client.Counter({
    name: 'ehr_schedule_rounds_total',
    help: "Rounds of reading a clinic's schedule from its EHR, by tenant and outcome (ok, ehr-unavailable, ehr-refused, ehr-garbage, failed)",
    labelNames: ['tenant', 'outcome'] as const,
    registers: [registry],
  });
  const scheduleAppointments = new client.Counter({
    name: 'ehr_schedule_appointments',
    help: "Appointments read from the EHR's schedule, by tenant and what was done: booked, moved, cancelled, not checked",
    labelNames: ['tenant', 'result'] as const,
    registers: [registry],
  });

  const timed = async <T>(endpoint: string, call: () => Promise<UpstreamResult<T>>) => {
    const end = upstreamCalls.startTimer({ endpoint });
    const result = await call();
    end({ result: result.ok ? 'ok' : describeFailure(result.error) });
    return result;
  };

  return {
    registry,
    httpDuration,
    onLifecycle(event) {
      if (event.type === 'poll') pollLag.observe(event.lateMs / 1000);
      if (event.type === 'create' && event.queueClass && event.waitedMs !== undefined)
        queueWait.observe({ class: event.queueClass }, Math.max(0, event.waitedMs) / 1000);
      if (event.type === 'done') finished.inc({ tenant: event.tenantId, outcome: event.outcome });
      if (event.type === 'reuse') reused.inc({ tenant: event.tenantId });
    },
    onPrevisit(event) {
      if (event.type === 'checkin-reused') checkinsReused.inc({ tenant: event.tenantId });
      else rechecks.inc({ tenant: event.tenantId, result: RECHECK_RESULTS[event.type] });
    },
    onEhrScheduleRound(tenantId, outcome) {
      scheduleRounds.inc({ tenant: tenantId, outcome });
    },
    onEhrScheduleEvent(tenantId, event) {
      scheduleAppointments.inc({ tenant: tenantId, result: event });
    },
    onEvidence(event) {
      if (event.type === 'kept') {
        evidenceDocuments.inc({ tenant: event.tenantId, result: 'kept' });
        evidenceBytes.inc({ tenant: event.tenantId }, event.bytes);
        evidenceLag.observe(event.afterMs / 1000);
      } else if (event.type === 'retry') evidenceDocuments.inc({ tenant: event.tenantId, result: 'retried' });
      else evidenceDocuments.inc({ tenant: event.tenantId, result: `not-kept-${event.reason}` });
    },
    deliveries: {
      sent: (type) => notificationsSent.inc({ type }),
      failed: (type) => notificationsFailed.inc({ type }),
      retried: () => notificationsRetried.inc(),
      lag: (seconds) => notificationLag.observe(seconds),
    },
    cds: {
      call: (service, outcome) => cdsCalls.inc({ service, outcome }),
      card: (service, indicator) => cdsCards.inc({ service, indicator }),
      feedback: (service, outcome) => cdsFeedback.inc({ service, outcome }),
    },
    instrument: (upstream) => ({
      createTask: (creds, body) => timed('create-task', () => upstream.createTask(creds, body)),
      getResult: (creds, taskId) => timed('eligibility-result', () => upstream.getResult(creds, taskId)),
      health: () => timed('health', () => upstream.health()),
    }),
  };
}

/** A store read for a gauge; null while the store is unavailable (other errors are thrown). */
async function storeOrNull<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch (error) {
    if (isStoreUnavailable(error)) return null;
    throw error;
  }
}
