/**
 * Shared pieces of the benchmarks: the service as a child process (as in production), the
 * sandbox upstream in this process, autocannon as a separate load process, and CPU time of a
 * process read from /proc (user + sys, not wall time).
 */
import { execFile } from 'node:child_process';
import { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { promisify } from 'node:util';
import pg from 'pg';
import * as prettier from 'prettier';
import { spawnService, tenantAuth } from '../test/support/process.js';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { openStore } from '../src/checks/store/open.js';
import { join } from 'node:path';
import { eligibilityRequest } from '../test/support/requests.js';
import type { CerContext } from '../src/mapping/types.js';
import { emiratesId } from '../test/support/emirates-id.js';

export { logSummary, spawnService, tenantAuth, writeTenantsFile } from '../test/support/process.js';
export type { ServiceProcess } from '../test/support/process.js';
export { until } from '../test/support/until.js';

const run = promisify(execFile);

/** A socket that takes every write and answers nothing (a request answered in process). */
class Sink extends Duplex {
  override _write(_chunk: unknown, _encoding: BufferEncoding, callback: () => void): void {
    callback();
  }

  override _read(): void {}
}

/**
 * One GET through a request handler (the service's express app) on a mock socket, without the
 * network; resolves with the status once the answer is finished.
 */
export function getInProcess(
  handle: (req: IncomingMessage, res: ServerResponse) => void,
  path: string,
  headers: Record<string, string>,
): Promise<number> {
  return new Promise((done) => {
    const socket = new Sink() as unknown as Socket;
    const req = new IncomingMessage(socket);
    req.method = 'GET';
    req.url = path;
    req.httpVersionMajor = 1;
    req.httpVersionMinor = 1;
    req.httpVersion = '1.1';
    req.headers = { host: 'localhost', connection: 'keep-alive', ...headers };
    req.complete = true;
    req.push(null);
    const res = new ServerResponse(req);
    res.assignSocket(socket);
    res.on('finish', () => done(res.statusCode));
    handle(req, res);
  });
}

/**
 * One `$submit` of the benches' found-eligible body (a new request identifier each time, one
 * patient for all) for a tenant, never answered from a recent check (`Cache-Control: no-cache`).
 */
export async function submitOnce(url: string, tenant: number): Promise<number> {
  const res = await fetch(`${url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { ...tenantAuth(tenant), 'Content-Type': 'application/fhir+json', 'Cache-Control': 'no-cache' },
    body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' })),
  });
  await res.arrayBuffer();
  return res.status;
}

/** CPU seconds (user + sys) a process has used, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15 of stat)
  return ticks / 100; // USER_HZ is 100 on Linux
}

/** Resident set size of a process in MB, from /proc/<pid>/status. */
export function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match?.[1] ? Number(match[1]) / 1024 : 0;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

/** Runs the autocannon CLI (its own process) and reads its JSON summary. */
export async function autocannon(
  url: string,
  headers: Record<string, string>,
  connections = 50,
  seconds = 10,
): Promise<LoadResult> {
  const args = ['autocannon', '-j', '-c', String(connections), '-d', String(seconds)];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
  args.push(url);
  const { stdout } = await run('npx', args, { maxBuffer: 10 * 1024 * 1024 });
  const r = JSON.parse(stdout) as {
    requests: { average: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
  };
  return {
    requestsPerSecond: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
  };
}

/**
 * Writes a result file under bench/results/ and prints it. The file is formatted with the
 * project's prettier settings, so `npm run format:check` stays clean after a bench run.
 */
export async function record(name: string, result: unknown): Promise<void> {
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  const file = new URL(`./results/${name}.json`, import.meta.url);
  const json = JSON.stringify({ date: new Date().toISOString(), ...(result as object) }, null, 2);
  const options = (await prettier.resolveConfig(file)) ?? {};
  const text = await prettier.format(json, { ...options, parser: 'json' });
  writeFileSync(file, text);
  process.stdout.write(text);
}

/** Waits `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Peak resident set size of a process in MB (VmHWM, kept by the kernel), from /proc/<pid>/status. */
export function peakRssMb(pid: number): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match?.[1] ? Number(match[1]) / 1024 : 0;
}

/** The machine a result was measured on. */
export function machine(): {
  cpus: number;
  cpuModel: string;
  memMb: number;
  node: string;
  loadavg: number[];
} {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memMb: Math.round(totalmem() / 1024 / 1024),
    node: process.version,
    loadavg: loadavg().map((n) => Number(n.toFixed(2))),
  };
}

/**
 * Node arguments that write CPU profiles of a spawned service when BENCH_CPU_PROF is set to a
 * directory: one file per thread (the main thread and tsx's loader worker) under
 * <dir>/<name>-<time>/, written when the process exits (also after SIGTERM -> process.exit).
 * The largest file is the main thread's.
 */
export function cpuProfArgs(name: string): string[] {
  // BENCH_NODE_ARGS: more flags for the service's node (e.g. --trace-gc for the live heap).
  const extra = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const base = process.env.BENCH_CPU_PROF;
  if (!base) return extra;
  const dir = `${base}/${name}-${Date.now()}`;
  mkdirSync(dir, { recursive: true });
  return [...extra, '--cpu-prof', '--cpu-prof-dir', dir];
}

/** An Emirates ID that is unique per n and picks the sandbox's default-eligible scenario. */
export function uniqueEmiratesId(n: number): string {
  return emiratesId(1990, 1_000_000 + n);
}

/** The PostgreSQL server of the benchmarks (as the tests use it). */
export const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Creates a fresh schema; returns the DATABASE_URL that uses it and a function that drops it. */
export async function pgSchema(
  prefix: string,
): Promise<{ url: string; schema: string; drop: () => Promise<void> }> {
  const schema = `${prefix}_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    schema,
    drop: async () => {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP SCHEMA ${schema} CASCADE`);
      await client.end();
    },
  };
}

