/**
 * Evidence (issue 36, docs/evidence.md): what keeping the portal's screenshot and letters costs.
 *
 * Growth (default): BENCH_CHECKS single-payer checks (found eligible: a screenshot and two letters
 * each) on each store, with the sandbox's own documents (a 70-byte screenshot, letters of about 250
 * bytes) and with screenshots padded to BENCH_SCREENSHOT_BYTES (300 KB): the store's bytes and rows
 * before and after (SQLite: dbstat per table and index; PostgreSQL: pg_total_relation_size), and the
 * time from each check's end (its evidence row, written with the final CER) to its document kept.
 *
 * CPU (`--cpu`): CPU of the service process per check, evidence capture included, against
 * BENCH_PREVIOUS (a checkout of the previous source with node_modules), alternated in pairs, after
 * a warm-up, the idle cost subtracted (the method of bench:cost, figure 1).
 *
 *   npx tsx bench/evidence.ts                       (BENCH_CHECKS=1000, BENCH_STORES=sqlite,postgres)
 *   BENCH_RATE=5 BENCH_CHECKS=300 BENCH_SIZES=307200 npx tsx bench/evidence.ts   (paced: time to kept)
 *   BENCH_PREVIOUS=/tmp/prev BENCH_PAIRS=3 npx tsx bench/evidence.ts --cpu
 */
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { startSandbox } from '../src/sandbox/index.js';
import {
  cpuSeconds,
  machine,
  PG_URL,
  pgSchema,
  quantile,
  record,
  sleep,
  spawnService,
  submitOnce,
  tenantAuth,
  until,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const TENANTS = 10;
const CHECKS = Number(process.env.BENCH_CHECKS ?? 1000);
const SCREENSHOT = Number(process.env.BENCH_SCREENSHOT_BYTES ?? 300 * 1024);
/** Checks a second (0: bursts of 25, as fast as they are taken). */
const RATE = Number(process.env.BENCH_RATE ?? 0);
const SIZES = (process.env.BENCH_SIZES ?? `0,${SCREENSHOT}`).split(',').map(Number);
const STORES = (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',') as ('sqlite' | 'postgres')[];
const TABLES = ['checks', 'evidence', 'evidence_blobs'];

async function submitAll(url: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, count - i) }, async (_, j) => {
        const status = await submitOnce(url, (i + j) % TENANTS);
        if (status !== 200 && status !== 202) throw new Error(`$submit answered ${status}`);
      }),
    );
  }
}

/** `count` checks at `rate` a second, each answered (or queued) before the next second's. */
async function submitPaced(url: string, count: number, rate: number): Promise<void> {
  const started = Date.now();
  for (let i = 0; i < count; i += 1) {
    await sleep(Math.max(0, started + (i * 1000) / rate - Date.now()));
    const status = await submitOnce(url, i % TENANTS);
    if (status !== 200 && status !== 202) throw new Error(`$submit answered ${status}`);
  }
}

async function doneCount(url: string): Promise<number> {
  let done = 0;
  for (let t = 0; t < TENANTS; t += 1) {
    const res = await fetch(`${url}/fhir/CoverageEligibilityResponse?outcome=complete&_count=0`, {
      headers: tenantAuth(t),
    });
    done += ((await res.json()) as { total?: number }).total ?? 0;
  }
  return done;
}

interface Measured {
  bytes: Record<string, number>;
  rows: Record<string, number>;
  keptMs: number[];
  states: Record<string, number>;
}

function measureSqlite(file: string): Measured {
  const db = new Database(file, { readonly: true });
  try {
    const bytes: Record<string, number> = {};
    for (const table of TABLES) {
      const indexes = (
        db
          .prepare(`SELECT name FROM sqlite_master WHERE tbl_name = ? AND type IN ('table', 'index')`)
          .all(table) as {
          name: string;
        }[]
      ).map((r) => r.name);
      let sum = 0;
      for (const name of indexes)
        sum += (
          db.prepare('SELECT COALESCE(SUM(pgsize), 0) AS b FROM dbstat WHERE name = ?').get(name) as {
            b: number;
          }
        ).b;
      bytes[table] = sum;
    }
    return { bytes, ...rowsOf((sql) => db.prepare(sql).all() as Record<string, unknown>[]) };
  } finally {
    db.close();
  }
}

