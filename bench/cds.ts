/**
 * CDS Hooks (issue 27): the answer time of each hook, p50 and p95, at 20 concurrent callers, on a
 * store holding 10,000 finished checks of the tenant. Target: p95 <= 250 ms on this machine.
 *
 *   npm run bench:cds        (BENCH_REQUESTS=1000 per hook, BENCH_STORED=10000, BENCH_CALLERS=20)
 *
 * - patient-view: the chart of a patient with a stored answer (a card from the store; nothing is
 *   started), with the prefetch inline as EHRs send it.
 * - appointment-book: one new appointment of a new patient per call (a request stored, a check
 *   accepted as $submit accepts it; the portal work runs in the background).
 * Each call carries its own JWT (ES384, a new jti, kept in the store), signed before the timed run
 * so the client's signing is not in the figures. Results: bench/results/cds.json, bench/README.md.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSandbox } from '../src/sandbox/index.js';
import { clientKey } from '../test/support/smart.js';
import { appointment, cdsJwt, hookRequest } from '../test/support/cds.js';
import {
  cpuProfArgs,
  cpuSeconds,
  fillStore,
  machine,
  quantile,
  record,
  seedFinishedRow,
  spawnService,
  uniqueEmiratesId,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const STORED = Number(process.env.BENCH_STORED ?? 10_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1000);
const CALLERS = Number(process.env.BENCH_CALLERS ?? 20);
const ISS = 'https://ehr.bench.example';
const EID = 'http://uae.gov/fhir/identifier/emirates-id';

const log = (message: string) => process.stderr.write(`[cds] ${message}\n`);

const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
const dir = mkdtempSync(join(tmpdir(), 'fea-bench-cds-'));
const key = await clientKey('ES384');
const tenantsFile = writeTenantsFile(dir, 1, UPSTREAM_KEY, 10);
const tenants = JSON.parse(readFileSync(tenantsFile, 'utf8')) as { tenants: Record<string, unknown>[] };
tenants.tenants[0]!.cdsClients = [{ iss: ISS, jwks: { keys: [key.publicJwk] }, fhirServers: [] }];
writeFileSync(tenantsFile, JSON.stringify(tenants));
const env = (db: string) => ({
  UPSTREAM_BASE_URL: sandbox.url,
  TENANTS_FILE: tenantsFile,
  DATABASE_URL: `sqlite:${db}`,
  LOG_LEVEL: 'info',
  PUBLIC_BASE_URL: 'http://localhost:8080',
});

interface HookFigures {
  requests: number;
  non200: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
  perSecond: number;
  cpuMsPerCall: number;
  /** How many cards began with each summary's first two words: what was measured. */
  cards: Record<string, number>;
}

/** Sends the bodies with their tokens from CALLERS callers at once; the latency of each call. */
async function run(
  url: string,
  service: string,
  calls: { token: string; body: unknown }[],
  pid: number,
): Promise<HookFigures> {
  const latencies: number[] = [];
  let non200 = 0;
  let next = 0;
  const cards: Record<string, number> = {};
  const cpuBefore = cpuSeconds(pid);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      for (let i = next++; i < calls.length; i = next++) {
        const call = calls[i]!;
        const t0 = performance.now();
        const res = await fetch(`${url}/cds-services/${service}`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${call.token}`, 'Content-Type': 'application/json' },
          body: JSON.stringify(call.body),
        });
        const answer = (await res.json()) as { cards?: { summary: string }[] };
        latencies.push(performance.now() - t0);
        if (res.status !== 200) non200 += 1;
        for (const card of answer.cards ?? []) {
          const kind = card.summary.split(' ').slice(0, 2).join(' ');
          cards[kind] = (cards[kind] ?? 0) + 1;
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const sorted = latencies.sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    requests: calls.length,
    non200,
    p50Ms: round(quantile(sorted, 0.5)),
    p95Ms: round(quantile(sorted, 0.95)),
    p99Ms: round(quantile(sorted, 0.99)),
    maxMs: round(sorted[sorted.length - 1] ?? 0),
    perSecond: Math.round(calls.length / elapsed),
    cpuMsPerCall: round(((cpuSeconds(pid) - cpuBefore) * 1000) / calls.length),
    cards,
  };
}

/** REQUESTS calls of a hook, each with its own freshly signed JWT. */
async function callsOf(
  service: string,
  body: (i: number) => unknown,
): Promise<{ token: string; body: unknown }[]> {
  return Promise.all(
    Array.from({ length: REQUESTS }, async (_, i) => ({
      token: await cdsJwt(key, { aud: `http://localhost:8080/cds-services/${service}`, iss: ISS }),
      body: body(i),
    })),
  );
}

try {
  const seeded = await seedFinishedRow(dir, env);
  const db = join(dir, 'adapter.db');
  await fillStore(db, seeded, STORED, 1, (i) => ({
    idempotency_key: `urn:example:ehr:eligibility|bench-cds-${i}`,
    request_identifier_value: `bench-cds-${i}`,
    patient_key: `${EID}|${uniqueEmiratesId(i)}`,
    patient_value: uniqueEmiratesId(i),
    reuse_key: null,
  }));
  log(`filled ${STORED} checks`);
  const service = await spawnService(env(db), undefined, cpuProfArgs('cds'));
  const pid = service.child.pid!;
  try {
    // Warm-up: the FHIR definitions and the JIT, on calls not measured.
    await fetch(`${service.url}/ready`);
    for (const warm of await callsOf('eligibility-patient-view', (i) =>
      hookRequest('patient-view', { patient: { emiratesId: uniqueEmiratesId(i % STORED) } }),
    ))
      await fetch(`${service.url}/cds-services/eligibility-patient-view`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${warm.token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(warm.body),
      }).then((r) => r.arrayBuffer());
    const view = await run(
      service.url,
      'eligibility-patient-view',
      await callsOf('eligibility-patient-view', (i) =>
        hookRequest('patient-view', { patient: { emiratesId: uniqueEmiratesId((i * 7919) % STORED) } }),
      ),
      pid,
    );
    log(`patient-view ${JSON.stringify(view)}`);
    const book = await run(
      service.url,
      'eligibility-appointment-book',
      await callsOf('eligibility-appointment-book', (i) =>
        hookRequest('appointment-book', {
          hookInstance: randomUUID(),
          patient: { emiratesId: uniqueEmiratesId(STORED + i) },
          appointments: [appointment(`bench-${i}`)],
        }),
      ),
      pid,
    );
    log(`appointment-book ${JSON.stringify(book)}`);
    await record('cds', {
      machine: machine(),
      stored: STORED,
      callers: CALLERS,
      targetP95Ms: 250,
      patientView: view,
      appointmentBook: book,
    });
  } finally {
    await service.stop();
  }
} finally {
  await sandbox.close();
}
