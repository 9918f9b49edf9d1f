/**
 * Search latency with 100,000 stored checks (issue 14): p50 and p99 of
 * `GET /fhir/CoverageEligibilityResponse?patient=`, `?request.identifier=`, a `_lastUpdated`
 * range holding about 25 checks of the tenant, and `GET /fhir/CoverageEligibilityRequest?identifier=`, over HTTP against the service
 * as a child process on SQLite.
 *
 * The store is filled as bench/startup.ts fills it: one real finished check run by the service,
 * its row copied BENCH_STORED times over 10 tenants (new ids, each with its own patient and
 * request identifier, times spread over the last 20 days). Each search is asked BENCH_REQUESTS
 * times one after the other (after 20 warm-up requests), each time for another check of tenant 0,
 * `_count=20`; every answer is checked to hold what it must.
 *
 *   npx tsx bench/search.ts     (BENCH_STORED=100000 BENCH_REQUESTS=300)
 */
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSandbox } from '../src/sandbox/index.js';
import {
  fillStore,
  machine,
  quantile,
  record,
  seedFinishedRow,
  spawnService,
  tenantAuth,
  writeTenantsFile,
} from './lib.js';
import { emiratesId } from '../test/support/emirates-id.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const STORED = Number(process.env.BENCH_STORED ?? 100_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 300);
const TENANTS = 10;
const EID = 'http://uae.gov/fhir/identifier/emirates-id';
const VISIT = 'urn:example:ehr:eligibility';

const log = (message: string) => process.stderr.write(`[search] ${message}\n`);

const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-search-'));
const tenantsFile = writeTenantsFile(dir, TENANTS, UPSTREAM_KEY, 10);
const env = (db: string) => ({
  UPSTREAM_BASE_URL: sandbox.url,
  TENANTS_FILE: tenantsFile,
  DATABASE_URL: `sqlite:${db}`,
  LOG_LEVEL: 'info',
});

const patientOf = (i: number) => emiratesId(1990, String(1_000_000 + i).slice(1));
const visitOf = (i: number) => `bench-search-${i}`;

try {
  const seeded = await seedFinishedRow(dir, env);
  const db = join(dir, 'adapter.db');
  const started = Date.now();
  const newest = await fillStore(db, seeded, STORED, TENANTS, (i) => ({
    idempotency_key: `${VISIT}|${visitOf(i)}`,
    request_identifier_value: visitOf(i),
    patient_key: `${EID}|${patientOf(i)}`,
    patient_value: patientOf(i),
  }));
  log(
    `filled ${STORED} checks in ${((Date.now() - started) / 1000).toFixed(1)} s, ${(statSync(db).size / 1e9).toFixed(2)} GB`,
  );
  const service = await spawnService(env(db));
  const results: Record<string, unknown> = {};
  try {
    // Rows of tenant 0: i = 0, 10, 20, ...
    const pick = (n: number) => ((n * 7919) % (STORED / TENANTS)) * TENANTS;
    // A window holding about 25 checks of tenant 0 (72 minutes at 100,000 checks over 20 days).
    const width = 25 * TENANTS * Math.floor((20 * 86_400_000) / STORED);
    const windows = Math.floor(STORED / (25 * TENANTS)) - 2;
    const searches: Record<
      string,
      { path: (n: number) => string; expect: (total: number, entries: number) => boolean }
    > = {
      'CER patient=system|value': {
        path: (n) => `/fhir/CoverageEligibilityResponse?patient=${EID}|${patientOf(pick(n))}&_count=20`,
        expect: (total, entries) => total === 1 && entries === 1,
      },
      'CER request.identifier=system|value': {
        path: (n) =>
          `/fhir/CoverageEligibilityResponse?request.identifier=${VISIT}|${visitOf(pick(n))}&_count=20`,
        expect: (total, entries) => total === 1 && entries === 1,
      },
      'CoverageEligibilityRequest identifier=value': {
        path: (n) => `/fhir/CoverageEligibilityRequest?identifier=${visitOf(pick(n))}&_count=20`,
        expect: (total, entries) => total === 1 && entries === 1,
      },
      'CER _lastUpdated range (about 25 checks of the tenant)': {
        path: (n) => {
          const k = (n % windows) + 1;
          const from = new Date(newest - (k + 1) * width).toISOString();
          const to = new Date(newest - k * width).toISOString();
          return `/fhir/CoverageEligibilityResponse?_lastUpdated=ge${from}&_lastUpdated=lt${to}&_count=20`;
        },
        expect: (total, entries) => total > 0 && entries === Math.min(20, total),
      },
    };
    for (const [name, search] of Object.entries(searches)) {
      const times: number[] = [];
      let bytes = 0;
      for (let n = 0; n < REQUESTS + 20; n += 1) {
        const t0 = performance.now();
        const res = await fetch(`${service.url}${search.path(n)}`, { headers: tenantAuth(0) });
        const text = await res.text();
        const took = performance.now() - t0;
        const bundle = JSON.parse(text) as { total?: number; entry?: unknown[] };
        if (res.status !== 200 || !search.expect(bundle.total ?? -1, bundle.entry?.length ?? 0))
          throw new Error(
            `${name}: ${res.status} total ${String(bundle.total)} entries ${bundle.entry?.length}`,
          );
        if (n >= 20) {
          times.push(took);
          bytes += text.length;
        }
      }
      times.sort((x, y) => x - y);
      results[name] = {
        p50Ms: Number(quantile(times, 0.5).toFixed(1)),
        p99Ms: Number(quantile(times, 0.99).toFixed(1)),
        maxMs: Number((times.at(-1) ?? 0).toFixed(1)),
        meanBytes: Math.round(bytes / times.length),
      };
      log(`${name}: ${JSON.stringify(results[name])}`);
    }
  } finally {
    await service.stop();
  }
  await record('search', {
    machine: machine(),
    storedChecks: STORED,
    tenants: TENANTS,
    requestsPerSearch: REQUESTS,
    storeBytes: statSync(db).size,
    searches: results,
    note: 'sequential GETs over HTTP on localhost to the service (tsx) on SQLite, after 20 warm-up requests each; latency includes the Bundle with its full CERs (about 40 KB each)',
  });
} finally {
  await sandbox.close();
}
