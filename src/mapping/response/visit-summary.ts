/**
 * The visit summary: what the patient pays for this visit, one sentence per service category,
 * computed once from a final CER and the categories asked (the request's item[].category; none
 * asked: the visit type's usual ones, mappings/service-categories.json `usualForVisit`). The
 * narrative, the front-desk page, the CDS Hooks card and `$estimate` all read it from here.
 *
 * A category's figures come from one CER item, chosen among the items of that category in the
 * block the visit reads (Outpatient unless the category names another, e.g. Maternity): the
 * portal's copay analysis first, its benefit list second, the form blocks (copay_details_to_fill)
 * last; in-network before out-of-network. Every choice and every reading of a figure is a note
 * (`$estimate` turns them into processNotes): the block or network chosen, a maximum read as per
 * visit, a maximum over another scope (per admission, per case) said in its words and not applied,
 * a deductible read as a per-visit amount, a yearly cap not applied, what other items say.
 */
import type {
  CodeableConcept,
  Coding,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsurance as Insurance,
  CoverageEligibilityResponseInsuranceItem as Item,
} from 'fhir/r4.js';
import { DEFAULT_VISIT_TYPE, visitTypeOf } from '../request/tables.js';
import { BENEFIT_CATEGORY_SYSTEM, BENEFIT_NETWORK_SYSTEM, SERVICE_CATEGORY_SYSTEM } from './codes.js';
import type { BenefitModel, ShareRule } from './benefit-model.js';
import { benefitModelOf, money, shareRuleOf } from './benefit-model.js';
import { sourceOf } from './items.js';
import { escapeXml } from './xhtml.js';
import { classValue, coverageOfInsurance, payerName } from './contained.js';
import type { ServiceCategory } from './vocabulary.js';
import {
  blockNamed,
  blockStartingLabel,
  categoryByCode,
  categoryFor,
  serviceCategories,
  usualCategories,
} from './vocabulary.js';

/** One category of the summary. */
export interface VisitLine {
  category: ServiceCategory;
  /** `Consultation (Outpatient, GN+)`: the category, the block and network its figures come from. */
  label: string;
  block?: string;
  network?: string;
  /** The model of the chosen item's benefits; undefined when the answer has no item for it. */
  model?: BenefitModel;
  rule: ShareRule;
  /** `Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit`. */
  sentence: string;
  /** Every assumption behind the sentence, one per line (processNotes of `$estimate`). */
  notes: string[];
}

/** The summary of one in-force coverage of a final found-member CER. */
export interface VisitSummary {
  payer?: string;
  plan?: string;
  lines: VisitLine[];
}

const DEFAULT_BLOCK = 'Outpatient';
const FORM_SOURCE = 'copay_details_to_fill[';
const BENEFITS_SOURCE = 'copay_analysis.new_version_of_copay_analysis.';

/**
 * The service category a Coding names: a code of this service's service-category CodeSystem,
 * an ex-benefitcategory code (https://hl7.org/fhir/R4/codesystem-ex-benefitcategory.html) or a
 * visit-type code the request mapping knows; undefined for any other system or code.
 */
export function serviceCategoryOf(coding: Coding): ServiceCategory | undefined {
  if (coding.system === SERVICE_CATEGORY_SYSTEM) return categoryByCode(coding.code);
  // The visit-type table first: its title names the service ("Consultation", "Radiology").
  const visit = visitTypeOf(coding);
  if (visit) {
    const category = categoryFor(visit.title);
    // A broad code ("Medical Care") is a consultation visit, as the request mapping reads it.
    return category.code === 'other' ? categoryFor(DEFAULT_VISIT_TYPE.title) : category;
  }
  if (coding.system !== BENEFIT_CATEGORY_SYSTEM) return undefined;
  return serviceCategories().find((c) => c.benefitCategory === coding.code);
}

/** The categories asked, each once, in the order asked; none: the usual ones. */
export function askedCategories(
  asked: readonly (CodeableConcept | undefined)[] = [],
): readonly ServiceCategory[] {
  const found: ServiceCategory[] = [];
  for (const concept of asked) {
    for (const coding of concept?.coding ?? []) {
      const category = serviceCategoryOf(coding);
      if (category && !found.includes(category)) {
        found.push(category);
        break;
      }
    }
  }
  return found.length > 0 ? found : usualCategories();
}

