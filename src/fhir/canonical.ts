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
    | 'SearchParameter',
  id: string,
): string {
  return `${CANONICAL_BASE}/${type}/${id}`;
}