export interface Histogram {
  /** Upper bounds (seconds) and cumulative counts, +Inf last. */
  buckets: Array<{ le: number; count: number }>;
  count: number;
  sum: number;
}

/** Reads one (unlabelled) Prometheus histogram from a /metrics text. */
export function parseHistogram(text: string, name: string): Histogram {
  const buckets: Array<{ le: number; count: number }> = [];
  let count = 0;
  let sum = 0;
  for (const line of text.split('\n')) {
    const bucket = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)`).exec(line);
    if (bucket?.[1] && bucket[2]) {
      buckets.push({ le: bucket[1] === '+Inf' ? Infinity : Number(bucket[1]), count: Number(bucket[2]) });
    }
    const c = new RegExp(`^${name}_count (\\S+)`).exec(line);
    if (c?.[1]) count = Number(c[1]);
    const s = new RegExp(`^${name}_sum (\\S+)`).exec(line);
    if (s?.[1]) sum = Number(s[1]);
  }
  return { buckets: buckets.sort((a, b) => a.le - b.le), count, sum };
}

/** Histograms of several processes with the same bucket bounds, summed (as PromQL's sum by (le)). */
export function sumHistograms(histograms: Histogram[]): Histogram {
  const first = histograms[0] ?? { buckets: [], count: 0, sum: 0 };
  return {
    buckets: first.buckets.map((b, i) => ({
      le: b.le,
      count: histograms.reduce((total, h) => total + (h.buckets[i]?.count ?? 0), 0),
    })),
    count: histograms.reduce((total, h) => total + h.count, 0),
    sum: histograms.reduce((total, h) => total + h.sum, 0),
  };
}

/**
 * A quantile of a Prometheus histogram, linearly interpolated inside its bucket (as PromQL's
 * histogram_quantile does); the lowest bucket starts at 0. Infinity when it falls in +Inf.
 */
export function histogramQuantile(h: Histogram, q: number): number {
  if (h.count === 0) return 0;
  const rank = q * h.count;
  let lowerLe = 0;
  let lowerCount = 0;
  for (const b of h.buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return Infinity;
      const inBucket = b.count - lowerCount;
      return inBucket === 0 ? b.le : lowerLe + ((b.le - lowerLe) * (rank - lowerCount)) / inBucket;
    }
    lowerLe = b.le;
    lowerCount = b.count;
  }
  return Infinity;
}

/** Fraction of observations at or under a bucket bound (exact at bucket bounds). */
export function histogramFractionAtMost(h: Histogram, le: number): number {
  const b = h.buckets.find((x) => x.le === le);
  return b && h.count > 0 ? b.count / h.count : 0;
}

/** GET /metrics of a service (no token in the benchmarks). */
export async function scrape(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`);
  return res.text();
}

