/**
 * Figure 2 of issue 7: requests per second of GET /fhir/CoverageEligibilityResponse/{id} for a
 * full found-eligible CER (autocannon, 50 connections), side by side with a bare express 5 app
 * serving the same bytes from memory. Target: at least 0.8 of the bare app's rate (issue 19).
 *
 *   npm run bench:read            (BENCH_SECONDS=10 BENCH_ROUNDS=3 by default; medians reported)
 *   BENCH_PREVIOUS=<checkout> npm run bench:read     (the previous source as a third side)
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

await compareBare();

/**
 * The adapter against the bare app, in rounds, the order rotating; with BENCH_PREVIOUS=<checkout>
 * (a copy of the previous source with the same node_modules) the previous source's service as a
 * third side, so a change is measured against what it replaces in the same run. Beside req/s, each
 * side's CPU per request (µs, utime + stime from /proc), steadier than req/s on a shared machine.
 */
async function compareBare(): Promise<void> {
  const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
  const previous = process.env.BENCH_PREVIOUS;
  const adapter = await serviceWithCer(sandbox.url, {}, undefined, cpuProfArgs('read-path'));
  const before = previous
    ? await serviceWithCer(
        sandbox.url,
        {},
        [join(previous, 'src/main.ts')],
        cpuProfArgs('read-path-previous'),
      )
    : undefined;
  try {
    const body = await (await fetch(adapter.url, { headers: adapter.auth })).text();
    const file = join(mkdtempSync(join(tmpdir(), 'fea-bench-read-')), 'cer.json');
    writeFileSync(file, body);
    const bareService = await spawnService({}, ['bench/bare-server.ts', file]);
    try {
      const bare = {
        service: bareService,
        url: `${bareService.url}${new URL(adapter.url).pathname}`,
        auth: {},
      };
      const sides = [adapter, ...(before ? [before] : []), bare];
      // Warm-up, then the measured runs, one after the other on the same machine.
      for (const side of sides) await autocannon(side.url, side.auth, 50, 2);
      // Several rounds, rotating which goes first, so a busy moment of a shared machine does not
      // fall on one side only; the figures are the medians.
      const runs = sides.map(() => [] as LoadResult[]);
      const cpu = sides.map(() => [] as number[]);
      for (let round = 0; round < rounds; round += 1) {
        for (let k = 0; k < sides.length; k += 1) {
          const i = (round + k) % sides.length;
          const side = sides[i];
          if (!side) continue;
          const pid = side.service.child.pid ?? 0;
          const cpuBefore = cpuSeconds(pid);
          const result = await autocannon(side.url, side.auth, 50, seconds);
          const requests = result.requestsPerSecond * seconds;
          cpu[i]?.push(Math.round(((cpuSeconds(pid) - cpuBefore) * 1e6) / Math.max(1, requests)));
          runs[i]?.push(result);
        }
      }
      const bareRuns = runs[sides.length - 1] ?? [];
      const ratiosOf = (sideRuns: LoadResult[]) =>
        sideRuns.map((a, i) =>
          Number((a.requestsPerSecond / (bareRuns[i]?.requestsPerSecond ?? 1)).toFixed(3)),
        );
      const median = (values: number[]) =>
        [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
      const ratios = ratiosOf(runs[0] ?? []);
      const previousRatios = before ? ratiosOf(runs[1] ?? []) : undefined;
      await record('read-path', {
        rounds,
        ratiosPerRound: ratios,
        machine: machine(),
        cerBytes: Buffer.byteLength(body),
        seconds,
        connections: 50,
        logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
        adapter: medianRun(runs[0] ?? []),
        bareExpress: medianRun(bareRuns),
        /** Service CPU per request (µs), per round. */
        cpuUsPerRequest: cpu[0],
        cpuUsPerRequestBare: cpu[sides.length - 1],
        ...(before
          ? {
              previous: {
                source: previous,
                run: medianRun(runs[1] ?? []),
                ratiosPerRound: previousRatios,
                ratio: median(previousRatios ?? []),
                cpuUsPerRequest: cpu[1],
              },
            }
          : {}),
        /** The median of the per-round ratios (each round measures both, back to back). */
        ratio: median(ratios),
        target: 0.8,
      });
    } finally {
      await bareService.stop();
    }
  } finally {
    await adapter.service.stop();
    await before?.service.stop();
    await sandbox.close();
  }
}

/** A service with one complete CER: its path and the auth header to read it. */
async function serviceWithCer(
  upstreamUrl: string,
  env: Record<string, string>,
  script?: string[],
  nodeArgs: string[] = [],
) {
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
    script,
    nodeArgs.length > 0 ? nodeArgs : cpuProfArgs(`read-path-audit-${env.AUDIT_EVENTS ?? 'default'}`),
  );
  const auth = tenantAuth(0);
  const submitted = await fetch(`${service.url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/fhir+json', Prefer: 'wait=30' },
    body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' })),
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