/**
 * The portal block of an item of this name: a form block's (`isForm`: copay_details_to_fill) is the
 * first part of its name; any other's the visit setting its name carries (Outpatient,
 * Maternity...), else the block its label starts with (`Inpatient`, `Inpatient & Day Care`: a
 * visit setting equal to the label is not repeated in the name); undefined when none.
 */
function blockFrom(name: string, isForm: boolean): string | undefined {
  // indexOf, not split: this runs for every item of every narrative.
  let end = name.indexOf(SEPARATOR);
  const first = end < 0 ? name : name.slice(0, end);
  if (isForm) return blockNamed(first) ?? first;
  while (end >= 0) {
    const start = end + SEPARATOR.length;
    end = name.indexOf(SEPARATOR, start);
    const block = blockNamed(end < 0 ? name.slice(start) : name.slice(start, end));
    if (block) return block;
  }
  return blockStartingLabel(first);
}

/** The parts of an item's name (cost-shares.ts joins them with it). */
const SEPARATOR = ' - ';

function codeOf(item: Item): string | undefined {
  return item.category?.coding?.find((c) => c.system === SERVICE_CATEGORY_SYSTEM)?.code;
}

function isOutOfNetwork(item: Item): boolean {
  return item.network?.coding?.some((c) => c.system === BENEFIT_NETWORK_SYSTEM && c.code === 'out') === true;
}

/**
 * What the choice of an item reads of it, computed once per item; the narrative's tables group
 * by the same `block`, so an answer's items are read once for both (narrative.ts).
 */
export interface IndexedItem {
  item: Item;
  code: string | undefined;
  block: string | undefined;
  /** Analysis before benefit list before form block, in-network first (0-5). */
  group: number;
  /** Its place in the answer. */
  order: number;
}

/** The items of one coverage, indexed for the summary and the narrative's tables. */
export function indexItems(items: readonly Item[]): IndexedItem[] {
  const index: IndexedItem[] = [];
  for (let order = 0; order < items.length; order += 1) {
    const item = items[order]!;
    const source = sourceOf(item) ?? '';
    const isForm = source.startsWith(FORM_SOURCE);
    const rank = isForm ? 2 : source.startsWith(BENEFITS_SOURCE) ? 1 : 0;
    index.push({
      item,
      code: codeOf(item),
      block: blockFrom(item.name ?? '', isForm),
      group: rank * 2 + (isOutOfNetwork(item) ? 1 : 0),
      order,
    });
  }
  return index;
}

/**
 * An item's rank as an answer to a category in the block its visit reads (lower is better), or -1
 * when it does not answer it: by group, then the category's own code before a related one, then
 * the answer's order.
 */
function rankFor(entry: IndexedItem, category: ServiceCategory, size: number): number {
  if (entry.code === undefined) return -1;
  const own = entry.code === category.code;
  const related = own ? 0 : category.alsoReads?.includes(entry.code) ? 1 : -1;
  if (related < 0) return -1;
  const block = category.block ?? DEFAULT_BLOCK;
  // A category of a block of its own (Maternity, Inpatient, Specialization) reads its own
  // benefit wherever the portal sets it (maternity's "Outpatient" visit setting), after the
  // items in its block; a related category's item, and any item of an Outpatient category, only
  // in the block the visit reads.
  let away = 0;
  if (entry.block !== undefined && entry.block !== block) {
    if (!own || category.block === undefined) return -1;
    away = 1;
  }
  return ((away * 6 + entry.group) * 2 + related) * size + entry.order;
}

/** The items that answer a category in the block its visit reads, best first. */
function candidatesFor(index: readonly IndexedItem[], category: ServiceCategory): IndexedItem[] {
  const matching: { entry: IndexedItem; rank: number }[] = [];
  for (const entry of index) {
    const rank = rankFor(entry, category, index.length);
    if (rank >= 0) matching.push({ entry, rank });
  }
  return matching.sort((a, b) => a.rank - b.rank).map((m) => m.entry);
}

/** What a chosen item gives: its model and rule, and the other items it read (a merged deductible). */
interface Choice {
  entry: IndexedItem;
  model: BenefitModel;
  rule: ShareRule;
  /** The item whose per-visit deductible completes the chosen one's figures. */
  deductibleFrom?: IndexedItem;
}

/** True when the two networks may be the same (the same text, or one not named). */
function sameNetwork(a: Item, b: Item): boolean {
  const x = a.network?.text;
  const y = b.network?.text;
  return x === undefined || y === undefined || x === y;
}

