/**
 * Figure 3 of issue 7: 10,000 checks in flight at once. 100 tenants with maxInFlight 100,
 * POLL_INTERVAL_MS 5000, SUBMIT_WAIT_MS 0; upstream task durations of 2 to 5 minutes (four
 * sandbox task books with time scales 40, 60, 80 and 100: the standard ~3 s timeline becomes
 * 2, 3, 4 and 5 minutes; tenant i uses book i mod 4).
 *
 * Reports: resident memory of the service (peak VmHWM, and the peak of VmRSS sampled every
 * 500 ms, from /proc/<pid>/status); poll lateness p50/p99 from the service's
 * poll_lateness_seconds histogram (interpolated within buckets) and, exactly, as the upstream
 * saw it; upstream polls per task per interval, and every pair of polls of one task closer
 * than the interval (must be none). Targets: <= 300 MB RSS, p99 lateness < 250 ms, never more
 * than one poll per task per interval.
 *
 * BENCH_REPLICAS=2 (PostgreSQL only) runs two replicas on one database, $submit spread over both:
 * RSS per replica, lateness over both (their histograms summed, and exactly at the upstream).
 *
 *   npm run bench:scale     (BENCH_CHECKS=10000 BENCH_STORE=sqlite|postgres BENCH_TIME_SCALES=40,60,80,100
 *                            BENCH_REPLICAS=1|2)
 */
import { mkdtempSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  checksByState,
  cpuProfArgs,
  cpuSeconds,
  gauge,
  histogramFractionAtMost,
  histogramQuantile,
  logSummary,
  machine,
  parseHistogram,
  peakRssMb,
  pgSchema,
  progressLog,
  record,
  rssMb,
  scrape,
  sleep,
  spawnService,
  submitChecks,
  sumByLabel,
  sumHistograms,
  writeTenantsFile,
} from './lib.js';
import { startBenchUpstream } from './upstream.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const loadavgAtStart = loadavg().map((n) => Number(n.toFixed(2)));
const CHECKS = Number(process.env.BENCH_CHECKS ?? 10_000);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 100);
const MAX_IN_FLIGHT = Number(process.env.BENCH_MAX_IN_FLIGHT ?? 100);
const POLL_INTERVAL_MS = Number(process.env.BENCH_POLL_INTERVAL_MS ?? 5000);
const TIME_SCALES = (process.env.BENCH_TIME_SCALES ?? '40,60,80,100').split(',').map(Number);
const STORE = process.env.BENCH_STORE === 'postgres' ? 'postgres' : 'sqlite';
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_MS ?? 30 * 60_000);
const REPLICAS = Number(process.env.BENCH_REPLICAS ?? 1);
if (REPLICAS > 1 && STORE !== 'postgres') throw new Error('BENCH_REPLICAS > 1 needs BENCH_STORE=postgres');
const NAME = `scale-${STORE}${REPLICAS > 1 ? `-${REPLICAS}-replicas` : ''}`;

const log = progressLog('scale');

const upstream = await startBenchUpstream({
  timeScales: TIME_SCALES,
  apiKey: UPSTREAM_KEY,
  pollIntervalMs: POLL_INTERVAL_MS,
  sampleInFlightMs: 2000,
});
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-scale-'));
const pgStore = STORE === 'postgres' ? await pgSchema('bench_scale') : null;
const services = [];
for (let r = 0; r < REPLICAS; r += 1) {
  services.push(
    await spawnService(
      {
        UPSTREAM_BASE_URL: upstream.url,
        TENANTS_FILE: writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, MAX_IN_FLIGHT),
        DATABASE_URL: pgStore?.url ?? `sqlite:${join(dir, 'adapter.db')}`,
        POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
        SUBMIT_WAIT_MS: '0',
        LOG_LEVEL: 'info', // spawnService waits for the 'listening' info line
        SUBMIT_RATE_PER_MINUTE: '1000000',
        // Longer than the slowest task, so no check is reported as "still checking".
        CHECK_TIMEOUT_MS: String(60 * 60_000),
      },
      undefined,
      cpuProfArgs(`${NAME}-${r}`),
    ),
  );
}
const [service] = services;
if (!service) throw new Error('no replica');
const pids = services.map((s) => s.child.pid ?? 0);
const pid = pids[0] ?? 0;
let exited: string | null = null;
services.forEach((replica, r) =>
  replica.child.once('exit', (code, signal) => {
    exited = `replica ${r}: exit code ${String(code)}, signal ${String(signal)}`;
    log(`service exited (${exited}); last lines:\n${replica.output.slice(-30).join('\n')}`);
  }),
);
const peakSampledRss = pids.map(() => 0);
const rssSamples: Array<{ t: number; mb: number[] }> = [];
const started = Date.now();
const rssTimer = setInterval(() => {
  try {
    const mb = pids.map((p) => rssMb(p));
    mb.forEach((m, r) => (peakSampledRss[r] = Math.max(peakSampledRss[r] ?? 0, m)));
    rssSamples.push({ t: Math.round((Date.now() - started) / 1000), mb: mb.map(Math.round) });
  } catch {
    // a process is gone
  }
}, 500);

