/**
 * The first `$submit` after a start, as a deployment sends it: once `GET /ready` answers 200.
 * While it runs, `GET /health` is asked back to back; the slowest answer shows whether the
 * request path stalled the event loop (loading the R4 definitions, about a second of CPU, did
 * before /ready waited for them). Sandbox mode, SQLite, one process per run.
 *
 *   npm run bench:first-submit
 *   BENCH_PREVIOUS=/path/to/previous/checkout BENCH_ROUNDS=3 npm run bench:first-submit
 *
 * With BENCH_PREVIOUS (a checkout of the previous source with its node_modules), the runs
 * alternate between it and this source, so both see the same load on a shared machine.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eligibilityRequest } from '../test/support/requests.js';
import { machine, record, sleep, spawnService } from './lib.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PREVIOUS = process.env.BENCH_PREVIOUS;

interface Run {
  source: 'this' | 'previous';
  startToReadyMs: number;
  submitMs: number;
  submitStatus: number;
  slowestHealthMs: number;
  healthAnswers: number;
}

async function once(source: Run['source']): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-first-'));
  const script = source === 'previous' ? join(PREVIOUS ?? '', 'src/main.ts') : 'src/main.ts';
  const started = Date.now();
  const service = await spawnService(
    { DATABASE_URL: `sqlite:${join(dir, 'adapter.db')}`, SUBMIT_WAIT_MS: '0', SANDBOX_TIME_SCALE: '0.01' },
    [script],
  );
  try {
    for (;;) {
      const res = await fetch(`${service.url}/ready`).catch(() => null);
      await res?.arrayBuffer();
      if (res?.status === 200) break;
      await sleep(20);
    }
    const startToReadyMs = Date.now() - started;
    let submitting = true;
    const health: number[] = [];
    const probe = (async () => {
      while (submitting) {
        const sent = performance.now();
        const res = await fetch(`${service.url}/health`);
        await res.arrayBuffer();
        health.push(performance.now() - sent);
      }
    })();
    await sleep(50);
    const sent = performance.now();
    const res = await fetch(`${service.url}/fhir/CoverageEligibilityRequest/$submit`, {
      method: 'POST',
      headers: { Authorization: 'Bearer sandbox', 'Content-Type': 'application/fhir+json' },
      body: JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' })),
    });
    await res.arrayBuffer();
    const submitMs = performance.now() - sent;
    await sleep(100);
    submitting = false;
    await probe;
    return {
      source,
      startToReadyMs,
      submitMs: Math.round(submitMs),
      submitStatus: res.status,
      slowestHealthMs: Math.round(Math.max(...health)),
      healthAnswers: health.length,
    };
  } finally {
    await service.stop();
  }
}

const runs: Run[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  if (PREVIOUS) runs.push(await once('previous'));
  runs.push(await once('this'));
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;
const summary = (source: Run['source']) => {
  const of = runs.filter((r) => r.source === source);
  return of.length === 0
    ? null
    : {
        runs: of.length,
        slowestHealthMsMedian: median(of.map((r) => r.slowestHealthMs)),
        submitMsMedian: median(of.map((r) => r.submitMs)),
        startToReadyMsMedian: median(of.map((r) => r.startToReadyMs)),
      };
};
await record('first-submit', {
  machine: machine(),
  this: summary('this'),
  previous: summary('previous'),
  runs,
  note: 'sandbox mode; after the first /ready 200, /health asked back to back while the first $submit (answered queued, SUBMIT_WAIT_MS=0) runs; slowestHealthMs is the slowest of those answers',
});
