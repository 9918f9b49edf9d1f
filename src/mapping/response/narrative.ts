/**
 * The human-readable narrative (`text`) of a CoverageEligibilityResponse, for any EHR that shows
 * FHIR narrative and for the front-desk page (docs/front-desk.md).
 *
 * Built from the finished structured CER itself, so the narrative can never say something the
 * structured data does not (one source of truth): the outcome in plain words first, then per
 * insurance the payer, plan, network and policy period, a table with one row per service category
 * (coverage, copay %, amount, maximum, currency, and a Notes cell with the item's other benefits
 * and its description), the GP-referral rule, every portal warning verbatim, the multi-card
 * statement, the documents, and when the check was made.
 *
 * FHIR R4 Narrative (https://hl7.org/fhir/R4/narrative.html): status `generated` (the text is
 * entirely generated from the structured data); `div` is XHTML in the xhtml namespace. txt-1: only
 * the basic HTML formatting elements, no `<script>`, `<style>`, forms or event attributes; txt-2:
 * non-whitespace content. Every text from the upstream or the request goes through `escapeXml`,
 * which emits only the XML entities (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`): named HTML
 * entities such as `&nbsp;` are not allowed in FHIR XHTML.
 */
import type {
  CodeableConcept,
  Coverage,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsurance as Insurance,
  CoverageEligibilityResponseInsuranceItem as Item,
  CoverageEligibilityResponseInsuranceItemBenefit as Benefit,
  Extension,
  Narrative,
} from 'fhir/r4.js';
import type { ExtensionId } from './codes.js';
import { extensionUrl } from './codes.js';
import { benefitsByType } from './benefit-model.js';
import type { IndexedItem, VisitSummary } from './visit-summary.js';
import {
  askedCategories,
  coverageSummary,
  indexItems,
  isFoundInForce,
  summaryXhtml,
} from './visit-summary.js';
import { blockNames, categoryFor } from './vocabulary.js';
import { escapeXml } from './xhtml.js';
import { documentsXhtml } from './evidence.js';
import { classValue, coverageOfInsurance, payerName } from './contained.js';
import { parsePercent } from '../../upstream/contract.js';

const XHTML_NS = 'http://www.w3.org/1999/xhtml';

/** An ISO instant as people read it at a desk: `2026-11-22 09:58 UTC`. */
function when(instant: string | undefined): string {
  if (!instant) return 'an unknown time';
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(instant);
  return match ? `${match[1]} ${match[2]} UTC` : instant;
}

function sub(ext: Extension | undefined, url: string): Extension | undefined {
  return ext?.extension?.find((e) => e.url === url);
}

function subText(ext: Extension | undefined, url: string): string | undefined {
  const part = sub(ext, url);
  if (!part) return undefined;
  if (part.valueString !== undefined) return part.valueString;
  if (part.valueCode !== undefined) return part.valueCode;
  if (part.valuePositiveInt !== undefined) return String(part.valuePositiveInt);
  if (part.valueUnsignedInt !== undefined) return String(part.valueUnsignedInt);
  if (part.valueBoolean !== undefined) return part.valueBoolean ? 'yes' : 'no';
  return undefined;
}

function extensionsOf(list: Extension[] | undefined, id: ExtensionId): Extension[] {
  const url = extensionUrl(id);
  return (list ?? []).filter((e) => e.url === url);
}

function firstExtension(list: Extension[] | undefined, id: ExtensionId): Extension | undefined {
  const url = extensionUrl(id);
  return list?.find((e) => e.url === url);
}

/** The outcome in plain words: the first line of the narrative. */
function headline(cer: CoverageEligibilityResponse): string {
  const insurance = cer.insurance ?? [];
  switch (cer.outcome) {
    case 'queued':
      return `Still checking since ${when(cer.created)}`;
    case 'error':
      return 'No determination';
    default: {
      const eligible = insurance.filter((i) => i.inforce === true).length;
      if (eligible > 1) return `Eligible at ${eligible} payers`;
      if (eligible === 1) return 'Eligible';
      if (insurance.some((i) => i.inforce === false)) return 'Not eligible';
      return 'No determination';
    }
  }
}

/**
 * What the headline needs next: the reason, or what to do, as the disposition says it. Left out
 * for one eligible coverage: its sentences (GP rule, warnings, cards) are all shown below from the
 * structured elements, and the narrative stays small.
 */
