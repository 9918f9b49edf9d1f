/**
 * Who the check is for: the identifier sent to the payer portal (request_dump.emirates_id and
 * id_type) and the few demographics the upstream wants (name, phone, dob).
 * Order (the README): the patient's Emirates ID (type NI, or an Emirates ID system) first,
 * then the patient's member card (type MB), then the Coverage's subscriberId or card identifier.
 */
import type { Coverage, HumanName, Identifier, Patient, Reference } from 'fhir/r4.js';
import { unprocessable } from '../../fhir/outcomes.js';
import type { Target } from './references.js';
import { idTypeFor, identifierKind, V2_0203 } from './tables.js';
import { list } from './submit-body.js';

export interface PatientIdentity {
  /** request_dump.emirates_id: the Emirates ID (784-YYYY-NNNNNNN-C) or the card number. */
  value: string;
  idType: string;
  kind: 'emirates-id' | 'card-number';
  /** The identifier as used (normalized value, type NI or MB, the client's system if any). */
  identifier: Identifier;
  /** `system|value`, `|value` when the identifier had no system. */
  key: string;
  /** Where the Emirates ID is whose check digit failed and was let through (rule `warn`). */
  checkDigitWarningAt?: string;
}

export interface Demographics {
  name: string;
  phone: string;
  dob: string | null;
}

/** Emirates ID: 15 digits starting 784, written 784-YYYY-NNNNNNN-C; dashes and spaces are optional on input. */
export function normalizeEmiratesId(raw: string): string | null {
  const digits = raw.replace(/[\s-]/g, '');
  if (!/^784\d{12}$/.test(digits)) return null;
  return `${digits.slice(0, 3)}-${digits.slice(3, 7)}-${digits.slice(7, 14)}-${digits.slice(14)}`;
}

/**
 * The Luhn check digit of the first 14 digits of an Emirates ID: its 15th digit. Every public
 * validator of the UAE ID number uses it (docs/request-mapping.md, "The Emirates ID's check digit").
 */
