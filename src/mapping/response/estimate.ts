/**
 * The patient-share estimate of `$estimate` as a ClaimResponse (https://hl7.org/fhir/R4/claimresponse.html):
 * `use` predetermination, one item per fee asked, each with the adjudications `submitted` (the
 * fee), `copay` (what the patient pays) and `benefit` (what the payer pays), from the category's
 * line of the visit summary (visit-summary.ts) and its share (benefit-model.ts). Pure: the CER,
 * the fees and the time come in. Adjudication categories:
 * http://terminology.hl7.org/CodeSystem/adjudication (https://hl7.org/fhir/R4/codesystem-adjudication.html).
 */
import type {
  ClaimResponse,
  ClaimResponseItemAdjudication as Adjudication,
  ClaimResponseProcessNote as ProcessNote,
  ClaimResponseTotal as Total,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsuranceItem as Item,
  Narrative,
} from 'fhir/r4.js';
import { PROFILES } from '../../fhir/canonical.js';
import { escapeXml, generatedNarrative } from '../../fhir/xhtml.js';
import type { Share } from './benefit-model.js';
import { money, shareOf } from './benefit-model.js';
import type { VisitLine } from './visit-summary.js';
import { visitLineOf } from './visit-summary.js';
import type { ServiceCategory } from './vocabulary.js';

const ADJUDICATION_SYSTEM = 'http://terminology.hl7.org/CodeSystem/adjudication';
const CLAIM_TYPE_SYSTEM = 'http://terminology.hl7.org/CodeSystem/claim-type';
export const ESTIMATE_CURRENCY = 'AED';

/** One fee to estimate: the category asked and the fee in AED (at most 2 decimals). */
export interface EstimateItem {
  category: ServiceCategory;
  fee: number;
}

/** An item's line and share (undefined: no share, no figures or figures that do not combine). */
export interface ItemEstimate {
  item: EstimateItem;
  line: VisitLine;
  share: Share | undefined;
}

const amount = (value: number) => ({ value, currency: ESTIMATE_CURRENCY });

/** An amount in an adjudication category: an item's adjudication and a total have the same shape. */
function adjudication(code: 'submitted' | 'copay' | 'benefit', value: number): Adjudication & Total {
  return { category: { coding: [{ system: ADJUDICATION_SYSTEM, code }] }, amount: amount(value) };
}

/** Each fee's line of the visit summary (from the coverage's items) and its share. */
export function estimateItems(items: readonly Item[], asked: readonly EstimateItem[]): ItemEstimate[] {
  return asked.map((item) => {
    const line = visitLineOf(items, item.category);
    return { item, line, share: shareOf(line.rule, item.fee) };
  });
}

/** Sums in fils, so the totals are exact to 2 decimals. */
const sum = (values: number[]): number => values.reduce((a, v) => a + Math.round(v * 100), 0) / 100;

/** The date of the portal's answer as people read it (`2026-11-22`). */
function answerDate(cer: CoverageEligibilityResponse): string {
  return cer.created.slice(0, 10);
}

/** `item 2 (Laboratory, AED 90)`: an item as the notes name it. */
function itemName(estimate: ItemEstimate, index: number): string {
  return `item ${index + 1} (${estimate.line.category.display}, ${money(estimate.item.fee, ESTIMATE_CURRENCY)})`;
}

