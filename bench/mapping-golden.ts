/**
 * The response mapping of this source against a reference source, byte for byte: what a change
 * made only for speed must leave exactly as it was. For every envelope fixture
 * (test/fixtures/upstream), seeded mutations of each, and cases of the property test's envelope
 * generator (test/support/envelopes.ts), each under several sets of categories asked, single payer
 * and search-all, it compares three things as JSON:
 * - the CER `mapEnvelope` gives;
 * - its narrative re-rendered from the stored form (`withNarrative`, as migration 16 does);
 * - the visit summary with its notes (`visitSummary`, what `$estimate` and the CDS cards read).
 *
 *   git archive <commit> | tar -x -C /tmp/ref && ln -s "$PWD/node_modules" /tmp/ref/node_modules
 *   REF=/tmp/ref npx tsx bench/mapping-golden.ts        (MUTATIONS=150 CASES=1500)
 *
 * Exits 1 on the first differences (it prints up to three). WITHOUT_PROFILES=1 compares this
 * source's CERs with their `meta.profile` (and the contained resources') left out: against a
 * reference from before the profiles (issue 33), that is the one intended difference.
 */
import { readFileSync, readdirSync } from 'node:fs';
import type { CodeableConcept, CoverageEligibilityResponse } from 'fhir/r4.js';
import fc from 'fast-check';
import { anyEnvelope } from '../test/support/envelopes.js';
import type { CerContext } from '../src/mapping/types.js';
import { benchCerContext } from './lib.js';

interface Source {
  map: (envelope: unknown, ctx: CerContext) => CoverageEligibilityResponse;
  renarrate: (cer: CoverageEligibilityResponse, asked: CodeableConcept[]) => unknown;
  summary: (cer: CoverageEligibilityResponse, asked: CodeableConcept[]) => unknown;
}

async function source(root: string): Promise<Source> {
  const response = (await import(`${root}/src/mapping/response/index.ts`)) as { mapEnvelope: Source['map'] };
  const narrative = (await import(`${root}/src/mapping/response/narrative.ts`)) as {
    withNarrative: Source['renarrate'];
  };
  const summary = (await import(`${root}/src/mapping/response/visit-summary.ts`)) as {
    visitSummary: Source['summary'];
  };
  return { map: response.mapEnvelope, renarrate: narrative.withNarrative, summary: summary.visitSummary };
}

const refRoot = process.env.REF;
if (!refRoot) throw new Error('REF=<folder of the reference source> is required');
const MUTATIONS = Number(process.env.MUTATIONS ?? 150);
const CASES = Number(process.env.CASES ?? 1500);
const reference = await source(refRoot);
const current = await source(new URL('..', import.meta.url).pathname);
const { envelopeSchema } = (await import('../src/upstream/contract.js')) as {
  envelopeSchema: { parse: (raw: unknown) => unknown };
};

const BENEFIT_CATEGORY = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';
const category = (code: string): CodeableConcept => ({ coding: [{ system: BENEFIT_CATEGORY, code }] });
/** None asked (the usual ones), one, two, a code no table knows, and maternity. */
const ASKED: CodeableConcept[][] = [
  [],
  [category('1')],
  [category('69')],
  [category('F3'), category('5')],
  [{ text: 'x' }],
  [category('62'), category('1')],
];

/** What a mutation puts in a field, by the field's kind. */
const POOL = {
  percent: [null, 0, 20, '20%', '0', '10', 'Nil', 'Not Covered', 12.5, '100%', 150],
  amount: [null, 0, 25, '25', 'AED 50', 'Nil', 50, 200, '1,000'],
  scope: [null, 'per claim', 'per year', 'annual', 'Per Visit', ''],
  currency: [null, 'AED', 'Dhs', 'usd', ''],
  status: [null, 'Covered', 'Not Covered', 'Partially'],
  text: [
    null,
    'Copay waived for follow-up within 7 days',
    'A & B <x>',
    'Not Mentioned',
    'Direct billing; GN+',
  ],
} as const;

let seed = 42;
/** A seeded linear congruential generator: the same mutations on every run. */
const random = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;

/** A value for a field by its name, or undefined to leave it. */
function replacement(key: string, value: unknown): unknown {
  if (key.includes('percent')) return pick(POOL.percent);
  if (/amount|max|copay$|deductible/i.test(key)) return pick(POOL.amount);
  if (key.includes('scope')) return pick(POOL.scope);
  if (key.includes('currency')) return pick(POOL.currency);
  if (key.includes('coverage_status')) return pick(POOL.status);
  if (/remarks|name|visit_type|standardized|original|network/.test(key) && typeof value === 'string')
    return pick(POOL.text) ?? value;
  return undefined;
}

