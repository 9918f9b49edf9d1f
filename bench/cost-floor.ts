/**
 * The floor under figure 1: CPU per check of bench/floor-server.ts, which runs a check with this
 * design's parts and nothing else (no store, no scheduler, no auth or audit, no logs), on the
 * same workload as bench:cost (the same `$submit` body, a found-eligible answer from the sandbox
 * on its own port, answering at once). Three modes: `node` (the three exchanges of a check, node's
 * own HTTP server taking the `$submit`, and the reading of the upstream's answers), `http` (the
 * same with express taking the `$submit`) and `required` (express, plus the validation of the `$submit` body,
 * the mapping, the CER's text). What bench:cost measures above `required` is the store, the
 * scheduler and the service's own HTTP layer.
 *
 *   npm run bench:floor            (BENCH_CHECKS=1000, BENCH_WARMUP=3000, as bench:cost, BENCH_MODES=node,http,required)
 */
import { startSandbox } from '../src/sandbox/index.js';
import { eligibilityRequest } from '../test/support/requests.js';
import { cpuProfArgs, cpuSeconds, machine, record, sleep, spawnService, until } from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const CHECKS = Number(process.env.BENCH_CHECKS ?? 1000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3000);

type Mode = 'node' | 'http' | 'required';

async function runOnce(mode: Mode) {
  const sandbox = await startSandbox({ port: 0, timeScale: 0.0001, apiKeys: [UPSTREAM_KEY] });
  const server = await spawnService(
    { TEST_UPSTREAM_KEY: UPSTREAM_KEY },
    ['bench/floor-server.ts', mode, sandbox.url],
    cpuProfArgs(`floor-${mode}`),
  );
  try {
    const pid = server.child.pid ?? 0;
    const finished = async (count: number) =>
      until(
        async () => {
          await sleep(200);
          const res = await fetch(`${server.url}/done`);
          const { done, failed } = (await res.json()) as { done: number; failed: number };
          if (failed > 0) throw new Error(`${failed} checks failed:\n${server.output.join('\n')}`);
          return done >= count ? true : undefined;
        },
        300_000,
        `${count} checks done`,
      );
    await submitAll(server.url, WARMUP);
    await finished(WARMUP);
    await sleep(500);
    const before = cpuSeconds(pid);
    const started = Date.now();
    await submitAll(server.url, CHECKS);
    await finished(WARMUP + CHECKS);
    const cpu = cpuSeconds(pid) - before;
    const stats = sandbox.control.stats();
    return {
      mode,
      checks: CHECKS,
      warmUpChecks: WARMUP,
      createTaskCalls: stats.createTask,
      polls: stats.polls,
      cpuSeconds: Number(cpu.toFixed(3)),
      cpuMsPerCheck: Number(((cpu * 1000) / CHECKS).toFixed(3)),
      wallSeconds: Number(((Date.now() - started) / 1000).toFixed(1)),
    };
  } finally {
    await server.stop();
    await sandbox.close();
  }
}

/** The `$submit` requests of bench:cost, 25 at a time. */
async function submitAll(url: string, count: number): Promise<void> {
  const body = JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
  for (let i = 0; i < count; i += 25) {
    await Promise.all(
      Array.from({ length: Math.min(25, count - i) }, async () => {
        const res = await fetch(`${url}/fhir/CoverageEligibilityRequest/$submit`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/fhir+json' },
          body,
        });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`$submit answered ${res.status}`);
      }),
    );
  }
}

const results = [];
for (const mode of (process.env.BENCH_MODES ?? 'node,http,required').split(',') as Mode[]) {
  results.push(await runOnce(mode));
}
await record('cost-floor', { machine: machine(), results });
