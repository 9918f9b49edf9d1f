/**
 * Figure 2 of issue 7: requests per second of GET /fhir/CoverageEligibilityResponse/{id} for a
 * full found-eligible CER (autocannon, 50 connections), side by side with a bare express 5 app
 * serving the same bytes from memory. Target: at least 0.7 of the bare app's rate.
 *
 *   npm run bench:read            (BENCH_SECONDS=10 BENCH_ROUNDS=3 by default; medians reported)
 *
 * With `--audit` (npm run bench:read:audit) the same read runs against two adapters instead, one
 * recording AuditEvents (AUDIT_EVENTS=on, the default) and one not (off), in interleaved pairs:
 * target: on >= 0.9 x off (docs/auth.md).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSandbox } from '../src/sandbox/index.js';
import { eligibilityRequest } from '../test/support/requests.js';
import type { LoadResult } from './lib.js';
import {
  autocannon,
  cpuProfArgs,
  cpuSeconds,
  machine,
  record,
  spawnService,
  tenantAuth,
  until,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

/** The median of each field over the runs. */
function medianRun(runs: LoadResult[]): LoadResult {
  const median = (pick: (r: LoadResult) => number) =>
    runs.map(pick).sort((a, b) => a - b)[Math.floor(runs.length / 2)] ?? 0;
  return {
    requestsPerSecond: median((r) => r.requestsPerSecond),
    p50Ms: median((r) => r.p50Ms),
    p99Ms: median((r) => r.p99Ms),
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
  };
}

if (process.argv.includes('--audit')) {
  await compareAudit();
  process.exit(0);
}

const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-read-'));
const service = await spawnService(
  {
    UPSTREAM_BASE_URL: sandbox.url,
    TENANTS_FILE: writeTenantsFile(dir, 1, UPSTREAM_KEY, 10),
    DATABASE_URL: process.env.BENCH_DATABASE_URL ?? `sqlite:${join(dir, 'adapter.db')}`,
    POLL_INTERVAL_MS: '50',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    SUBMIT_RATE_PER_MINUTE: '100000',
  },
  undefined,
  cpuProfArgs('read-path'),
);
try {
  const auth = tenantAuth(0);
  const submitted = await fetch(`${service.url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/fhir+json', Prefer: 'wait=30' },
    body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-1' })),
  });
  const location = String(submitted.headers.get('location'));
  const body = await until(
    async () => {
      const res = await fetch(location.replace(/^https?:\/\/[^/]+/, service.url), { headers: auth });
      const text = await res.text();
      return (JSON.parse(text) as { outcome?: string }).outcome === 'complete' ? text : undefined;
    },
    30_000,
    'a complete CER',
  );
  const file = join(dir, 'cer.json');
  writeFileSync(file, body);
  const bare = await spawnService({}, ['bench/bare-server.ts', file]);
  try {
    const path = new URL(location).pathname;
    // Warm-up, then the measured runs, one after the other on the same machine.
    await autocannon(`${service.url}${path}`, auth, 50, 2);
    await autocannon(`${bare.url}${path}`, {}, 50, 2);
    // Several rounds, alternating which goes first, so a busy moment of a shared machine does not
    // fall on one side only; the figures are the medians.
    const adapterRuns: LoadResult[] = [];
    const bareRuns: LoadResult[] = [];
    for (let round = 0; round < rounds; round += 1) {
      if (round % 2 === 0) {
        adapterRuns.push(await autocannon(`${service.url}${path}`, auth, 50, seconds));
        bareRuns.push(await autocannon(`${bare.url}${path}`, {}, 50, seconds));
      } else {
        bareRuns.push(await autocannon(`${bare.url}${path}`, {}, 50, seconds));
        adapterRuns.push(await autocannon(`${service.url}${path}`, auth, 50, seconds));
      }
    }
    const adapter = medianRun(adapterRuns);
    const baseline = medianRun(bareRuns);
    const ratios = adapterRuns.map((a, i) =>
      Number((a.requestsPerSecond / (bareRuns[i]?.requestsPerSecond ?? 1)).toFixed(3)),
    );
    await record('read-path', {
      rounds,
      ratiosPerRound: ratios,
      machine: machine(),
      cerBytes: Buffer.byteLength(body),
      seconds,
      connections: 50,
      logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
      adapter,
      bareExpress: baseline,
      /** The median of the per-round ratios (each round measures both, back to back). */
      ratio: [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)] ?? 0,
      target: 0.7,
    });
  } finally {
    await bare.stop();
  }
} finally {
  await service.stop();
  await sandbox.close();
}

/** A service with one complete CER: its path and the auth header to read it. */
async function serviceWithCer(upstreamUrl: string, env: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-read-'));
  const service = await spawnService(
    {
      UPSTREAM_BASE_URL: upstreamUrl,
      TENANTS_FILE: writeTenantsFile(dir, 1, UPSTREAM_KEY, 10),
      DATABASE_URL: `sqlite:${join(dir, 'adapter.db')}`,
      POLL_INTERVAL_MS: '50',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
      SUBMIT_RATE_PER_MINUTE: '100000',
      ...env,
    },
    undefined,
    cpuProfArgs(`read-path-audit-${env.AUDIT_EVENTS ?? 'default'}`),
  );
  const auth = tenantAuth(0);
  const submitted = await fetch(`${service.url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/fhir+json', Prefer: 'wait=30' },
    body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-1' })),
  });
  const path = new URL(String(submitted.headers.get('location'))).pathname;
  await until(
    async () => {
      const res = await fetch(`${service.url}${path}`, { headers: auth });
      return ((await res.json()) as { outcome?: string }).outcome === 'complete' ? true : undefined;
    },
    30_000,
    'a complete CER',
  );
  return { service, url: `${service.url}${path}`, auth };
}

