/**
 * What the narrative of an OperationOutcome (issue 43, src/fhir/outcomes.ts `outcomeNarrative`)
 * costs per error answer, in process: for one issue (a 400 or 404, the common answer) and for the
 * largest outcome there is (100 issues, the cap), beside the JSON.stringify of the same outcome
 * that every answer pays anyway. CPU from process.cpuUsage after a warm-up, in alternating rounds.
 *
 *   npm run bench:outcome-narrative     (BENCH_ITERATIONS=100000, BENCH_ROUNDS=5)
 */
import type { OperationOutcomeIssue } from 'fhir/r4.js';
import { badRequest, outcomeNarrative, outcomeOf } from '../src/fhir/outcomes.js';
import { cpuPerCall, machine, record } from './lib.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const one = badRequest('Unknown status "x" <sic>', 'CoverageEligibilityRequest.status').outcome;
const issues: OperationOutcomeIssue[] = Array.from({ length: 100 }, (_, i) => ({
  severity: 'error',
  code: 'invalid',
  details: { text: `Value ${i} of item is not a code of its value set & cannot be read` },
  expression: [`CoverageEligibilityRequest.item[${i}].category`],
}));
const many = outcomeOf(issues);

const µs = (work: () => unknown, n: number) => Number((cpuPerCall(work, n, n / 10) * 1000).toFixed(3));
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const rounds: Record<string, number>[] = [];
for (let r = 0; r < ROUNDS; r += 1)
  rounds.push({
    oneIssueNarrativeUs: µs(() => outcomeNarrative(one.issue), ITERATIONS),
    oneIssueStringifyUs: µs(() => JSON.stringify(one), ITERATIONS),
    oneIssueErrorUs: µs(
      () => badRequest('Unknown status "x"', 'CoverageEligibilityRequest.status'),
      ITERATIONS,
    ),
    hundredIssuesNarrativeUs: µs(() => outcomeNarrative(many.issue), ITERATIONS / 100),
    hundredIssuesStringifyUs: µs(() => JSON.stringify(many), ITERATIONS / 100),
  });
const medians = Object.fromEntries(Object.keys(rounds[0]!).map((k) => [k, median(rounds.map((r) => r[k]!))]));
await record('outcome-narrative', {
  machine: machine(),
  iterations: ITERATIONS,
  rounds,
  medians,
  oneIssueBytes: {
    narrative: Buffer.byteLength(one.text?.div ?? ''),
    outcome: Buffer.byteLength(JSON.stringify(one)),
  },
});
