/**
 * One model of a benefit, read from a CER item (https://hl7.org/fhir/R4/coverageeligibilityresponse-definitions.html#CoverageEligibilityResponse.insurance.item.benefit),
 * and the patient's share of a fee under it. Pure: the visit summary (visit-summary.ts), the
 * narrative and `$estimate` all read a benefit through here, so they never disagree.
 *
 * UAE outpatient plans (public plan documents: Daman Basic, Dubai's Essential Benefits Plan):
 * a `deductible` on a category is a fixed amount per visit (AED 20 per consultation), not a
 * yearly deductible; a percentage carries a per-visit maximum and sometimes a yearly cap. A
 * maximum of 0 beside a percentage is the portal giving none, never "pay nothing".
 *
 * A maximum is read in the scope the portal gives it (the item's `term`, the portal's
 * `copay_max_scope`/`copay_maximum_scope`): per visit (or per claim, encounter, consultation or
 * session: one outpatient claim is one visit) caps the share of one fee; per year or policy
 * period is a yearly cap; any other scope (per admission, per case, per day, lifetime...) is
 * said in the portal's words and never applied to one fee as if per visit. No scope: on an
 * outpatient line read as per visit (UAE outpatient plans, noted), on an inpatient line said as
 * "no scope given" and not applied.
 */
import type {
  CoverageEligibilityResponseInsuranceItem as Item,
  CoverageEligibilityResponseInsuranceItemBenefit as Benefit,
} from 'fhir/r4.js';
import { parsePercent } from '../../upstream/contract.js';
import {
  BENEFIT_TERM_SYSTEM,
  BENEFIT_TYPE_SYSTEM,
  OWN_BENEFIT_TYPE_SYSTEM,
  SERVICE_CATEGORY_SYSTEM,
} from './codes.js';
import { DEFAULT_CURRENCY, normalizeLabel } from './vocabulary.js';

/** The figures of one benefit, as the visit summary and the estimate read them. */
export interface BenefitModel {
  /** false when the portal says not covered; undefined when it does not say. */
  covered: boolean | undefined;
  /** The patient's percentage of the fee. */
  percent?: number;
  /** A fixed amount per visit (the copay amount). */
  fixed?: number;
  /** The per-visit deductible (UAE outpatient: a fixed amount per visit). */
  deductible?: number;
  /** The most the patient pays per visit: a copay maximum per visit (or claim), or without scope on an outpatient line. */
  perVisitCap?: number;
  /** True when the portal gave the maximum without a scope on an outpatient line: read as per visit. */
  capScopeAssumed?: boolean;
  /**
   * A copay maximum over a scope wider than one visit, or without scope on an inpatient line:
   * shown in the portal's words (`per admission`; undefined: no scope given), never applied to one fee.
   */
  scopedCap?: { amount: number; scope: string | undefined };
  /** A yearly cap on the patient's copays, as given (amount, or the portal's text). */
  yearlyCap?: string;
  /** The portal's own text where it gave no figure ("As per policy"). */
  asGiven?: string;
  currency: string;
}

/** How the share follows from a model: the contract's clear cases, or why there is none. */
export type ShareRule =
  | { kind: 'not-covered' }
  | { kind: 'percent'; percent: number; cap?: number; deductible?: number }
  | { kind: 'fixed'; amount: number; fromDeductible: boolean }
  | { kind: 'unclear'; reason: string }
  | { kind: 'no-figures' };

/** The benefits of an item the model and the narrative read, the first of each type. */
export interface BenefitsByType {
  percent?: Benefit;
  amount?: Benefit;
  maximum?: Benefit;
  deductible?: Benefit;
  aggregateCap?: Benefit;
}

/** An item's benefits by type, in one pass (no Map: this runs for every item of every mapping). */
export function benefitsByType(item: Item): BenefitsByType {
  const found: BenefitsByType = {};
  for (const benefit of item.benefit ?? []) {
    const coding = benefit.type.coding?.[0];
    if (!coding) continue;
    if (coding.system === BENEFIT_TYPE_SYSTEM) {
      if (coding.code === 'copay-percent') found.percent ??= benefit;
      else if (coding.code === 'copay') found.amount ??= benefit;
      else if (coding.code === 'copay-maximum') found.maximum ??= benefit;
      else if (coding.code === 'deductible') found.deductible ??= benefit;
    } else if (coding.system === OWN_BENEFIT_TYPE_SYSTEM && coding.code === 'copay-aggregate-cap') {
      found.aggregateCap ??= benefit;
    }
  }
  return found;
}

