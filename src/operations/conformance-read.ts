/**
 * Reads and canonical searches of the service's own conformance resources (profiles, extension
 * StructureDefinitions, CodeSystems, ValueSets, ConceptMaps, OperationDefinitions,
 * SearchParameters, the ImplementationGuide): /fhir/{type}/{id}, and /fhir/{type}?url=&version=,
 * how a client or a validator resolves a canonical (https://hl7.org/fhir/R4/resource.html#canonical,
 * https://hl7.org/fhir/R4/search.html). Public, like /fhir/metadata: they hold no patient or tenant
 * data. Each resource is served as the package carries it, snapshots included.
 */
import type { Bundle, Resource } from 'fhir/r4.js';
import { badRequest, notFound } from '../fhir/outcomes.js';
import { parsePrefer } from '../fhir/prefer.js';
import { packageResources } from '../mapping/conformance/package.js';
import type { FhirAnswer } from './types.js';

/** A canonical URL longer than this is no URL of this service: refused, not looked up. */
const MAX_CANONICAL_CHARS = 1024;
const CACHE = { 'Cache-Control': 'public, max-age=3600' };

interface Conformance {
  url?: string;
  version?: string;
}

let index: Map<string, Resource> | null = null;

/** By `{type}/{id}`: every resource of the package but the CapabilityStatement (that is /metadata). */
function byKey(): Map<string, Resource> {
  index ??= new Map(
    packageResources()
      .filter((r) => r.resourceType !== 'CapabilityStatement')
      .map((r) => [`${r.resourceType}/${r.id ?? ''}`, r]),
  );
  return index;
}

/** The resource types this service publishes conformance resources of (for the CapabilityStatement). */
export function conformanceTypes(): string[] {
  return [...new Set([...byKey().values()].map((r) => r.resourceType))].sort();
}

export function readConformance(type: string, id: string): FhirAnswer {
  const resource = byKey().get(`${type}/${id}`);
  if (!resource) throw notFound(`${type}/${id} is not known`);
  return { status: 200, body: resource, headers: CACHE };
}

type Query = Record<string, unknown>;

/** One value of a search parameter: absent, or one string within bounds; anything else is 400. */
function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequest(`${name} may be given once, as one value`, name);
  if (value.length > MAX_CANONICAL_CHARS)
    throw badRequest(`${name} is longer than ${MAX_CANONICAL_CHARS} characters`, name);
  return value;
}

const KNOWN = new Set(['url', 'version', '_format']);

/**
 * GET /fhir/{type}?url=<canonical>[&version=]: a searchset Bundle with the resource of that
 * canonical (none when unknown). `url` may carry the version as `url|version`. Without `url`,
 * every resource of the type. Other parameters are ignored (the self link names what was applied),
 * unless `Prefer: handling=strict` (then 400), as the other searches do (docs/search.md).
 */
export function searchConformance(
  type: string,
  query: Query,
  baseUrl: string,
  prefer: string | undefined,
): FhirAnswer {
  if (parsePrefer(prefer).handling === 'strict') {
    const unknown = Object.keys(query).find((name) => !KNOWN.has(name));
    if (unknown !== undefined)
      throw badRequest(
        `${unknown.slice(0, 64)}: not a search parameter of ${type} here (Prefer: handling=strict)`,
        unknown.slice(0, 64),
      );
  }
  let url = single(query, 'url');
  let version = single(query, 'version');
  const bar = url?.lastIndexOf('|') ?? -1;
  if (url !== undefined && bar >= 0) {
    const given = url.slice(bar + 1);
    if (version !== undefined && version !== given)
      throw badRequest('url names a version that differs from version', 'version');
    version = given;
    url = url.slice(0, bar);
  }
  const matches = [...byKey().values()].filter((r) => {
    const c = r as Conformance;
    return (
      r.resourceType === type &&
      (url === undefined || c.url === url) &&
      (version === undefined || c.version === version)
    );
  });
  const self = new URL(`${baseUrl}/fhir/${type}`);
  if (url !== undefined) self.searchParams.set('url', url);
  if (version !== undefined) self.searchParams.set('version', version);
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'searchset',
    total: matches.length,
    link: [{ relation: 'self', url: self.href }],
    entry: matches.map((resource) => ({
      fullUrl: `${baseUrl}/fhir/${resource.resourceType}/${resource.id ?? ''}`,
      resource,
      search: { mode: 'match' },
    })),
  };
  if (bundle.entry?.length === 0) delete bundle.entry;
  return { status: 200, body: bundle, headers: CACHE };
}
