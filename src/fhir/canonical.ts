/**
 * The one canonical base of every conformance resource this service defines
 * (extensions, CodeSystems, ConceptMaps). Documented in the README. Canonical URLs are
 * identifiers; they are also served at /fhir/StructureDefinition/{id} etc. by this service.
 */
export const CANONICAL_BASE = 'http://fhir-eligibility-adapter.org/fhir';

/** Canonical URL of a conformance resource of this service. */
export function canonical(
  type:
    | 'StructureDefinition'
    | 'CodeSystem'
    | 'ConceptMap'
    | 'ValueSet'
    | 'OperationDefinition'
    | 'SearchParameter'
    | 'ImplementationGuide'
    | 'CapabilityStatement',
  id: string,
): string {
  return `${CANONICAL_BASE}/${type}/${id}`;
}

/**
 * The profiles this service declares in meta.profile of what it emits (docs/validation.md). Built
 * once: every mapped CER names one, so the strings are never rebuilt per check.
 */
export const PROFILES = {
  eligibilityResponse: canonical('StructureDefinition', 'eligibility-response'),
  eligibilityRequest: canonical('StructureDefinition', 'eligibility-request'),
  portalCoverage: canonical('StructureDefinition', 'portal-coverage'),
  estimateClaimResponse: canonical('StructureDefinition', 'estimate-claim-response'),
} as const;

/** The topic: one event per check, when its CER first becomes final (complete, partial or error). */
export const ELIGIBILITY_FINAL_TOPIC = `${CANONICAL_BASE}/SubscriptionTopic/eligibility-final`;
