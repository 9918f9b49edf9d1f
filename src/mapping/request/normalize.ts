/**
 * The CoverageEligibilityRequest as stored and read back: the client's `id` and `meta` removed
 * (the service assigns its own), contained resources kept, and for a Bundle input every Bundle
 * resource the request references (directly or through another one) contained, with the
 * references rewritten to `#id`. Rules kept: dom-2 (no nested contained: they are hoisted),
 * dom-3 (only referenced resources are contained), dom-4 (contained `meta` removed).
 * https://hl7.org/fhir/R4/references.html#contained
 */
import type { BundleEntry, CoverageEligibilityRequest, Resource } from 'fhir/r4.js';
import { PROFILES } from '../../fhir/canonical.js';
import { list, type SubmitBody } from './submit-body.js';
import { findBundleEntry } from './references.js';
import { requestNarrative } from './request-narrative.js';

/** The request to store, from a validated submit body. */
export function normalizeRequest(body: SubmitBody): CoverageEligibilityRequest {
  const { id: _id, meta: _meta, text: _text, resourceType, ...rest } = structuredClone(body.request);
  // The client's profiles are not this service's claim: the stored request names its own, and
  // carries the narrative of what is stored (the client's may name the patient).
  const request: CoverageEligibilityRequest = { resourceType, meta: storedRequestMeta(), ...rest };
  if (body.bundle) containBundleResources(request, body.bundle.entries);
  dropUnreferencedContained(request);
  const { meta, ...fields } = request;
  return { ...fields, resourceType, meta, text: requestNarrative(request) };
}

/** meta of a stored request: its profile (docs/validation.md). */
export function storedRequestMeta(): { profile: string[] } {
  return { profile: [PROFILES.eligibilityRequest] };
}

/**
 * dom-3: the stored request keeps only contained resources something refers to (a client may
 * send a Patient it no longer points at, e.g. when the patient is given by identifier).
 */
function dropUnreferencedContained(request: CoverageEligibilityRequest): void {
  const contained = list(request.contained);
  if (contained.length === 0) return;
  const referenced = new Set<string>();
  const collect = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(collect);
    else if (typeof value === 'object' && value !== null) {
      for (const [key, child] of Object.entries(value)) {
        if (key === 'reference' && typeof child === 'string') referenced.add(child);
        else collect(child);
      }
    }
  };
  // References from the request itself, then from what those reach, until nothing new.
  const { contained: _contained, ...rest } = request;
  collect(rest);
  let kept: Resource[] = [];
  for (let grew = true; grew;) {
    grew = false;
    for (const resource of contained) {
      if (kept.includes(resource) || !referenced.has(`#${resource.id ?? ''}`)) continue;
      kept.push(resource);
      collect(resource);
      grew = true;
    }
  }
  kept = contained.filter((r) => kept.includes(r));
  if (kept.length > 0) request.contained = kept;
  else delete request.contained;
}

function containBundleResources(request: CoverageEligibilityRequest, entries: readonly BundleEntry[]): void {
  const contained: Resource[] = [...list(request.contained)];
  const taken = new Set(contained.map((r) => r.id).filter((id): id is string => id !== undefined));
  const localIds = new Map<number, string>();
  const pending: Resource[] = [];

  const toLocal = (reference: string): string | undefined => {
    if (reference.startsWith('#')) return undefined;
    const index = findBundleEntry(entries, reference);
    const source = index === undefined ? undefined : entries[index]?.resource;
    if (index === undefined || !source) return undefined;
    let id = localIds.get(index);
    if (id === undefined) {
      id = uniqueId(source.id ?? source.resourceType.toLowerCase(), taken);
      localIds.set(index, id);
      const [resource, nested] = detach(structuredClone(source), id, taken);
      contained.push(resource, ...nested);
      pending.push(resource, ...nested);
    }
    return `#${id}`;
  };

  const { contained: _existing, ...rest } = request;
  rewriteReferences(rest, toLocal);
  for (const resource of contained) rewriteReferences(resource, toLocal);
  while (pending.length > 0) rewriteReferences(pending.shift(), toLocal);
  Object.assign(request, rest);
  if (contained.length > 0) request.contained = contained;
}

/** A Bundle resource made fit to be contained: new id, no meta, its own contained hoisted beside it. */
function detach(resource: Resource, id: string, taken: Set<string>): [Resource, Resource[]] {
  resource.id = id;
  delete resource.meta;
  const own = list((resource as { contained?: Resource[] }).contained);
  delete (resource as { contained?: Resource[] }).contained;
  const renamed = new Map<string, string>([['#', `#${id}`]]);
  const hoisted = own.map((inner) => {
    const innerId = uniqueId(inner.id ?? inner.resourceType.toLowerCase(), taken);
    if (inner.id) renamed.set(`#${inner.id}`, `#${innerId}`);
    const copy = { ...inner, id: innerId };
    delete copy.meta;
    return copy;
  });
  for (const target of [resource, ...hoisted]) rewriteReferences(target, (ref) => renamed.get(ref));
  return [resource, hoisted];
}

function uniqueId(base: string, taken: Set<string>): string {
  const clean = base.replace(/[^A-Za-z0-9\-.]/g, '-').slice(0, 60) || 'res';
  let id = clean;
  for (let n = 2; taken.has(id); n += 1) id = `${clean}-${n}`;
  taken.add(id);
  return id;
}

/** Replaces every `Reference.reference` under `node` for which `map` returns a value. */
function rewriteReferences(node: unknown, map: (reference: string) => string | undefined): void {
  if (Array.isArray(node)) {
    for (const item of node) rewriteReferences(item, map);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const record = node as Record<string, unknown>;
  for (const [key, value] of Object.entries(record)) {
    if (key === 'reference' && typeof value === 'string') {
      const local = map(value);
      if (local !== undefined) record[key] = local;
    } else rewriteReferences(value, map);
  }
}
