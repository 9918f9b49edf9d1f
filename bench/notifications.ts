/**
 * Notifications (issue 15): 1,000 checks finishing within about a minute, 10 subscriptions of one
 * tenant, each matching every check (10,000 deliveries), a real HTTP receiver in this process.
 *
 * Reports: latency from the CER's final write (the event's `timestamp`, written in the same
 * transaction) to the notification's arrival at the receiver, p50/p95/p99/max (same clock: one
 * machine); deliveries per second over the delivery window; and that no event was lost (each
 * subscription got numbers 1..N with no gap, and the focus of each is one of the checks). Also the
 * service's own subscription_notification_lag_seconds histogram. Target: p95 <= 1 s.
 *
 *   npm run bench:notify     (BENCH_CHECKS=1000 BENCH_SUBSCRIPTIONS=10 BENCH_STORE=sqlite|postgres)
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Bundle, Parameters } from 'fhir/r4.js';
import { hashApiKey } from '../src/config.js';
import { startSandbox } from '../src/sandbox/index.js';
import {
  cpuSeconds,
  histogramQuantile,
  machine,
  parseHistogram,
  pgSchema,
  progressLog,
  record,
  scrape,
  sleep,
  spawnService,
  submitChecks,
  tenantAuth,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const CHECKS = Number(process.env.BENCH_CHECKS ?? 1000);
const SUBSCRIPTIONS = Number(process.env.BENCH_SUBSCRIPTIONS ?? 10);
/** Checks running upstream at once: with ~3 s checks, 1,000 finish in about a minute. */
const MAX_IN_FLIGHT = Number(process.env.BENCH_MAX_IN_FLIGHT ?? 50);
const STORE = process.env.BENCH_STORE === 'postgres' ? 'postgres' : 'sqlite';
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_MS ?? 10 * 60_000);
const TOPIC = 'http://fhir-eligibility-adapter.org/fhir/SubscriptionTopic/eligibility-final';

const log = progressLog('notify');

interface Arrival {
  subscription: number;
  number: number;
  focus: string;
  /** The event's timestamp: when the CER's final version was written. */
  finalAt: number;
  receivedAt: number;
}

// ---- the receiver: one path per subscription --------------------------------------------------
const arrivals: Arrival[] = [];
/** POSTs received (a notification may carry several events). */
let requests = 0;
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    requests += 1;
    const receivedAt = Date.now();
    const bundle = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Bundle;
    const status = bundle.entry?.[0]?.resource as Parameters;
    const subscription = Number(/\/hook\/(\d+)/.exec(req.url ?? '')?.[1]);
    for (const p of status.parameter ?? []) {
      if (p.name !== 'notification-event') continue;
      const part = (name: string) => p.part?.find((x) => x.name === name);
      arrivals.push({
        subscription,
        number: Number(part('event-number')?.valueString),
        focus: String(part('focus')?.valueReference?.reference?.split('/').pop()),
        finalAt: Date.parse(String(part('timestamp')?.valueInstant)),
        receivedAt,
      });
    }
    res.statusCode = 200;
    res.end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

// ---- upstream and service ----------------------------------------------------------------------
const sandbox = await startSandbox({ port: 0, timeScale: 1, apiKeys: [UPSTREAM_KEY] });
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-notify-'));
const tenantsFile = join(dir, 'tenants.json');
writeFileSync(
  tenantsFile,
  JSON.stringify({
    tenants: [
      {
        id: 't0',
        apiKeys: [`sha256:${hashApiKey('key-t0-0123456789')}`],
        upstream: { apiKey: UPSTREAM_KEY, clinicId: 'clinic-t0', clientId: 'EHR-1' },
        practiceId: 'P-t0',
        maxInFlight: MAX_IN_FLIGHT,
        subscriptionEndpoints: [`${receiverUrl}/hook/`],
      },
    ],
  }),
);
const pgStore = STORE === 'postgres' ? await pgSchema('bench_notify') : null;
const service = await spawnService({
  UPSTREAM_BASE_URL: sandbox.url,
  TENANTS_FILE: tenantsFile,
  DATABASE_URL: pgStore?.url ?? `sqlite:${join(dir, 'adapter.db')}`,
  POLL_INTERVAL_MS: '500',
  SUBMIT_WAIT_MS: '0',
  SUBMIT_RATE_PER_MINUTE: '1000000',
  LOG_LEVEL: 'info',
});
const pid = service.child.pid ?? 0;

