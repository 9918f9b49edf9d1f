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
 * The envelopes: the sandbox's (test/fixtures/upstream) and the recorded answers of plans shaped
 * like real ones (test/fixtures/mapping/found-eligible-*.json).
 *
 *   git archive <commit> | tar -x -C /tmp/ref && ln -s "$PWD/node_modules" /tmp/ref/node_modules
 *   REF=/tmp/ref npx tsx bench/mapping-golden.ts        (MUTATIONS=150 CASES=1500)
 *
 * Exits 1 on differences (it prints up to three). CLASSIFY=1, for a change that means to change
 * the output: every difference is put in a class (what differs: the CER field by its path, the
 * narrative's summary or tables, the summary's sentence or notes), and each class is printed with
 * its count and one example, so each can be explained. WITHOUT_PROFILES=1 compares this source's
 * CERs with their `meta.profile` (and the contained resources') left out: against a reference
 * from before the profiles (issue 33), that is the one intended difference.
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
const SERVICE_CATEGORY = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';
/** None asked (the usual ones), one, two, a code no table knows, maternity, and inpatient (a maximum per admission). */
const ASKED: CodeableConcept[][] = [
  [],
  [category('1')],
  [category('69')],
  [category('F3'), category('5')],
  [{ text: 'x' }],
  [category('62'), category('1')],
  [{ coding: [{ system: SERVICE_CATEGORY, code: 'inpatient' }] }, category('3')],
];

/** What a mutation puts in a field, by the field's kind. */
const POOL = {
  percent: [null, 0, 20, '20%', '0', '10', 'Nil', 'Not Covered', 12.5, '100%', 150],
  amount: [null, 0, 25, '25', 'AED 50', 'Nil', 50, 200, '1,000'],
  scope: [
    null,
    'per claim',
    'per year',
    'annual',
    'Per Visit',
    '',
    'per admission',
    'Per_Case',
    'per policy period',
  ],
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
const CLASSIFY = process.env.CLASSIFY === '1';
/** Per class: how many differences and the first one. */
const classes = new Map<string, { count: number; example: string }>();

interface Line {
  category: { code: string };
  label: string;
  model?: {
    perVisitCap?: number;
    capScopeAssumed?: boolean;
    scopedCap?: { amount: number; scope?: string };
    yearlyCap?: string;
  };
  rule: { kind: string; deductible?: number };
  sentence: string;
  notes: string[];
}

/** The classes of the copay maximum read in its scope (issue 35, the scope of a maximum). */
function scopeCauses(a: Line, b: Line): string[] {
  const causes: string[] = [];
  const scoped = b.model?.scopedCap;
  if (scoped && !a.model?.scopedCap) {
    if (scoped.scope === undefined)
      causes.push('scope: a maximum without scope on an inpatient line: "no scope given", not applied');
    else if (scoped.scope.startsWith('('))
      causes.push('scope: a maximum whose scope text is no scope word: quoted, not applied');
    else causes.push('scope: a maximum per admission, case, day or lifetime: in its words, not applied');
  }
  if (b.model?.yearlyCap !== a.model?.yearlyCap)
    causes.push('scope: a maximum per policy period is a yearly cap in its words, not applied');
  if (b.sentence.includes('no per-visit maximum given') && !a.sentence.includes('no per-visit maximum given'))
    causes.push('scope: beside a yearly cap, "no per-visit maximum given" (was "no maximum given")');
  if (b.model?.capScopeAssumed && !a.model?.capScopeAssumed)
    causes.push('scope: a scope written as none ("Nil", "0", a number) reads as no scope: per visit, noted');
  const others = (line: Line) => line.notes.filter((n) => n.startsWith('The portal also gives'));
  if (
    causes.length === 0 &&
    a.sentence === b.sentence &&
    JSON.stringify(others(a)) !== JSON.stringify(others(b)) &&
    JSON.stringify(a.notes.filter((n) => !others(a).includes(n))) ===
      JSON.stringify(b.notes.filter((n) => !others(b).includes(n)))
  )
    causes.push('scope: what the other items say, their maximum in its scope (notes only)');
  return causes;
}
type Summaries = { lines: Line[] }[];
interface Row {
  rows: string[];
  text: string;
}

/** The narrative's summary block and its tables' rows. */
function partsOf(div: string): { summary: string; tables: Row } {
  const summary = /<h2>What to collect[^]*?<\/ul><\/div>/.exec(div)?.[0] ?? '';
  const text = [...div.matchAll(/<h3>[^]*?<\/table>/g)].map((m) => m[0]).join('');
  return { summary, tables: { rows: text.split('<tr>'), text } };
}

/** Why the narrative's tables differ: rows merged or split, or which cells. */
function tableCauses(a: Row, b: Row): string[] {
  if (a.text === b.text) return [];
  const causes: string[] = [];
  if (a.rows.length !== b.rows.length)
    causes.push('table: rows merged (a label naming a block: Inpatient, Inpatient & Day Care)');
  const count = (t: string, s: string) => t.split(s).length;
  if (count(a.text, 'Deductible maximum: 0 ') > count(b.text, 'Deductible maximum: 0 '))
    causes.push('table: a 0 deductible maximum left out of the Notes');
  if (count(b.text, 'A GP referral is required') > count(a.text, 'A GP referral is required'))
    causes.push('table: the GP-referral note on a Maternity-block consultation line (now a consultation)');
  const titles = (t: string) => [...t.matchAll(/<h3>([^<]*)<\/h3>/g)].map((m) => m[1]).join('|');
  if (titles(a.text) !== titles(b.text))
    causes.push('table: an item moved to the table of the block its label names (no block named before)');
  const order = (t: string) =>
    [...t.matchAll(/<h3>([^<]*)<\/h3>([^]*?)<\/table>/g)]
      .map(
        (m) =>
          `${m[1]}: ${[...(m[2] ?? '').matchAll(/<tr><td>([^<]*)<\/td>/g)]
            .map((r) => r[1])
            .sort()
            .join('|')}`,
      )
      .join('\n');
  if (causes.length === 0 && order(a.text) !== order(b.text))
    causes.push('table: a row moved to the table of the block its label names');
  if (causes.length === 0) causes.push('table: other cells');
  return causes;
}

/** Why one summary line differs from the reference's. */
function lineCauses(a: Line, b: Line): string[] {
  const causes: string[] = scopeCauses(a, b);
  if (a.rule.kind === 'unclear' && b.rule.kind === 'percent' && b.rule.deductible !== undefined)
    causes.push('summary: a per-visit deductible beside a percentage is added (was no share)');
  else if (b.rule.deductible !== undefined && a.rule.deductible === undefined)
    causes.push('summary: a deductible of a later item of the same block completes the chosen figures');
  if (b.notes.some((n) => / is from .*which gives the same percentage/.test(n)))
    causes.push('summary: note naming the item the deductible comes from');
  if (a.rule.kind === 'no-figures' && b.rule.kind !== 'no-figures')
    causes.push('summary: an item with figures answers before one without');
  if (a.label !== b.label) {
    const own = ['maternity', 'inpatient', 'specialist-consultation'].includes(b.category.code);
    causes.push(
      own
        ? 'summary: a category of a block of its own reads its own benefit (another block, or Maternity-block lines no longer its own)'
        : "summary: another item chosen (block read from the label, or a form line of its key's category)",
    );
  }
  if (causes.length === 0 && a.sentence !== b.sentence) causes.push('summary: sentence (other)');
  if (causes.length === 0)
    causes.push('summary: notes only (what the other items say, the figures-first choice)');
  return causes;
}

function summaryCauses(a: string, b: string): string[] {
  const x = JSON.parse(a) as Summaries;
  const y = JSON.parse(b) as Summaries;
  const causes = new Set<string>();
  x.forEach((summary, i) =>
    summary.lines.forEach((line, j) => {
      const other = y[i]?.lines[j];
      if (other && JSON.stringify(line) !== JSON.stringify(other))
        for (const cause of lineCauses(line, other)) causes.add(cause);
    }),
  );
  return [...causes];
}

/** The category codes of the items of a CER, and the count of items whose category differs. */
function categoryChanges(a: CoverageEligibilityResponse, b: CoverageEligibilityResponse): string[] {
  const causes = new Set<string>();
  (a.insurance ?? []).forEach((insurance, i) =>
    (insurance.item ?? []).forEach((item, j) => {
      const other = b.insurance?.[i]?.item?.[j];
      const code = (c: typeof item | undefined) =>
        c?.category?.coding?.find((k) => k.system?.endsWith('/service-category'))?.code;
      if (code(item) !== code(other))
        causes.add(
          `CER: a Maternity-block form line's category is its key's (${code(item)} -> its key's), with its referral fields`,
        );
      else if (JSON.stringify(item) !== JSON.stringify(other)) causes.add('CER: an item (other fields)');
    }),
  );
  return [...causes];
}

function classify(what: string, a: string, b: string, example: string): void {
  let causes: string[];
  if (what === 'visit summary') causes = summaryCauses(a, b);
  else {
    const x = JSON.parse(a) as CoverageEligibilityResponse;
    const y = JSON.parse(b) as CoverageEligibilityResponse;
    const px = partsOf(x.text?.div ?? '');
    const py = partsOf(y.text?.div ?? '');
    causes = what === 'CER' ? categoryChanges(x, y) : [];
    if (px.summary !== py.summary) causes.push('narrative: the summary block (the summary classes)');
    const tables = tableCauses(px.tables, py.tables);
    causes.push(...tables);
    if (causes.length === 0) causes.push('other');
    // The tables' own first difference, for a class the causes above do not name.
    if (tables.includes('table: other cells'))
      example = firstDifference('tables', what, px.tables.text, py.tables.text);
  }
  for (const cause of causes) {
    const key = `${what}: ${cause}`;
    const known = classes.get(key);
    if (known) known.count += 1;
    else classes.set(key, { count: 1, example });
  }
}

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
      const check = (what: string, a: string, b: string): void => {
        if (a === b) return;
        const difference = firstDifference(label, what, a, b);
        differences.push(difference);
        if (CLASSIFY) classify(what, a, b, difference);
      };
      const a = JSON.stringify(reference.map(envelope, ctx));
      check('CER', a, JSON.stringify(withoutProfiles(current.map(envelope, ctx))));
      const stored = JSON.parse(a) as CoverageEligibilityResponse;
      check(
        're-rendered narrative',
        JSON.stringify(reference.renarrate(stored, asked)),
        JSON.stringify(current.renarrate(stored, asked)),
      );
      check(
        'visit summary',
        JSON.stringify(reference.summary(stored, asked)),
        JSON.stringify(current.summary(stored, asked)),
      );
    }
  }
}