function headlineDetail(cer: CoverageEligibilityResponse): string | undefined {
  const insurance = cer.insurance ?? [];
  if (cer.outcome === 'complete' && insurance.length === 1 && insurance[0]?.inforce === true)
    return undefined;
  return cer.disposition ?? cer.error?.[0]?.code.text;
}

function row(label: string, value: string | undefined): string {
  return value ? `<li>${label}: ${escapeXml(value)}</li>` : '';
}

function periodText(coverage: Coverage | undefined, details: Extension | undefined): string | undefined {
  const period = coverage?.period;
  if (period?.start || period?.end) return `${period.start ?? 'not stated'} to ${period.end ?? 'not stated'}`;
  return subText(details, 'periodAsGiven');
}

/** Payer, plan, package, network, policy period. */
function policyFacts(insurance: Insurance, coverage: Coverage | undefined): string {
  const details = firstExtension(coverage?.extension, 'policy-details');
  const payer = payerName(coverage);
  const lines = [
    row('Payer', payer),
    row('Plan', classValue(coverage, 'plan')),
    row('Package', classValue(coverage, 'subplan')),
    row('Network', coverage?.network),
    row('Policy period', periodText(coverage, details)),
    row('Eligible', insurance.inforce === undefined ? 'not determined' : insurance.inforce ? 'yes' : 'no'),
  ].join('');
  return `<ul>${lines}</ul>`;
}

const COVERAGE_STATUS = 'Coverage status: ';
const CURRENCY_AS_GIVEN = 'Currency as given: ';

/**
 * An item's description (items.ts joins its parts with "; "), read in one pass: the coverage
 * status and the currency word it gives (each shown in a cell of its own, the first given), and
 * its other parts (the Notes).
 */
interface Description {
  status?: string;
  currency?: string;
  others: string[];
}

function descriptionOf(item: Item): Description {
  const read: Description = { others: [] };
  if (!item.description) return read;
  for (const part of item.description.split('; ')) {
    const trimmed = part.trim();
    if (trimmed.length === 0) continue;
    if (trimmed.startsWith(COVERAGE_STATUS)) read.status ??= trimmed.slice(COVERAGE_STATUS.length);
    else if (trimmed.startsWith(CURRENCY_AS_GIVEN)) read.currency ??= trimmed.slice(CURRENCY_AS_GIVEN.length);
    else read.others.push(trimmed);
  }
  return read;
}

/**
 * The currency of the item's amounts: the ISO code of its Money, else the portal's own word
 * (a Money without a code, the word kept in the description as "Currency as given: ..."), so an
 * amount never stands without the unit the CER has for it.
 */
function currencyOfItem(item: Item, description: Description, amount?: Benefit, maximum?: Benefit): string {
  // The copay amount's currency first, then the maximum's, then any benefit's: a loop, no list
  // built (this runs for every item of every narrative).
  let anyAmount = false;
  for (let i = -2; i < (item.benefit?.length ?? 0); i += 1) {
    const money = (i === -2 ? amount : i === -1 ? maximum : item.benefit?.[i])?.allowedMoney;
    if (!money) continue;
    if (money.currency) return money.currency;
    anyAmount = true;
  }
  return anyAmount ? (description.currency ?? '') : '';
}

function benefitValue(benefit: Benefit | undefined, percent: boolean): string {
  if (!benefit) return '';
  if (benefit.allowedUnsignedInt !== undefined) return `${benefit.allowedUnsignedInt}${percent ? '%' : ''}`;
  if (benefit.allowedMoney?.value !== undefined) return String(benefit.allowedMoney.value);
  return benefit.allowedString ?? '';
}

/** Short names of the benefit types the table has no column for; others by their display or code. */
const OTHER_BENEFITS: Readonly<Record<string, { label: string; percent: boolean }>> = {
  'copay-aggregate-cap': { label: 'Copay cap', percent: false },
  deductible: { label: 'Deductible (per visit)', percent: false },
  'deductible-maximum': { label: 'Deductible maximum', percent: false },
  'deductible-legacy': { label: 'Deductible (legacy form)', percent: false },
  'coinsurance-percent': { label: 'Coinsurance', percent: true },
};

