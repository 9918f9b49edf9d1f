/**
 * What the narrative (issue 16, src/mapping/response/narrative.ts) costs: its size against the
 * whole CER for every envelope fixture, and the CPU of building it against the CPU of mapping the
 * largest answer (test/fixtures/upstream/found-eligible.json), and of the visit summary (issue 28)
 * inside it. In process, no HTTP; CPU from process.cpuUsage after a warm-up.
 *
 *   npx tsx bench/narrative.ts            (BENCH_ITERATIONS=2000)
 */
import { readFileSync, readdirSync } from 'node:fs';
import { mapEnvelope } from '../src/mapping/response/index.js';
import { narrativeOf } from '../src/mapping/response/narrative.js';
import { summaryXhtml, visitSummary } from '../src/mapping/response/visit-summary.js';
import { envelopeSchema } from '../src/upstream/contract.js';
import { benchCerContext, cpuPerCall, machine, record } from './lib.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 2000);
const WARMUP = 200;

const context = benchCerContext;

function cpuPerIteration(work: () => unknown): number {
  return Number(cpuPerCall(work, ITERATIONS, WARMUP).toFixed(4));
}

const sizes = ['mapping', 'upstream'].flatMap((dir) => {
  const url = new URL(`../test/fixtures/${dir}/`, import.meta.url);
  return readdirSync(url)
    .filter((f) => f.endsWith('.json'))
    .map((file) => {
      const envelope = envelopeSchema.parse(JSON.parse(readFileSync(new URL(file, url), 'utf8')));
      const cer = mapEnvelope(envelope, context(file.startsWith('search-all')));
      const whole = Buffer.byteLength(JSON.stringify(cer));
      const text = Buffer.byteLength(JSON.stringify(cer.text));
      return {
        fixture: `${dir}/${file}`,
        cerBytes: whole,
        textBytes: text,
        share: Number((text / whole).toFixed(3)),
      };
    });
});

const largest = envelopeSchema.parse(
  JSON.parse(readFileSync(new URL('../test/fixtures/upstream/found-eligible.json', import.meta.url), 'utf8')),
);
const ctx = context(false);
const mapped = mapEnvelope(largest, ctx);
const mappingMs = cpuPerIteration(() => mapEnvelope(largest, ctx));
const narrativeMs = cpuPerIteration(() => narrativeOf(mapped));
const summaryMs = cpuPerIteration(() => summaryXhtml(visitSummary(mapped)));

const shares = sizes.map((s) => s.share).sort((a, b) => a - b);
await record('narrative', {
  machine: machine(),
  iterations: ITERATIONS,
  foundEligible: {
    cerBytes: Buffer.byteLength(JSON.stringify(mapped)),
    textBytes: Buffer.byteLength(JSON.stringify(mapped.text)),
    mappingMsWithNarrative: mappingMs,
    narrativeMs,
    summaryMs,
  },
  textShare: { min: shares[0], median: shares[Math.floor(shares.length / 2)], max: shares.at(-1) },
  largestText: Math.max(...sizes.map((s) => s.textBytes)),
  sizes,
});
