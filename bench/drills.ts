/**
 * Figure 5 of issue 7, the drills. For each: checks lost (target 0), duplicate create-task
 * calls (target 0), and the maximum in flight per tenant seen by the upstream (in-flight tasks
 * per clinic sampled from the sandbox every 20 ms; target at most maxInFlight).
 *
 *   a  kill:     SIGKILL of the service while 500 checks are in flight, then a restart on the
 *                same SQLite file.
 *   a2 kill:     the same, but in the middle of the $submit burst, while create-task calls are
 *                going out.
 *   b  faults:   30% of polls answered 5xx (sandbox pollErrorRate) and 10% never answered (the
 *                bench upstream holds them past the client's 15 s request timeout), whole run.
 *   c  outage:   the upstream answers 503 to every call, /health included, for 60 s mid-run,
 *                with checks in flight and more checks submitted during the outage.
 *   d  replicas: two replicas on one PostgreSQL schema, $submit spread over both, one SIGKILLed
 *                mid-run; the other takes its checks over when the leases expire.
 *
 * Every check has its own Emirates ID and the sandbox's default found-eligible scenario, so a
 * check needs exactly one upstream task: a second task for one Emirates ID is a duplicate.
 * A check is lost when $submit accepted it and, at the end, it is not in the store or not done.
 * Checks that end in an adapter error (e.g. `ambiguous-create`) are counted and named, not lost.
 *
 *   npm run bench:drills               (all four)
 *   npx tsx bench/drills.ts a c        (some)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/checks/store/open.js';
import { isAnswered } from '../src/checks/store/check-store.js';
import type { CerOutcome, CheckState } from '../src/checks/store/check-store.js';
import type { BenchUpstream } from './upstream.js';
import { startBenchUpstream } from './upstream.js';
import type { ServiceProcess, Submitted } from './lib.js';
import {
  answeredChecks,
  checksByState,
  logSummary,
  machine,
  pgSchema,
  progressLog,
  record,
  scrape,
  sleep,
  spawnService,
  submitChecks,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const TENANTS = 10;

const log = progressLog('drills');

interface DrillSetup {
  checks: number;
  maxInFlight: number;
  /** Sandbox time scale: the standard timeline is ~3 s at 1. */
  timeScale: number;
  pollIntervalMs: number;
  leaseMs: number;
}

interface Outcome {
  accepted: number;
  notAccepted: number;
  lost: number;
  lostIds: string[];
  done: number;
  complete: number;
  errors: Record<string, number>;
  createTaskCalls: number;
  tasksCreated: number;
  duplicateTasks: { emiratesIds: number; extraTasks: number };
  /** create-task calls beyond one per accepted check. */
  extraCreateTaskCalls: number;
  maxInFlightPerTenant: { max: number; clinic: string | null; samples: number };
  maxInFlight: number;
  gapsUnderInterval: number;
  overlappingPolls: number;
  upstreamPolls: number;
  injectedErrors: number;
  stalledPolls: number;
  answered503: number;
  wallSeconds: number;
  met: boolean;
}

function serviceEnv(upstream: BenchUpstream, dir: string, databaseUrl: string, s: DrillSetup) {
  return {
    UPSTREAM_BASE_URL: upstream.url,
    TENANTS_FILE: writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, s.maxInFlight),
    DATABASE_URL: databaseUrl,
    POLL_INTERVAL_MS: String(s.pollIntervalMs),
    SUBMIT_WAIT_MS: '0',
    LEASE_MS: String(s.leaseMs),
    SUBMIT_RATE_PER_MINUTE: '1000000',
    CHECK_TIMEOUT_MS: String(30 * 60_000),
    LOG_LEVEL: 'info',
  };
}

/**
 * Waits until the store holds `count` answered checks (read through /metrics of a live replica):
 * done, or answered while still holding a slot (see `answeredChecks`).
 */
async function untilAllDone(service: ServiceProcess, count: number, timeoutMs: number): Promise<void> {
  const started = Date.now();
  let last = 0;
  for (;;) {
    const text = await scrape(service.url);
    const states = checksByState(text);
    if (answeredChecks(text) >= count) return;
    if (Date.now() - last > 15_000) {
      last = Date.now();
      log(`  states ${JSON.stringify(states)}`);
    }
    if (Date.now() - started > timeoutMs)
      throw new Error(`not all done after ${timeoutMs} ms: ${JSON.stringify(states)}`);
    await sleep(1000);
  }
}