/** A benefit the table has no column for: its type and value, money with its currency. */
function otherBenefit(benefit: Benefit, currency: string): string | undefined {
  const coding = benefit.type.coding?.[0];
  const known = coding?.code ? OTHER_BENEFITS[coding.code] : undefined;
  const label = known?.label ?? benefit.type.text ?? coding?.display ?? coding?.code ?? 'Benefit';
  const value = benefitValue(benefit, known?.percent ?? false);
  if (!value) return undefined;
  const unit = benefit.allowedMoney ? (benefit.allowedMoney.currency ?? currency) : '';
  return `${label}: ${value}${unit ? ` ${unit}` : ''}`;
}

function coverageStatus(item: Item, description: Description): string {
  if (item.excluded === true) return 'Not covered';
  if (description.status) return description.status;
  return item.excluded === false ? 'Covered' : '';
}

function categoryName(item: Item): string {
  const category = item.category;
  return category?.text ?? category?.coding?.find((c) => c.display)?.display ?? '';
}

const isZero = (benefit: Benefit | undefined): boolean => benefit?.allowedMoney?.value === 0;

/**
 * Deductibles that say nothing to a reader: a 0 deductible, its maximum when there is no
 * deductible or it is 0, and a deductible equal to the copay amount (the same per-visit amount,
 * shown once).
 */
function silentBenefits(item: Item, amount: Benefit | undefined, deductible: Benefit | undefined): Benefit[] {
  const silent: Benefit[] = [];
  const none = deductible === undefined || isZero(deductible);
  const sameAsAmount =
    amount?.allowedMoney?.value !== undefined &&
    deductible?.allowedMoney?.value === amount.allowedMoney.value;
  if (deductible && (none || sameAsAmount)) silent.push(deductible);
  for (const benefit of item.benefit ?? []) {
    // A deductible maximum without a deductible, or of 0 (none given), says nothing.
    if ((none || isZero(benefit)) && benefit.type.coding?.some((c) => c.code === 'deductible-maximum'))
      silent.push(benefit);
  }
  return silent;
}

/**
 * The Notes: every benefit without a column of its own (aggregate cap, deductibles, coinsurance,
 * a second copay), then the item's description without the parts shown in other cells
 * (coverage status, currency as given).
 */
function notesOf(
  item: Item,
  description: Description,
  shown: (Benefit | undefined)[],
  currency: string,
): string[] {
  const notes: string[] = [];
  for (const benefit of item.benefit ?? []) {
    if (shown.includes(benefit)) continue;
    const other = otherBenefit(benefit, currency);
    if (other !== undefined) notes.push(other);
  }
  for (const part of description.others) notes.push(part);
  return notes;
}

const NONE_GIVEN = 'none given by the portal';

/**
 * The maximum cell: the amount with its scope ("50 (per claim)"); beside a percentage, a maximum
 * the portal gives as 0 or not at all reads "none given by the portal", never a 0 that reads as
 * "pay nothing" (issue 28). A text maximum other than "Nil" is shown as given.
 */
function maximumCell(item: Item, percent: Benefit | undefined, maximum: Benefit | undefined): string {
  const value = benefitValue(maximum, false);
  const given = percent?.allowedUnsignedInt ?? parsePercent(percent?.allowedString);
  const hasPercent = given !== undefined && given !== null && given > 0;
  if (hasPercent && (maximum === undefined || isZero(maximum) || /^nil$/i.test(value))) return NONE_GIVEN;
  if (!maximum || isZero(maximum)) return '';
  const scope = item.term?.text;
  return scope ? `${value} (${scope})` : value;
}

/** One table row: the fact (category, network, figures) and its notes. */
interface Row {
  code: string;
  /** The category the portal's label names ("LAB" and "Laboratory" alike; a block may set code). */
  label: string;
  name: string;
  network: string | undefined;
  /** Coverage, copay %, amount, maximum, currency. */
  figures: string[];
  notes: string[];
}

/** The row of an indexed item (its category code read once, by indexItems). */
function rowOf({ item, code }: IndexedItem): Row {
  const byType = benefitsByType(item);
  const { percent, amount, maximum } = byType;
  const description = descriptionOf(item);
  const currency = currencyOfItem(item, description, amount, maximum);
  const name = categoryName(item);
  // A copay amount of 0 beside a percentage is no fixed amount, and a 0% beside an amount no
  // percentage: left empty rather than "0".
  const amountShown = isZero(amount) && percent !== undefined ? undefined : amount;
  const percentShown =
    amountShown?.allowedMoney && benefitValue(percent, true) === '0%' ? undefined : percent;
  const maximumText = maximumCell(item, percent, maximum);
  const money =
    amountShown?.allowedMoney || (maximum?.allowedMoney && maximumText !== NONE_GIVEN && maximumText !== '');
  const shown: (Benefit | undefined)[] = silentBenefits(item, amount, byType.deductible);
  shown.push(percent, amount, maximum);
  return {
    code: code ?? name,
    name,
    label: categoryFor(name).code,
    network: item.network?.text,
    figures: [
      coverageStatus(item, description),
      benefitValue(percentShown, true),
      benefitValue(amountShown, false),
      maximumText,
      money ? currency : '',
    ],
    notes: notesOf(item, description, shown, currency),
  };
}