function rowsOf(all: (sql: string) => Record<string, unknown>[]): Omit<Measured, 'bytes'> {
  const rows: Record<string, number> = {};
  for (const table of TABLES) rows[table] = Number(all(`SELECT COUNT(*) AS n FROM ${table}`)[0]?.n ?? 0);
  const keptMs = all(`SELECT kept_at - created_at AS ms FROM evidence WHERE state = 'kept'`)
    .map((r) => Number(r.ms))
    .sort((a, b) => a - b);
  const states: Record<string, number> = {};
  for (const r of all('SELECT state, COUNT(*) AS n FROM evidence GROUP BY state'))
    states[String(r.state)] = Number(r.n);
  return { rows, keptMs, states };
}

async function measurePostgres(schema: string): Promise<Measured> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`SET search_path = ${schema}`);
    const bytes: Record<string, number> = {};
    for (const table of TABLES) {
      const { rows } = await client.query<{ b: string }>(
        `SELECT pg_total_relation_size('${schema}.${table}') AS b`,
      );
      bytes[table] = Number(rows[0]?.b ?? 0);
    }
    const cache = new Map<string, Record<string, unknown>[]>();
    for (const sql of [
      ...TABLES.map((t) => `SELECT COUNT(*) AS n FROM ${t}`),
      `SELECT kept_at - created_at AS ms FROM evidence WHERE state = 'kept'`,
      'SELECT state, COUNT(*) AS n FROM evidence GROUP BY state',
    ])
      cache.set(sql, (await client.query(sql)).rows as Record<string, unknown>[]);
    return { bytes, ...rowsOf((sql) => cache.get(sql) ?? []) };
  } finally {
    await client.end();
  }
}

async function growth(store: 'sqlite' | 'postgres', screenshotBytes: number) {
  // Links live 5 minutes, as the upstream's (the sandbox's default at this time scale is 1 s).
  const sandbox = await startSandbox({
    port: 0,
    timeScale: 0.0001,
    apiKeys: [UPSTREAM_KEY],
    screenshotBytes,
    linkTtlMs: 300_000,
  });
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-evidence-'));
  const file = join(dir, 'adapter.db');
  const pgStore = store === 'postgres' ? await pgSchema('bench_evidence') : null;
  const service = await spawnService({
    UPSTREAM_BASE_URL: sandbox.url,
    TENANTS_FILE: writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, 100),
    DATABASE_URL: pgStore?.url ?? `sqlite:${file}`,
    POLL_INTERVAL_MS: '1000',
    SUBMIT_WAIT_MS: '0',
    SUBMIT_RATE_PER_MINUTE: '1000000',
  });
  try {
    const before = pgStore ? await measurePostgres(pgStore.schema) : measureSqlite(file);
    if (RATE > 0) await submitPaced(service.url, CHECKS, RATE);
    else await submitAll(service.url, CHECKS);
    await until(async () => ((await doneCount(service.url)) >= CHECKS ? true : undefined), 600_000, 'checks');
    // Every document decided (none pending), as the store says.
    await until(
      async () => {
        await sleep(500);
        const now = pgStore ? await measurePostgres(pgStore.schema) : measureSqlite(file);
        return (now.rows.evidence ?? 0) >= CHECKS && !now.states.pending ? true : undefined;
      },
      600_000,
      'documents kept',
    );
    await service.stop();
    const after = pgStore ? await measurePostgres(pgStore.schema) : measureSqlite(file);
    const grown = (m: Record<string, number>, b: Record<string, number>) =>
      Object.fromEntries(Object.keys(m).map((k) => [k, (m[k] ?? 0) - (b[k] ?? 0)]));
    const bytes = grown(after.bytes, before.bytes);
    const evidenceBytes = (bytes.evidence ?? 0) + (bytes.evidence_blobs ?? 0);
    return {
      store,
      screenshotBytes: screenshotBytes || 'sandbox (70-byte PNG)',
      checks: CHECKS,
      states: after.states,
      grownBytes: bytes,
      grownRows: grown(after.rows, before.rows),
      evidenceBytesPer1000Checks: Math.round((evidenceBytes * 1000) / CHECKS),
      checkBytesPer1000Checks: Math.round(((bytes.checks ?? 0) * 1000) / CHECKS),
      yearOf50ADayMb: Number((((evidenceBytes / CHECKS) * 50 * 365) / 1e6).toFixed(1)),
      keptAfterMs: {
        p50: quantile(after.keptMs, 0.5),
        p99: quantile(after.keptMs, 0.99),
        max: after.keptMs.at(-1) ?? null,
      },
      sqliteFileBytes: store === 'sqlite' ? statSync(file).size : undefined,
    };
  } finally {
    await service.stop().catch(() => undefined);
    await sandbox.close();
    await pgStore?.drop();
  }
}