/** Reads every check back from the store (through the store API) and compares with what was accepted. */
async function outcome(
  databaseUrl: string,
  submitted: Submitted[],
  upstream: BenchUpstream,
  s: DrillSetup,
  started: number,
): Promise<Outcome> {
  const store = await openStore(databaseUrl);
  const byId = new Map<string, { state: string; outcome: string; code: string }>();
  try {
    for (let t = 0; t < TENANTS; t += 1) {
      const { checks } = await store.search(`t${t}`, {}, { count: 100_000, offset: 0 });
      for (const c of checks) {
        const code = c.cer.error?.[0]?.code.coding?.[0]?.code ?? c.cer.error?.[0]?.code.text ?? 'unknown';
        byId.set(c.id, { state: c.state, outcome: String(c.outcome), code });
      }
    }
  } finally {
    await store.close();
  }
  const accepted = submitted.filter((x) => x.id !== null);
  // Lost = accepted but, at the end, not in the store or without its answer (isAnswered: done, or
  // an ambiguous create-task answered at once while its row still holds the tenant slot).
  const answered = (row: { state: string; outcome: string } | undefined): boolean =>
    row !== undefined && isAnswered({ state: row.state as CheckState, outcome: row.outcome as CerOutcome });
  const lostIds = accepted.filter((x) => !answered(byId.get(x.id ?? ''))).map((x) => x.id ?? '');
  const errors: Record<string, number> = {};
  let complete = 0;
  let done = 0;
  for (const x of accepted) {
    const row = byId.get(x.id ?? '');
    if (!answered(row) || !row) continue;
    done += 1;
    if (row.outcome === 'complete') complete += 1;
    else errors[`${row.outcome}:${row.code}`] = (errors[`${row.outcome}:${row.code}`] ?? 0) + 1;
  }
  const stats = upstream.stats();
  const polls = upstream.polls();
  const dup = upstream.duplicateTasks();
  const perTenant = upstream.maxInFlightPerClinic();
  const result = {
    accepted: accepted.length,
    notAccepted: submitted.length - accepted.length,
    lost: lostIds.length,
    lostIds: lostIds.slice(0, 10),
    done,
    complete,
    errors,
    createTaskCalls: stats.createTask,
    tasksCreated: stats.tasksCreated,
    duplicateTasks: dup,
    extraCreateTaskCalls: Math.max(0, stats.createTask - accepted.length),
    maxInFlightPerTenant: perTenant,
    maxInFlight: s.maxInFlight,
    gapsUnderInterval: polls.gapsUnderInterval,
    overlappingPolls: polls.overlappingPolls,
    upstreamPolls: stats.polls,
    injectedErrors: stats.injectedErrors,
    stalledPolls: polls.stalled,
    answered503: polls.answered503ByDownMode,
    wallSeconds: Number(((Date.now() - started) / 1000).toFixed(1)),
  };
  return {
    ...result,
    met: result.lost === 0 && dup.extraTasks === 0 && perTenant.max <= s.maxInFlight,
  };
}

async function withUpstream<T>(s: DrillSetup, run: (upstream: BenchUpstream) => Promise<T>): Promise<T> {
  const upstream = await startBenchUpstream({
    timeScales: [s.timeScale],
    apiKey: UPSTREAM_KEY,
    pollIntervalMs: s.pollIntervalMs,
    sampleInFlightMs: 20,
  });
  try {
    return await run(upstream);
  } finally {
    await upstream.close();
  }
}

/** a: SIGKILL while 500 checks are in flight, restart on the same SQLite file. */
async function drillKill() {
  const s: DrillSetup = {
    checks: 600,
    maxInFlight: 50,
    timeScale: 10,
    pollIntervalMs: 2000,
    leaseMs: 10_000,
  };
  return withUpstream(s, async (upstream) => {
    const dir = mkdtempSync(join(tmpdir(), 'fea-drill-kill-'));
    const db = `sqlite:${join(dir, 'adapter.db')}`;
    const started = Date.now();
    const first = await spawnService(serviceEnv(upstream, dir, db, s));
    const submitted = await submitChecks([first.url], { count: s.checks, tenants: TENANTS });
    // Kill once 500 are in flight upstream (10 tenants x maxInFlight 50), a few seconds in.
    let inFlightAtKill = 0;
    for (let i = 0; i < 200; i += 1) {
      inFlightAtKill = upstream.inFlightNow();
      if (inFlightAtKill >= 500) break;
      await sleep(50);
    }
    await sleep(3000);
    const statesAtKill = checksByState(await scrape(first.url));
    inFlightAtKill = upstream.inFlightNow();
    await first.kill();
    log(
      `  a: SIGKILL with ${inFlightAtKill} tasks in flight upstream, states ${JSON.stringify(statesAtKill)}`,
    );
    const restartAt = Date.now();
    const second = await spawnService(serviceEnv(upstream, dir, db, s));
    try {
      await untilAllDone(second, submitted.filter((x) => x.id).length, 10 * 60_000);
    } finally {
      await second.stop();
    }
    return {
      setup: s,
      inFlightAtKill,
      statesAtKill,
      restartToAllDoneSeconds: Number(((Date.now() - restartAt) / 1000).toFixed(1)),
      serviceLog: logSummary([...first.output, ...second.output]),
      ...(await outcome(db, submitted, upstream, s, started)),
    };
  });
}