/**
 * The chosen item of a category among its candidates (best first): the first the portal gives
 * figures for (a covered line without figures gives way to a later one with them, never to an
 * out-of-network one when it is in network or unnamed); then, when its
 * figures have no deductible, the first later item of the same block and network whose figures
 * agree with them (the same percentage and maximum, or none given) and add a per-visit deductible
 * (a consultation of 20% up to AED 500 in the copay analysis, its form line adding AED 20).
 */
function choose(candidates: readonly IndexedItem[]): Choice | undefined {
  const first = candidates[0];
  if (!first) return undefined;
  let chosen: Choice | undefined;
  const firstOut = isOutOfNetwork(first.item);
  for (const entry of candidates) {
    // Out-of-network figures never stand in for an in-network line without figures.
    if (!firstOut && entry !== first && isOutOfNetwork(entry.item)) continue;
    const model = benefitModelOf(entry.item);
    const rule = shareRuleOf(model);
    if (rule.kind !== 'no-figures') {
      chosen = { entry, model, rule };
      break;
    }
  }
  if (!chosen) {
    const model = benefitModelOf(first.item);
    return { entry: first, model, rule: shareRuleOf(model) };
  }
  const { model } = chosen;
  if (model.deductible !== undefined || model.fixed !== undefined || chosen.rule.kind === 'not-covered')
    return chosen;
  for (const other of candidates) {
    if (other === chosen.entry || other.item.excluded === true) continue;
    if (other.block !== chosen.entry.block || !sameNetwork(other.item, chosen.entry.item)) continue;
    const extra = benefitModelOf(other.item);
    if (extra.deductible === undefined) continue;
    if (extra.fixed !== undefined && extra.fixed !== extra.deductible) continue;
    const samePercent =
      extra.percent === model.percent || (model.percent === undefined && (extra.percent ?? 0) === 0);
    const sameCap =
      (extra.perVisitCap === undefined || extra.perVisitCap === model.perVisitCap) &&
      (extra.scopedCap === undefined || extra.scopedCap.amount === model.scopedCap?.amount);
    if (!samePercent || !sameCap) continue;
    const merged: BenefitModel = { ...model, deductible: extra.deductible };
    return { entry: chosen.entry, model: merged, rule: shareRuleOf(merged), deductibleFrom: other };
  }
  return chosen;
}

/**
 * A maximum not applied to one fee, in the portal's scope: `at most AED 1000 per admission`,
 * `at most AED 1000 (no scope given by the portal)`; undefined when there is none.
 */
function scopedCapWords(model: BenefitModel | undefined): string | undefined {
  const capped = model?.scopedCap;
  if (!capped) return undefined;
  const amount = money(capped.amount, model.currency);
  return capped.scope
    ? `at most ${amount} ${capped.scope}`
    : `at most ${amount} (no scope given by the portal)`;
}

/** The sentence's body for a rule. */
function bodyOf(rule: ShareRule, model: BenefitModel | undefined): string {
  const currency = model?.currency ?? 'AED';
  const scoped = scopedCapWords(model);
  switch (rule.kind) {
    case 'not-covered':
      return 'not covered';
    case 'percent':
      if (rule.deductible !== undefined)
        return rule.cap === undefined
          ? `${money(rule.deductible, currency)} per visit (the portal's deductible) plus ${rule.percent}% of the fee, ${scoped ? `the ${rule.percent}% ${scoped}` : 'no maximum given by the portal'}`
          : `${money(rule.deductible, currency)} per visit (the portal's deductible) plus ${rule.percent}% of the fee, the ${rule.percent}% at most ${money(rule.cap, currency)} per visit`;
      if (rule.percent === 0 && rule.cap === undefined) return 'no copay (0% of the fee)';
      if (rule.cap === undefined)
        return scoped
          ? `${rule.percent}% of the fee, ${scoped}`
          : `${rule.percent}% of the fee, no ${model?.yearlyCap ? 'per-visit ' : ''}maximum given by the portal`;
      return `${rule.percent}% of the fee, at most ${money(rule.cap, currency)} per visit`;
    case 'fixed':
      return rule.fromDeductible
        ? `${money(rule.amount, currency)} per visit (the portal's deductible, a fixed amount per visit)`
        : `${money(rule.amount, currency)} per visit`;
    case 'unclear':
      return `${figuresOf(model)}; the portal does not say how ${rule.reason} combine, so no share is given`;
    case 'no-figures':
      if (model?.asGiven) return `no copay figures, the portal says "${model.asGiven}"`;
      return model?.covered === true
        ? 'covered, no copay figures given by the portal'
        : 'no copay figures given by the portal';
  }
}

