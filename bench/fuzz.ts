/**
 * The long run of the HTTP-level property test (test/component/fuzz.test.ts): 100,000 seeded
 * mutations of valid $submit bodies against the real service and sandbox on local ports.
 * Counts answers by status, answers >= 500, invalid answers, the largest and the slowest answer,
 * and error-level log lines; writes bench/results/fuzz.json.
 *
 *   npm run fuzz                      100,000 cases, seed 20261123
 *   FUZZ_RUNS=5000 FUZZ_SEED=7 npm run fuzz
 */
import { PassThrough } from 'node:stream';
import { createLogger } from '../src/log.js';
import { startServer } from '../src/server.js';
import { startSandbox } from '../src/sandbox/index.js';
import { runFuzz } from '../test/support/fuzz.js';
import { TENANT_A_KEY, testConfig, UPSTREAM_KEY } from '../test/support/harness.js';
import { eligibilityRequest } from '../test/support/requests.js';
import { machine, record } from './lib.js';

const runs = Number(process.env.FUZZ_RUNS ?? 100_000);
const seed = Number(process.env.FUZZ_SEED ?? 20261123);

const sandbox = await startSandbox({ port: 0, timeScale: 0.02, apiKeys: [UPSTREAM_KEY] });
const logs = new PassThrough();
let errorLines = 0;
logs.on('data', (chunk: Buffer) => {
  errorLines += (chunk.toString('utf8').match(/"level":"error"/g) ?? []).length;
});
const config = {
  ...testConfig(sandbox.url, { submitWaitMs: 0 }),
  submitRatePerMinute: 10_000_000,
  logLevel: 'warn',
};
const server = await startServer(config, createLogger('warn', logs));
// One valid request first, so the slowest answer is not the one-time load of the FHIR definitions.
await fetch(`${server.url}/fhir/CoverageEligibilityRequest/$submit`, {
  method: 'POST',
  headers: { authorization: `Bearer ${TENANT_A_KEY}`, 'content-type': 'application/fhir+json' },
  body: JSON.stringify(eligibilityRequest()),
});
const started = process.cpuUsage();
const report = await runFuzz({
  url: server.url,
  authorization: `Bearer ${TENANT_A_KEY}`,
  seed,
  runs,
  onProgress: (sent) => {
    if (sent % 5000 !== 0) return;
    const heapMb = Math.round(process.memoryUsage().heapUsed / 1e6);
    process.stderr.write(
      `${sent} sent, heap ${heapMb} MB, sandbox tasks ${sandbox.control.tasks().length}\n`,
    );
  },
});
const cpu = process.cpuUsage(started);
await server.stop();
await sandbox.close();

const serverErrors = Object.entries(report.byStatus)
  .filter(([status]) => Number(status) >= 500)
  .reduce((sum, [, n]) => sum + n, 0);
await record('fuzz', {
  command: 'npm run fuzz',
  seed,
  runs,
  sent: report.sent,
  seconds: report.seconds,
  cpuSeconds: Math.round((cpu.user + cpu.system) / 1e5) / 10,
  byStatus: report.byStatus,
  answersAtLeast500: serverErrors,
  failures: report.failures.length,
  firstFailures: report.failures.slice(0, 20),
  largestAnswer: report.largest,
  largestErrorAnswer: report.largestOutcome,
  slowestAnswer: report.slowest,
  errorLogLines: errorLines,
  machine: machine(),
});
process.exitCode = report.failures.length === 0 && errorLines === 0 ? 0 : 1;