/**
 * a2: as a, but the SIGKILL lands in the middle of the $submit burst, while create-task calls
 * are going out (some checks are in `creating`), and the rest is submitted after the restart.
 */
async function drillKillDuringCreates() {
  const s: DrillSetup = {
    checks: 600,
    maxInFlight: 50,
    timeScale: 10,
    pollIntervalMs: 2000,
    leaseMs: 10_000,
  };
  return withUpstream(s, async (upstream) => {
    const dir = mkdtempSync(join(tmpdir(), 'fea-drill-kill2-'));
    const db = `sqlite:${join(dir, 'adapter.db')}`;
    const started = Date.now();
    const first = await spawnService(serviceEnv(upstream, dir, db, s));
    const burst = submitChecks([first.url], { count: 400, tenants: TENANTS, concurrency: 40 });
    // Kill once about 250 tasks exist upstream: create-task calls are still going out.
    for (let i = 0; i < 600 && upstream.tasksCreated() < 250; i += 1) await sleep(10);
    const tasksAtKill = upstream.tasksCreated();
    await first.kill();
    const firstPart = await burst;
    log(
      `  a2: SIGKILL after ${tasksAtKill} tasks created, ${firstPart.filter((x) => x.id).length} of 400 accepted`,
    );
    const second = await spawnService(serviceEnv(upstream, dir, db, s));
    let rest: Submitted[] = [];
    const retried: Submitted[] = [];
    try {
      // A client retries what failed with the same request identifier (idempotency key).
      for (const failed of firstPart.filter((x) => x.id === null)) {
        retried.push(...(await submitChecks([second.url], { from: failed.n, count: 1, tenants: TENANTS })));
      }
      rest = await submitChecks([second.url], { from: 400, count: 200, tenants: TENANTS });
      const accepted = [...firstPart, ...retried, ...rest].filter((x) => x.id).length;
      await untilAllDone(second, accepted, 10 * 60_000);
    } finally {
      await second.stop();
    }
    const submitted = [...firstPart.filter((x) => x.id), ...retried, ...rest];
    return {
      setup: s,
      tasksCreatedAtKill: tasksAtKill,
      refusedDuringKill: firstPart.filter((x) => x.id === null).length,
      retriedAfterRestart: retried.length,
      serviceLog: logSummary([...first.output, ...second.output]),
      ...(await outcome(db, submitted, upstream, s, started)),
    };
  });
}

/** b: 30% 5xx and 10% timeouts on polls for the whole run. */
async function drillFaults() {
  const s: DrillSetup = { checks: 100, maxInFlight: 5, timeScale: 2, pollIntervalMs: 2000, leaseMs: 60_000 };
  return withUpstream(s, async (upstream) => {
    upstream.setFaults({ pollErrorRate: 0.3 });
    upstream.setStall(0.1, 20_000); // the client gives up after 15 s (UpstreamClient default)
    const dir = mkdtempSync(join(tmpdir(), 'fea-drill-faults-'));
    const db = `sqlite:${join(dir, 'adapter.db')}`;
    const started = Date.now();
    const service = await spawnService(serviceEnv(upstream, dir, db, s));
    let submitted: Submitted[] = [];
    try {
      submitted = await submitChecks([service.url], { count: s.checks, tenants: TENANTS });
      await untilAllDone(service, submitted.filter((x) => x.id).length, 20 * 60_000);
    } finally {
      await service.stop();
    }
    return {
      setup: s,
      pollErrorRate: 0.3,
      pollStallRate: 0.1,
      clientTimeoutMs: 15_000,
      serviceLog: logSummary(service.output),
      ...(await outcome(db, submitted, upstream, s, started)),
    };
  });
}

/**
 * c: 503 to everything for 60 s mid-run. 150 checks are submitted before the outage (in
 * flight when it starts) and 150 more during it, one every 400 ms, as clinics keep working.
 */
