/**
 * One walk of a resource (and the resources contained in it) against the R4 definitions
 * (definitions.ts), finding two kinds of issue:
 * 1. Shape: the JSON type of each value against its element definition: an array where the
 *    definition says many and only there, an object where a complex type belongs, the JSON type of
 *    a primitive (https://hl7.org/fhir/R4/json.html#primitive), and the object of a `_x` primitive
 *    extension. medplum 4 lets some of these through, and reads others character by character.
 * 2. Required bindings (https://hl7.org/fhir/R4/terminologies.html#required): medplum 4 does not
 *    check them (a `status` of "bogus" passes), so every coded value bound with strength `required`
 *    is checked against the expanded ValueSet. ValueSets are expanded from the R4 definitions
 *    (valuesets.json, v3-codesystems.json, v2-tables.json). A ValueSet that cannot be expanded from
 *    them (filters, external code systems) is skipped, except mime types (BCP 13) and currencies
 *    (ISO 4217), which get a syntactic check.
 */
import type { ElementDefinition, OperationOutcomeIssue, Resource, ValueSet } from 'fhir/r4.js';
import { allCodes, loadedDefinitions } from './definitions.js';
import type { Expansion } from './definitions.js';
import { echo } from './text.js';

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
export interface Walk {
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
export function walkResource(resource: Record<string, unknown>): Walk {
  const walk: Walk = { shape: [], bindings: [] };
  walkInner(resource, String(resource.resourceType), walk);
  return walk;
}

function walkInner(value: Record<string, unknown>, fhirPath: string, walk: Walk): void {
  const type = value.resourceType;
  if (typeof type !== 'string' || !loadedDefinitions().structures.has(type)) {
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
  const elements = loadedDefinitions().elements.get(typeName);
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
    if (!many) {
      const path = `${fhirPath}.${key}`;
      if (primitiveExtension) checkPrimitiveExtension(child, path, walk);
      else checkItem(element, typeCode, child, path, walk);
      continue;
    }
    const items = child as unknown[];
    // forEach, not for: a hole in a sparse array is skipped, as it always was.
    items.forEach((item, index) => {
      const path = `${fhirPath}.${key}[${index}]`;
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

export interface Found {
  element: ElementDefinition;
  typeCode: string | undefined;
  max: string | undefined;
}

/**
 * The elements found for the property names of one element path, computed once per definition:
 * element path -> property name -> what `searchElement` finds for it. Only names that name an
 * element (a child, or a choice type of one) are listed, so the memo never grows with the input;
 * any other name is searched for each time.
 */
const childrenMemo = new WeakMap<Map<string, ElementDefinition>, Map<string, Map<string, Found>>>();

/** The element a property names under `elementPath`, from the table; exported for its invariant test. */
export function findElement(
  elements: Map<string, ElementDefinition>,
  elementPath: string,
  key: string,
): Found | null {
  let byPath = childrenMemo.get(elements);
  if (!byPath) childrenMemo.set(elements, (byPath = new Map<string, Map<string, Found>>()));
  let children = byPath.get(elementPath);
  if (!children) byPath.set(elementPath, (children = childrenOf(elements, elementPath)));
  return children.get(key) ?? searchElement(elements, elementPath, key);
}

/** Every property name without a dot that `searchElement` resolves under `elementPath`, with its result. */
function childrenOf(elements: Map<string, ElementDefinition>, elementPath: string): Map<string, Found> {
  const children = new Map<string, Found>();
  const prefix = `${elementPath}.`;
  for (const [path, element] of elements) {
    if (!path.startsWith(prefix)) continue;
    const name = path.slice(prefix.length);
    if (name.includes('.')) continue;
    const candidates = [name];
    if (name.endsWith('[x]'))
      for (const t of element.type ?? []) candidates.push(name.slice(0, -3) + upperFirst(t.code));
    for (const candidate of candidates) {
      if (candidate.includes('.') || children.has(candidate)) continue;
      const found = searchElement(elements, elementPath, candidate);
      if (found) children.set(candidate, found);
    }
  }
  return children;
}

/**
 * The element a property names under `elementPath`: a child (`${elementPath}.${key}`), else the
 * choice element whose name and one type make `key` (valueString -> value[x], string). The
 * reference `findElement` is held to (test/unit/validator-elements.test.ts).
 */
export function searchElement(
  elements: Map<string, ElementDefinition>,
  elementPath: string,
  key: string,
): Found | null {
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
  const resolved = loadedDefinitions().elements.get(typeName)?.get(target);
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
  const cache = loadedDefinitions().expansions;
  if (cache.has(url)) return cache.get(url) ?? null;
  if (seen.has(url)) return null;
  seen.add(url);
  const valueSet = loadedDefinitions().valueSets.get(url);
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
    const codeSystem = loadedDefinitions().codeSystems.get(include.system);
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