export function emiratesIdCheckDigit(first14: string): number {
  let sum = 0;
  for (let i = 0; i < 14; i += 1) {
    // From the right: the digit next to the check digit is doubled, then every second one.
    let digit = first14.charCodeAt(13 - i) - 48;
    if (i % 2 === 0) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return (10 - (sum % 10)) % 10;
}

/**
 * eClaimLink's placeholders for a person without an Emirates ID (a newborn, a visitor): never a
 * member a portal can find, so a check on one is a wasted portal session.
 */
const PLACEHOLDERS = new Set(['000000000000000', '111111111111111', '222222222222222', '999999999999999']);

/** What is wrong with an Emirates ID that has the right shape, if anything. */
export type EmiratesIdProblem = 'placeholder' | 'check-digit';

/**
 * The typo guard (docs/request-mapping.md): a placeholder, or a 15th digit that is not the Luhn
 * check digit of the first 14; null when neither. Dashes and spaces are ignored; a value of
 * another shape is null here (normalizeEmiratesId says that). The year digits are never compared
 * with the birth date: they need not match it.
 */
export function emiratesIdProblem(raw: string): EmiratesIdProblem | null {
  const digits = raw.replace(/[\s-]/g, '');
  if (PLACEHOLDERS.has(digits)) return 'placeholder';
  if (!/^784\d{12}$/.test(digits)) return null;
  return emiratesIdCheckDigit(digits) === digits.charCodeAt(14) - 48 ? null : 'check-digit';
}

/** What a person reads for each problem: what to do about it. The value itself is never repeated. */
export const EMIRATES_ID_PROBLEM_TEXT: Readonly<Record<EmiratesIdProblem, string>> = {
  'check-digit':
    "The Emirates ID does not add up: its last digit is not the check digit of the other 14, so one digit is probably mistyped. Re-type it from the patient's Emirates ID card; no portal session was started.",
  placeholder:
    'The Emirates ID is a placeholder for a person without one (000-, 111-, 222- or 999-...): no payer portal can find a member by it. Check with the insurance card number instead; no portal session was started.',
};

/**
 * Each problem in a few words, for a line a person sees at a glance (a CDS card's summary, at most
 * 140 characters with its lead-in); the value itself is never repeated.
 */
export const EMIRATES_ID_PROBLEM_SHORT: Readonly<Record<EmiratesIdProblem, string>> = {
  'check-digit': 'the Emirates ID looks mistyped (check digit)',
  placeholder: 'the Emirates ID is a placeholder (check with the insurance card number)',
};

/** The typo guard's problem a refusal's text names (one of EMIRATES_ID_PROBLEM_TEXT), if any. */
export function emiratesIdProblemOfText(text: string): EmiratesIdProblem | undefined {
  return (Object.keys(EMIRATES_ID_PROBLEM_TEXT) as EmiratesIdProblem[]).find(
    (problem) => EMIRATES_ID_PROBLEM_TEXT[problem] === text,
  );
}

/** The same problem, when a tenant lets the check go ahead ("emiratesIdCheckDigit": "warn"). */
export const EMIRATES_ID_WARNING_TEXT =
  "The Emirates ID's last digit is not the check digit of the other 14: one digit may be mistyped. The check went ahead because this clinic accepts such identifiers; if the payer does not find the member, re-type it from the patient's Emirates ID card.";

/** How a tenant treats a wrong check digit: refuse before any upstream call (default) or warn. */
export type CheckDigitRule = 'refuse' | 'warn';

/**
 * The warning a check's answers carry when its Emirates ID failed the check digit and went ahead
 * (a tenant with the rule `warn`): read off the patient reference the CER carries, so every
 * answer of the check (read, search, batch, async, notification) says it without storing it twice.
 */
export function checkDigitWarning(patient: Reference | undefined): string | undefined {
  const identifier = patient?.identifier;
  if (!identifier?.value || identifierKind(identifier) !== 'emirates-id') return undefined;
  return emiratesIdProblem(identifier.value) === 'check-digit' ? EMIRATES_ID_WARNING_TEXT : undefined;
}

interface Candidate {
  identifier: Identifier;
  path: string;
}

/**
 * The identifier the check runs on; 422 when there is none, or an Emirates ID is malformed, a
 * placeholder, or (with the rule `refuse`) fails its check digit.
 */
export function patientIdentity(
  patient: Target,
  coverages: Target[],
  missingPath: string,
  rule: CheckDigitRule = 'refuse',
): PatientIdentity {
  const own = candidatesOf(patient);
  const emiratesId = own.find((c) => identifierKind(c.identifier) === 'emirates-id');
  if (emiratesId) return fromEmiratesId(emiratesId, rule);
  const card = own.find((c) => identifierKind(c.identifier) === 'card-number');
  const ownCard = card && fromCard(card.identifier.value ?? '', card.identifier.system);
  if (ownCard) return ownCard;
  for (const coverage of coverages) {
    const found = cardOfCoverage(coverage);
    if (found) return found;
  }
  throw unprocessable(
    "No Emirates ID or insurance card number was found for the patient. Add the patient's Emirates ID (identifier type NI) or card number (type MB), or the card number as Coverage.subscriberId.",
    missingPath,
    'required',
  );
}

function candidatesOf(target: Target): Candidate[] {
  if (target.kind === 'logical') return [{ identifier: target.identifier, path: target.path }];
  return list((target.resource as Patient).identifier).map((identifier, index) => ({
    identifier,
    path: `${target.path}.identifier[${index}]`,
  }));
}

function fromEmiratesId({ identifier, path }: Candidate, rule: CheckDigitRule): PatientIdentity {
  const raw = identifier.value ?? '';
  const problem = emiratesIdProblem(raw);
  // A placeholder is refused whatever the tenant's rule: it never names a member.
  if (problem === 'placeholder' || (problem === 'check-digit' && rule === 'refuse'))
    throw unprocessable(EMIRATES_ID_PROBLEM_TEXT[problem], path, 'value');
  const value = normalizeEmiratesId(raw);
  if (!value)
    throw unprocessable(
      // The value is patient data: the expression names it, the text never repeats it.
      'The Emirates ID is not valid: it must have 15 digits starting with 784 (784-YYYY-NNNNNNN-C).',
      path,
      'value',
    );
  const identity = build('emirates-id', value, identifier.system, 'NI');
  return problem === 'check-digit' ? { ...identity, checkDigitWarningAt: path } : identity;
}

function fromCard(raw: string, system: string | undefined): PatientIdentity | undefined {
  const value = raw.trim();
  return value ? build('card-number', value, system, 'MB') : undefined;
}

function cardOfCoverage(target: Target): PatientIdentity | undefined {
  if (target.kind === 'logical')
    return identifierKind(target.identifier) === 'card-number'
      ? fromCard(target.identifier.value ?? '', target.identifier.system)
      : undefined;
  const coverage = target.resource as Coverage;
  if (coverage.subscriberId) return fromCard(coverage.subscriberId, undefined);
  const card = list(coverage.identifier).find((i) => identifierKind(i) === 'card-number');
  return card ? fromCard(card.value ?? '', card.system) : undefined;
}

function build(
  kind: PatientIdentity['kind'],
  value: string,
  system: string | undefined,
  typeCode: string,
): PatientIdentity {
  const identifier: Identifier = {
    type: { coding: [{ system: V2_0203, code: typeCode }] },
    ...(system ? { system } : {}),
    value,
  };
  return { value, idType: idTypeFor(kind), kind, identifier, key: `${system ?? ''}|${value}` };
}

/** Name, phone and date of birth; empty strings / null when the input has none. */
export function demographics(target: Target): Demographics {
  if (target.kind === 'logical') return { name: target.display ?? '', phone: '', dob: null };
  const patient = target.resource as Patient;
  const phones = list(patient.telecom).filter((t) => t.system === 'phone' && t.value);
  const phone = phones.find((t) => t.use === 'mobile') ?? phones[0];
  const birthDate = patient.birthDate ?? '';
  return {
    name: formatName(patient.name),
    phone: phone?.value ?? '',
    // A partial date (YYYY or YYYY-MM) is not a date of birth the portal can use.
    dob: /^\d{4}-\d{2}-\d{2}$/.test(birthDate) ? birthDate : null,
  };
}

/** The official name (else the first): its text, else given names and family. */
export function formatName(names: HumanName[] | undefined): string {
  const all = list(names);
  const name = all.find((n) => n.use === 'official') ?? all[0];
  if (!name) return '';
  if (name.text?.trim()) return name.text.trim();
  return [...list(name.given), name.family]
    .filter((part): part is string => typeof part === 'string' && part.trim() !== '')
    .join(' ');
}

/** Reference for CoverageEligibilityResponse.patient: no names, only the identifier (and the literal reference if one was sent). */
export function patientReference(target: Target, identity: PatientIdentity): Reference {
  if (target.kind === 'resource' && target.via === 'literal' && target.reference)
    return { reference: target.reference, identifier: identity.identifier };
  return { identifier: identity.identifier };
}
