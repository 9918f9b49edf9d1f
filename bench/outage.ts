/**
 * Issue 29's drill figures: the store taken away while a clinic keeps working. The drill of
 * test/component/store-outage.test.ts and store-full-disk.test.ts (test/support/outage-drill.ts),
 * with more checks and longer outages:
 *
 *   postgres  a PostgreSQL server of its own; checks submitted all along (one every
 *             BENCH_SUBMIT_EVERY_MS), create-task answers slow (BENCH_CREATE_TASK_MS), three
 *             outages (stop -m fast 8 s, -m immediate 12 s, -m fast 16 s), each one meeting
 *             checks being submitted, create-task calls out and checks being polled.
 *   sqlite    the SQLite file on a small tmpfs filled to ENOSPC for 10 s, then emptied (an
 *             injected SQLITE_FULL where mount is refused, as the test does).
 *
 * After the last outage every $submit refused is sent again with its request identifier (as a
 * client retries a 503), and the drill waits for every check's final CER. Reported: outages,
 * checks, lost (stored or asked for, and not found eligible at the end), doubled (create-task
 * calls beyond one per check), answers while the store was away by status, 500s, 503s without
 * Retry-After, answers breaking the contract, /ready, warn and error log lines per outage.
 *
 *   npm run bench:outage                 (both)
 *   npx tsx bench/outage.ts postgres     (one)
 */
import { join } from 'node:path';
import type { FullDisk } from '../test/support/full-disk.js';
import { canMountTmpfs, smallDisk } from '../test/support/full-disk.js';
import type { Drill, OutagePlan, OutageReport, OutageStore } from '../test/support/outage-drill.js';
import { answerProblems, counter, outage, startDrill, stoppedServer } from '../test/support/outage-drill.js';
import { startPrivatePostgres } from '../test/support/private-postgres.js';
import { machine, progressLog, record, sleep } from './lib.js';

const SUBMIT_EVERY_MS = Number(process.env.BENCH_SUBMIT_EVERY_MS ?? 250);
const CREATE_TASK_MS = Number(process.env.BENCH_CREATE_TASK_MS ?? 2000);
const TIME_SCALE = Number(process.env.BENCH_TIME_SCALE ?? 3);
const BETWEEN_MS = Number(process.env.BENCH_BETWEEN_OUTAGES_MS ?? 5000);
/** The service and sandbox of both drills. */
const DRILL = {
  timeScale: TIME_SCALE,
  createTaskLatencyMs: CREATE_TASK_MS,
  tenants: 4,
  maxInFlight: 5,
  env: { LEASE_MS: '30000', CHECK_TIMEOUT_MS: '120000' },
};

const log = progressLog('outage');

interface Moment {
  name: string;
  store: OutageStore;
  downMs: number;
}

/** Checks submitted one every SUBMIT_EVERY_MS, for `ms`. */
async function submitFor(drill: Drill, next: () => number, ms: number): Promise<void> {
  const until = Date.now() + ms;
  const sent: Promise<unknown>[] = [];
  while (Date.now() < until) {
    sent.push(drill.submit(next()));
    await sleep(SUBMIT_EVERY_MS);
  }
  await Promise.all(sent);
}

/** What one outage looked like from outside. */
function summarise(report: OutageReport, readyDownFrom?: number) {
  const byStatus: Record<string, number> = {};
  for (const a of report.answers) {
    const key = `${a.what} ${a.status}`;
    byStatus[key] = (byStatus[key] ?? 0) + 1;
  }
  const fhir = report.answers.filter(
    (a) => a.what !== 'ready' && a.what !== 'health' && a.what !== 'metrics',
  );
  return {
    name: report.name,
    downSeconds: Number(((report.upAt - report.downAt) / 1000).toFixed(1)),
    answers: report.answers.length,
    answers500: fhir.filter((a) => a.status >= 500 && a.status !== 503).length,
    answers503: fhir.filter((a) => a.status === 503).length,
    answers503WithoutRetryAfter: fhir.filter((a) => a.status === 503 && !a.retryAfter).length,
    noAnswer: report.answers.filter((a) => a.status === 0).length,
    byStatus,
    problems: answerProblems(report.answers, readyDownFrom),
    readyAfterUpSeconds:
      report.readyAfterUpMs === null ? null : Number((report.readyAfterUpMs / 1000).toFixed(1)),
    logLines: report.logLines,
    metrics: report.metrics,
    alive: report.alive,
    crash: report.crash,
  };
}