async function drillOutage() {
  const outageMs = Number(process.env.BENCH_OUTAGE_MS ?? 60_000);
  const s: DrillSetup = {
    checks: 300,
    maxInFlight: 20,
    timeScale: 10,
    pollIntervalMs: 2000,
    leaseMs: 60_000,
  };
  return withUpstream(s, async (upstream) => {
    const dir = mkdtempSync(join(tmpdir(), 'fea-drill-outage-'));
    const db = `sqlite:${join(dir, 'adapter.db')}`;
    const started = Date.now();
    const service = await spawnService(serviceEnv(upstream, dir, db, s));
    const submitted: Submitted[] = [];
    let statesAtOutage: Record<string, number> = {};
    let statesAtEnd: Record<string, number> = {};
    let recoverySeconds = 0;
    try {
      submitted.push(...(await submitChecks([service.url], { count: 150, tenants: TENANTS })));
      await sleep(10_000);
      statesAtOutage = checksByState(await scrape(service.url));
      log(`  c: upstream down for ${outageMs} ms, states ${JSON.stringify(statesAtOutage)}`);
      upstream.setDown(true);
      const downAt = Date.now();
      for (let n = 150; n < 300; n += 1) {
        submitted.push(...(await submitChecks([service.url], { from: n, count: 1, tenants: TENANTS })));
        await sleep(Math.max(0, downAt + ((n - 149) * outageMs) / 151 - Date.now()));
      }
      await sleep(Math.max(0, downAt + outageMs - Date.now()));
      statesAtEnd = checksByState(await scrape(service.url));
      upstream.setDown(false);
      const upAt = Date.now();
      await untilAllDone(service, submitted.filter((x) => x.id).length, 20 * 60_000);
      recoverySeconds = (Date.now() - upAt) / 1000;
    } finally {
      upstream.setDown(false);
      await service.stop();
    }
    return {
      setup: s,
      outageMs,
      submittedBeforeOutage: 150,
      submittedDuringOutage: 150,
      statesAtOutage,
      statesAtOutageEnd: statesAtEnd,
      upToAllDoneSeconds: Number(recoverySeconds.toFixed(1)),
      serviceLog: logSummary(service.output),
      ...(await outcome(db, submitted, upstream, s, started)),
    };
  });
}

/** d: two replicas on PostgreSQL, one SIGKILLed mid-run. */
async function drillReplicas() {
  const s: DrillSetup = {
    checks: 600,
    maxInFlight: 50,
    timeScale: 10,
    pollIntervalMs: 2000,
    leaseMs: 10_000,
  };
  const pgStore = await pgSchema('bench_drill');
  try {
    return await withUpstream(s, async (upstream) => {
      const dir = mkdtempSync(join(tmpdir(), 'fea-drill-replicas-'));
      const started = Date.now();
      const a = await spawnService(serviceEnv(upstream, dir, pgStore.url, s));
      const b = await spawnService(serviceEnv(upstream, dir, pgStore.url, s));
      let killedAt = 0;
      let statesAtKill: Record<string, number> = {};
      let submitted: Submitted[] = [];
      try {
        submitted = await submitChecks([a.url, b.url], { count: s.checks, tenants: TENANTS });
        await sleep(8000);
        statesAtKill = checksByState(await scrape(b.url));
        await a.kill();
        killedAt = Date.now();
        log(`  d: replica A SIGKILLed, states ${JSON.stringify(statesAtKill)}`);
        await untilAllDone(b, submitted.filter((x) => x.id).length, 10 * 60_000);
      } finally {
        await a.kill().catch(() => undefined);
        await b.stop();
      }
      return {
        setup: s,
        statesAtKill,
        killToAllDoneSeconds: Number(((Date.now() - killedAt) / 1000).toFixed(1)),
        serviceLog: logSummary([...a.output, ...b.output]),
        ...(await outcome(pgStore.url, submitted, upstream, s, started)),
      };
    });
  } finally {
    await pgStore.drop();
  }
}

const DRILLS = {
  a: drillKill,
  a2: drillKillDuringCreates,
  b: drillFaults,
  c: drillOutage,
  d: drillReplicas,
} as const;
const chosen = (
  process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(DRILLS)
) as (keyof typeof DRILLS)[];
const results: Record<string, unknown> = {};
for (const name of chosen) {
  log(`drill ${name}`);
  try {
    results[name] = await DRILLS[name]();
  } catch (error) {
    results[name] = { failed: error instanceof Error ? error.message : String(error) };
  }
  log(`drill ${name}: ${JSON.stringify(results[name])}`);
  await record(`drill-${name}`, { machine: machine(), ...(results[name] as object) });
}
