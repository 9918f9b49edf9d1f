/**
 * Issue 17: a 500-entry batch (POST /fhir, docs/batch-and-reuse.md) against the service as a
 * child process and the sandbox upstream on its own port. Measures the time to the
 * batch-response (target < 1 s), then runs the batch to its end and checks the caps: one
 * create-task per entry, never more than maxInFlight tasks of the clinic in flight at the
 * sandbox (sampled every 20 ms), every entry final. Three rounds, each a new batch of new patients.
 *
 *   npm run bench:batch           (BENCH_STORE=postgres for PostgreSQL; BENCH_ROUNDS=3)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSandbox } from '../src/sandbox/index.js';
import { eligibilityRequest } from '../test/support/requests.js';
import {
  machine,
  pgSchema,
  record,
  spawnService,
  tenantAuth,
  uniqueEmiratesId,
  until,
  writeTenantsFile,
} from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const ENTRIES = 500;
const MAX_IN_FLIGHT = Number(process.env.BENCH_MAX_IN_FLIGHT ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const STORE = process.env.BENCH_STORE === 'postgres' ? 'postgres' : 'sqlite';
const TERMINAL = new Set(['PROCESS_COMPLETE', 'CANCELLED', 'FAILED']);

function batchBody(from: number, count: number): string {
  return JSON.stringify({
    resourceType: 'Bundle',
    type: 'batch',
    entry: Array.from({ length: count }, (_, i) => ({
      request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
      resource: eligibilityRequest({
        emiratesId: uniqueEmiratesId(from + i),
        identifier: `bench-batch-${from + i}`,
      }),
    })),
  });
}

async function main() {
  // timeScale 0.01: a sandbox check takes about 30 ms of upstream time plus the polls.
  const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-batch-'));
  const pgStore = STORE === 'postgres' ? await pgSchema('bench_batch') : null;
  const service = await spawnService({
    UPSTREAM_BASE_URL: sandbox.url,
    TENANTS_FILE: writeTenantsFile(dir, 1, UPSTREAM_KEY, MAX_IN_FLIGHT),
    DATABASE_URL: pgStore?.url ?? `sqlite:${join(dir, 'adapter.db')}`,
    POLL_INTERVAL_MS: '100',
  });
  const headers = { ...tenantAuth(0), 'Content-Type': 'application/fhir+json' };
  const post = async (body: string) => {
    const started = performance.now();
    const res = await fetch(`${service.url}/fhir`, { method: 'POST', headers, body });
    const json = (await res.json()) as { id?: string; entry?: Array<{ response?: { status?: string } }> };
    return { ms: performance.now() - started, status: res.status, json };
  };
  const finished = (id: string) =>
    until(
      async () => {
        const res = await fetch(`${service.url}/fhir/_async/${id}`, { headers: tenantAuth(0) });
        const text = await res.text();
        return res.status === 200
          ? (JSON.parse(text) as { entry: Array<{ resource?: { outcome?: string } }> })
          : undefined;
      },
      300_000,
      'the batch to finish',
    );
  try {
    // Warm-up: the FHIR definitions, the JIT, prepared statements.
    const warm = await post(batchBody(900_000, 20));
    await finished(String(warm.json.id));

    const rounds = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const before = sandbox.control.stats().tasksCreated;
      const body = batchBody(round * ENTRIES, ENTRIES);
      let maxInFlight = 0;
      const sampler = setInterval(() => {
        const running = sandbox.control.tasks().filter((t) => !TERMINAL.has(t.status)).length;
        maxInFlight = Math.max(maxInFlight, running);
      }, 20);
      const accepted = await post(body);
      const started = performance.now();
      const final = await finished(String(accepted.json.id));
      const runSeconds = (performance.now() - started) / 1000;
      clearInterval(sampler);
      const statuses = new Map<string, number>();
      for (const e of accepted.json.entry ?? []) {
        const s = e.response?.status ?? 'none';
        statuses.set(s, (statuses.get(s) ?? 0) + 1);
      }
      rounds.push({
        bodyBytes: Buffer.byteLength(body),
        httpStatus: accepted.status,
        msToBatchResponse: Number(accepted.ms.toFixed(1)),
        entryStatuses: Object.fromEntries(statuses),
        secondsToAllFinal: Number(runSeconds.toFixed(1)),
        complete: final.entry.filter((e) => e.resource?.outcome === 'complete').length,
        createTasks: sandbox.control.stats().tasksCreated - before,
        maxInFlightAtUpstream: maxInFlight,
      });
      process.stdout.write(`${JSON.stringify(rounds.at(-1))}\n`);
    }
    await record(`batch-${STORE}`, {
      machine: machine(),
      store: STORE,
      entries: ENTRIES,
      maxInFlight: MAX_IN_FLIGHT,
      rounds,
    });
  } finally {
    await service.stop();
    await sandbox.close();
    await pgStore?.drop();
  }
}

await main();
