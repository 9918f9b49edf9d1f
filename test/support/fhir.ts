/**
 * Test helper: asserts that a resource passes the real FHIR R4 validator (structure, cardinality,
 * invariants such as ces-1, required bindings). Hand-written shape checks are no substitute.
 */
import { expect } from 'vitest';
import { validateFhir } from '../../src/fhir/validator.js';

/** Fails the test with the validator's issues when the resource is not valid FHIR R4. */
export function expectValidFhir(resource: unknown): void {
  const { valid, issues } = validateFhir(resource);
  const errors = issues
    .filter((i) => i.severity === 'error' || i.severity === 'fatal')
    .map((i) => `${(i.expression ?? []).join(',')}: ${i.details?.text ?? i.diagnostics ?? i.code}`);
  expect(errors, 'FHIR validation errors').toEqual([]);
  expect(valid).toBe(true);
}
