/**
 * Figure 4 of issue 7: time from process start to the first `GET /ready` 200, with a SQLite
 * store of 100,000 finished checks. Target: under 1 s.
 *
 * The store is filled with copies of one real finished check: the service runs one
 * found-eligible check against the sandbox, then its row is copied 100,000 times (new ids,
 * idempotency keys, task ids and times spread over the last days, ids inside the request and
 * CER JSON replaced) by a bulk INSERT through better-sqlite3 into a store migrated by openStore.
 * Start-up is measured three times with that store and three times with an empty store (the
 * cost of node + tsx + modules alone), the page cache warm in both cases. For comparison it is
 * also measured with the TypeScript compiled ahead of time (tsc -p tsconfig.build.json into a
 * temporary directory, run as plain `node dist/main.js`, no tsx).
 *
 *   npm run bench:startup     (BENCH_STORED=100000 BENCH_RUNS=3)
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSandbox } from '../src/sandbox/index.js';
import {
  cpuProfArgs,
  machine,
  record,
  fillStore,
  seedFinishedRow,
  sleep,
  spawnService,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const STORED = Number(process.env.BENCH_STORED ?? 100_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const TENANTS = 10;
/** How long after /ready the first run of each variant watches GET /health for stalls. */
const WATCH_MS = Number(process.env.BENCH_WATCH_MS ?? 6000);

const log = (message: string) => process.stderr.write(`[startup] ${message}\n`);

const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-startup-'));
const tenantsFile = writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, 10);
const env = (db: string) => ({
  UPSTREAM_BASE_URL: sandbox.url,
  TENANTS_FILE: tenantsFile,
  DATABASE_URL: `sqlite:${db}`,
  LOG_LEVEL: 'info',
});

/** The service compiled by tsc into a temporary directory (dist/, with mappings/ and node_modules/ linked). */
function compile(): string {
  const root = mkdtempSync(join(tmpdir(), 'fea-bench-build-'));
  const repo = new URL('..', import.meta.url).pathname;
  execFileSync(process.execPath, [
    join(repo, 'node_modules/typescript/bin/tsc'),
    '-p',
    join(repo, 'tsconfig.build.json'),
    '--outDir',
    join(root, 'dist'),
  ]);
  symlinkSync(join(repo, 'node_modules'), join(root, 'node_modules'));
  symlinkSync(join(repo, 'mappings'), join(root, 'mappings'));
  copyFileSync(join(repo, 'package.json'), join(root, 'package.json'));
  return root;
}