const folder = new URL('../test/fixtures/upstream/', import.meta.url);
for (const file of readdirSync(folder).filter((f) => f.endsWith('.json'))) {
  const raw = JSON.parse(readFileSync(new URL(file, folder), 'utf8')) as Raw;
  compare(raw, file);
  for (let m = 0; m < MUTATIONS; m += 1) compare(mutate(raw), `${file}, mutation ${m}`);
}
const plans = new URL('../test/fixtures/mapping/', import.meta.url);
for (const file of readdirSync(plans).filter((f) => /^found-eligible-.*\.json$/.test(f))) {
  const raw = JSON.parse(readFileSync(new URL(file, plans), 'utf8')) as Raw;
  compare(raw, `mapping/${file}`);
  for (let m = 0; m < MUTATIONS; m += 1) compare(mutate(raw), `mapping/${file}, mutation ${m}`);
}
fc.sample(anyEnvelope, { numRuns: CASES, seed: 7 }).forEach((raw, i) => compare(raw, `generated case ${i}`));

console.log(JSON.stringify({ reference: refRoot, cases, differences: differences.length }));
if (CLASSIFY) {
  const sorted = [...classes].sort((x, y) => y[1].count - x[1].count);
  for (const [key, { count, example }] of sorted) console.log(`\n## ${count} × ${key}\n${example}`);
} else for (const difference of differences.slice(0, 3)) console.log(difference);
if (differences.length > 0) process.exit(1);