/** A positive amount of money; 0, text ("Nil") or none: undefined (the portal gave no amount). */
function positiveMoney(benefit: Benefit | undefined): number | undefined {
  const value = benefit?.allowedMoney?.value;
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : undefined;
}

function percentOf(benefit: Benefit | undefined): number | undefined {
  if (!benefit) return undefined;
  if (benefit.allowedUnsignedInt !== undefined) return benefit.allowedUnsignedInt;
  const value = parsePercent(benefit.allowedString);
  return value === null ? undefined : value;
}

/** Scopes of one visit: one outpatient claim (encounter) is one visit. Normalized (normalizeLabel). */
const VISIT_SCOPES: ReadonlySet<string> = new Set([
  'visit',
  'per visit',
  'each visit',
  'claim',
  'per claim',
  'encounter',
  'per encounter',
  'consultation',
  'per consultation',
  'session',
  'per session',
]);

/** A policy period reads as a year's cap, in the portal's words (not the FHIR `annual` term). */
const PERIOD_SCOPES: ReadonlySet<string> = new Set([
  'policy period',
  'per policy period',
  'policy year',
  'per policy year',
  'benefit period',
  'per benefit period',
  'per policy',
]);

/** Texts the portal writes where it gives no scope (normalized). */
const NO_SCOPES: ReadonlySet<string> = new Set([
  '',
  'nil',
  'none',
  'null',
  'na',
  'n a',
  'not mentioned',
  'not applicable',
  'not specified',
]);

/** A scope of one or two words, with or without `per`: `per admission`, `Per_Case`, `lifetime`. */
const READABLE_SCOPE = /^(?:per |each )?[a-z]+(?: [a-z]+)?$/;

/**
 * The scope of a maximum as people read it: `per_admission` -> `per admission`, `Case` ->
 * `per case`; a longer text in the portal's words, quoted (`scope "A & B"`); undefined for no
 * scope (`Nil`, a number, empty).
 */
export function scopeWords(scope: string): string | undefined {
  const words = normalizeLabel(scope);
  if (NO_SCOPES.has(words) || !/[a-z]/.test(words)) return undefined;
  if (!READABLE_SCOPE.test(words)) return `(scope "${scope}")`;
  return words.startsWith('per ') || words.startsWith('each ') ? words : `per ${words}`;
}

/** An inpatient line: of the inpatient category, or in the Inpatient block. */
function isInpatient(item: Item): boolean {
  const code = item.category?.coding?.find((c) => c.system === SERVICE_CATEGORY_SYSTEM)?.code;
  return code === 'inpatient' || normalizeLabel(item.name ?? '').startsWith('inpatient');
}

type CapScope =
  { kind: 'visit' } | { kind: 'year'; words: string } | { kind: 'wider'; words: string | undefined };

/** What the scope of an item's copay maximum is (its `term`). */
function capScopeOf(item: Item): CapScope | undefined {
  if (item.term?.coding?.some((c) => c.system === BENEFIT_TERM_SYSTEM && c.code === 'annual'))
    return { kind: 'year', words: 'per year' };
  const text = item.term?.text;
  const words = text === undefined ? undefined : scopeWords(text);
  if (text === undefined || words === undefined) return undefined;
  const normalized = normalizeLabel(text);
  if (VISIT_SCOPES.has(normalized)) return { kind: 'visit' };
  if (PERIOD_SCOPES.has(normalized)) return { kind: 'year', words };
  return { kind: 'wider', words };
}

/** Amount as people write it: `AED 50`, `AED 75.50`. */
export function money(amount: number, currency: string): string {
  return `${currency} ${Number.isInteger(amount) ? String(amount) : amount.toFixed(2)}`;
}

