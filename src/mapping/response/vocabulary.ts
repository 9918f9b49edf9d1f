/**
 * The benefit vocabulary table (mappings/service-categories.json): portal labels -> item
 * category, network, excluded, term, and the reading of is_gatekeeper. Loaded and checked once.
 */
import type { CodeableConcept } from 'fhir/r4.js';
import { z } from 'zod';
import { loadMappingTable } from '../mapping-table.js';
import {
  BENEFIT_CATEGORY_SYSTEM,
  BENEFIT_NETWORK_SYSTEM,
  BENEFIT_TERM_SYSTEM,
  SERVICE_CATEGORY_SYSTEM,
  coding,
  concept,
  fhirText,
} from './codes.js';

const phrases = z.array(z.string().min(1));
const categorySchema = z.strictObject({
  code: z.string().regex(/^[a-z0-9-]+$/),
  display: z.string().min(1),
  benefitCategory: z.string().min(1).optional(),
  referralGated: z.boolean().optional(),
  /** The portal benefit block a visit of this category reads (visit summary); default Outpatient. */
  block: z.string().min(1).optional(),
  /** Other categories whose items also answer this one in the visit summary. */
  alsoReads: z.array(z.string()).optional(),
  keywords: phrases,
});

const tableSchema = z
  .strictObject({
    description: z.string(),
    defaultCurrency: z.string().regex(/^[A-Z]{3}$/),
    categories: z.array(categorySchema).min(1),
    usualForVisit: z.array(z.string()).min(1),
    blocks: z.array(
      z.strictObject({
        name: z.string(),
        referralGated: z.boolean().optional(),
      }),
    ),
    networks: z.strictObject({ in: phrases, out: phrases }),
    coverageStatus: z.strictObject({ excluded: phrases, covered: phrases }),
    gatekeeper: z.strictObject({ required: phrases, notRequired: phrases }),
    terms: z.record(z.enum(['annual', 'day', 'lifetime']), phrases),
  })
  .superRefine((table, ctx) => {
    const codes = new Set(table.categories.map((c) => c.code));
    if (!codes.has('other')) ctx.addIssue({ code: 'custom', message: 'a category "other" is required' });
    const named = [...table.usualForVisit, ...table.categories.flatMap((c) => c.alsoReads ?? [])];
    for (const code of named) {
      if (!codes.has(code)) ctx.addIssue({ code: 'custom', message: `unknown category ${code}` });
    }
    const blockNames = new Set(table.blocks.map((b) => b.name));
    for (const c of table.categories) {
      if (c.block && !blockNames.has(c.block))
        ctx.addIssue({ code: 'custom', message: `category ${c.code}: unknown block ${c.block}` });
    }
  });

export type ServiceCategory = z.infer<typeof categorySchema>;

const table = loadMappingTable('service-categories.json', tableSchema);

const MAX_NORMALIZED_LABELS = 4096;
const normalizedLabels = new Map<string, string>();

/** Lower case, punctuation to spaces, single spaces: "DENTAL CONSULTATION & PROCEDURE" -> "dental consultation procedure". */
export function normalizeLabel(label: string): string {
  let normalized = normalizedLabels.get(label);
  if (normalized === undefined) {
    normalized = label
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, ' ')
      .trim();
    // Portal labels and the table's keywords are a small vocabulary, matched on every poll: a
    // bounded memo (cleared when full) removes the regex work from the mapping (bench figure 1).
    if (normalizedLabels.size >= MAX_NORMALIZED_LABELS) normalizedLabels.clear();
    normalizedLabels.set(label, normalized);
  }
  return normalized;
}

function containsPhrase(normalized: string, phrase: string): boolean {
  return ` ${normalized} `.includes(` ${normalizeLabel(phrase)} `);
}

/** A phrase list of the table as a set of normalized phrases (built once, at load). */
function phraseSet(list: string[]): ReadonlySet<string> {
  return new Set(list.map(normalizeLabel));
}

function inList(value: string | null | undefined, set: ReadonlySet<string>): boolean {
  if (!value) return false;
  return set.has(normalizeLabel(value));
}

/** The table's phrase lists, normalized at load: read for the network, term and status of every item. */
const PHRASES = {
  networkIn: phraseSet(table.networks.in),
  networkOut: phraseSet(table.networks.out),
  excluded: phraseSet(table.coverageStatus.excluded),
  covered: phraseSet(table.coverageStatus.covered),
  gatekeeperRequired: phraseSet(table.gatekeeper.required),
  gatekeeperNotRequired: phraseSet(table.gatekeeper.notRequired),
  terms: Object.entries(table.terms).map(([code, list]) => [code, phraseSet(list)] as const),
};

const other = table.categories.find((c) => c.code === 'other') as ServiceCategory;

/** All categories (for the service-category CodeSystem). */
export function serviceCategories(): readonly ServiceCategory[] {
  return table.categories;
}

export const DEFAULT_CURRENCY = table.defaultCurrency;

/** A category by its code in the service-category CodeSystem. */
export function categoryByCode(code: string | undefined): ServiceCategory | undefined {
  return code === undefined ? undefined : table.categories.find((c) => c.code === code);
}

const usual: readonly ServiceCategory[] = table.usualForVisit.map((code) => categoryByCode(code) ?? other);

/** The categories the visit summary shows when the request asks none (read once from the table). */
export function usualCategories(): readonly ServiceCategory[] {
  return usual;
}