/** Number of a tenant's checks with a given CER outcome (one count-only search). */
export async function countOutcome(url: string, tenant: number, outcome?: string): Promise<number> {
  const query = outcome ? `outcome=${outcome}&_count=0` : '_count=0';
  const res = await fetch(`${url}/fhir/CoverageEligibilityResponse?${query}`, {
    headers: tenantAuth(tenant),
  });
  if (res.status !== 200) throw new Error(`search answered ${res.status}`);
  return ((await res.json()) as { total?: number }).total ?? 0;
}

export interface Submitted {
  n: number;
  tenant: number;
  /** The check id (from Location), or null when $submit failed. */
  id: string | null;
  status: number;
}

/**
 * Submits checks n = from .. from+count-1 through $submit (check n goes to tenant n mod
 * tenants, with its own Emirates ID and request identifier), `concurrency` at a time.
 * A refused connection or a non-200 answer is recorded, not thrown (drills kill services).
 */
export async function submitChecks(
  urls: string[],
  options: { from?: number; count: number; tenants: number; concurrency?: number },
): Promise<Submitted[]> {
  const from = options.from ?? 0;
  const out: Submitted[] = new Array<Submitted>(options.count);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next;
      next += 1;
      if (i >= options.count) return;
      const n = from + i;
      const tenant = n % options.tenants;
      const url = urls[n % urls.length] ?? '';
      const body = eligibilityRequest({ emiratesId: uniqueEmiratesId(n), identifier: `bench-${n}` });
      try {
        const res = await fetch(`${url}/fhir/CoverageEligibilityRequest/$submit`, {
          method: 'POST',
          headers: { ...tenantAuth(tenant), 'Content-Type': 'application/fhir+json' },
          body: JSON.stringify(body),
        });
        await res.arrayBuffer();
        const location = res.headers.get('location');
        const id = res.status === 200 && location ? (location.split('/').pop() ?? null) : null;
        out[i] = { n, tenant, id, status: res.status };
      } catch {
        out[i] = { n, tenant, id: null, status: 0 };
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 20 }, worker));
  return out;
}

/** Stored checks by state (sum over tenants) from the service's `checks` gauge. */
export function checksByState(metricsText: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metricsText.split('\n')) {
    const m = /^checks\{[^}]*state="([^"]+)"[^}]*\} (\S+)/.exec(line);
    if (m?.[1] && m[2]) out[m[1]] = (out[m[1]] ?? 0) + Number(m[2]);
  }
  return out;
}

/**
 * Checks that have their answer, from a /metrics text: done, or ended early while the row still
 * holds its tenant slot (an ambiguous create-task keeps `creating` for one check timeout, with an
 * error CER already given). The same rule as `isAnswered` in src/checks/store/check-store.ts.
 */
export function answeredChecks(metricsText: string): number {
  let total = 0;
  for (const line of metricsText.split('\n')) {
    const m = /^checks\{([^}]*)\} (\S+)/.exec(line);
    if (!m?.[1] || !m[2]) continue;
    const state = /state="([^"]+)"/.exec(m[1])?.[1];
    const outcome = /outcome="([^"]+)"/.exec(m[1])?.[1];
    if (state === 'done' || (outcome !== undefined && outcome !== 'queued')) total += Number(m[2]);
  }
  return total;
}

/** Sums of a counter or histogram-count family by the values of one label, from a /metrics text. */
export function sumByLabel(
  metricsText: string,
  metric: string,
  label: string,
  where: Record<string, string> = {},
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of metricsText.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(where).some(([k, v]) => labels[k] !== v)) continue;
    const key = labels[label] ?? '';
    out[key] = (out[key] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return out;
}

/** A gauge without labels (e.g. nodejs_eventloop_lag_seconds), or NaN. */
export function gauge(metricsText: string, metric: string): number {
  const m = new RegExp(`^${metric} (\\S+)`, 'm').exec(metricsText);
  return m?.[1] ? Number(m[1]) : Number.NaN;
}

/**
 * One real finished check, as the service stores it: a found-eligible check run by a service on
 * its own SQLite file in `dir`, read back as its row (the benchmarks that need a large store copy it).
 */
