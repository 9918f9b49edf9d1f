/**
 * CostShare -> CoverageEligibilityResponse.insurance.item
 * (https://hl7.org/fhir/R4/coverageeligibilityresponse-definitions.html#CoverageEligibilityResponse.insurance.item).
 *
 * ces-1 "SHALL contain a category or a billcode but not both" (category.exists() xor
 * productOrService.exists()): every item has a category and never a productOrService.
 * Benefit types are http://terminology.hl7.org/CodeSystem/benefit-type (copay, copay-percent,
 * copay-maximum, deductible) and our own benefit-type CodeSystem for what R4 lacks.
 */
import type {
  CoverageEligibilityResponseInsuranceItem as Item,
  CoverageEligibilityResponseInsuranceItemBenefit as Benefit,
  Coding,
} from 'fhir/r4.js';
import { parseLooseNumber, parsePercent } from '../../upstream/contract.js';
import {
  BENEFIT_TYPE_SYSTEM,
  BENEFIT_UNIT_SYSTEM,
  OWN_BENEFIT_TYPE_SYSTEM,
  coding,
  concept,
  extensionUrl,
  fhirText,
} from './codes.js';
import type { CostShare, Figures, Loose } from './cost-shares.js';
import {
  DEFAULT_CURRENCY,
  categoryConcept,
  excludedFrom,
  networkConcept,
  termConcept,
} from './vocabulary.js';

const MAX_UNSIGNED_INT = 2147483647;

const TYPES = {
  percent: coding(BENEFIT_TYPE_SYSTEM, 'copay-percent', 'Copayment Percent per service'),
  amount: coding(BENEFIT_TYPE_SYSTEM, 'copay', 'Copayment per service'),
  maximum: coding(BENEFIT_TYPE_SYSTEM, 'copay-maximum', 'Copayment maximum per service'),
  deductible: coding(BENEFIT_TYPE_SYSTEM, 'deductible', 'Deductible'),
  coinsurance: coding(OWN_BENEFIT_TYPE_SYSTEM, 'coinsurance-percent', 'Coinsurance percent'),
  aggregateCap: coding(OWN_BENEFIT_TYPE_SYSTEM, 'copay-aggregate-cap', 'Copayment aggregate cap'),
  deductibleMaximum: coding(OWN_BENEFIT_TYPE_SYSTEM, 'deductible-maximum', 'Deductible maximum'),
  deductibleLegacy: coding(OWN_BENEFIT_TYPE_SYSTEM, 'deductible-legacy', 'Deductible (portal legacy form)'),
} satisfies Record<Exclude<keyof Figures, 'currency'>, Coding>;

/** A percentage: allowedUnsignedInt for a whole number, else allowedString ("12.5%", or the portal's text). */
function percentBenefit(type: Coding, raw: Loose): Benefit | undefined {
  const value = parsePercent(raw);
  if (value !== null && Number.isInteger(value) && value >= 0 && value <= MAX_UNSIGNED_INT) {
    return { type: concept([type]), allowedUnsignedInt: value };
  }
  const text = value !== null ? `${value}%` : fhirText(raw);
  return text === undefined ? undefined : { type: concept([type]), allowedString: text };
}

/**
 * Money.currency must be an ISO 4217 code (required binding, https://hl7.org/fhir/R4/datatypes.html#Money,
 * ValueSet currencies). The list is ICU's (Intl.supportedValuesOf), so a three-letter word that
 * is not a currency ("Dhs") is not passed off as one.
 */
const ISO_4217 = new Set(Intl.supportedValuesOf('currency'));
/** What UAE portals write for dirhams besides AED. "Dirham" alone is left as text (MAD is one too). */
const CURRENCY_ALIASES: Readonly<Record<string, string>> = { DHS: 'AED', DH: 'AED' };

/** ISO 4217 code of copay_currency; AED when absent; null when the portal gave something else. */
function currencyOf(raw: string | null | undefined): string | null {
  const text = fhirText(raw);
  if (text === undefined) return DEFAULT_CURRENCY;
  const code = text.toUpperCase(); // fhirText has trimmed it
  const alias = CURRENCY_ALIASES[code];
  if (alias) return alias;
  return ISO_4217.has(code) ? code : null;
}

/** An amount: allowedMoney when it is a number, else allowedString with the portal's text. */
function moneyBenefit(type: Coding, raw: Loose, currency: string | null): Benefit | undefined {
  const value = typeof raw === 'string' && raw.includes('%') ? null : parseLooseNumber(raw);
  if (value !== null) {
    return { type: concept([type]), allowedMoney: currency ? { value, currency } : { value } };
  }
  const text = fhirText(raw);
  return text === undefined ? undefined : { type: concept([type]), allowedString: text };
}

function textBenefit(type: Coding, raw: Loose): Benefit | undefined {
  const text = fhirText(raw);
  return text === undefined ? undefined : { type: concept([type]), allowedString: text };
}

/**
 * Every figure of a cost share as a benefit. Each figure has a type of its own (TYPES, eight
 * distinct codes), so no two benefits of one cost share can be identical: nothing to de-duplicate.
 */