/** Fields replaced (15 %), list entries repeated, dropped or reversed (10 % each), all the way down. */
function mutateIn(node: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(node)) {
    if (random() < 0.15) {
      const next = replacement(key, value);
      if (next !== undefined) node[key] = next;
    }
    if (Array.isArray(value)) {
      if (random() < 0.1 && value.length > 0) value.push(structuredClone(pick(value)));
      if (random() < 0.1 && value.length > 0) value.splice(Math.floor(random() * value.length), 1);
      if (random() < 0.1) value.reverse();
    }
    if (value && typeof value === 'object') mutateIn(value as Record<string, unknown>);
  }
}

interface Raw {
  eligibility_result?: { data_dump?: { data?: Record<string, unknown> } };
  aggregated_results?: { data?: Record<string, unknown> }[];
}

function mutate(raw: Raw): Raw {
  const copy = structuredClone(raw);
  const data = copy.eligibility_result?.data_dump?.data;
  if (data) mutateIn(data);
  for (const result of copy.aggregated_results ?? []) if (result.data) mutateIn(result.data);
  return copy;
}

let cases = 0;
const differences: string[] = [];

function firstDifference(label: string, what: string, a: string, b: string): string {
  let i = 0;
  while (i < a.length && a[i] === b[i]) i += 1;
  const around = (s: string) => s.slice(Math.max(0, i - 120), i + 120);
  return `${label}, ${what} at ${i}:\n  reference: ${around(a)}\n  this:      ${around(b)}`;
}

const WITHOUT_PROFILES = process.env.WITHOUT_PROFILES === '1';

/** The CER without meta.profile on it and its contained resources, when WITHOUT_PROFILES=1. */
function withoutProfiles(cer: CoverageEligibilityResponse): CoverageEligibilityResponse {
  if (!WITHOUT_PROFILES) return cer;
  const strip = <T extends { meta?: { profile?: string[] } }>(r: T): T => {
    if (!r.meta) return r;
    const { profile: _profile, ...meta } = r.meta;
    const { meta: _meta, ...rest } = r;
    return (Object.keys(meta).length > 0 ? { ...rest, meta } : rest) as T;
  };
  const stripped = strip(cer);
  // Key order kept: contained is rebuilt in place.
  if (stripped.contained) stripped.contained = stripped.contained.map(strip);
  return stripped;
}

function compare(raw: unknown, label: string): void {
  let envelope: unknown;
  try {
    envelope = envelopeSchema.parse(raw);
  } catch {
    return; // a mutation the envelope schema refuses never reaches the mapping
  }
  for (const asked of ASKED) {
    for (const isSearchAll of [false, true]) {
      const ctx = benchCerContext(isSearchAll);
      ctx.request = { ...ctx.request, item: asked.map((c) => ({ category: c })) };
      cases += 1;
      const a = JSON.stringify(reference.map(envelope, ctx));
      const b = JSON.stringify(withoutProfiles(current.map(envelope, ctx)));
      if (a !== b) differences.push(firstDifference(label, 'CER', a, b));
      const stored = JSON.parse(a) as CoverageEligibilityResponse;
      const na = JSON.stringify(reference.renarrate(stored, asked));
      const nb = JSON.stringify(current.renarrate(stored, asked));
      if (na !== nb) differences.push(firstDifference(label, 're-rendered narrative', na, nb));
      const sa = JSON.stringify(reference.summary(stored, asked));
      const sb = JSON.stringify(current.summary(stored, asked));
      if (sa !== sb) differences.push(firstDifference(label, 'visit summary', sa, sb));
    }
  }
}

const folder = new URL('../test/fixtures/upstream/', import.meta.url);
for (const file of readdirSync(folder).filter((f) => f.endsWith('.json'))) {
  const raw = JSON.parse(readFileSync(new URL(file, folder), 'utf8')) as Raw;
  compare(raw, file);
  for (let m = 0; m < MUTATIONS; m += 1) compare(mutate(raw), `${file}, mutation ${m}`);
}
fc.sample(anyEnvelope, { numRuns: CASES, seed: 7 }).forEach((raw, i) => compare(raw, `generated case ${i}`));

console.log(JSON.stringify({ reference: refRoot, cases, differences: differences.length }));
for (const difference of differences.slice(0, 3)) console.log(difference);
if (differences.length > 0) process.exit(1);