/** The model of one CER item's benefits. */
export function benefitModelOf(item: Item): BenefitModel {
  const {
    percent: percentBenefit,
    amount,
    maximum,
    deductible,
    aggregateCap: aggregate,
  } = benefitsByType(item);
  const currency =
    [amount, maximum, deductible].find((b) => b?.allowedMoney?.currency)?.allowedMoney?.currency ??
    DEFAULT_CURRENCY;
  const model: BenefitModel = { covered: item.excluded === undefined ? undefined : !item.excluded, currency };
  const percent = percentOf(percentBenefit);
  if (percent !== undefined) model.percent = percent;
  else if (percentBenefit?.allowedString) model.asGiven = percentBenefit.allowedString;
  const fixed = positiveMoney(amount);
  if (fixed !== undefined) model.fixed = fixed;
  const perVisit = positiveMoney(deductible);
  if (perVisit !== undefined) model.deductible = perVisit;
  const cap = positiveMoney(maximum);
  if (cap !== undefined) {
    const scope = capScopeOf(item);
    if (scope?.kind === 'year') model.yearlyCap = `${money(cap, currency)} ${scope.words}`;
    else if (scope?.kind === 'wider') model.scopedCap = { amount: cap, scope: scope.words };
    else if (scope === undefined && isInpatient(item)) model.scopedCap = { amount: cap, scope: undefined };
    else {
      model.perVisitCap = cap;
      if (scope === undefined) model.capScopeAssumed = true;
    }
  }
  if (aggregate?.allowedString) model.yearlyCap = aggregate.allowedString;
  return model;
}

/**
 * The rule a model gives. The clear cases (a percentage with or without a maximum, a fixed amount,
 * not covered) have a share. A per-visit deductible beside a percentage is a second charge of the
 * same line: the portal's form gives the two as separate fields, each with a maximum of its own
 * (`copay` with `_copayMaxAmount`, `deductible` with `_maxDeductible`), so they are added: the
 * deductible (at most the fee) plus the percentage of the fee (at most its maximum), the whole at
 * most the fee. A percentage beside a fixed copay amount (not a deductible), or a copay amount
 * beside a different deductible, has no share: the portal does not say how those combine.
 */
export function shareRuleOf(model: BenefitModel): ShareRule {
  if (model.covered === false) return { kind: 'not-covered' };
  // The deductible is the per-visit amount when no copay amount is given, or the same one.
  const sameAmount =
    model.fixed === undefined || model.deductible === undefined || model.fixed === model.deductible;
  const amount = model.fixed ?? model.deductible;
  const percent = model.percent === 0 && amount !== undefined ? undefined : model.percent;
  if (!sameAmount) return { kind: 'unclear', reason: 'a copay amount and a different per-visit deductible' };
  if (percent !== undefined && amount !== undefined) {
    if (model.deductible === undefined)
      return { kind: 'unclear', reason: 'both a percentage and a fixed amount per visit' };
    const rule: ShareRule = { kind: 'percent', percent, deductible: model.deductible };
    if (model.perVisitCap !== undefined) rule.cap = model.perVisitCap;
    return rule;
  }
  if (percent !== undefined)
    return model.perVisitCap === undefined
      ? { kind: 'percent', percent }
      : { kind: 'percent', percent, cap: model.perVisitCap };
  if (amount !== undefined) return { kind: 'fixed', amount, fromDeductible: model.fixed === undefined };
  return { kind: 'no-figures' };
}

/** What the patient and the payer pay of a fee, to 2 decimals (copay + benefit = fee). */
export interface Share {
  copay: number;
  benefit: number;
}

/**
 * The patient's share of `fee` under a rule; undefined when the rule has no share (no figures,
 * or figures whose combination the portal does not give). Computed in whole fils (1/100 AED) so
 * the two parts always add up to the fee: percentage p with maximum m: min(fee * p / 100, m);
 * without maximum: fee * p / 100; a fixed amount a: min(a, fee); a per-visit deductible d beside a
 * percentage: min(d, fee) + the percentage's share, at most the fee; not covered: the whole fee.
 */
export function shareOf(rule: ShareRule, fee: number): Share | undefined {
  const feeCents = Math.round(fee * 100);
  let copayCents: number;
  switch (rule.kind) {
    case 'not-covered':
      copayCents = feeCents;
      break;
    case 'percent': {
      const cents = Math.round((feeCents * rule.percent) / 100);
      copayCents = rule.cap === undefined ? cents : Math.min(cents, Math.round(rule.cap * 100));
      // A per-visit deductible is added, at most the fee (the whole is held at the fee below).
      if (rule.deductible !== undefined) copayCents += Math.min(Math.round(rule.deductible * 100), feeCents);
      break;
    }
    case 'fixed':
      copayCents = Math.min(Math.round(rule.amount * 100), feeCents);
      break;
    case 'unclear':
    case 'no-figures':
      return undefined;
  }
  // A percentage over 100 from the portal never makes the share exceed the fee.
  copayCents = Math.max(0, Math.min(copayCents, feeCents));
  return { copay: copayCents / 100, benefit: (feeCents - copayCents) / 100 };
}