/** The portal's benefit blocks (copay_details_to_fill names), in the order the narrative shows them. */
export function blockNames(): readonly string[] {
  return table.blocks.map((b) => b.name);
}

const blocksByNormalizedName = new Map(table.blocks.map((b) => [normalizeLabel(b.name), b.name] as const));
/** blockNamed's answers by label (null: no block), bounded like the other memos. */
const blocksByLabel = new Map<string, string | null>();

/** The portal block a label names (normalized whole-value match), else undefined. */
export function blockNamed(label: string | undefined): string | undefined {
  if (!label) return undefined;
  let block = blocksByLabel.get(label);
  if (block === undefined) {
    // Read for every item of every narrative: a bounded memo, as for categoryFor.
    block = blocksByNormalizedName.get(normalizeLabel(label)) ?? null;
    if (blocksByLabel.size >= MAX_NORMALIZED_LABELS) blocksByLabel.clear();
    blocksByLabel.set(label, block);
  }
  return block ?? undefined;
}

/** blockStartingLabel's answers by label (null: no block), bounded like the other memos. */
const blocksStartingLabel = new Map<string, string | null>();

/**
 * The portal block whose name the label starts with, as whole words (`Inpatient & Day Care` ->
 * Inpatient, `Maternity (outpatient)` -> Maternity), else undefined.
 */
export function blockStartingLabel(label: string | undefined): string | undefined {
  if (!label) return undefined;
  let block = blocksStartingLabel.get(label);
  if (block === undefined) {
    const normalized = `${normalizeLabel(label)} `;
    block = null;
    for (const [name, original] of blocksByNormalizedName) {
      if (normalized.startsWith(`${name} `)) {
        block = original;
        break;
      }
    }
    if (blocksStartingLabel.size >= MAX_NORMALIZED_LABELS) blocksStartingLabel.clear();
    blocksStartingLabel.set(label, block);
  }
  return block ?? undefined;
}

/** categoryFor's answers by normalized label. */
const categories = new Map<string, ServiceCategory>();

/** The category of a portal label; "other" when nothing matches. */
export function categoryFor(label: string | undefined): ServiceCategory {
  if (!label) return other;
  const normalized = normalizeLabel(label);
  let category = categories.get(normalized);
  if (category === undefined) {
    category = table.categories.find((c) => c.keywords.some((k) => containsPhrase(normalized, k))) ?? other;
    // Bounded like the label memo: portal labels are a small vocabulary, matched on every mapping.
    if (categories.size >= MAX_NORMALIZED_LABELS) categories.clear();
    categories.set(normalized, category);
  }
  return category;
}

/**
 * A copay_details_to_fill block (Outpatient, Maternity, Specialization, Inpatient) from the table:
 * whether its lines are referral-gated. A block names where its lines sit, never their category
 * (each line's category is its key's: CONSULTATION, LAB...).
 */
export function blockRule(name: string): { referralGated?: boolean } {
  const block = table.blocks.find((b) => normalizeLabel(b.name) === normalizeLabel(name));
  return block?.referralGated ? { referralGated: true } : {};
}

/**
 * item.category: ex-benefitcategory where one exists, always our own code, text = the portal's
 * label (`label` is FHIR text already: CostShare.label), else the category's display.
 */
export function categoryConcept(category: ServiceCategory, label: string | undefined): CodeableConcept {
  const own = coding(SERVICE_CATEGORY_SYSTEM, category.code, category.display);
  const codings = category.benefitCategory
    ? [coding(BENEFIT_CATEGORY_SYSTEM, category.benefitCategory), own]
    : [own];
  return concept(codings, label ?? category.display);
}

/** item.network: in/out of http://terminology.hl7.org/CodeSystem/benefit-network, else the label as text. */
export function networkConcept(label: string | null | undefined): CodeableConcept | undefined {
  const text = fhirText(label);
  if (!text) return undefined;
  if (inList(text, PHRASES.networkIn))
    return concept([coding(BENEFIT_NETWORK_SYSTEM, 'in', 'In Network')], text);
  if (inList(text, PHRASES.networkOut))
    return concept([coding(BENEFIT_NETWORK_SYSTEM, 'out', 'Out of Network')], text);
  return concept([], text);
}

/** item.term: benefit-term code when the scope names one, else the scope as text. */
export function termConcept(scope: string | null | undefined): CodeableConcept | undefined {
  const text = fhirText(scope);
  if (!text) return undefined;
  for (const [code, phrases] of PHRASES.terms) {
    if (inList(text, phrases)) return concept([coding(BENEFIT_TERM_SYSTEM, code)], text);
  }
  return concept([], text);
}

/** item.excluded from coverage_status: true for Not Covered, false for Covered, else unknown. */
export function excludedFrom(status: string | null | undefined): boolean | undefined {
  if (inList(status, PHRASES.excluded)) return true;
  if (inList(status, PHRASES.covered)) return false;
  return undefined;
}

/** is_gatekeeper read through the table: true (GP referral required), false, or unknown ("Not Mentioned"). */
export function gatekeeperRequired(value: string | null | undefined): boolean | undefined {
  if (inList(value, PHRASES.gatekeeperRequired)) return true;
  if (inList(value, PHRASES.gatekeeperNotRequired)) return false;
  return undefined;
}