/** `node <root>/dist/main.js`, resolved once it logs 'listening'. */
async function spawnCompiled(root: string, db: string): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [...cpuProfArgs('startup-compiled'), join(root, 'dist/main.js')], {
    cwd: root,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env(db) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('compiled service did not start')), 20_000);
    child.stdout.on('data', (chunk: Buffer) => {
      const match = /"url":"([^"]+)".*"message":"listening"|"message":"listening".*?"url":"([^"]+)"/.exec(
        chunk.toString(),
      );
      const found = match?.[1] ?? match?.[2];
      if (found) {
        clearTimeout(timer);
        resolve(found);
      }
    });
  });
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Process start to the first /ready 200, and to the 'listening' line. */
async function timeStartup(
  db: string,
  label: string,
  compiledRoot?: string,
  watchMs = 0,
): Promise<{ listeningMs: number; readyMs: number; slowestHealth?: { ms: number; atMs: number } }> {
  const t0 = performance.now();
  const service = compiledRoot
    ? await spawnCompiled(compiledRoot, db)
    : await spawnService(env(db), undefined, cpuProfArgs(`startup-${label}`));
  const listeningMs = performance.now() - t0;
  try {
    for (;;) {
      const res = await fetch(`${service.url}/ready`).catch(() => null);
      if (res?.status === 200) break;
      await res?.arrayBuffer();
      await sleep(5);
    }
    const readyMs = Math.round(performance.now() - t0);
    if (watchMs <= 0) return { listeningMs: Math.round(listeningMs), readyMs };
    // After /ready: the slowest GET /health in the next seconds (work deferred past start-up,
    // e.g. loading the FHIR definitions, blocks the event loop then).
    let slowest = { ms: 0, atMs: 0 };
    while (performance.now() - t0 < readyMs + watchMs) {
      const sent = performance.now();
      await (await fetch(`${service.url}/health`)).arrayBuffer();
      const took = performance.now() - sent;
      if (took > slowest.ms) slowest = { ms: Math.round(took), atMs: Math.round(sent - t0) };
      await sleep(50);
    }
    return { listeningMs: Math.round(listeningMs), readyMs, slowestHealth: slowest };
  } finally {
    await service.stop();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

try {
  const seeded = await seedFinishedRow(dir, env);
  const rowBytes = ['request', 'upstream_request', 'envelope', 'cer'].reduce(
    (n, c) => n + (typeof seeded[c] === 'string' ? Buffer.byteLength(seeded[c]) : 0),
    0,
  );
  const full = join(dir, 'adapter.db');
  const fillStarted = Date.now();
  await fillStore(full, seeded, STORED, TENANTS, (i) => ({
    idempotency_key: `urn:example:ehr:eligibility|bench-startup-${i}`,
    request_identifier_value: `bench-startup-${i}`,
  }));
  const fillSeconds = (Date.now() - fillStarted) / 1000;
  log(`filled ${STORED} checks in ${fillSeconds.toFixed(1)} s, ${(statSync(full).size / 1e9).toFixed(2)} GB`);
  const empty = join(dir, 'empty.db');
  const compiled = compile();
  const emptyRuns = [];
  const fullRuns = [];
  const compiledEmptyRuns = [];
  const compiledFullRuns = [];
  // Alternate, so slow moments of a shared machine hit all variants.
  for (let i = 0; i < RUNS; i += 1) {
    const watch = i === 0 ? WATCH_MS : 0; // first run of each: watch the seconds after /ready
    emptyRuns.push(await timeStartup(empty, 'empty', undefined, watch));
    fullRuns.push(await timeStartup(full, 'full', undefined, watch));
    compiledEmptyRuns.push(await timeStartup(empty, 'compiled-empty', compiled, watch));
    compiledFullRuns.push(await timeStartup(full, 'compiled-full', compiled, watch));
    log(
      `run ${i + 1}: tsx empty ${JSON.stringify(emptyRuns.at(-1))} full ${JSON.stringify(fullRuns.at(-1))}; ` +
        `compiled empty ${JSON.stringify(compiledEmptyRuns.at(-1))} full ${JSON.stringify(compiledFullRuns.at(-1))}`,
    );
  }
  const readyMs = median(fullRuns.map((r) => r.readyMs));
  await record('startup', {
    machine: machine(),
    storedChecks: STORED,
    storeBytes: statSync(full).size,
    jsonBytesPerCheck: rowBytes,
    fillSeconds: Number(fillSeconds.toFixed(1)),
    runs: RUNS,
    emptyStore: { readyMsMedian: median(emptyRuns.map((r) => r.readyMs)), runs: emptyRuns },
    fullStore: { readyMsMedian: readyMs, runs: fullRuns },
    compiledJs: {
      emptyStore: { readyMsMedian: median(compiledEmptyRuns.map((r) => r.readyMs)), runs: compiledEmptyRuns },
      fullStore: { readyMsMedian: median(compiledFullRuns.map((r) => r.readyMs)), runs: compiledFullRuns },
    },
    targetMs: 1000,
    met: readyMs < 1000,
    note: 'process start (spawn of node --import tsx src/main.ts) to the first GET /ready 200; page cache warm. slowestHealth (first run of each variant): the slowest GET /health, polled every 50 ms for BENCH_WATCH_MS after /ready, and when it was sent (ms after process start)',
  });
} finally {
  await sandbox.close();
}
