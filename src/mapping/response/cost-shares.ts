/**
 * The three places a result gives cost sharing, read into one shape (CostShare), one per
 * future CER item (docs/upstream.md: copay_analysis, new_version_of_copay_analysis.benefits,
 * copay_details_to_fill). No figure is dropped: items.ts turns every one into a benefit.
 */
import type {
  BenefitEntry,
  CopayDetail,
  CopayToFill,
  CostSharing,
  ResultData,
} from '../../upstream/contract.js';
import { fhirText } from './codes.js';
import type { ServiceCategory } from './vocabulary.js';
import { blockRule, categoryFor, excludedFrom } from './vocabulary.js';

export type Loose = string | number | null | undefined;

/** The cost-sharing figures of one item, as the portal gave them. */
export interface Figures {
  percent?: Loose;
  amount?: Loose;
  maximum?: Loose;
  coinsurance?: Loose;
  aggregateCap?: Loose;
  deductible?: Loose;
  deductibleMaximum?: Loose;
  deductibleLegacy?: Loose;
  currency?: string | null;
}

export interface CostShare {
  /** Where in data_dump.data this came from, e.g. copay_analysis.copay_details[2]. */
  source: string;
  /** The portal's label for the category, as FHIR text (fhirText). */
  label: string | undefined;
  category: ServiceCategory;
  referralGated: boolean;
  /** As FHIR text (joinTexts of FHIR texts). */
  name: string | undefined;
  coverageStatus: string | null | undefined;
  network: string | null | undefined;
  /** Scope of the copay maximum (e.g. per claim). */
  term: string | null | undefined;
  figures: Figures;
  notes: string[];
}

/**
 * The present texts, each once, joined with " - "; undefined when none. The callers read each part
 * with fhirText, so a label read once is not read again for every name. A loop: this runs for every item.
 */
function joinTexts(...texts: (string | undefined)[]): string | undefined {
  let joined: string | undefined;
  for (let i = 0; i < texts.length; i += 1) {
    const text = texts[i];
    // Absent, or given by an earlier part: left out.
    if (text === undefined || texts.indexOf(text) < i) continue;
    joined = joined === undefined ? text : `${joined} - ${text}`;
  }
  return joined;
}

/**
 * A value the upstream leaves open, as people read it: an object's keys as words
 * (`{"annual_limit":"AED 15,000"}` -> `annual limit AED 15,000`), a list joined with commas.
 */
function plainText(value: unknown, depth = 0): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value !== 'object') return '';
  // The envelope's nesting is bounded at the edge; this bound only keeps the text short.
  if (depth > 3) return '';
  if (Array.isArray(value))
    return value
      .map((v) => plainText(v, depth + 1))
      .filter(Boolean)
      .join(', ');
  return Object.entries(value)
    .map(([key, v]) => {
      const text = plainText(v, depth + 1);
      return text ? `${key.replace(/_/g, ' ')} ${text}` : '';
    })
    .filter(Boolean)
    .join(', ');
}

/** Text of a value the upstream leaves open (conditions, limits: "null or value"). */
function describe(label: string, value: unknown): string | undefined {
  const clean = fhirText(plainText(value));
  return clean ? `${label}: ${clean}` : undefined;
}

function costSharingFigures(c: CostSharing, currency: string | null | undefined): Figures {
  return {
    percent: c.copay_percentage,
    amount: c.copay_amount,
    maximum: c.copay_maximum_amount,
    coinsurance: c.coinsurance_percentage,
    currency,
  };
}

type ShareFields = Omit<CostShare, 'category' | 'referralGated'> & {
  category?: ServiceCategory;
  gated?: boolean;
};

/** A CostShare built field by field (no rest/spread copies: this runs for every item). */
function share(fields: ShareFields): CostShare {
  const category = fields.category ?? categoryFor(fields.label);
  return {
    source: fields.source,
    label: fields.label,
    category,
    referralGated: fields.gated === true || category.referralGated === true,
    name: fields.name,
    coverageStatus: fields.coverageStatus,
    network: fields.network,
    term: fields.term,
    figures: fields.figures,
    notes: fields.notes,
  };
}