/** Audit on against audit off: interleaved pairs, the order alternating, medians and per-pair ratios. */
async function compareAudit(): Promise<void> {
  const upstream = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
  const on = await serviceWithCer(upstream.url, { AUDIT_EVENTS: 'on' });
  const off = await serviceWithCer(upstream.url, { AUDIT_EVENTS: 'off' });
  try {
    await autocannon(on.url, on.auth, 50, 2);
    await autocannon(off.url, off.auth, 50, 2);
    const onRuns: LoadResult[] = [];
    const offRuns: LoadResult[] = [];
    // The service's CPU per request (µs), from /proc: on a machine shared with other work the
    // throughput of a run swings with the neighbours' load far more than the CPU a request costs.
    const onCpu: number[] = [];
    const offCpu: number[] = [];
    const measured = async (side: typeof on, runs: LoadResult[], cpu: number[]) => {
      const pid = side.service.child.pid ?? 0;
      const before = cpuSeconds(pid);
      const result = await autocannon(side.url, side.auth, 50, seconds);
      const requests = result.requestsPerSecond * seconds;
      cpu.push(Math.round(((cpuSeconds(pid) - before) * 1e6) / Math.max(1, requests)));
      runs.push(result);
    };
    for (let round = 0; round < rounds; round += 1) {
      if (round % 2 === 0) {
        await measured(on, onRuns, onCpu);
        await measured(off, offRuns, offCpu);
      } else {
        await measured(off, offRuns, offCpu);
        await measured(on, onRuns, onCpu);
      }
    }
    const ratios = onRuns.map((a, i) =>
      Number((a.requestsPerSecond / (offRuns[i]?.requestsPerSecond ?? 1)).toFixed(3)),
    );
    const median = (values: number[]) =>
      [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
    const cpuRatios = onCpu.map((c, i) => Number(((offCpu[i] ?? 0) / Math.max(1, c)).toFixed(3)));
    // Every read was recorded: the AuditEvents of the 'on' service, counted by a search.
    const events = await fetch(`${on.service.url}/fhir/AuditEvent?_count=1&action=R`, { headers: on.auth });
    await record('read-path-audit', {
      rounds,
      seconds,
      connections: 50,
      machine: machine(),
      auditOn: medianRun(onRuns),
      auditOff: medianRun(offRuns),
      ratiosPerRound: ratios,
      ratio: median(ratios),
      /** Service CPU per request (µs), per round, and off/on per round: the throughput ratio a CPU-bound service reaches. */
      cpuUsPerRequestOn: onCpu,
      cpuUsPerRequestOff: offCpu,
      cpuRatiosPerRound: cpuRatios,
      cpuRatio: median(cpuRatios),
      auditSearchStatus: events.status,
      target: 0.9,
    });
  } finally {
    await on.service.stop();
    await off.service.stop();
    await upstream.close();
  }
}
