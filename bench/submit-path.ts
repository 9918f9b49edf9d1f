/**
 * The `$submit` request alone: CPU time (user + sys, from /proc) of the service per
 * `POST /fhir/CoverageEligibilityRequest/$submit`, without the check that would follow it.
 *
 * Every tenant's payer (DAMAN) has an open credentials guard, written in the store before the
 * service starts: each `$submit` is read, validated, looked up (no reuse: `Cache-Control:
 * no-cache`, a new request identifier each time), inserted as a check answered at once by the
 * guard, audited, logged and answered (422, the guard's OperationOutcome). The scheduler never
 * sees these checks. Two ways that were tried and dropped: an upstream that holds create-task with
 * `maxInFlight` 1 (the checks pile up waiting, and the scheduler's claim grows with them: 2.1,
 * 3.6, 4.6 ms per request over three rounds), and the sandbox with a 10-minute poll interval
 * (the checks pile up running: claimDue was 39 % of the profile, 2.3 to 3.3 ms per request).
 * What remains besides the requests is the idle scheduler; its CPU per second is measured before
 * each round and subtracted for the round's wall time. Each round of BENCH_SUBMITS requests (8 at
 * a time, 10 tenants) follows a warm-up of BENCH_WARMUP; the figure is the median of BENCH_ROUNDS
 * rounds in one process. BENCH_CPU_PROF=<dir> writes the service's CPU profile (bench/lib.ts).
 *
 *   npx tsx bench/submit-path.ts        (BENCH_SUBMITS=2000, BENCH_WARMUP=2000, BENCH_ROUNDS=5)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/checks/store/open.js';
import { startSandbox } from '../src/sandbox/index.js';
import {
  cpuProfArgs,
  cpuSeconds,
  machine,
  record,
  sleep,
  spawnService,
  submitOnce,
  writeTenantsFile,
} from './lib.js';

const SUBMITS = Number(process.env.BENCH_SUBMITS ?? 2000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONCURRENCY = 8;
/** The answer of a check refused by an open credentials guard. */
const STATUS = 422;
const TENANTS = 10;

async function submitAll(url: string, count: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const tenant = next % TENANTS;
      next += 1;
      // A new request identifier each time (eligibilityRequest counts): a new check, never the idempotent answer.
      const status = await submitOnce(url, tenant);
      if (status !== STATUS) throw new Error(`$submit answered ${status}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

async function ready(url: string): Promise<void> {
  for (let i = 0; i < 300; i += 1) {
    const res = await fetch(`${url}/ready`).catch(() => undefined);
    if (res?.status === 200) return;
    await sleep(100);
  }
  throw new Error('service not ready');
}

const upstream = await startSandbox({ port: 0, timeScale: 1, apiKeys: ['bench-upstream-key'] });
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-submit-'));
const databaseUrl = `sqlite:${join(dir, 'adapter.db')}`;
// An open credentials guard for each tenant's payer: every check is answered at insert, so the
// scheduler never sees it (no claim, no upstream call, no growing set of checks in flight).
const setup = await openStore(databaseUrl);
await setup.migrate();
for (let t = 0; t < TENANTS; t += 1) {
  await setup.putGuard({
    tenantId: `t${t}`,
    payerCode: 'DAMAN',
    kind: 'credentials',
    until: null,
    reason: 'bench: no upstream work',
    openedAt: Date.now(),
  });
}
await setup.close();
const service = await spawnService(
  {
    UPSTREAM_BASE_URL: upstream.url,
    TENANTS_FILE: writeTenantsFile(dir, TENANTS, 'bench-upstream-key', 1000),
    DATABASE_URL: databaseUrl,
    SUBMIT_WAIT_MS: '0',
    SUBMIT_RATE_PER_MINUTE: '1000000',
    // No poll during the run: each check is its $submit and one create-task.
    POLL_STRATEGY: 'fixed',
    POLL_INTERVAL_MS: '600000',
    CHECK_TIMEOUT_MS: '3600000',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  },
  undefined,
  cpuProfArgs('submit-path'),
);
const rounds: number[] = [];
let idle = 0;
try {
  const pid = service.child.pid ?? 0;
  await ready(service.url);
  await submitAll(service.url, WARMUP);
  for (let round = 0; round < ROUNDS; round += 1) {
    await sleep(500);
    const idleBefore = cpuSeconds(pid);
    await sleep(2000);
    const idlePerSecond = (cpuSeconds(pid) - idleBefore) / 2;
    idle = idlePerSecond;
    const before = cpuSeconds(pid);
    const started = Date.now();
    await submitAll(service.url, SUBMITS);
    const wall = (Date.now() - started) / 1000;
    const cpu = cpuSeconds(pid) - before - idlePerSecond * wall;
    rounds.push((cpu * 1e6) / SUBMITS);
  }
} finally {
  await service.stop();
  await upstream.close();
}
const sorted = [...rounds].sort((a, b) => a - b);
await record('submit-path', {
  machine: machine(),
  submitsPerRound: SUBMITS,
  warmUp: WARMUP,
  concurrency: CONCURRENCY,
  lastIdleCpuSecondsPerSecond: Number(idle.toFixed(4)),
  cpuMicrosecondsPerSubmitRounds: rounds.map((r) => Math.round(r)),
  cpuMicrosecondsPerSubmitMedian: Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0),
  note: 'service CPU per $submit request (answered 422 by an open credentials guard, so no scheduler work), idle CPU subtracted',
});
