/**
 * The R4 definitions load in steps at start-up (warmFhirDefinitions), so the event loop keeps
 * turning; a validation needed in the middle finishes the load itself. Own file: the module's
 * definitions must not be loaded yet when these tests start.
 */
import { describe, expect, it } from 'vitest';
import { validateFhir, warmFhirDefinitions } from '../../src/fhir/validator.js';

describe('warmFhirDefinitions', () => {
  it('a validation needed while the load runs in steps finishes the load; the warm-up then ends', async () => {
    const warm = warmFhirDefinitions();
    // Let a few steps run in the background, then need the definitions at once.
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(validateFhir({ resourceType: 'Patient', gender: 'male' }).valid).toBe(true);
    expect(validateFhir({ resourceType: 'Patient', gender: 'not-a-gender' }).valid).toBe(false);
    await warm;
    // Loaded once: a second warm-up is immediate and changes nothing.
    await warmFhirDefinitions();
    expect(validateFhir({ resourceType: 'Patient', gender: 'not-a-gender' }).issues[0]?.expression).toEqual([
      'Patient.gender',
    ]);
  });
});