/** A maximum cell without its scope: "50 (per claim)" and "50" state the same figure. */
const figureOf = (cell: string): string => cell.replace(/ \(.*\)$/, '');

/** Two rows state the same fact: each figure equal, or given by one of them only (coverage, scope). */
function sameFigures(a: string[], b: string[]): boolean {
  return a.every((cell, i) => {
    const other = b[i] ?? '';
    if (i === 0 || i === 3)
      return cell === other || cell === '' || other === '' || figureOf(cell) === figureOf(other);
    return cell === other;
  });
}

/** The row's figures with what `other` adds (a coverage status, a scope the row lacked). */
function fill(row: Row, other: Row): void {
  row.figures = row.figures.map((cell, i) => {
    const given = other.figures[i] ?? '';
    return given.length > cell.length && (cell === '' || figureOf(given) === figureOf(cell)) ? given : cell;
  });
  row.network ??= other.network;
  for (const note of other.notes) if (!row.notes.includes(note)) row.notes.push(note);
}

/**
 * The rows of one block: the same fact (category, figures, and the same network or one not
 * named) once, what each copy adds kept, each note once.
 */
function blockRows(entries: readonly IndexedItem[]): Row[] {
  const rows: Row[] = [];
  for (const entry of entries) {
    const row = rowOf(entry);
    const same = rows.find((r) => sameFact(r, row));
    if (same) fill(same, row);
    else rows.push(row);
  }
  return rows;
}

/** Two rows state the same fact: category, figures, and the same network or one not named. */
function sameFact(a: Row, b: Row): boolean {
  return (
    a.code === b.code &&
    a.label === b.label &&
    (a.network === b.network || a.network === undefined || b.network === undefined) &&
    sameFigures(a.figures, b.figures)
  );
}

const TABLE_HEAD = [
  'Service category',
  'Coverage',
  'Copay %',
  'Copay amount',
  'Copay maximum',
  'Currency',
  'Notes',
]
  .map((h) => `<th>${h}</th>`)
  .join('');

function tableOf(rows: Row[]): string {
  let body = '';
  for (const row of rows) {
    // Each cell escaped on its own; no list of cells built (this runs for every row).
    body += `<tr><td>${escapeXml(row.network ? `${row.name} (${row.network})` : row.name)}</td>`;
    for (const figure of row.figures) body += `<td>${escapeXml(figure)}</td>`;
    body += `<td>${escapeXml(row.notes.join('; '))}</td></tr>`;
  }
  return `<table><thead><tr>${TABLE_HEAD}</tr></thead><tbody>${body}</tbody></table>`;
}

const NO_BLOCK = 'Other benefits (no block named by the portal)';

/**
 * The benefits table, one per portal block (Outpatient, Maternity, Specialization, Inpatient, in
 * that order; then the benefits the portal names no block for), each under the block's name.
 */
function itemTables(index: readonly IndexedItem[]): string {
  if (index.length === 0) return '';
  const groups = new Map<string, IndexedItem[]>();
  for (const entry of index) {
    const block = entry.block ?? NO_BLOCK;
    const group = groups.get(block);
    if (group) group.push(entry);
    else groups.set(block, [entry]);
  }
  // The table's blocks in its order, then the others in the answer's order.
  let html = '';
  for (const block of blockNames()) {
    const group = groups.get(block);
    if (!group) continue;
    html += blockTable(block, group);
    groups.delete(block);
  }
  for (const [block, group] of groups) html += blockTable(block, group);
  return html;
}

function blockTable(block: string, entries: readonly IndexedItem[]): string {
  const title = block === NO_BLOCK ? block : `${block} benefits`;
  return `<h3>${escapeXml(title)}</h3>${tableOf(blockRows(entries))}`;
}