export function benefitsOf(figures: Figures, currency = currencyOf(figures.currency)): Benefit[] {
  return [
    percentBenefit(TYPES.percent, figures.percent),
    moneyBenefit(TYPES.amount, figures.amount, currency),
    moneyBenefit(TYPES.maximum, figures.maximum, currency),
    percentBenefit(TYPES.coinsurance, figures.coinsurance),
    textBenefit(TYPES.aggregateCap, figures.aggregateCap),
    moneyBenefit(TYPES.deductible, figures.deductible, currency),
    moneyBenefit(TYPES.deductibleMaximum, figures.deductibleMaximum, currency),
    moneyBenefit(TYPES.deductibleLegacy, figures.deductibleLegacy, currency),
  ].filter((b): b is Benefit => b !== undefined);
}

/** `currency` is currencyOf(share.figures.currency), read once per item by itemOf. */
function descriptionOf(
  share: CostShare,
  gpReferral: boolean | undefined,
  currency: string | null,
): string | undefined {
  const parts = [...share.notes];
  const status = fhirText(share.coverageStatus);
  if (status && excludedFrom(status) === undefined) parts.push(`Coverage status: ${status}`);
  // null only for a currency given as text that is no ISO 4217 code (absent is AED).
  if (currency === null) parts.push(`Currency as given: ${fhirText(share.figures.currency) ?? ''}`);
  if (share.referralGated && gpReferral === true)
    parts.push('A GP referral is required for specialist visits');
  return parts.length > 0 ? parts.join('; ') : undefined;
}

/**
 * One item. `gpReferral` is is_gatekeeper read through the table (undefined when the portal did
 * not say); `currency` and `benefits` are the share's, read by itemsOf before it builds the item.
 */
export function itemOf(
  share: CostShare,
  gpReferral: boolean | undefined,
  currency: string | null,
  benefits: Benefit[],
): Item {
  const item: Item = {
    extension: [{ url: BENEFIT_SOURCE, valueString: share.source }],
    category: categoryConcept(share.category, share.label),
  };
  const excluded = excludedFrom(share.coverageStatus);
  if (excluded !== undefined) item.excluded = excluded;
  if (share.name) item.name = share.name; // FHIR text already (cost-shares.ts)
  const description = descriptionOf(share, gpReferral, currency);
  if (description) item.description = description;
  const network = networkConcept(share.network);
  if (network) item.network = network;
  // Portal benefits are per member (card), never family-wide.
  item.unit = concept([coding(BENEFIT_UNIT_SYSTEM, 'individual', 'Individual')]);
  const term = termConcept(share.term);
  if (term) item.term = term;
  if (benefits.length > 0) item.benefit = benefits;
  if (share.referralGated && gpReferral !== undefined) {
    item.authorizationRequired = gpReferral;
    if (gpReferral) item.authorizationSupporting = [{ text: 'Referral from a general practitioner (GP)' }];
  }
  return item;
}

/** Numbers equal as JSON writes them: non-finite ones are all `null`, and -0 is `0`. */
function sameJsonNumber(a: number | undefined, b: number | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a === b || (!Number.isFinite(a) && !Number.isFinite(b));
}

function sameCodings(a: Coding[] | undefined, b: Coding[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.length === b.length &&
    a.every((c, i) => c.system === b[i]?.system && c.code === b[i]?.code && c.display === b[i]?.display)
  );
}

/**
 * Benefit equality as their JSON would say it, field by field (stringifying every benefit was the
 * mapping's largest cost). Benefits are only built above: a type of one Coding and one allowed[x].
 */
function sameBenefit(a: Benefit, b: Benefit): boolean {
  return (
    a.type.text === b.type.text &&
    sameCodings(a.type.coding, b.type.coding) &&
    a.allowedUnsignedInt === b.allowedUnsignedInt &&
    a.allowedString === b.allowedString &&
    (a.allowedMoney === undefined || b.allowedMoney === undefined
      ? a.allowedMoney === b.allowedMoney
      : sameJsonNumber(a.allowedMoney.value, b.allowedMoney.value) &&
        a.allowedMoney.currency === b.allowedMoney.currency)
  );
}

/** True when `extra` adds no benefit that `base` lacks (a cost_sharing block repeating its entry). */
function addsNothing(base: Item, extra: Benefit[]): boolean {
  const known = base.benefit ?? [];
  return extra.every((b) => known.some((k) => sameBenefit(k, b)));
}

/** Items of all cost shares; a copay_details cost_sharing block that repeats its entry is dropped. */
export function itemsOf(shares: CostShare[], gpReferral: boolean | undefined): Item[] {
  const items: Item[] = [];
  for (const share of shares) {
    // The benefits first: a block that repeats its entry is dropped before the rest of its item is built.
    const currency = currencyOf(share.figures.currency);
    const benefits = benefitsOf(share.figures, currency);
    const previous = items[items.length - 1];
    if (
      previous &&
      share.source.endsWith(NESTED) &&
      sourceOf(previous) === share.source.slice(0, -NESTED.length) &&
      addsNothing(previous, benefits)
    ) {
      continue;
    }
    items.push(itemOf(share, gpReferral, currency, benefits));
  }
  return items;
}

const NESTED = '.cost_sharing';
const BENEFIT_SOURCE = extensionUrl('benefit-source');

/** Where in the portal's answer an item's figures come from (its benefit-source extension). */
export function sourceOf(item: Item): string | undefined {
  return item.extension?.find((e) => e.url === BENEFIT_SOURCE)?.valueString;
}
