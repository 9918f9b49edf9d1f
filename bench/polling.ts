/**
 * Adaptive against fixed polling, side by side in one run on the same seeded work
 * (docs/polling.md): two services (child processes, SQLite), each with its own sandbox started
 * with the same duration seed, get the same checks at the same moments. Figures per strategy:
 * the time from the upstream task's end (the sandbox's own record) to the CER turning final
 * (the check's last write in the service's store), median and p90, and upstream polls per check.
 *
 *   npm run bench:polling
 *   BENCH_CHECKS=240 BENCH_ARRIVAL_SECONDS=120 BENCH_PAYERS=8 BENCH_WARMUP_PER_PAYER=5 npm run bench:polling
 *
 * A warm-up (BENCH_WARMUP_PER_PAYER checks per payer, all at once, not measured) first gives
 * adaptive polling a history, as a service that has run for a while has in its store; a
 * BENCH_WARMUP_PER_PAYER=0 run measures a cold start. One check in twenty goes to a payer code
 * the clinic has no credentials for (tpa_not_configured: the task never reaches EXTRACTING_DATA).
 * Durations are real time (timeScale 1): a run takes about five minutes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { startSandbox } from '../src/sandbox/index.js';
import { PAYERS } from '../src/sandbox/scenarios.js';
import { eligibilityRequest } from '../test/support/requests.js';
import { DOC_DURATION_SEED } from '../scripts/sandbox-table.js';
import {
  machine,
  record,
  sleep,
  spawnService,
  tenantAuth,
  uniqueEmiratesId,
  until,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const CHECKS = Number(process.env.BENCH_CHECKS ?? 240);
const ARRIVAL_SECONDS = Number(process.env.BENCH_ARRIVAL_SECONDS ?? 120);
const PAYER_COUNT = Number(process.env.BENCH_PAYERS ?? 8);
const WARMUP_PER_PAYER = Number(process.env.BENCH_WARMUP_PER_PAYER ?? 5);
const POLL_INTERVAL_MS = Number(process.env.BENCH_POLL_INTERVAL_MS ?? 5000);
const MIN_POLL_GAP_MS = Number(process.env.BENCH_MIN_POLL_GAP_MS ?? 1000);
const SEED = Number(process.env.BENCH_SEED ?? DOC_DURATION_SEED);
/** A payer code outside the sandbox's list: tpa_not_configured, straight from NAVIGATING_WEBSITE. */
const NO_CREDENTIALS = 'NOCREDS';
const STRATEGIES = ['fixed', 'adaptive'] as const;
type Strategy = (typeof STRATEGIES)[number];