try {
  await sleep(3000); // the FHIR definitions load just after 'listening'
  for (let i = 0; i < SUBSCRIPTIONS; i += 1) {
    const res = await fetch(`${service.url}/fhir/Subscription`, {
      method: 'POST',
      headers: { ...tenantAuth(0), 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify({
        resourceType: 'Subscription',
        status: 'requested',
        reason: 'bench',
        criteria: TOPIC,
        channel: {
          type: 'rest-hook',
          endpoint: `${receiverUrl}/hook/${i}`,
          payload: 'application/fhir+json',
          header: ['Authorization: Bearer bench-engine-token'],
        },
      }),
    });
    if (res.status !== 201) throw new Error(`subscription ${i}: HTTP ${res.status} ${await res.text()}`);
  }
  await sleep(1000); // handshakes
  const cpuStart = cpuSeconds(pid);
  const started = Date.now();
  log(`${SUBSCRIPTIONS} subscriptions; submitting ${CHECKS} checks (maxInFlight ${MAX_IN_FLIGHT})`);
  const submitted = await submitChecks([service.url], { count: CHECKS, tenants: 1, concurrency: 10 });
  const ids = new Set(submitted.flatMap((s) => (s.id ? [s.id] : [])));
  log(`submitted in ${((Date.now() - started) / 1000).toFixed(1)} s (${CHECKS - ids.size} not accepted)`);
  const expected = ids.size * SUBSCRIPTIONS;
  let lastLog = 0;
  while (arrivals.length < expected && Date.now() - started < TIMEOUT_MS) {
    await sleep(500);
    if (Date.now() - lastLog > 10_000) {
      lastLog = Date.now();
      log(`${arrivals.length} / ${expected} notifications received`);
    }
  }
  await sleep(2000); // anything sent twice would arrive now
  const cpu = cpuSeconds(pid) - cpuStart;

  const lags = arrivals.map((a) => a.receivedAt - a.finalAt).sort((a, b) => a - b);
  const q = (p: number) => lags[Math.min(lags.length - 1, Math.floor(p * lags.length))] ?? NaN;
  const finals = arrivals.map((a) => a.finalAt);
  const received = arrivals.map((a) => a.receivedAt);
  const firstFinal = Math.min(...finals);
  const lastFinal = Math.max(...finals);
  const windowSeconds = (Math.max(...received) - Math.min(...received)) / 1000;
  // Nothing lost: each subscription got 1..N, no gap, each check once.
  const perSubscription = Array.from({ length: SUBSCRIPTIONS }, (_, i) => {
    const mine = arrivals.filter((a) => a.subscription === i);
    const numbers = new Set(mine.map((a) => a.number));
    const foci = new Set(mine.map((a) => a.focus));
    const gapless = [...numbers].sort((a, b) => a - b).every((n, index) => n === index + 1);
    const inOrder = mine.every((a, index) => index === 0 || a.number > mine[index - 1]!.number);
    return {
      received: mine.length,
      distinct: numbers.size,
      gapless,
      inOrder,
      everyCheck: [...ids].every((id) => foci.has(id)),
    };
  });
  const lost = perSubscription.reduce((n, s) => n + (ids.size - s.distinct), 0);
  const duplicates = perSubscription.reduce((n, s) => n + (s.received - s.distinct), 0);
  const metrics = await scrape(service.url);
  const hist = parseHistogram(metrics, 'subscription_notification_lag_seconds');
  await record(`notifications-${STORE}`, {
    machine: machine(),
    store: STORE,
    checks: CHECKS,
    accepted: ids.size,
    subscriptions: SUBSCRIPTIONS,
    maxInFlight: MAX_IN_FLIGHT,
    checksFinalOverSeconds: Number(((lastFinal - firstFinal) / 1000).toFixed(1)),
    notificationsExpected: expected,
    notificationsReceived: arrivals.length,
    lost,
    duplicates,
    allGapless: perSubscription.every((s) => s.gapless),
    allInOrder: perSubscription.every((s) => s.inOrder),
    allChecksPerSubscription: perSubscription.every((s) => s.everyCheck),
    notificationsPosted: requests,
    lagMs: { p50: q(0.5), p95: q(0.95), p99: q(0.99), max: lags[lags.length - 1] ?? NaN },
    serviceLagHistogramS: {
      p50: Number(histogramQuantile(hist, 0.5).toFixed(3)),
      p95: Number(histogramQuantile(hist, 0.95).toFixed(3)),
    },
    deliveriesPerSecond: Number((arrivals.length / windowSeconds).toFixed(1)),
    deliveryWindowSeconds: Number(windowSeconds.toFixed(1)),
    serviceCpuSeconds: Number(cpu.toFixed(1)),
  });
} finally {
  await service.stop();
  await sandbox.close();
  await new Promise<void>((resolve) => {
    receiver.close(() => resolve());
    receiver.closeAllConnections();
  });
  await pgStore?.drop();
}
