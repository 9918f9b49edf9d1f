/**
 * Figure 1 of issue 7: CPU time (user + sys, from /proc) of the adapter process per completed
 * single-payer check, 1,000 checks, the sandbox upstream answering at once on its own port.
 * Target: at most 2 ms of CPU per check. Runs on SQLite and on PostgreSQL.
 *
 * The warm-up (BENCH_WARMUP checks) lets V8 compile the hot code before the measurement: with 50,
 * a profile of the measured checks still showed the optimizing compiler's threads at about a
 * sixth of the process's CPU, a cost a running service pays once. V8 (`--trace-opt`) compiled
 * 430, 136, 130, 96, 54, 54, 28 and 8 functions in eight successive rounds of 500 checks: after
 * about 3,000 checks the process is in its steady state, which is what this figure measures.
 * The completion probe (a count search per tenant) costs more as the table grows, so its cost is
 * measured before and after the run and the mean of the two subtracted per probe.
 *
 *   npm run bench:cost            (BENCH_CHECKS=1000, BENCH_WARMUP=3000)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSandbox } from '../src/sandbox/index.js';
import {
  cpuProfArgs,
  cpuSeconds,
  machine,
  pgSchema,
  record,
  sleep,
  spawnService,
  submitOnce,
  tenantAuth,
  until,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const CHECKS = Number(process.env.BENCH_CHECKS ?? 1000);
const TENANTS = 10;
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3000);
/**
 * 1 s: each check is one create-task and one poll (the sandbox answers at once). A 10 ms
 * interval would add the idle scheduler rounds (every min(250, interval) ms) to every check.
 */
const POLL_INTERVAL_MS = Number(process.env.BENCH_POLL_INTERVAL_MS ?? 1000);

async function runOnce(store: 'sqlite' | 'postgres') {
  const sandbox = await startSandbox({ port: 0, timeScale: 0.0001, apiKeys: [UPSTREAM_KEY] });
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-cost-'));
  const pgStore = store === 'postgres' ? await pgSchema('bench_cost') : null;
  const service = await spawnService(
    {
      UPSTREAM_BASE_URL: sandbox.url,
      TENANTS_FILE: writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, 100),
      DATABASE_URL: pgStore?.url ?? `sqlite:${join(dir, 'adapter.db')}`,
      POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
      SUBMIT_WAIT_MS: '0',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      SUBMIT_RATE_PER_MINUTE: '1000000',
    },
    undefined,
    cpuProfArgs(`cost-${store}`),
  );
  try {
    const pid = service.child.pid ?? 0;
    // Warm-up: JIT, definitions, prepared statements.
    await submitAll(service.url, WARMUP);
    await until(async () => ((await doneCount(service.url)) === 0 ? true : undefined), 120_000, 'warm-up');
    await sleep(500);
    // The idle cost of the service (scheduler rounds every min(250, POLL_INTERVAL_MS) ms), per second.
    const idleBefore = cpuSeconds(pid);
    await sleep(2000);
    const idlePerSecond = (cpuSeconds(pid) - idleBefore) / 2;
    // The completion probe costs the service reads too: measured on its own, then subtracted.
    const probeCostNow = async (): Promise<number> => {
      const probeBefore = cpuSeconds(pid);
      const probeStarted = Date.now();
      for (let i = 0; i < 20; i += 1) await doneCount(service.url);
      const probeWall = (Date.now() - probeStarted) / 1000;
      return Math.max(0, cpuSeconds(pid) - probeBefore - idlePerSecond * probeWall) / 20;
    };
    const probeCostBefore = await probeCostNow();
    let probes = 0;
    const before = cpuSeconds(pid);
    const started = Date.now();
    await submitAll(service.url, CHECKS);
    await until(
      async () => {
        await sleep(900); // one probe a second: the probe's own cost stays small
        probes += 1;
        return (await doneCount(service.url)) === CHECKS ? true : undefined;
      },
      300_000,
      'all done',
    );
    const wallMs = Date.now() - started;
    const gross = cpuSeconds(pid) - before;
    // A count walks the tenant's rows: the probes cost more as the run went on (roughly linearly).
    const probeCostAfter = await probeCostNow();
    const probeCost = (probeCostBefore + probeCostAfter) / 2;
    const cpu = gross - probes * probeCost;
    const stats = sandbox.control.stats();
    return {
      store,
      checks: CHECKS,
      pollIntervalMs: POLL_INTERVAL_MS,
      createTaskCalls: stats.createTask - WARMUP,
      polls: stats.polls,
      cpuSecondsGross: Number(gross.toFixed(3)),
      completionProbes: probes,
      warmUpChecks: WARMUP,
      cpuSecondsPerProbe: Number(probeCost.toFixed(4)),
      cpuSecondsPerProbeBeforeAfter: [Number(probeCostBefore.toFixed(4)), Number(probeCostAfter.toFixed(4))],
      idleCpuSecondsPerSecond: Number(idlePerSecond.toFixed(4)),
      cpuSeconds: Number(cpu.toFixed(3)),
      cpuMsPerCheck: Number(((cpu * 1000) / CHECKS).toFixed(3)),
      wallSeconds: Number((wallMs / 1000).toFixed(1)),
      note: 'cpuSeconds = gross - probes x cpuSecondsPerProbe (the mean of its cost before and after the run); includes the $submit request of each check and the idle scheduler rounds during the run',
    };
  } finally {
    await service.stop();
    await sandbox.close();
    await pgStore?.drop();
  }
}

async function submitAll(url: string, count: number): Promise<void> {
  const batch = 25;
  for (let i = 0; i < count; i += batch) {
    await Promise.all(
      Array.from({ length: Math.min(batch, count - i) }, async (_, j) => {
        // One patient for every check, each a real one: no reuse of a recent answer.
        const status = await submitOnce(url, (i + j) % TENANTS);
        if (status !== 200) throw new Error(`$submit answered ${status}`);
      }),
    );
  }
}

/** How many measured checks are done (warm-up excluded), by one count-only search per tenant. */
async function doneCount(url: string): Promise<number> {
  let done = 0;
  for (let t = 0; t < TENANTS; t += 1) {
    const res = await fetch(`${url}/fhir/CoverageEligibilityResponse?outcome=complete&_count=0`, {
      headers: tenantAuth(t),
    });
    done += ((await res.json()) as { total?: number }).total ?? 0;
  }
  return done - WARMUP;
}

const results = [];
for (const store of (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',') as ('sqlite' | 'postgres')[]) {
  results.push(await runOnce(store));
}
await record('cost-per-check', { machine: machine(), targetCpuMsPerCheck: 2, results });