/** A deterministic stream of uniform numbers in [0, 1). */
function uniforms(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

interface Work {
  n: number;
  payer: string;
  /** Seconds after the measured phase starts. */
  atSeconds: number;
}

function workload(): { warmup: Work[]; measured: Work[] } {
  const payers = Object.keys(PAYERS).slice(0, PAYER_COUNT);
  const warmup = payers.flatMap((payer, p) =>
    Array.from({ length: WARMUP_PER_PAYER }, (_, i) => ({ n: 500_000 + p * 100 + i, payer, atSeconds: 0 })),
  );
  const random = uniforms(SEED);
  const measured = Array.from({ length: CHECKS }, (_, n) => {
    const payer = n % 20 === 19 ? NO_CREDENTIALS : (payers[Math.floor(random() * payers.length)] ?? 'DAMAN');
    return { n, payer, atSeconds: random() * ARRIVAL_SECONDS };
  }).sort((a, b) => a.atSeconds - b.atSeconds);
  return { warmup, measured };
}

async function submit(url: string, work: Work): Promise<void> {
  const body = eligibilityRequest({
    emiratesId: uniqueEmiratesId(work.n),
    payer: work.payer,
    identifier: `poll-${work.n}`,
  });
  const res = await fetch(`${url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { ...tenantAuth(0), 'Content-Type': 'application/fhir+json', Prefer: 'wait=0' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`$submit answered ${res.status}`);
}

function quantileOf(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

async function main(): Promise<void> {
  const { warmup, measured } = workload();
  const setups = await Promise.all(
    STRATEGIES.map(async (strategy) => {
      const sandbox = await startSandbox({
        port: 0,
        timeScale: 1,
        apiKeys: [UPSTREAM_KEY],
        durationSeed: SEED,
      });
      const dir = mkdtempSync(join(tmpdir(), `fea-bench-polling-${strategy}-`));
      const database = join(dir, 'adapter.db');
      const service = await spawnService({
        UPSTREAM_BASE_URL: sandbox.url,
        TENANTS_FILE: writeTenantsFile(dir, 1, UPSTREAM_KEY, 1000),
        DATABASE_URL: `sqlite:${database}`,
        POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
        POLL_STRATEGY: strategy,
        MIN_POLL_GAP_MS: String(MIN_POLL_GAP_MS),
        SUBMIT_WAIT_MS: '0',
        SUBMIT_RATE_PER_MINUTE: '1000000',
      });
      return { strategy, sandbox, service, database };
    }),
  );
  const allEnded = async (count: number) =>
    until(
      async () => {
        await sleep(1000);
        return setups.every(
          (s) => s.sandbox.control.tasks().filter((t) => t.endedAt !== null).length >= count,
        )
          ? true
          : undefined;
      },
      30 * 60_000,
      'every task ended',
    );
  /** Every check of the service done (its CER final). */
  const allDone = async () =>
    until(
      async () => {
        await sleep(1000);
        return setups.every((s) => {
          const db = new Database(s.database, { readonly: true, fileMustExist: true });
          try {
            const row = db.prepare(`SELECT COUNT(*) AS n FROM checks WHERE state <> 'done'`).get() as {
              n: number;
            };
            return row.n === 0;
          } finally {
            db.close();
          }
        })
          ? true
          : undefined;
      },
      30 * 60_000,
      'every check done',
    );
  try {
    const started = Date.now();
    // Warm-up: the same checks to both, all at once.
    for (const work of warmup) await Promise.all(setups.map((s) => submit(s.service.url, work)));
    await allEnded(warmup.length);
    await allDone();
    const before = new Map(setups.map((s) => [s.strategy, s.sandbox.control.stats()]));
    const warmTaskIds = new Map(
      setups.map((s) => [s.strategy, new Set(s.sandbox.control.tasks().map((t) => t.taskId))]),
    );
    // Measured: the same checks to both at the same moments.
    const phaseStart = Date.now();
    await Promise.all(
      measured.map(async (work) => {
        await sleep(Math.max(0, phaseStart + work.atSeconds * 1000 - Date.now()));
        await Promise.all(setups.map((s) => submit(s.service.url, work)));
      }),
    );
    await allEnded(warmup.length + measured.length);
    await allDone();
    const wallSeconds = (Date.now() - started) / 1000;
    const results: Record<Strategy, unknown> = { fixed: null, adaptive: null };
    for (const s of setups) {
      const endedAt = new Map(
        s.sandbox.control
          .tasks()
          .filter((t) => !warmTaskIds.get(s.strategy)?.has(t.taskId) && t.endedAt)
          .map((t) => [t.taskId, Date.parse(t.endedAt!)]),
      );
      const db = new Database(s.database, { readonly: true, fileMustExist: true });
      const rows = db
        .prepare(`SELECT upstream_task_id, updated_at, outcome FROM checks WHERE state = 'done'`)
        .all() as Array<{ upstream_task_id: string | null; updated_at: number; outcome: string }>;
      db.close();
      const latencies: number[] = [];
      for (const row of rows) {
        const end = row.upstream_task_id ? endedAt.get(row.upstream_task_id) : undefined;
        if (end !== undefined) latencies.push(row.updated_at - end);
      }
      latencies.sort((a, b) => a - b);
      const stats = s.sandbox.control.stats();
      const polls = stats.polls - (before.get(s.strategy)?.polls ?? 0);
      const tasks = stats.tasksCreated - (before.get(s.strategy)?.tasksCreated ?? 0);
      results[s.strategy] = {
        checks: latencies.length,
        tasksCreated: tasks,
        endToFinalMs: {
          median: Math.round(quantileOf(latencies, 0.5)),
          p90: Math.round(quantileOf(latencies, 0.9)),
          p99: Math.round(quantileOf(latencies, 0.99)),
          max: Math.round(latencies.at(-1) ?? NaN),
        },
        pollsPerCheck: Number((polls / measured.length).toFixed(2)),
      };
    }
    // A cold start is kept apart from the usual (warm) figures.
    await record(WARMUP_PER_PAYER === 0 ? 'polling-cold' : 'polling', {
      machine: machine(),
      setup: {
        checks: CHECKS,
        arrivalSeconds: ARRIVAL_SECONDS,
        payers: Object.keys(PAYERS).slice(0, PAYER_COUNT),
        noCredentialsShare: 0.05,
        warmupPerPayer: WARMUP_PER_PAYER,
        pollIntervalMs: POLL_INTERVAL_MS,
        minPollGapMs: MIN_POLL_GAP_MS,
        durationSeed: SEED,
      },
      fixed: results.fixed,
      adaptive: results.adaptive,
      wallSeconds: Math.round(wallSeconds),
      note: 'end-to-final: the sandbox task end (its terminal status time) to the check row last write (the final CER), both on this machine clock',
    });
  } finally {
    for (const s of setups) {
      await s.service.stop();
      await s.sandbox.close();
    }
  }
}

await main();
