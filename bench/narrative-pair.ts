/**
 * The CER mapping and its narrative, this source against a previous one, in one process and
 * alternating (so the machine's load drifts over both alike): CPU per found-eligible answer
 * (test/fixtures/upstream/found-eligible.json), R rounds of N calls each, after a warm-up.
 *
 *   git archive <commit> | tar -x -C /tmp/prev && ln -s "$PWD/node_modules" /tmp/prev/node_modules
 *   PREV=/tmp/prev R=7 N=3000 npx tsx bench/narrative-pair.ts
 */
import { readFileSync } from 'node:fs';
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import type { CerContext } from '../src/mapping/types.js';
import { benchCerContext, cpuPerCall, machine, record } from './lib.js';

interface Side {
  map: (envelope: unknown, ctx: CerContext) => CoverageEligibilityResponse;
  narrative: (cer: CoverageEligibilityResponse) => unknown;
  parse: (raw: unknown) => unknown;
}

async function side(root: string): Promise<Side> {
  const response = (await import(`${root}/src/mapping/response/index.ts`)) as { mapEnvelope: Side['map'] };
  const narrative = (await import(`${root}/src/mapping/response/narrative.ts`)) as {
    narrativeOf: Side['narrative'];
  };
  const contract = (await import(`${root}/src/upstream/contract.ts`)) as {
    envelopeSchema: { parse: Side['parse'] };
  };
  return {
    map: response.mapEnvelope,
    narrative: narrative.narrativeOf,
    parse: (raw) => contract.envelopeSchema.parse(raw),
  };
}

const prevRoot = process.env.PREV;
if (!prevRoot) throw new Error('PREV=<folder of the previous source> is required');
const N = Number(process.env.N ?? 3000);
const ROUNDS = Number(process.env.R ?? 7);
const sides = {
  previous: await side(prevRoot),
  current: await side(new URL('..', import.meta.url).pathname),
};
const raw: unknown = JSON.parse(
  readFileSync(new URL('../test/fixtures/upstream/found-eligible.json', import.meta.url), 'utf8'),
);
const ctx = benchCerContext();
const cpu = (work: () => unknown): number => cpuPerCall(work, N);

type Name = keyof typeof sides;
const results: Record<Name, { mappingMs: number[]; narrativeMs: number[] }> = {
  previous: { mappingMs: [], narrativeMs: [] },
  current: { mappingMs: [], narrativeMs: [] },
};
for (const s of Object.values(sides)) {
  const envelope = s.parse(raw);
  for (let i = 0; i < 1500; i += 1) s.narrative(s.map(envelope, ctx));
}
for (let round = 0; round < ROUNDS; round += 1) {
  const order: Name[] = round % 2 === 0 ? ['previous', 'current'] : ['current', 'previous'];
  for (const name of order) {
    const s = sides[name];
    const envelope = s.parse(raw);
    const cer = s.map(envelope, ctx);
    results[name].mappingMs.push(Number(cpu(() => s.map(envelope, ctx)).toFixed(4)));
    results[name].narrativeMs.push(Number(cpu(() => s.narrative(cer)).toFixed(4)));
  }
}
const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const ratios = results.current.mappingMs.map((v, i) =>
  Number((v / (results.previous.mappingMs[i] ?? v)).toFixed(3)),
);
await record('narrative-pair', {
  machine: machine(),
  previousSource: prevRoot,
  rounds: ROUNDS,
  callsPerRound: N,
  ...results,
  median: {
    previousMappingMs: median(results.previous.mappingMs),
    currentMappingMs: median(results.current.mappingMs),
    previousNarrativeMs: median(results.previous.narrativeMs),
    currentNarrativeMs: median(results.current.narrativeMs),
    mappingRatio: median(ratios),
  },
});