/** Every figure of a model, for a case the summary cannot reduce to one share. */
function figuresOf(model: BenefitModel | undefined): string {
  if (!model) return '';
  const parts: string[] = [];
  if (model.percent !== undefined) parts.push(`${model.percent}% of the fee`);
  if (model.perVisitCap !== undefined)
    parts.push(`at most ${money(model.perVisitCap, model.currency)} per visit`);
  const scoped = scopedCapWords(model);
  if (scoped !== undefined) parts.push(scoped);
  if (model.fixed !== undefined) parts.push(`${money(model.fixed, model.currency)} per visit`);
  if (model.deductible !== undefined)
    parts.push(`a deductible of ${money(model.deductible, model.currency)} per visit`);
  return parts.join(', ');
}

function labelOf(category: ServiceCategory, block: string | undefined, network: string | undefined): string {
  if (block === undefined && network === undefined) return category.display;
  const where = block === undefined ? network : network === undefined ? block : `${block}, ${network}`;
  return `${category.display} (${where})`;
}

function notesOf(rule: ShareRule, model: BenefitModel | undefined, label: string): string[] {
  const notes: string[] = [];
  if (rule.kind === 'percent' && rule.cap === undefined && rule.percent > 0 && !model?.scopedCap)
    notes.push(
      `${label}: the portal gives no ${model?.yearlyCap ? 'per-visit ' : ''}maximum (or 0) beside the percentage; none is applied.`,
    );
  if (rule.kind === 'percent' && rule.percent > 0 && model?.scopedCap) {
    const amount = money(model.scopedCap.amount, model.currency);
    const scope = model.scopedCap.scope;
    if (scope === undefined)
      notes.push(
        `${label}: the portal gives the maximum of ${amount} on an inpatient line without its scope (per admission, per year...): it is not applied to this fee as if per visit.`,
      );
    else if (scope.startsWith('('))
      notes.push(
        `${label}: the portal gives the maximum of ${amount} with a scope this service does not read ${scope}: it is not applied to this fee as if per visit.`,
      );
    else
      notes.push(
        `${label}: the maximum of ${amount} is ${scope}, not per visit: it is not applied to this fee as if per visit, since what the patient has already paid ${scope.replace(/^(per|each) /, 'this ')} is not known here; the patient pays at most ${amount} ${scope} in all.`,
      );
  }
  if (model?.capScopeAssumed && rule.kind === 'percent')
    notes.push(`${label}: the portal gives the maximum without its scope; it is read as per visit.`);
  if ((rule.kind === 'fixed' && rule.fromDeductible) || (rule.kind === 'percent' && rule.deductible))
    notes.push(
      `${label}: the portal's deductible is read as a fixed amount per visit (UAE outpatient plans), not a yearly deductible.`,
    );
  if (rule.kind === 'percent' && rule.deductible !== undefined) {
    const currency = model?.currency ?? 'AED';
    const part =
      rule.cap === undefined
        ? `${rule.percent}% of the fee`
        : `${rule.percent}% of the fee up to ${money(rule.cap, currency)}`;
    notes.push(
      `${label}: the deductible and the percentage are two charges of one line (the portal gives each with a maximum of its own), so they are added: ${money(rule.deductible, currency)} (at most the fee) plus ${part}, the whole at most the fee.`,
    );
  }
  if (model?.yearlyCap)
    notes.push(
      `${label}: the yearly cap (${model.yearlyCap}) is not applied: what the patient has paid this year is not known here.`,
    );
  return notes;
}

/** What the other items of a category say where it differs from the chosen one's body (at most 3). */
function othersSay(others: readonly IndexedItem[], body: string, category: ServiceCategory): string[] {
  const differing = new Set<string>();
  for (const { item: other } of others) {
    const otherModel = benefitModelOf(other);
    const otherBody = bodyOf(shareRuleOf(otherModel), otherModel);
    if (otherBody !== body) differing.add(`${other.name ?? category.display}: ${otherBody}`);
  }
  return [...differing].slice(0, 3).map((text) => `The portal also gives ${text}.`);
}

/** The line of one category from the items of one coverage. */
export function visitLineOf(items: readonly Item[], category: ServiceCategory): VisitLine {
  return lineOf(indexItems(items), category);
}

