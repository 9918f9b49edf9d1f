/**
 * `_summary=true`, `_summary=data` and `_elements` (https://hl7.org/fhir/R4/search.html#summary,
 * #elements): a match reduced to some of its top-level elements, tagged SUBSETTED as the page
 * asks. The mandatory elements are always kept (search.html#elements: "Servers SHOULD always
 * return mandatory elements whether they are requested or not"), so a subset is still a valid
 * resource; contained resources are kept when a kept element still refers to them (dom-3).
 */
import type { Coding, FhirResource } from 'fhir/r4.js';
import { topLevelElements } from '../../fhir/definitions.js';

/** The v3 ObservationValue code a subsetted resource carries in meta.tag. */
export const SUBSETTED: Coding = {
  system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue',
  code: 'SUBSETTED',
  display: 'subsetted',
};

export type SubsetType = 'CoverageEligibilityResponse' | 'CoverageEligibilityRequest';

const ALWAYS = ['resourceType', 'id', 'meta', 'implicitRules'];

/** The elements of R4 that are mandatory (min 1); in these two types they are also the summary elements. */
const MANDATORY: Record<SubsetType, readonly string[]> = {
  CoverageEligibilityResponse: ['status', 'purpose', 'patient', 'created', 'request', 'outcome', 'insurer'],
  CoverageEligibilityRequest: ['status', 'purpose', 'patient', 'created', 'insurer'],
};

/** Every top-level element of the type (from the R4 definitions), for `_elements`. */
export function elementsOf(type: SubsetType): ReadonlySet<string> {
  return new Set([...ALWAYS, ...topLevelElements(type)]);
}

/**
 * What a subset keeps: the summary (`_summary=true`), all but text (`data`), the narrative with the
 * mandatory elements (`text`: every CER carries one), or the elements named.
 */
export type Subset =
  { kind: 'summary' } | { kind: 'data' } | { kind: 'text' } | { kind: 'elements'; names: readonly string[] };

/** The names a subset keeps of a resource of this type. */
function kept(type: SubsetType, subset: Subset, resource: Record<string, unknown>): Set<string> {
  if (subset.kind === 'data') return new Set(Object.keys(resource).filter((key) => key !== 'text'));
  const names = new Set([...ALWAYS, ...MANDATORY[type]]);
  if (subset.kind === 'elements') for (const name of subset.names) names.add(name);
  // search.html#summary: `text` returns "only the text, id, meta, and top-level mandatory elements".
  if (subset.kind === 'text') names.add('text');
  return names;
}

/** The ids of contained resources referred to (`#id`) in a JSON text. */
function localReferences(json: string): Set<string> {
  return new Set([...json.matchAll(/"reference":"#([^"]+)"/g)].map((match) => match[1]!));
}

/** A resource reduced to a subset, tagged SUBSETTED. */
export function subsetOf<T extends FhirResource>(resource: T, type: SubsetType, subset: Subset): T {
  const source = resource as unknown as Record<string, unknown>;
  const names = kept(type, subset, source);
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    if (key !== 'contained' && names.has(key)) out[key] = value;
  }
  // Contained resources still referred to, from the kept elements or from each other.
  const contained = (source.contained ?? []) as Array<{ id?: string }>;
  if (contained.length > 0) {
    const wanted = localReferences(JSON.stringify(out));
    let grew = true;
    while (grew) {
      grew = false;
      for (const child of contained) {
        if (!child.id || !wanted.has(child.id)) continue;
        for (const id of localReferences(JSON.stringify(child))) {
          if (!wanted.has(id)) {
            wanted.add(id);
            grew = true;
          }
        }
      }
    }
    const keep = contained.filter((child) => child.id !== undefined && wanted.has(child.id));
    if (keep.length > 0) out.contained = keep;
  }
  const meta = (source.meta ?? {}) as { tag?: Coding[] };
  out.meta = { ...meta, tag: [...(meta.tag ?? []), SUBSETTED] };
  return out as unknown as T;
}