/** `a, b and c`. */
function listed(parts: readonly string[]): string {
  return parts.length < 2
    ? (parts[0] ?? '')
    : `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
}

/**
 * The note on the totals when an item has no share: which items the copay and benefit totals
 * leave out (they count the others), or that there are none when no item has a share.
 */
export function totalsNote(
  estimates: readonly ItemEstimate[],
  left: readonly number[],
  counted: number,
): string {
  const names = listed(left.map((index) => itemName(estimates[index]!, index)));
  if (counted === 0)
    return `No copay or benefit total: no item has an estimated share (${names}: the portal's answer gives no figures this estimate can apply).`;
  return `The copay and benefit totals count only the items with an estimated share; not counted: ${names}, for which the portal's answer gives no figures this estimate can apply. The submitted total is of every item.`;
}

const cell = (value: number | undefined) =>
  `<td>${value === undefined ? 'not estimated' : escapeXml(money(value, ESTIMATE_CURRENCY))}</td>`;

/**
 * The narrative (dom-6): the disposition, then one row per fee (category, fee, the patient's share,
 * the payer's) and the totals, as the structured items and totals give them.
 */
function estimateNarrative(estimates: readonly ItemEstimate[], disposition: string): Narrative {
  let rows = '';
  for (const { item, line, share } of estimates)
    rows += `<tr><td>${escapeXml(`${line.category.display}`)}</td>${cell(item.fee)}${cell(share?.copay)}${cell(share?.benefit)}</tr>`;
  const counted = estimates.filter((e) => e.share !== undefined);
  const total = (pick: (s: Share) => number) =>
    counted.length > 0 ? sum(counted.map((e) => pick(e.share!))) : undefined;
  rows += `<tr><td><b>Total</b></td>${cell(sum(estimates.map((e) => e.item.fee)))}${cell(total((s) => s.copay))}${cell(total((s) => s.benefit))}</tr>`;
  return generatedNarrative(
    `<p>${escapeXml(disposition)}</p><table><tr><th>Service</th><th>Fee</th><th>Patient pays</th><th>Payer pays</th></tr>${rows}</table>`,
  );
}

/**
 * The ClaimResponse of an estimate. The notes: per item its sentence first (the page shows it
 * beside the amount), then every assumption behind it; then one for the whole answer (the items
 * the copay and benefit totals leave out: those without a share).
 */
export function estimateClaimResponse(
  cer: CoverageEligibilityResponse,
  estimates: readonly ItemEstimate[],
  created: string,
  firstNotes: readonly string[] = [],
): ClaimResponse {
  const notes: ProcessNote[] = [];
  const note = (text: string): number => {
    const existing = notes.find((n) => n.text === text);
    if (existing?.number !== undefined) return existing.number;
    notes.push({ number: notes.length + 1, type: 'display', text });
    return notes.length;
  };
  for (const text of firstNotes) note(text);
  const items = estimates.map((estimate, index) => {
    const { item, line, share } = estimate;
    const numbers = [note(line.sentence)];
    for (const text of line.notes) numbers.push(note(text));
    if (share)
      numbers.push(
        note(
          `${line.category.display}: the patient pays ${money(share.copay, ESTIMATE_CURRENCY)} of ${money(item.fee, ESTIMATE_CURRENCY)}.`,
        ),
      );
    else
      numbers.push(
        note(
          `${line.category.display}: no share is estimated: the portal's answer gives no figures this estimate can apply; the fee is shown as submitted only.`,
        ),
      );
    const adjudications = [adjudication('submitted', item.fee)];
    if (share) adjudications.push(adjudication('copay', share.copay), adjudication('benefit', share.benefit));
    return { itemSequence: index + 1, noteNumber: [...new Set(numbers)], adjudication: adjudications };
  });
  const totals = [adjudication('submitted', sum(estimates.map((e) => e.item.fee)))];
  const counted = estimates.filter((e) => e.share !== undefined);
  if (counted.length > 0) {
    totals.push(
      adjudication('copay', sum(counted.map((e) => e.share?.copay ?? 0))),
      adjudication('benefit', sum(counted.map((e) => e.share?.benefit ?? 0))),
    );
  }
  const left = estimates.flatMap((e, index) => (e.share === undefined ? [index] : []));
  if (left.length > 0) note(totalsNote(estimates, left, counted.length));
  const disposition = `An estimate from the payer portal's answer of ${answerDate(cer)} (CoverageEligibilityResponse/${cer.id ?? ''}), not the payer's adjudication: the payer decides the claim.`;
  return {
    resourceType: 'ClaimResponse',
    meta: { profile: [PROFILES.estimateClaimResponse] },
    text: estimateNarrative(estimates, disposition),
    status: 'active',
    type: { coding: [{ system: CLAIM_TYPE_SYSTEM, code: 'professional' }] },
    use: 'predetermination',
    patient: cer.patient,
    created,
    insurer: cer.insurer,
    outcome: 'complete',
    disposition,
    item: items,
    total: totals,
    processNote: notes,
  };
}
