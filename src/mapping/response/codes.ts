/**
 * Code systems, extension URLs and small value helpers shared by the response mapper.
 * Every URL here is defined by a resource of `conformanceResources()` (a test checks it).
 */
import type { CodeableConcept, Coding, Extension } from 'fhir/r4.js';
import { CANONICAL_BASE, canonical } from '../../fhir/canonical.js';

/** One CodeSystem for every error code of the service: upstream outcomes and adapter failures. */
export const OUTCOME_SYSTEM = canonical('CodeSystem', 'adapter-outcome');
/** Service categories the portals use that ex-benefitcategory has no code for (and those it has). */
export const SERVICE_CATEGORY_SYSTEM = canonical('CodeSystem', 'service-category');
/** Benefit types the R4 benefit-type CodeSystem lacks (coinsurance, aggregate cap, deductible maximum). */
export const OWN_BENEFIT_TYPE_SYSTEM = canonical('CodeSystem', 'benefit-type');
/** warning | information, for portal messages. */
export const MESSAGE_TYPE_SYSTEM = canonical('CodeSystem', 'portal-message-type');
/** Payer codes (tpa_name) when the request gave no system of its own. */
export const PAYER_CODE_SYSTEM = `${CANONICAL_BASE}/payer-code`;

// https://hl7.org/fhir/R4/codesystem-ex-benefitcategory.html
export const BENEFIT_CATEGORY_SYSTEM = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';
// https://hl7.org/fhir/R4/codesystem-benefit-type.html (copay, copay-percent, copay-maximum, deductible)
export const BENEFIT_TYPE_SYSTEM = 'http://terminology.hl7.org/CodeSystem/benefit-type';
// https://hl7.org/fhir/R4/codesystem-benefit-network.html
export const BENEFIT_NETWORK_SYSTEM = 'http://terminology.hl7.org/CodeSystem/benefit-network';
// https://hl7.org/fhir/R4/codesystem-benefit-unit.html
export const BENEFIT_UNIT_SYSTEM = 'http://terminology.hl7.org/CodeSystem/benefit-unit';
// https://hl7.org/fhir/R4/codesystem-benefit-term.html
export const BENEFIT_TERM_SYSTEM = 'http://terminology.hl7.org/CodeSystem/benefit-term';
// https://hl7.org/fhir/R4/codesystem-coverage-class.html
export const COVERAGE_CLASS_SYSTEM = 'http://terminology.hl7.org/CodeSystem/coverage-class';
// https://hl7.org/fhir/R4/v2/0203/index.html (MB = member number)
export const V2_0203_SYSTEM = 'http://terminology.hl7.org/CodeSystem/v2-0203';

/** Extension ids; the URL is canonical('StructureDefinition', id). */
export const EXTENSION_IDS = [
  'upstream-outcome',
  'search-all-response',
  'gp-referral-required',
  'portal-message',
  'multi-card',
  'portal-document',
  'portal-screenshot',
  'policy-details',
  'benefit-source',
] as const;
export type ExtensionId = (typeof EXTENSION_IDS)[number];

/** Each extension's URL, built once: every CER names them, and readers compare them. */
const EXTENSION_URLS = Object.fromEntries(
  EXTENSION_IDS.map((id) => [id, canonical('StructureDefinition', id)]),
) as Record<ExtensionId, string>;

export function extensionUrl(id: ExtensionId): string {
  return EXTENSION_URLS[id];
}

/** Characters a FHIR string may not hold (https://hl7.org/fhir/R4/datatypes.html#string). */
const NOT_FHIR_STRING = /[^\r\n\t\u0020-\uFFFF]/;
const NOT_FHIR_STRING_ALL = /[^\r\n\t\u0020-\uFFFF]/g;

/**
 * A FHIR string from an upstream value, or undefined. FHIR strings must have non-whitespace
 * content and no control characters other than CR, LF and TAB
 * (https://hl7.org/fhir/R4/datatypes.html#string); nothing else is changed.
 */
export function fhirText(value: unknown): string | undefined {
  let raw: string;
  if (typeof value === 'string') raw = value;
  else if (typeof value === 'number' && Number.isFinite(value)) raw = String(value);
  else return undefined;
  // Most portal text has no control characters: tested first, replaced only when needed.
  const cleaned = (NOT_FHIR_STRING.test(raw) ? raw.replace(NOT_FHIR_STRING_ALL, '') : raw).trim();
  return cleaned === '' ? undefined : cleaned;
}

/** A complex extension from named parts; parts without a value are left out. Undefined when empty. */
export function complexExtension(id: ExtensionId, parts: (Extension | undefined)[]): Extension | undefined {
  const present = parts.filter((p): p is Extension => p !== undefined);
  return present.length > 0 ? { url: extensionUrl(id), extension: present } : undefined;
}

/** A string sub-extension, or undefined when the value is not usable text. */
export function stringPart(url: string, value: unknown): Extension | undefined {
  const text = fhirText(value);
  return text === undefined ? undefined : { url, valueString: text };
}

export function booleanPart(url: string, value: unknown): Extension | undefined {
  return typeof value === 'boolean' ? { url, valueBoolean: value } : undefined;
}

/** A positive integer sub-extension from a loose number ("2", 2); undefined otherwise. */
export function positiveIntPart(url: string, value: number | null): Extension | undefined {
  return value !== null && Number.isInteger(value) && value > 0 && value <= 2147483647
    ? { url, valuePositiveInt: value }
    : undefined;
}

export function coding(system: string, code: string, display?: string): Coding {
  return display === undefined ? { system, code } : { system, code, display };
}

export function concept(codings: Coding[], text?: string): CodeableConcept {
  const result: CodeableConcept = {};
  if (codings.length > 0) result.coding = codings;
  if (text !== undefined) result.text = text;
  return result;
}
