/**
 * Figure 2's read path in process, without the network: the service's express app answers GET
 * /fhir/CoverageEligibilityResponse/{id} of a stored found-eligible CER on mock sockets (50 in
 * flight, as the bench's connections), and the CPU of each block of reads is taken with
 * process.cpuUsage. With BENCH_PREVIOUS=<checkout> (the previous source, same node_modules) both
 * sources run in this one process, in alternating blocks, so a busy machine weighs on both alike;
 * the figure is the median of the per-block differences.
 *
 *   npx tsx bench/read-in-process.ts > /dev/null                       (log lines to stdout)
 *   BENCH_PREVIOUS=/tmp/prev npx tsx bench/read-in-process.ts > /dev/null
 *
 * With BENCH_AUDIT=pair the two sides are this source with the audit trail on and off (issue 18:
 * what recording a read's AuditEvent costs, the store's batched writes included); BENCH_SOURCE
 * measures another checkout instead of this one.
 *
 * BENCH_BLOCK (2000 reads) and BENCH_ROUNDS (30) set the blocks. Results go to stderr and
 * bench/results/read-in-process.json. Not the network: the socket writes and the request log's
 * write to a pipe are not in it (bench/README.md, figure 2).
 */
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Express } from 'express';
import type * as LogModule from '../src/log.js';
import type * as ServerModule from '../src/server.js';
import { startSandbox } from '../src/sandbox/index.js';
import { testConfig, TENANT_A_KEY, UPSTREAM_KEY } from '../test/support/harness.js';
import { eligibilityRequest } from '../test/support/requests.js';
import { getInProcess, machine, record } from './lib.js';

/** The source measured: this checkout, or BENCH_SOURCE (another checkout, same node_modules). */
const ROOT = resolve(process.env.BENCH_SOURCE ?? fileURLToPath(new URL('..', import.meta.url)));
const block = Number(process.env.BENCH_BLOCK ?? 2000);
const rounds = Number(process.env.BENCH_ROUNDS ?? 30);
const previous = process.env.BENCH_PREVIOUS;
const auditPair = process.env.BENCH_AUDIT === 'pair';
const auth = `Bearer ${TENANT_A_KEY}`;

interface Side {
  source: string;
  app: Express;
  path: string;
  stop: () => Promise<void>;
  perBlock: number[];
}

/** One read through the app; resolves with the status once the answer is finished. */
function read(app: Express, path: string): Promise<number> {
  return getInProcess(app, path, { authorization: auth });
}

async function reads(side: Side, count: number): Promise<void> {
  let started = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (started < count) {
        started += 1;
        const status = await read(side.app, side.path);
        if (status !== 200) throw new Error(`${side.source}: status ${status}`);
      }
    }),
  );
}

const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
const sides: Side[] = [];
const plan = auditPair
  ? [
      { source: ROOT, label: 'audit on', auditEvents: true },
      { source: ROOT, label: 'audit off', auditEvents: false },
    ]
  : [ROOT, ...(previous ? [resolve(previous)] : [])].map((source) => ({
      source,
      label: source,
      auditEvents: true,
    }));
for (const { source, label, auditEvents } of plan) {
  // Each source's own modules (a checkout elsewhere is a module graph of its own).
  const server = (await import(join(source, 'src/server.ts'))) as typeof ServerModule;
  const log = (await import(join(source, 'src/log.ts'))) as typeof LogModule;
  const running = await server.startServer(
    { ...testConfig(sandbox.url), logLevel: 'info', auditEvents },
    log.createLogger('info'),
  );
  const submitted = await fetch(`${running.url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { Authorization: auth, 'Content-Type': 'application/fhir+json', Prefer: 'wait=30' },
    body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' })),
  });
  const cer = (await submitted.json()) as { outcome?: string };
  if (cer.outcome !== 'complete') throw new Error(`${source}: the check ended ${String(cer.outcome)}`);
  const path = new URL(String(submitted.headers.get('location'))).pathname;
  sides.push({ source: label, app: running.app, path, stop: () => running.stop(), perBlock: [] });
}
try {
  for (const side of sides) await reads(side, 5000); // warm-up
  for (let round = 0; round < rounds; round += 1) {
    for (let k = 0; k < sides.length; k += 1) {
      const side = sides[(round + k) % sides.length];
      if (!side) continue;
      const before = process.cpuUsage();
      await reads(side, block);
      const used = process.cpuUsage(before);
      side.perBlock.push((used.user + used.system) / block);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  const [current, before] = sides;
  const result = {
    machine: machine(),
    block,
    rounds,
    cpuUsPerRead: Number(median(current?.perBlock ?? []).toFixed(1)),
    ...(before
      ? {
          previous: before.source,
          previousCpuUsPerRead: Number(median(before.perBlock).toFixed(1)),
          /** Median over the rounds of (current - previous) in the same round. */
          differenceUs: Number(
            median((current?.perBlock ?? []).map((us, i) => us - (before.perBlock[i] ?? 0))).toFixed(1),
          ),
        }
      : {}),
  };
  process.stderr.write(`${JSON.stringify(result)}\n`);
  await record(auditPair ? 'read-in-process-audit' : 'read-in-process', result);
} finally {
  for (const side of sides) await side.stop();
  await sandbox.close();
}
process.exit(0);