function lineOf(index: readonly IndexedItem[], category: ServiceCategory, withNotes = true): VisitLine {
  const candidates = candidatesFor(index, category);
  const choice = choose(candidates);
  if (!choice) {
    return {
      category,
      label: category.display,
      rule: { kind: 'no-figures' },
      sentence: `${category.display}: not in the portal's answer`,
      notes: withNotes
        ? [
            `${category.display}: the portal's answer has no benefit for this category; no share is estimated.`,
          ]
        : [],
    };
  }
  const { entry, model, rule } = choice;
  const { item: chosen, block } = entry;
  const network = chosen.network?.text;
  const label = labelOf(category, block, network);
  const body = bodyOf(rule, model);
  const notes = withNotes ? notesOf(rule, model, label) : [];
  if (withNotes && (block !== undefined || network !== undefined))
    notes.unshift(
      `${label}: figures of the portal's ${block ? `${block} block` : 'answer'}${network ? `, network ${network}` : ''} (${chosen.name ?? sourceOf(chosen) ?? ''}).`,
    );
  if (withNotes && choice.deductibleFrom && model.deductible !== undefined)
    notes.push(
      `${label}: the deductible of ${money(model.deductible, model.currency)} per visit is from ${choice.deductibleFrom.item.name ?? sourceOf(choice.deductibleFrom.item) ?? ''}, which gives the same percentage and maximum.`,
    );
  // What the other items of the category say, when it differs: the portal's answer is shown, not hidden.
  if (withNotes)
    notes.push(
      ...othersSay(
        candidates.filter((c) => c !== entry),
        body,
        category,
      ),
    );
  const cap =
    model.yearlyCap && rule.kind !== 'not-covered' ? `; yearly cap on copays: ${model.yearlyCap}` : '';
  const line: VisitLine = { category, label, model, rule, sentence: `${label}: ${body}${cap}`, notes };
  if (block !== undefined) line.block = block;
  if (network !== undefined) line.network = network;
  return line;
}

/** True for a final answer (complete or partial) of a found member whose coverage is in force. */
export function isFoundInForce(cer: CoverageEligibilityResponse): boolean {
  return (
    (cer.outcome === 'complete' || cer.outcome === 'partial') &&
    (cer.insurance ?? []).some((i) => i.inforce === true)
  );
}

/**
 * The visit summary of a CER: one per in-force coverage of a final found-member answer, none
 * otherwise (queued, error, not eligible). `asked`: the request's item[].category.
 * `notes: false` leaves every line's notes empty (the narrative shows the sentences only, and
 * skips their cost on every mapping).
 */
export function visitSummary(
  cer: CoverageEligibilityResponse,
  asked?: readonly (CodeableConcept | undefined)[],
  options: { notes?: boolean } = {},
): VisitSummary[] {
  if (!isFoundInForce(cer)) return [];
  const categories = askedCategories(asked);
  const summaries: VisitSummary[] = [];
  for (const insurance of cer.insurance ?? []) {
    if (insurance.inforce !== true) continue;
    const index = indexItems(insurance.item ?? []);
    summaries.push(coverageSummary(cer, insurance, categories, index, options.notes !== false));
  }
  return summaries;
}

/**
 * The summary of one in-force coverage, from its items indexed once (indexItems) and the
 * categories asked (askedCategories): visitSummary's part for one coverage, for a caller that
 * also reads the index (the narrative's tables).
 */
export function coverageSummary(
  cer: CoverageEligibilityResponse,
  insurance: Insurance,
  categories: readonly ServiceCategory[],
  index: readonly IndexedItem[],
  withNotes: boolean,
): VisitSummary {
  const coverage = coverageOfInsurance(cer, insurance);
  const summary: VisitSummary = { lines: categories.map((category) => lineOf(index, category, withNotes)) };
  const payer = payerName(coverage);
  if (payer) summary.payer = payer;
  const plan = classValue(coverage, 'plan');
  if (plan) summary.plan = plan;
  return summary;
}

const HEADING = 'What to collect';
const SHORT_MAX = 140;

