/**
 * What `$estimate` (issue 28, src/operations/estimate.ts) costs per call, in process, no HTTP: the
 * input read (the FHIR validator on the Parameters, then the items), the visit-summary lines and
 * shares, and the ClaimResponse, for one and for four items against the sandbox's found-eligible
 * answer. The store read and express are what a read already costs (figure 2). CPU from
 * process.cpuUsage after a warm-up.
 *
 *   npx tsx bench/estimate.ts            (BENCH_ITERATIONS=2000)
 */
import { readFileSync } from 'node:fs';
import type { Parameters } from 'fhir/r4.js';
import { warmFhirDefinitions } from '../src/fhir/validator.js';
import { estimateClaimResponse, estimateItems } from '../src/mapping/response/estimate.js';
import { mapEnvelope } from '../src/mapping/response/index.js';
import { estimateInput } from '../src/operations/estimate.js';
import { envelopeSchema } from '../src/upstream/contract.js';
import { benchCerContext, cpuPerCall, machine, record } from './lib.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 2000);
const WARMUP = 300;
const SERVICE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';

function cpuPerIteration(work: () => unknown): number {
  return Number(cpuPerCall(work, ITERATIONS, WARMUP).toFixed(4));
}

function body(codes: string[]): Parameters {
  return {
    resourceType: 'Parameters',
    parameter: codes.map((code, i) => ({
      name: 'item',
      part: [
        { name: 'category', valueCoding: { system: SERVICE, code } },
        { name: 'fee', valueMoney: { value: 250 + i * 10.5, currency: 'AED' } },
      ],
    })),
  };
}

await warmFhirDefinitions();
const envelope = envelopeSchema.parse(
  JSON.parse(readFileSync(new URL('../test/fixtures/upstream/found-eligible.json', import.meta.url), 'utf8')),
);
const cer = mapEnvelope(envelope, benchCerContext());
const items = cer.insurance?.[0]?.item ?? [];
const created = new Date().toISOString();

function call(parameters: Parameters) {
  const asked = estimateInput(parameters);
  return estimateClaimResponse(cer, estimateItems(items, asked), created);
}

const one = body(['consultation']);
const four = body(['consultation', 'lab', 'radiology', 'physiotherapy']);
await record('estimate', {
  machine: machine(),
  iterations: ITERATIONS,
  oneItem: {
    callMs: cpuPerIteration(() => call(one)),
    inputMs: cpuPerIteration(() => estimateInput(one)),
  },
  fourItems: {
    callMs: cpuPerIteration(() => call(four)),
    inputMs: cpuPerIteration(() => estimateInput(four)),
  },
  claimResponseBytes: Buffer.byteLength(JSON.stringify(call(four))),
});