/** copay_analysis.copay_details: one item each, plus one for a cost_sharing block (items.ts drops it when it adds nothing). */
export function fromCopayDetails(details: CopayDetail[]): CostShare[] {
  // Loops that push, not flatMap and spread copies of a shared base: this runs on every mapping.
  const shares: CostShare[] = [];
  details.forEach((d, i) => {
    const source = `copay_analysis.copay_details[${i}]`;
    const label = fhirText(d.visit_type) ?? fhirText(d.scope?.benefit) ?? fhirText(d.scope?.label);
    const notes = [
      fhirText(d.remarks),
      describe('Qualifiers', d.scope?.qualifiers?.length ? d.scope.qualifiers.join(', ') : null),
    ].filter((n): n is string => n !== undefined);
    const coverageStatus = d.coverage_status;
    const network = d.scope?.network;
    shares.push(
      share({
        source,
        label,
        name: joinTexts(
          label,
          fhirText(d.visit_setting ?? d.scope?.visit_setting),
          fhirText(d.scope?.location),
        ),
        coverageStatus,
        network,
        term: d.copay_max_scope,
        notes,
        figures: {
          percent: d.copay_percentage,
          amount: d.copay_amount,
          maximum: d.copay_max_amount,
          coinsurance: d.coinsurance_percentage,
          aggregateCap: d.copay_aggregate_cap,
          currency: d.copay_currency,
        },
      }),
    );
    const c = d.cost_sharing;
    if (!c) return;
    shares.push(
      share({
        source: `${source}.cost_sharing`,
        label,
        name: joinTexts(label, fhirText(c.visit_type), fhirText(c.visit_setting)),
        coverageStatus,
        network,
        term: c.copay_maximum_scope,
        notes,
        figures: costSharingFigures(c, c.copay_currency ?? d.copay_currency),
      }),
    );
  });
  return shares;
}

/** new_version_of_copay_analysis.benefits: one item per cost_sharing entry (one without figures when there is none). */
export function fromBenefits(benefits: BenefitEntry[]): CostShare[] {
  const shares: CostShare[] = [];
  benefits.forEach((b, i) => {
    const source = `copay_analysis.new_version_of_copay_analysis.benefits[${i}]`;
    const standardized = fhirText(b.service_category_standardized);
    const original = fhirText(b.service_category_original);
    const label = original ?? standardized;
    const category = categoryFor(joinTexts(standardized, original));
    const notes = [
      fhirText(b.remarks),
      describe('Conditions', b.conditions),
      describe('Limits', b.limits),
    ].filter((n): n is string => n !== undefined);
    const coverageStatus = b.coverage_status;
    const entries = b.cost_sharing ?? [];
    if (entries.length === 0) {
      shares.push(
        share({
          source,
          label,
          category,
          name: label,
          coverageStatus,
          network: undefined,
          term: undefined,
          notes,
          figures: {},
        }),
      );
      return;
    }
    entries.forEach((c, j) => {
      shares.push(
        share({
          source: `${source}.cost_sharing[${j}]`,
          label,
          category,
          name: joinTexts(label, fhirText(c.visit_type), fhirText(c.visit_setting)),
          coverageStatus,
          network: undefined,
          term: c.copay_maximum_scope,
          notes,
          figures: costSharingFigures(c, c.copay_currency),
        }),
      );
    });
  });
  return shares;
}

/** copay_details_to_fill[].values_to_fill: one item per block and key (CONSULTATION, LAB, ...). */
export function fromValuesToFill(blocks: CopayToFill[]): CostShare[] {
  const shares: CostShare[] = [];
  blocks.forEach((block, i) => {
    const rule = blockRule(block.name);
    const blockName = fhirText(block.name);
    const network = block.primary_network?.network ?? block.primary_network?.network_status;
    for (const [key, v] of Object.entries(block.values_to_fill ?? {})) {
      const notes = v._is_outpatient_fallback
        ? ['Values taken from the outpatient benefits (portal fallback)']
        : [];
      // A copay of "Not Covered" is a coverage status, not a figure: it makes the item excluded.
      const copayIsStatus = excludedFrom(v.copay) !== undefined;
      const label = fhirText(key);
      shares.push(
        share({
          source: `copay_details_to_fill[${i}].values_to_fill.${key}`,
          label,
          // A block's name is where the line sits, not what it covers: LAB of the Maternity block is a lab line.
          category: categoryFor(key),
          gated: rule.referralGated,
          name: joinTexts(blockName, label),
          coverageStatus: copayIsStatus ? v.copay : undefined,
          network,
          term: undefined,
          notes,
          figures: {
            percent: copayIsStatus ? undefined : v.copay,
            amount: v._copayAmount,
            maximum: v._copayMaxAmount,
            deductible: v.deductible,
            deductibleMaximum: v._maxDeductible,
            deductibleLegacy: v._deductibleLegacy === v.deductible ? undefined : v._deductibleLegacy,
          },
        }),
      );
    }
  });
  return shares;
}

/** Every cost share of a result, in the order the upstream gives them. */
export function costSharesOf(data: ResultData): CostShare[] {
  const analysis = data.copay_analysis;
  return fromCopayDetails(analysis?.copay_details ?? []).concat(
    fromBenefits(analysis?.new_version_of_copay_analysis?.benefits ?? []),
    fromValuesToFill(data.copay_details_to_fill ?? []),
  );
}