try {
  await sleep(3000); // the FHIR definitions load just after 'listening'
  const idleRssMb = pids.map((p) => Math.round(rssMb(p)));
  const cpuStart = pids.map((p) => cpuSeconds(p));
  log(`service pid ${pid}, submitting ${CHECKS} checks over ${TENANTS} tenants`);
  let peakInFlight = 0;
  const inFlightTimer = setInterval(() => {
    peakInFlight = Math.max(peakInFlight, upstream.inFlightNow());
  }, 5000);
  const submitted = await submitChecks(
    services.map((x) => x.url),
    { count: CHECKS, tenants: TENANTS, concurrency: 20 },
  );
  const submitSeconds = (Date.now() - started) / 1000;
  const refused = submitted.filter((s) => s.id === null).length;
  log(`submitted in ${submitSeconds.toFixed(1)} s (${refused} not accepted)`);

  let states: Record<string, number> = {};
  let lastLog = 0;
  // The service's event-loop delay (prom-client, reset at every scrape): max and p99 per 5 s window.
  let loopMaxMs = 0;
  let peakHeap = { usedMb: 0, externalMb: 0 };
  const loopP99s: number[] = [];
  for (;;) {
    await sleep(5000);
    if (exited) throw new Error(`the service died: ${String(exited)}`);
    const text = await scrape(service.url);
    states = checksByState(text);
    loopMaxMs = Math.max(loopMaxMs, gauge(text, 'nodejs_eventloop_lag_max_seconds') * 1000);
    loopP99s.push(gauge(text, 'nodejs_eventloop_lag_p99_seconds') * 1000);
    const heapMb = gauge(text, 'nodejs_heap_size_used_bytes') / 1048576;
    const externalMb = gauge(text, 'nodejs_external_memory_bytes') / 1048576;
    if (heapMb > peakHeap.usedMb)
      peakHeap = { usedMb: Math.round(heapMb), externalMb: Math.round(externalMb) };
    peakInFlight = Math.max(peakInFlight, upstream.inFlightNow());
    if (Date.now() - lastLog > 30_000) {
      lastLog = Date.now();
      const polls = upstream.polls();
      log(
        `states ${JSON.stringify(states)} upstream in flight ${upstream.inFlightNow()} polls ${polls.polls} ` +
          `rss ${pids.map((p) => rssMb(p).toFixed(0)).join(' + ')} MB lateness p99 ${polls.latenessMs?.p99 ?? '-'} ms`,
      );
    }
    if ((states.done ?? 0) >= CHECKS - refused) break;
    if (Date.now() - started > TIMEOUT_MS) {
      log('timed out');
      break;
    }
  }
  clearInterval(inFlightTimer);
  const wallSeconds = (Date.now() - started) / 1000;
  const cpu = pids.map((p, r) => cpuSeconds(p) - (cpuStart[r] ?? 0));
  const metrics = await scrape(service.url);
  // Both replicas poll: their lateness histograms (same bounds) summed.
  const hist = sumHistograms(
    await Promise.all(
      services.map(async (x) => parseHistogram(await scrape(x.url), 'poll_lateness_seconds')),
    ),
  );
  const polls = upstream.polls();
  const perInterval = upstream.pollsPerInterval();
  const stats = upstream.stats();
  const peakHwm = pids.map((p) => peakRssMb(p));
  const p99s = histogramQuantile(hist, 0.99);
  await record(NAME, {
    machine: machine(),
    loadavgAtStart,
    store: STORE,
    replicas: REPLICAS,
    checks: CHECKS,
    tenants: TENANTS,
    maxInFlight: MAX_IN_FLIGHT,
    pollIntervalMs: POLL_INTERVAL_MS,
    timeScales: TIME_SCALES,
    taskMinutes: TIME_SCALES.map((s) => Number(((3000 * s) / 60_000).toFixed(1))),
    submitSeconds: Number(submitSeconds.toFixed(1)),
    notAccepted: refused,
    wallSeconds: Number(wallSeconds.toFixed(1)),
    serviceCpuSeconds: cpu.map((c) => Number(c.toFixed(1))),
    finalStates: states,
    finishedByOutcome: sumByLabel(metrics, 'checks_finished_total', 'outcome'),
    upstreamCallsByResult: {
      createTask: sumByLabel(metrics, 'upstream_request_duration_seconds_count', 'result', {
        endpoint: 'create-task',
      }),
      poll: sumByLabel(metrics, 'upstream_request_duration_seconds_count', 'result', {
        endpoint: 'eligibility-result',
      }),
    },
    serviceEventLoopDelayMs: {
      source:
        'nodejs_eventloop_lag_*_seconds of the service (prom-client, 10 ms resolution), per 5 s scrape window',
      max: Number(loopMaxMs.toFixed(0)),
      worstWindowP99: Number(Math.max(0, ...loopP99s.filter(Number.isFinite)).toFixed(0)),
      medianWindowP99: Number(
        ([...loopP99s].sort((a, b) => a - b)[Math.floor(loopP99s.length / 2)] ?? 0).toFixed(0),
      ),
    },
    serviceLog: logSummary(services.flatMap((x) => x.output)),
    createTaskAtUpstreamMs: polls.createTaskMs,
    benchEventLoopDelayMs: polls.benchEventLoopDelayMs,
    peakUpstreamInFlight: peakInFlight,
    maxInFlightPerTenantSeenUpstream: upstream.maxInFlightPerClinic(),
    rss: {
      perReplica: true,
      peakMb: peakHwm.map((m) => Number(m.toFixed(1))),
      peakSampledMb: peakSampledRss.map((m) => Number(m.toFixed(1))),
      samples: rssSamples.filter((_, i) => i % 20 === 0),
      idleBeforeLoadMb: idleRssMb,
      peakHeapUsedFirstReplica: peakHeap,
      targetMb: 300,
      met: peakHwm.every((m) => m <= 300),
    },
    lateness: {
      service: {
        source: 'poll_lateness_seconds histogram of the service, quantiles interpolated within buckets',
        count: hist.count,
        meanMs: hist.count ? Number(((hist.sum / hist.count) * 1000).toFixed(1)) : 0,
        p50Ms: Number((histogramQuantile(hist, 0.5) * 1000).toFixed(1)),
        p99Ms: Number.isFinite(p99s) ? Number((p99s * 1000).toFixed(1)) : '>10000',
        fractionUnder250Ms: Number(histogramFractionAtMost(hist, 0.25).toFixed(4)),
        buckets: hist.buckets.map((b) => ({ le: Number.isFinite(b.le) ? b.le : '+Inf', count: b.count })),
      },
      upstream: {
        source:
          'exact, at the upstream: poll arrival minus (previous answer of that task + interval), or minus (task creation + interval) for the first poll',
        ...polls.latenessMs,
      },
      targetP99Ms: 250,
      met: Number.isFinite(p99s) && p99s * 1000 < 250,
    },
    polls: {
      upstreamPolls: stats.polls,
      createTaskCalls: stats.createTask,
      tasksCreated: stats.tasksCreated,
      ...perInterval,
      gapsUnderInterval: polls.gapsUnderInterval,
      overlappingPolls: polls.overlappingPolls,
      minGapMs: polls.minGapMs,
      duplicateTasks: upstream.duplicateTasks(),
      met: polls.gapsUnderInterval === 0 && polls.overlappingPolls === 0,
    },
  });
} finally {
  clearInterval(rssTimer);
  for (const x of services) await x.stop();
  await upstream.close();
  await pgStore?.drop();
}
