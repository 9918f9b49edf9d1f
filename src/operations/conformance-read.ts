/**
 * Reads of the service's own conformance resources (extension StructureDefinitions,
 * CodeSystems), served at the canonical-looking paths /fhir/{type}/{id} so a client or a
 * validator can resolve what a CER uses (https://hl7.org/fhir/R4/resource.html#canonical).
 * Public, like /fhir/metadata: they hold no patient or tenant data.
 */
import type { Resource } from 'fhir/r4.js';
import { conformanceResources } from '../mapping/response/index.js';
import { notFound } from '../fhir/outcomes.js';
import type { FhirAnswer } from './types.js';

let index: Map<string, Resource> | null = null;

function byKey(): Map<string, Resource> {
  index ??= new Map(conformanceResources().map((r) => [`${r.resourceType}/${r.id ?? ''}`, r]));
  return index;
}

/** The resource types this service publishes conformance resources of (for the CapabilityStatement). */
export function conformanceTypes(): string[] {
  return [...new Set([...byKey().values()].map((r) => r.resourceType))].sort();
}

export function readConformance(type: string, id: string): FhirAnswer {
  const resource = byKey().get(`${type}/${id}`);
  if (!resource) throw notFound(`${type}/${id} is not known`);
  return { status: 200, body: resource, headers: { 'Cache-Control': 'public, max-age=3600' } };
}
