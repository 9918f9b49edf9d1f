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
  Coverage,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsurance as Insurance,
  CoverageEligibilityResponseInsuranceItem as Item,
  CoverageEligibilityResponseInsuranceItemBenefit as Benefit,
  DocumentReference,
  Extension,
  Narrative,
} from 'fhir/r4.js';
import { BENEFIT_TYPE_SYSTEM, extensionUrl } from './codes.js';
import { escapeXml } from './xhtml.js';

const XHTML_NS = 'http://www.w3.org/1999/xhtml';

export { escapeXml };

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

function extensionsOf(list: Extension[] | undefined, id: Parameters<typeof extensionUrl>[0]): Extension[] {
  const url = extensionUrl(id);
  return (list ?? []).filter((e) => e.url === url);
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

function containedById<T extends { id?: string }>(
  cer: CoverageEligibilityResponse,
  ref?: string,
): T | undefined {
  if (!ref?.startsWith('#')) return undefined;
  return cer.contained?.find((r) => r.id === ref.slice(1)) as T | undefined;
}

function row(label: string, value: string | undefined): string {
  return value ? `<li>${label}: ${escapeXml(value)}</li>` : '';
}

function periodText(coverage: Coverage | undefined, details: Extension | undefined): string | undefined {
  const period = coverage?.period;
  if (period?.start || period?.end) return `${period.start ?? 'not stated'} to ${period.end ?? 'not stated'}`;
  return subText(details, 'periodAsGiven');
}

function classValue(coverage: Coverage | undefined, code: string): string | undefined {
  return coverage?.class?.find((c) => c.type.coding?.some((k) => k.code === code))?.value;
}

/** Payer, plan, package, network, policy period. */
function policyFacts(insurance: Insurance, coverage: Coverage | undefined): string {
  const details = extensionsOf(coverage?.extension, 'policy-details')[0];
  const payer = coverage?.payor[0]?.display ?? coverage?.payor[0]?.identifier?.value;
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

function benefitOf(item: Item, code: string): Benefit | undefined {
  return item.benefit?.find((b) =>
    b.type.coding?.some((c) => c.system === BENEFIT_TYPE_SYSTEM && c.code === code),
  );
}

/** The parts of an item's description (items.ts joins them with "; "). */
function descriptionParts(item: Item): string[] {
  const parts: string[] = [];
  if (!item.description) return parts;
  for (const part of item.description.split('; ')) {
    const trimmed = part.trim();
    if (trimmed.length > 0) parts.push(trimmed);
  }
  return parts;
}

const COVERAGE_STATUS = 'Coverage status: ';
const CURRENCY_AS_GIVEN = 'Currency as given: ';

/**
 * The currency of the item's amounts: the ISO code of its Money, else the portal's own word
 * (a Money without a code, the word kept in the description as "Currency as given: ..."), so an
 * amount never stands without the unit the CER has for it.
 */
function currencyOfItem(parts: string[], money: (Benefit | undefined)[]): string {
  let anyAmount = false;
  for (const benefit of money) {
    const amount = benefit?.allowedMoney;
    if (!amount) continue;
    if (amount.currency) return amount.currency;
    anyAmount = true;
  }
  if (!anyAmount) return '';
  const given = parts.find((p) => p.startsWith(CURRENCY_AS_GIVEN));
  return given ? given.slice(CURRENCY_AS_GIVEN.length) : '';
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
  deductible: { label: 'Deductible', percent: false },
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

function coverageStatus(item: Item, parts: string[]): string {
  if (item.excluded === true) return 'Not covered';
  const given = parts.find((p) => p.startsWith(COVERAGE_STATUS));
  if (given) return given.slice(COVERAGE_STATUS.length);
  return item.excluded === false ? 'Covered' : '';
}

function categoryOf(item: Item): string {
  const category = item.category;
  const name = category?.text ?? category?.coding?.find((c) => c.display)?.display ?? '';
  const network = item.network?.text;
  return network ? `${name} (${network})` : name;
}

/**
 * The Notes cell: every benefit without a column of its own (aggregate cap, deductibles,
 * coinsurance, a second copay), then the item's description without the parts shown in other
 * cells (coverage status, currency as given).
 */
function notesOf(item: Item, parts: string[], shown: (Benefit | undefined)[], currency: string): string {
  const notes: string[] = [];
  for (const benefit of item.benefit ?? []) {
    if (shown.includes(benefit)) continue;
    const other = otherBenefit(benefit, currency);
    if (other !== undefined) notes.push(other);
  }
  for (const part of parts) {
    if (!part.startsWith(COVERAGE_STATUS) && !part.startsWith(CURRENCY_AS_GIVEN)) notes.push(part);
  }
  return notes.join('; ');
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

/** One row per service category: coverage status, copay %, amount, maximum, currency, notes. */
function itemTable(items: Item[]): string {
  if (items.length === 0) return '';
  const rows = items.map((item) => {
    const percent = benefitOf(item, 'copay-percent');
    const amount = benefitOf(item, 'copay');
    const maximum = benefitOf(item, 'copay-maximum');
    const parts = descriptionParts(item);
    const currency = currencyOfItem(parts, [amount, maximum, ...(item.benefit ?? [])]);
    const cells = [
      categoryOf(item),
      coverageStatus(item, parts),
      benefitValue(percent, true),
      benefitValue(amount, false),
      benefitValue(maximum, false),
      amount?.allowedMoney || maximum?.allowedMoney ? currency : '',
      notesOf(item, parts, [percent, amount, maximum], currency),
    ];
    let row = '<tr>';
    for (const cell of cells) row += `<td>${escapeXml(cell)}</td>`;
    return `${row}</tr>`;
  });
  return `<table><thead><tr>${TABLE_HEAD}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/** The GP-referral rule: the portal's is_gatekeeper value always shown when it gave one. */
function gpRule(insurance: Insurance): string {
  const ext = extensionsOf(insurance.extension, 'gp-referral-required')[0];
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
  const ext = extensionsOf(insurance.extension, 'multi-card')[0];
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

function insuranceSection(cer: CoverageEligibilityResponse, insurance: Insurance): string {
  const coverage = containedById<Coverage>(cer, insurance.coverage.reference);
  return [
    policyFacts(insurance, coverage),
    itemTable(insurance.item ?? []),
    gpRule(insurance),
    warnings(insurance.extension),
    multiCard(insurance),
  ].join('');
}

/** The documents and screenshots, each with its stable adapter link. */
function documents(cer: CoverageEligibilityResponse): string {
  const refs = [
    ...extensionsOf(cer.extension, 'portal-document'),
    ...extensionsOf(cer.extension, 'portal-screenshot'),
  ];
  const items = refs.flatMap((ext) => {
    const doc = containedById<DocumentReference>(cer, ext.valueReference?.reference);
    const attachment = doc?.content[0]?.attachment;
    const title = attachment?.title ?? doc?.description ?? 'Payer portal document';
    if (!attachment?.url) return [];
    return [`<li><a href="${escapeXml(attachment.url)}">${escapeXml(title)}</a></li>`];
  });
  return items.length ? `<p>Documents:</p><ul>${items.join('')}</ul>` : '';
}

/** The narrative of a CER, from its structured elements only. */
export function narrativeOf(cer: CoverageEligibilityResponse): Narrative {
  const detail = headlineDetail(cer);
  const parts = [
    `<p><b>${escapeXml(headline(cer))}</b></p>`,
    detail ? `<p>${escapeXml(detail)}</p>` : '',
    ...(cer.insurance ?? []).map((i) => insuranceSection(cer, i)),
    warnings(cer.extension),
    documents(cer),
    cer.outcome === 'queued' ? '' : `<p>Checked: ${escapeXml(when(cer.created))}</p>`,
  ];
  return { status: 'generated', div: `<div xmlns="${XHTML_NS}">${parts.join('')}</div>` };
}

/** The CER with its narrative, `text` placed where R4 orders it (after id and meta). */
export function withNarrative(cer: CoverageEligibilityResponse): CoverageEligibilityResponse {
  const { resourceType, id, meta, text: _old, ...rest } = cer;
  return {
    resourceType,
    ...(id !== undefined ? { id } : {}),
    ...(meta !== undefined ? { meta } : {}),
    text: narrativeOf(cer),
    ...rest,
  };
}