export async function seedFinishedRow(
  dir: string,
  env: (db: string) => Record<string, string>,
): Promise<Record<string, unknown>> {
  const db = join(dir, 'seed.db');
  const service = await spawnService(env(db));
  try {
    const res = await fetch(`${service.url}/fhir/CoverageEligibilityRequest/$submit`, {
      method: 'POST',
      headers: { ...tenantAuth(0), 'Content-Type': 'application/fhir+json', Prefer: 'wait=30' },
      body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' })),
    });
    const cer = (await res.json()) as { outcome?: string };
    if (cer.outcome !== 'complete') throw new Error(`seed check ended ${String(cer.outcome)}`);
  } finally {
    await service.stop();
  }
  const sqlite = new Database(db, { readonly: true });
  const row = sqlite.prepare(`SELECT * FROM checks WHERE state = 'done'`).get() as Record<string, unknown>;
  sqlite.close();
  return row;
}

/**
 * Fills a new SQLite store at `path` with `count` finished checks, copies of `row` spread over the
 * last 20 days (nothing for the 30-day retention to purge) and over `tenants` tenants, each with
 * its own id, task id and the columns `perRow` gives it. Returns the time of the newest.
 */
export async function fillStore(
  path: string,
  row: Record<string, unknown>,
  count: number,
  tenants: number,
  perRow: (i: number) => Record<string, unknown>,
): Promise<number> {
  const store = await openStore(`sqlite:${path}`);
  await store.migrate();
  await store.close();
  const sqlite = new Database(path);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = OFF');
  const columns = Object.keys(row);
  const insert = sqlite.prepare(
    `INSERT INTO checks (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`,
  );
  const oldId = String(row.id);
  const now = Date.now();
  const spacingMs = Math.floor((20 * 86_400_000) / count);
  const batch = sqlite.transaction((from: number, to: number) => {
    for (let i = from; i < to; i += 1) {
      const id = randomUUID();
      const swap = (value: unknown) => (typeof value === 'string' ? value.split(oldId).join(id) : value);
      const at = now - (count - i) * spacingMs;
      insert.run({
        ...row,
        ...perRow(i),
        id,
        tenant_id: `t${i % tenants}`,
        upstream_task_id: randomUUID(),
        request: swap(row.request),
        cer: swap(row.cer),
        created_at: at,
        updated_at: at,
        next_run_at: at,
        deadline_at: at + 300_000,
      });
    }
  });
  for (let i = 0; i < count; i += 5000) batch(i, Math.min(count, i + 5000));
  sqlite.pragma('wal_checkpoint(TRUNCATE)');
  sqlite.close();
  return now - spacingMs;
}

/** CPU (user + system) per call of `work`, in ms, over `iterations` calls after `warmup` calls. */
export function cpuPerCall(work: () => unknown, iterations: number, warmup = 0): number {
  for (let i = 0; i < warmup; i += 1) work();
  const before = process.cpuUsage();
  for (let i = 0; i < iterations; i += 1) work();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / iterations;
}

/** The mapping context of the in-process mapping benches: a Daman check, or a search-all. */
export function benchCerContext(isSearchAll = false): CerContext {
  return {
    checkId: '0b6f7a52-3c1d-4e8f-9a2b-5c6d7e8f9a01',
    patient: { reference: 'Patient/p1' },
    insurer: isSearchAll
      ? { display: 'All payers' }
      : { identifier: { system: 'urn:payer', value: 'DAMAN' } },
    request: {
      resourceType: 'CoverageEligibilityRequest',
      status: 'active',
      purpose: isSearchAll ? ['discovery'] : ['benefits'],
      patient: { reference: 'Patient/p1' },
      created: '2026-11-24',
      insurer: { display: 'Daman' },
    },
    isSearchAll,
    baseUrl: 'http://localhost:8080',
    now: new Date().toISOString(),
  };
}

/** A bench's progress line on stderr, `[name HH:MM:SS] message` (stdout is the result). */
export function progressLog(name: string): (message: string) => void {
  return (message) =>
    process.stderr.write(`[${name} ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** The q-quantile (0..1) of an ascending list, by nearest rank below; 0 for an empty list. */
export function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}