/** Lost and doubled checks at the end, after the refused ones were sent again. */
async function tally(drill: Drill, started: number) {
  await drill.resubmitRefused();
  const final = await drill.settle(5 * 60_000);
  const asked = drill.submissions.length;
  const stored = drill.submissions.filter((s) => s.id !== null);
  const eligible = stored.filter((s) => {
    const f = final.get(s.id ?? '');
    return f?.outcome === 'complete' && f.inforce === true;
  }).length;
  const ends: Record<string, number> = {};
  for (const s of stored) {
    const f = final.get(s.id ?? '');
    const key = f ? `${f.outcome}${f.code ? `:${f.code}` : ''}` : 'still queued';
    ends[key] = (ends[key] ?? 0) + 1;
  }
  const createTask = drill.sandbox.control.stats().createTask;
  const distinct = new Set(stored.map((s) => s.id)).size;
  return {
    checks: asked,
    refusedThenResubmitted: drill.submissions.filter((s) => s.answers.some((a) => a.status === 503)).length,
    stored: stored.length,
    distinctChecks: distinct,
    foundEligible: eligible,
    ends,
    lost: asked - eligible,
    createTaskCalls: createTask,
    doubled: Math.max(0, createTask - distinct),
    wallSeconds: Number(((Date.now() - started) / 1000).toFixed(1)),
  };
}

async function drillPostgres() {
  const server = await startPrivatePostgres();
  try {
    const drill = await startDrill({
      databaseUrl: await server.createDatabase('bench_outage'),
      ...DRILL,
    });
    const started = Date.now();
    const next = counter(0);
    const moments: Moment[] = [
      { name: 'stop -m fast, 8 s', store: stoppedServer(server, 'fast'), downMs: 8000 },
      { name: 'stop -m immediate, 12 s', store: stoppedServer(server, 'immediate'), downMs: 12_000 },
      { name: 'stop -m fast, 16 s', store: stoppedServer(server, 'fast'), downMs: 16_000 },
    ];
    const outages = [];
    try {
      for (const moment of moments) {
        await submitFor(drill, next, BETWEEN_MS);
        log(`postgres: ${moment.name}`);
        outages.push(summarise(await outage(drill, { ...moment, ...during(next) })));
      }
      await submitFor(drill, next, BETWEEN_MS);
      return { store: 'postgres (private server)', outages, ...(await tally(drill, started)) };
    } finally {
      await drill.close();
    }
  } finally {
    await server.close();
  }
}

async function drillSqlite() {
  const kind = canMountTmpfs() ? 'tmpfs' : 'injected';
  if (kind === 'injected')
    log('sqlite: mount -t tmpfs is refused here: the full disk is an injected SQLITE_FULL');
  const disk: FullDisk = smallDisk(kind);
  try {
    const drill = await startDrill({
      databaseUrl: `sqlite:${join(disk.dir, 'adapter.db')}`,
      ...DRILL,
      env: { ...disk.env, ...DRILL.env },
      nodeArgs: disk.nodeArgs,
    });
    const started = Date.now();
    const next = counter(0);
    try {
      await submitFor(drill, next, BETWEEN_MS);
      log(`sqlite: disk full (${kind}), 10 s`);
      const report = await outage(drill, {
        name: `disk full (${kind}), 10 s`,
        store: disk,
        downMs: 10_000,
        ...during(next),
      });
      const failed = report.answers.filter(
        (a) => a.what === 'submit' && a.status !== 200 && a.status !== 202,
      );
      const readyDownFrom = failed.length ? Math.min(...failed.map((a) => a.sentAt)) : undefined;
      await submitFor(drill, next, BETWEEN_MS);
      return {
        store: `sqlite (${kind})`,
        outages: [summarise(report, readyDownFrom)],
        ...(await tally(drill, started)),
      };
    } finally {
      await drill.close();
    }
  } finally {
    disk.close();
  }
}

/** During an outage: checks keep coming at the same pace; reads, _async, /ready, /health, /metrics every 300 ms. */
function during(next: () => number): Omit<OutagePlan, 'name' | 'store' | 'downMs'> {
  return { submitEveryMs: SUBMIT_EVERY_MS, nextN: next, probeEveryMs: 300 };
}

const DRILLS = { postgres: drillPostgres, sqlite: drillSqlite } as const;
const chosen = (
  process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(DRILLS)
) as (keyof typeof DRILLS)[];
const results: Record<string, unknown> = {
  setup: {
    submitEveryMs: SUBMIT_EVERY_MS,
    createTaskMs: CREATE_TASK_MS,
    timeScale: TIME_SCALE,
    betweenOutagesMs: BETWEEN_MS,
    tenants: DRILL.tenants,
    maxInFlight: DRILL.maxInFlight,
  },
};
for (const name of chosen) {
  log(`drill ${name}`);
  try {
    results[name] = await DRILLS[name]();
  } catch (error) {
    results[name] = { failed: error instanceof Error ? error.message : String(error) };
  }
}
await record('outage', { machine: machine(), ...results });
