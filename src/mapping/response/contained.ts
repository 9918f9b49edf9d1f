/**
 * Reading a finished CER's own contained resources (https://hl7.org/fhir/R4/references.html#contained):
 * the Coverage an insurance names, a document an extension names, the Coverage's plan and payer.
 * Shared by the narrative and the visit summary, which read the same facts.
 */
import type {
  Coverage,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsurance as Insurance,
  FhirResource,
} from 'fhir/r4.js';

/** The contained resource of type `type` a local reference (`#id`) names, if any. */
export function containedById<T extends FhirResource>(
  cer: CoverageEligibilityResponse,
  ref: string | undefined,
  type: T['resourceType'],
): T | undefined {
  if (!ref?.startsWith('#')) return undefined;
  const id = ref.slice(1);
  return cer.contained?.find((r): r is T => r.resourceType === type && r.id === id);
}

/** The Coverage an insurance of the CER names. */
export function coverageOfInsurance(
  cer: CoverageEligibilityResponse,
  insurance: Insurance,
): Coverage | undefined {
  return containedById<Coverage>(cer, insurance.coverage.reference, 'Coverage');
}

/** A Coverage class value by its coverage-class code (`plan`, `subplan`). */
export function classValue(coverage: Coverage | undefined, code: string): string | undefined {
  return coverage?.class?.find((c) => c.type.coding?.some((k) => k.code === code))?.value;
}

/** The payer as the CER names it: its display, else its identifier. */
export function payerName(coverage: Coverage | undefined): string | undefined {
  const payor = coverage?.payor[0];
  return payor?.display ?? payor?.identifier?.value;
}