/** Documents not yet decided in an SQLite store; 0 for the previous source (no such table). */
function pending(file: string): number {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const table = db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'evidence'`).get();
    if (!table) return 0;
    return (db.prepare(`SELECT COUNT(*) AS n FROM evidence WHERE state = 'pending'`).get() as { n: number })
      .n;
  } finally {
    db.close();
  }
}

async function cpuRun(source: 'current' | 'previous', previous: string) {
  const sandbox = await startSandbox({
    port: 0,
    timeScale: 0.0001,
    apiKeys: [UPSTREAM_KEY],
    linkTtlMs: 300_000,
  });
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-evidence-cpu-'));
  const warmup = Number(process.env.BENCH_WARMUP ?? 1000);
  const service = await spawnService(
    {
      UPSTREAM_BASE_URL: sandbox.url,
      TENANTS_FILE: writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, 100),
      DATABASE_URL: `sqlite:${join(dir, 'adapter.db')}`,
      POLL_INTERVAL_MS: '1000',
      SUBMIT_WAIT_MS: '0',
      SUBMIT_RATE_PER_MINUTE: '1000000',
    },
    source === 'previous' ? [join(previous, 'src/main.ts')] : undefined,
  );
  try {
    const pid = service.child.pid ?? 0;
    const db = join(dir, 'adapter.db');
    await submitAll(service.url, warmup);
    await until(
      async () => ((await doneCount(service.url)) >= warmup ? true : undefined),
      600_000,
      'warm-up',
    );
    // The warm-up's documents kept first: the idle cost is measured idle.
    await until(() => (pending(db) === 0 ? true : undefined), 600_000, 'warm-up documents');
    await sleep(2000);
    const idleBefore = cpuSeconds(pid);
    await sleep(2000);
    const idlePerSecond = (cpuSeconds(pid) - idleBefore) / 2;
    const before = cpuSeconds(pid);
    const started = Date.now();
    await submitAll(service.url, CHECKS);
    await until(
      async () => {
        await sleep(900);
        return (await doneCount(service.url)) >= warmup + CHECKS ? true : undefined;
      },
      600_000,
      'all done',
    );
    // The documents of the measured checks kept: included.
    await until(() => (pending(db) === 0 ? true : undefined), 600_000, 'documents');
    const wall = (Date.now() - started) / 1000;
    const cpu = cpuSeconds(pid) - before - idlePerSecond * wall;
    return { source, cpuMsPerCheck: Number(((cpu * 1000) / CHECKS).toFixed(3)), idlePerSecond };
  } finally {
    await service.stop();
    await sandbox.close();
  }
}

if (process.argv.includes('--cpu')) {
  const previous = process.env.BENCH_PREVIOUS;
  if (!previous) throw new Error('BENCH_PREVIOUS=<checkout of the previous source> is required');
  const pairs = [];
  for (let i = 0; i < Number(process.env.BENCH_PAIRS ?? 3); i += 1) {
    // Alternated, so a change of the machine's load falls on both.
    const order = i % 2 === 0 ? (['current', 'previous'] as const) : (['previous', 'current'] as const);
    const run: Record<string, number> = {};
    for (const source of order) run[source] = (await cpuRun(source, previous)).cpuMsPerCheck;
    pairs.push({ ...run, ratio: Number(((run.current ?? 0) / (run.previous ?? 1)).toFixed(3)) });
  }
  await record(process.env.BENCH_NAME ?? 'evidence-cpu', {
    machine: machine(),
    checks: CHECKS,
    store: 'sqlite',
    pairs,
  });
} else {
  const results = [];
  for (const store of STORES)
    for (const screenshotBytes of SIZES) results.push(await growth(store, screenshotBytes));
  await record(process.env.BENCH_NAME ?? (RATE > 0 ? 'evidence-paced' : 'evidence-growth'), {
    machine: machine(),
    ratePerSecond: RATE || 'bursts of 25',
    results,
  });
}