function shortShare(line: VisitLine): string {
  const name = line.category.display.toLowerCase();
  const rule = line.rule;
  const currency = line.model?.currency ?? 'AED';
  switch (rule.kind) {
    case 'not-covered':
      return `${name} not covered`;
    case 'percent':
      if (rule.deductible !== undefined)
        return `${name} ${money(rule.deductible, currency)} + ${rule.percent}%${rule.cap === undefined ? '' : ` up to ${money(rule.cap, currency)}`}`;
      if (rule.percent === 0 && rule.cap === undefined) return `${name} no copay`;
      if (rule.cap === undefined && line.model?.scopedCap) {
        const scoped = line.model.scopedCap;
        return `${name} ${rule.percent}% up to ${money(scoped.amount, currency)}${scoped.scope ? ` ${scoped.scope}` : ', no scope given'}`;
      }
      return rule.cap === undefined
        ? `${name} ${rule.percent}%, no maximum given`
        : `${name} ${rule.percent}% up to ${money(rule.cap, currency)}`;
    case 'fixed':
      return `${name} ${money(rule.amount, currency)} per visit`;
    case 'unclear':
    case 'no-figures':
      return `${name}: see details`;
  }
}

function firstSentence(text: string | undefined): string | undefined {
  if (!text) return undefined;
  const match = /^.*?[.!?](?=\s|$)/.exec(text);
  return (match?.[0] ?? text).replace(/\.$/, '');
}

/** The outcome in a few words, for a line that has no room for more. */
function outcomeWords(cer: CoverageEligibilityResponse): string {
  if (cer.outcome === 'queued') return 'Checking eligibility at the payer portal';
  const insurance = cer.insurance ?? [];
  if (cer.outcome !== 'error' && insurance.some((i) => i.inforce === false))
    return `Not eligible: ${firstSentence(cer.disposition) ?? 'see the answer'}`;
  const why = firstSentence(cer.error?.[0]?.code.text ?? cer.disposition);
  return why ? `No determination: ${why}` : 'No determination';
}

function cut(text: string): string {
  return text.length <= SHORT_MAX ? text : `${text.slice(0, SHORT_MAX - 1).trimEnd()}…`;
}

/**
 * One line of at most 140 characters (a CDS Hooks card's `summary`): the outcome and, for a
 * found member in force, the share of the first categories that fit, e.g.
 * `Eligible: Daman Enhanced Plus; consultation 20% up to AED 50`.
 */
export function summaryLine(cer: CoverageEligibilityResponse, summaries: readonly VisitSummary[]): string {
  const first = summaries[0];
  if (!first) return cut(outcomeWords(cer));
  const who = first.plan ?? first.payer;
  let text = summaries.length > 1 ? `Eligible at ${summaries.length} payers` : 'Eligible';
  if (who) text += `: ${who}`;
  first.lines.forEach((line, index) => {
    const part = `${index === 0 ? '; ' : ', '}${shortShare(line)}`;
    if (index === 0 || text.length + part.length <= SHORT_MAX) text += part;
  });
  return cut(text);
}

function headingOf(summary: VisitSummary, several: boolean): string {
  if (!several) return HEADING;
  const who = [summary.payer, summary.plan].filter((p): p is string => p !== undefined).join(', ');
  return who ? `${HEADING} (${who})` : HEADING;
}

const MARKDOWN_SPECIALS = /[\\`*_[\]#|<>~]/g;

/** Text as GitHub-flavoured Markdown shows it literally. */
export function escapeMarkdown(text: string): string {
  return text.replace(MARKDOWN_SPECIALS, (c) => `\\${c}`);
}

/** The summary as GitHub-flavoured Markdown (a CDS Hooks card's `detail`): a bold heading, a list. */
export function summaryMarkdown(summaries: readonly VisitSummary[]): string {
  return summaries
    .map((summary) => {
      const items = summary.lines.map((line) => `- ${escapeMarkdown(line.sentence)}`).join('\n');
      return `**${escapeMarkdown(headingOf(summary, summaries.length > 1))}**\n\n${items}`;
    })
    .join('\n\n');
}

/**
 * The summary as FHIR XHTML (https://hl7.org/fhir/R4/narrative.html), the narrative's first
 * block: per coverage `<div><h2>What to collect</h2><ul><li>sentence</li>...</ul></div>` (no
 * attribute: the page and the narrative's rules allow none but links' href).
 * Every text is escaped (escapeXml): no markup comes from the portal.
 */
export function summaryXhtml(summaries: readonly VisitSummary[]): string {
  return summaries
    .map((summary) => {
      const items = summary.lines.map((line) => `<li>${escapeXml(line.sentence)}</li>`).join('');
      return `<div><h2>${escapeXml(headingOf(summary, summaries.length > 1))}</h2><ul>${items}</ul></div>`;
    })
    .join('');
}
