/**
 * The validator itself must catch what it claims to: a validator that passes everything
 * would make every other test worthless.
 */
import type { Coverage, CoverageEligibilityResponse } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { validateFhir } from '../../src/fhir/validator.js';

function cer(): CoverageEligibilityResponse {
  const coverage: Coverage = {
    resourceType: 'Coverage',
    id: 'cov',
    status: 'active',
    beneficiary: { display: 'patient' },
    payor: [{ display: 'Daman' }],
  };
  return {
    resourceType: 'CoverageEligibilityResponse',
    status: 'active',
    purpose: ['benefits'],
    patient: { display: 'patient' },
    created: '2026-11-22T10:00:00Z',
    request: { reference: 'CoverageEligibilityRequest/1' },
    outcome: 'complete',
    insurer: { display: 'Daman' },
    insurance: [
      {
        coverage: { reference: '#cov' },
        inforce: true,
        item: [
          {
            category: {
              coding: [{ system: 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory', code: '3' }],
            },
            benefit: [
              {
                type: {
                  coding: [{ system: 'http://terminology.hl7.org/CodeSystem/benefit-type', code: 'copay' }],
                },
                allowedMoney: { value: 50, currency: 'AED' },
              },
            ],
          },
        ],
      },
    ],
    contained: [coverage],
  };
}

function errorsOf(resource: unknown): string[] {
  return validateFhir(resource)
    .issues.filter((i) => i.severity === 'error' || i.severity === 'fatal')
    .map((i) => `${(i.expression ?? []).join(',')} ${i.details?.text ?? ''}`);
}

describe('validateFhir', () => {
  it('accepts a valid CoverageEligibilityResponse', () => {
    expect(errorsOf(cer())).toEqual([]);
  });

  it('rejects a code outside a required binding (status)', () => {
    const bad = { ...cer(), status: 'bogus' };
    expect(errorsOf(bad).join('\n')).toContain('CoverageEligibilityResponse.status');
  });

  it('rejects a wrong outcome code and a wrong currency in a nested datatype', () => {
    const bad = cer() as unknown as {
      outcome: string;
      insurance: { item: { benefit: { allowedMoney: { currency: string } }[] }[] }[];
    };
    bad.outcome = 'done';
    const benefit = bad.insurance[0]?.item[0]?.benefit[0];
    if (benefit) benefit.allowedMoney.currency = 'XXX-NOT';
    const errors = errorsOf(bad).join('\n');
    expect(errors).toContain('CoverageEligibilityResponse.outcome');
    expect(errors).toContain('allowedMoney.currency');
  });

  it('checks contained resources (Coverage.status)', () => {
    const bad = cer();
    const coverage = bad.contained?.[0] as unknown as { status: string };
    coverage.status = 'whatever';
    expect(errorsOf(bad).join('\n')).toContain('contained[0].status');
  });

  it('enforces ces-1: an item with both category and productOrService', () => {
    const bad = cer();
    const item = bad.insurance?.[0]?.item?.[0];
    if (item) item.productOrService = { text: 'consult' };
    expect(errorsOf(bad).join('\n')).toMatch(/ces-1/);
  });

  it('rejects a missing required element and a wrong type', () => {
    const { outcome: _omit, ...missing } = cer();
    expect(errorsOf(missing).length).toBeGreaterThan(0);
    expect(errorsOf({ ...cer(), created: 12 }).length).toBeGreaterThan(0);
  });

  it('rejects a bad mime type and an issue code outside issue-type', () => {
    expect(
      errorsOf({
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'error', code: 'not-a-code' }],
      }).join('\n'),
    ).toContain('OperationOutcome.issue[0].code');
    expect(errorsOf({ resourceType: 'Binary', contentType: 'not a mime' }).join('\n')).toContain(
      'Binary.contentType',
    );
  });

  it('accepts codes nested in a hierarchical code system (the trimmed definitions keep every level)', () => {
    // issue-type: 'structure' and 'code-invalid' sit under 'invalid' (https://hl7.org/fhir/R4/codesystem-issue-type.html).
    expect(
      errorsOf({
        resourceType: 'OperationOutcome',
        issue: [
          { severity: 'error', code: 'structure' },
          { severity: 'warning', code: 'code-invalid' },
        ],
      }),
    ).toEqual([]);
  });

  it('rejects an object where the definition says array, and an array where it says one', () => {
    expect(errorsOf({ ...cer(), contained: {} }).join('\n')).toContain(
      'CoverageEligibilityResponse.contained',
    );
    expect(errorsOf({ ...cer(), insurance: { inforce: true } }).join('\n')).toContain('insurance');
    expect(errorsOf({ ...cer(), status: ['active'] }).join('\n')).toContain(
      'CoverageEligibilityResponse.status',
    );
  });

  it('rejects an object where a primitive belongs, and absurd nesting, without throwing', () => {
    const bad = { ...cer(), patient: { reference: {} } };
    expect(errorsOf(bad).join('\n')).toContain('CoverageEligibilityResponse.patient.reference');
    let deep: Record<string, unknown> = { url: 'http://x', valueString: 'x' };
    for (let i = 0; i < 20_000; i += 1) deep = { url: 'http://x', extension: [deep] };
    expect(validateFhir({ ...cer(), extension: [deep] }).valid).toBe(false);
  });

  it('enforces dom-3: a contained resource nobody refers to is an error', () => {
    const unreferenced = cer();
    unreferenced.contained?.push({ resourceType: 'Organization', id: 'lonely', name: 'x' } as never);
    expect(errorsOf(unreferenced).join('\n')).toContain('CoverageEligibilityResponse.contained[1]');
    expect(errorsOf(cer())).toEqual([]);
  });

  it('never throws on junk', () => {
    for (const junk of [
      null,
      1,
      'x',
      [],
      {},
      { resourceType: 'Nope' },
      { resourceType: 'Patient', name: 5 },
    ]) {
      expect(validateFhir(junk).valid).toBe(false);
    }
  });
});