/** The GP-referral rule: the portal's is_gatekeeper value always shown when it gave one. */
function gpRule(insurance: Insurance): string {
  const ext = firstExtension(insurance.extension, 'gp-referral-required');
  if (!ext) return '';
  const required = sub(ext, 'required')?.valueBoolean;
  const given = subText(ext, 'isGatekeeper');
  const rule =
    required === true
      ? 'A GP referral is required for specialist visits'
      : required === false
        ? 'No GP referral is required for specialist visits'
        : 'The payer portal did not say whether a GP referral is required';
  const source = required === undefined ? '' : 'payer portal: ';
  const asGiven = given ? ` (${source}is_gatekeeper = "${escapeXml(given)}")` : '';
  return `<p>${rule}${asGiven}.</p>`;
}

function multiCard(insurance: Insurance): string {
  const ext = firstExtension(insurance.extension, 'multi-card');
  if (!ext) return '';
  const index = subText(ext, 'cardIndex');
  const total = subText(ext, 'cardTotal') ?? 'several';
  const pkg = subText(ext, 'package') ?? 'not stated';
  const network = subText(ext, 'network') ?? 'not stated';
  const which = index ? `this is card ${index}` : 'this is one of them';
  return `<p>${escapeXml(`The member holds ${total} cards; ${which} (package ${pkg}, network ${network}). Other cards are not shown.`)}</p>`;
}

/** Every portal warning verbatim, with its type. */
function warnings(list: Extension[] | undefined): string {
  const items = extensionsOf(list, 'portal-message').flatMap((ext) => {
    const message = subText(ext, 'message');
    if (!message) return [];
    const type = subText(ext, 'type') === 'information' ? 'Information' : 'Warning';
    return [`<li>${type} from the payer portal: "${escapeXml(message)}"</li>`];
  });
  return items.length ? `<ul>${items.join('')}</ul>` : '';
}

function insuranceSection(
  cer: CoverageEligibilityResponse,
  insurance: Insurance,
  index: readonly IndexedItem[] | undefined,
): string {
  const coverage = coverageOfInsurance(cer, insurance);
  return [
    policyFacts(insurance, coverage),
    // A coverage not in force shows why (the headline and disposition), not a table of "Covered".
    index ? itemTables(index) : '',
    gpRule(insurance),
    warnings(insurance.extension),
    multiCard(insurance),
  ].join('');
}

/**
 * The narrative of a CER, from its structured elements and the categories the request asked
 * (`asked`: its item[].category): the visit summary first for a final found-member answer in
 * force (visit-summary.ts), then the outcome, each coverage and its tables per portal block.
 */
export function narrativeOf(
  cer: CoverageEligibilityResponse,
  asked?: readonly (CodeableConcept | undefined)[],
): Narrative {
  const detail = headlineDetail(cer);
  const insurance = cer.insurance ?? [];
  // Each in-force coverage's items are read once (indexItems), for its summary and its tables.
  const indexes = insurance.map((i) => (i.inforce === true ? indexItems(i.item ?? []) : undefined));
  const summaries: VisitSummary[] = [];
  if (isFoundInForce(cer)) {
    const categories = askedCategories(asked);
    insurance.forEach((i, n) => {
      const index = indexes[n];
      if (index) summaries.push(coverageSummary(cer, i, categories, index, false));
    });
  }
  const parts = [
    summaryXhtml(summaries),
    `<p><b>${escapeXml(headline(cer))}</b></p>`,
    detail ? `<p>${escapeXml(detail)}</p>` : '',
    ...insurance.map((i, n) => insuranceSection(cer, i, indexes[n])),
    warnings(cer.extension),
    documentsXhtml(cer),
    cer.outcome === 'queued' ? '' : `<p>Checked: ${escapeXml(when(cer.created))}</p>`,
  ];
  return { status: 'generated', div: `<div xmlns="${XHTML_NS}">${parts.join('')}</div>` };
}

/** The CER with its narrative, `text` placed where R4 orders it (after id and meta). */
export function withNarrative(
  cer: CoverageEligibilityResponse,
  asked?: readonly (CodeableConcept | undefined)[],
): CoverageEligibilityResponse {
  const { resourceType, id, meta, text: _old, ...rest } = cer;
  return {
    resourceType,
    ...(id !== undefined ? { id } : {}),
    ...(meta !== undefined ? { meta } : {}),
    text: narrativeOf(cer, asked),
    ...rest,
  };
}
