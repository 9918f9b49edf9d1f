/**
 * $submit body -> CheckInput (src/mapping/request/parse-submit.ts), per docs/request-mapping.md.
 */
import fc from 'fast-check';
import type {
  Bundle,
  Coverage,
  CoverageEligibilityRequest,
  Organization,
  Parameters,
  Patient,
  Practitioner,
  PractitionerRole,
  Resource,
} from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { CANONICAL_BASE, PROFILES } from '../../src/fhir/canonical.js';
import { OperationOutcomeError } from '../../src/fhir/outcomes.js';
import { requestNarrative } from '../../src/mapping/request/request-narrative.js';
import { parseSubmit, type ParseSubmitOptions } from '../../src/mapping/request/parse-submit.js';
import { normalizeEmiratesId } from '../../src/mapping/request/patient.js';
import { ReferenceResolutionError, type ReferenceResolver } from '../../src/mapping/request/resolver.js';
import { expectValidFhir } from '../support/fhir.js';

const V2 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const BENEFIT = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';
const EID_SYSTEM = 'http://uae.gov/fhir/identifier/emirates-id';
const PAYER_SYSTEM = `${CANONICAL_BASE}/payer-code`;
const NOW = new Date('2026-11-22T08:30:00Z');
const options: ParseSubmitOptions = { practiceId: 'P-001', now: NOW };

const type = (code: string) => ({ coding: [{ system: V2, code }] });

function patient(overrides: Partial<Patient> = {}): Patient {
  return {
    resourceType: 'Patient',
    id: 'pat',
    identifier: [{ type: type('NI'), system: EID_SYSTEM, value: '784-1990-1234567-6' }],
    name: [{ given: ['Aisha'], family: 'Testpatient' }],
    birthDate: '1988-04-12',
    telecom: [{ system: 'phone', value: '+971501112233' }],
    ...overrides,
  };
}

function payer(code = 'DAMAN', overrides: Partial<Organization> = {}): Organization {
  return {
    resourceType: 'Organization',
    id: 'payer',
    identifier: [{ type: type('NIIP'), system: PAYER_SYSTEM, value: code }],
    name: 'Daman Insurance',
    ...overrides,
  };
}

function doctor(): Practitioner {
  return {
    resourceType: 'Practitioner',
    id: 'doc',
    identifier: [{ type: type('MD'), value: 'DHA-P-0012345' }],
    name: [{ prefix: ['Dr'], given: ['Omar'], family: 'Haddad', text: 'Dr Omar Haddad' }],
  };
}

/** A contained-resources request, as an EHR sends it. */
function request(overrides: Partial<CoverageEligibilityRequest> = {}): CoverageEligibilityRequest {
  return {
    resourceType: 'CoverageEligibilityRequest',
    id: 'client-id',
    meta: { versionId: '3', lastUpdated: '2026-11-22T08:00:00Z' },
    identifier: [{ system: 'urn:example:ehr:eligibility', value: 'visit-0001' }],
    status: 'active',
    purpose: ['benefits', 'validation'],
    created: '2026-11-22',
    patient: { reference: '#pat' },
    insurer: { reference: '#payer' },
    provider: { reference: '#doc' },
    item: [{ category: { coding: [{ system: BENEFIT, code: '3' }] } }],
    contained: [patient(), payer(), doctor()],
    ...overrides,
  };
}

/** The same request as a collection Bundle: references point at entries by `fullUrl`. */
function bundleOf(references: 'urn' | 'relative'): Bundle {
  const url = (t: string, id: string) =>
    references === 'urn'
      ? `urn:uuid:00000000-0000-4000-8000-0000000000${id}`
      : `Type/${id}`.replace('Type', t);
  const fullUrl = (t: string, id: string) =>
    references === 'urn' ? url(t, id) : `https://ehr.example/fhir/${t}/${id}`;
  const cer = request({
    contained: undefined,
    patient: { reference: url('Patient', '01') },
    insurer: { reference: url('Organization', '02') },
    provider: { reference: url('Practitioner', '03') },
  });
  return {
    resourceType: 'Bundle',
    type: 'collection',
    entry: [
      { fullUrl: fullUrl('CoverageEligibilityRequest', '00'), resource: cer },
      {
        fullUrl: fullUrl('Patient', '01'),
        resource: { ...patient({ id: '01' }), meta: { lastUpdated: '2026-01-01T00:00:00Z' } },
      },
      { fullUrl: fullUrl('Organization', '02'), resource: payer('DAMAN', { id: '02' }) },
      { fullUrl: fullUrl('Practitioner', '03'), resource: { ...doctor(), id: '03' } },
    ],
  };
}

const parametersOf = (resource: Resource): Parameters => ({
  resourceType: 'Parameters',
  parameter: [{ name: 'resource', resource }],
});

/** An in-memory EHR server for literal references. */
function memoryResolver(resources: Record<string, Resource>): ReferenceResolver & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    resolve(reference: string) {
      calls.push(reference);
      const found = resources[reference];
      return found
        ? Promise.resolve(found)
        : Promise.reject(new ReferenceResolutionError('not-found', reference, 'HTTP 404', 404));
    },
  };
}

async function rejection(body: unknown, opts: ParseSubmitOptions = options): Promise<OperationOutcomeError> {
  try {
    await parseSubmit(body, opts);
  } catch (error) {
    if (error instanceof OperationOutcomeError) return error;
    throw error;
  }
  throw new Error('expected parseSubmit to reject');
}

const literalResolver = () =>
  memoryResolver({
    'Patient/77': { ...patient(), id: '77' },
    'Organization/9': { ...payer(), id: '9' },
    'Practitioner/5': { ...doctor(), id: '5' },
  });

describe('parseSubmit: the three input shapes and every reference kind', () => {
  const cases: {
    name: string;
    body: () => unknown;
    opts?: () => ParseSubmitOptions;
    patientRef?: string;
    logical?: boolean;
  }[] = [
    { name: 'a CoverageEligibilityRequest with contained resources', body: () => request() },
    { name: 'a collection Bundle with urn:uuid fullUrls', body: () => bundleOf('urn') },
    { name: 'a collection Bundle with relative Type/id references', body: () => bundleOf('relative') },
    { name: 'Parameters holding the request', body: () => parametersOf(request()) },
    { name: 'Parameters holding a Bundle', body: () => parametersOf(bundleOf('urn')) },
    {
      name: 'logical references (Reference.identifier)',
      body: () =>
        request({
          contained: [doctor()],
          patient: { identifier: { type: type('NI'), system: EID_SYSTEM, value: '784199012345676' } },
          insurer: { identifier: { system: PAYER_SYSTEM, value: 'DAMAN' } },
        }),
      logical: true,
    },
    {
      name: 'literal references resolved from the EHR server',
      body: () =>
        request({
          contained: undefined,
          patient: { reference: 'Patient/77' },
          insurer: { reference: 'Organization/9' },
          provider: { reference: 'Practitioner/5' },
        }),
      opts: () => ({ ...options, resolver: literalResolver() }),
      patientRef: 'Patient/77',
    },
  ];

  it.each(cases)('maps $name to the upstream request', async ({ body, opts, patientRef, logical }) => {
    const input = await parseSubmit(body(), opts?.() ?? options);
    expect(input.upstream).toEqual({
      emirates_id: '784-1990-1234567-6',
      id_type: 'EMIRATESID',
      phone: logical ? '' : '+971501112233',
      practice_id: 'P-001',
      tpa_name: 'DAMAN',
      payerName: 'Daman - National Health Insurance Company',
      visit_type: 'OUTPATIENT',
      name: logical ? '' : 'Aisha Testpatient',
      doctorName: 'Dr Omar Haddad',
      doctorId: 'DHA-P-0012345',
      user_id: 'fhir-adapter',
      dob: logical ? null : '1988-04-12',
      extra_args: { title: 'Consultation', value: 'Outpatient', request_start_time: 1795336200 },
    });
    expect(input.payerCode).toBe('DAMAN');
    expect(input.isSearchAll).toBe(false);
    expect(input.idempotencyKey).toBe('urn:example:ehr:eligibility|visit-0001');
    expect(input.patientKey).toBe(`${EID_SYSTEM}|784-1990-1234567-6`);
    expect(input.insurer).toEqual({
      identifier: { system: PAYER_SYSTEM, value: 'DAMAN' },
      display: 'Daman - National Health Insurance Company',
    });
    expect(input.patient).toEqual({
      ...(patientRef ? { reference: patientRef } : {}),
      identifier: { type: type('NI'), system: EID_SYSTEM, value: '784-1990-1234567-6' },
    });
    expect(input.request.id).toBeUndefined();
    // The client's meta is dropped; the stored request names this service's profile.
    expect(input.request.meta).toEqual({ profile: [PROFILES.eligibilityRequest] });
    expectValidFhir(input.request);
  });

  it('reads the whole patient from a contained Patient', async () => {
    const { upstream } = await parseSubmit(request(), options);
    expect(upstream.name).toBe('Aisha Testpatient');
    expect(upstream.dob).toBe('1988-04-12');
  });

  it('uses only the identifier (and its display as name) for a logical patient', async () => {
    const { upstream } = await parseSubmit(
      request({ patient: { identifier: { type: type('NI'), value: '784199012345676' }, display: 'A. T.' } }),
      options,
    );
    expect(upstream).toMatchObject({
      emirates_id: '784-1990-1234567-6',
      name: 'A. T.',
      phone: '',
      dob: null,
    });
  });

  it('contains the referenced Bundle resources in the stored request, with #id references and no meta', async () => {
    const { request: stored } = await parseSubmit(bundleOf('relative'), options);
    expect(stored.patient).toEqual({ reference: '#01' });
    expect(stored.insurer).toEqual({ reference: '#02' });
    expect(stored.provider).toEqual({ reference: '#03' });
    expect(stored.contained?.map((r) => `${r.resourceType}/${r.id}`)).toEqual([
      'Patient/01',
      'Organization/02',
      'Practitioner/03',
    ]);
    expect(stored.contained?.some((r) => r.meta)).toBe(false);
    expectValidFhir(stored);
  });

  it('contains a Bundle resource referenced only from another one, hoisting its own contained', async () => {
    const bundle = bundleOf('urn');
    const role: PractitionerRole = {
      resourceType: 'PractitionerRole',
      id: 'role',
      practitioner: { reference: '#p' },
      contained: [{ ...doctor(), id: 'p' }],
      organization: { reference: 'urn:uuid:clinic' },
    };
    const cer = bundle.entry![0]!.resource as CoverageEligibilityRequest;
    cer.provider = { reference: 'urn:uuid:role' };
    bundle.entry!.push(
      { fullUrl: 'urn:uuid:role', resource: role },
      {
        fullUrl: 'urn:uuid:clinic',
        resource: { resourceType: 'Organization', id: '02', name: 'Clinic' } as Organization,
      },
    );
    const input = await parseSubmit(bundle, options);
    expect(input.upstream).toMatchObject({ doctorName: 'Dr Omar Haddad', doctorId: 'DHA-P-0012345' });
    const contained = input.request.contained ?? [];
    const storedRole = contained.find((r) => r.resourceType === 'PractitionerRole') as PractitionerRole;
    expect(storedRole.contained).toBeUndefined();
    expect(storedRole.practitioner?.reference).toBe('#p');
    expect(storedRole.organization?.reference).toBe('#02-2');
    expect(new Set(contained.map((r) => r.id)).size).toBe(contained.length);
    expectValidFhir(input.request);
  });

  it("keeps the contained resources of a contained-style request, drops only id and the client's meta and narrative, and names its profile and its own narrative", async () => {
    const body = request();
    const { request: stored } = await parseSubmit(body, options);
    const { id: _id, meta: _meta, text: _text, ...rest } = body;
    expect(stored).toEqual({
      ...rest,
      meta: { profile: [PROFILES.eligibilityRequest] },
      text: requestNarrative(stored),
    });
    expect(stored.text?.status).toBe('generated');
  });

  it('looks each literal reference up once, and keeps it literal in the stored request', async () => {
    const resolver = literalResolver();
    const { request: stored } = await parseSubmit(
      request({
        contained: undefined,
        patient: { reference: 'Patient/77' },
        insurer: { reference: 'Organization/9' },
        provider: { reference: 'Practitioner/5' },
        enterer: { reference: 'Practitioner/5' },
      }),
      { ...options, resolver },
    );
    expect(resolver.calls).toEqual(['Patient/77', 'Organization/9', 'Practitioner/5']);
    expect(stored.patient).toEqual({ reference: 'Patient/77' });
    expectValidFhir(stored);
  });

  it('falls back to the identifier of a literal reference when no EHR server is configured', async () => {
    const input = await parseSubmit(
      request({
        patient: { reference: 'Patient/77', identifier: { type: type('NI'), value: '784199012345676' } },
      }),
      options,
    );
    expect(input.upstream.emirates_id).toBe('784-1990-1234567-6');
    expect(input.patient).toEqual({ identifier: { type: type('NI'), value: '784-1990-1234567-6' } });
    expect(input.patientKey).toBe('|784-1990-1234567-6');
  });

  it('resolves a PractitionerRole provider to its contained practitioner', async () => {
    const role: PractitionerRole = {
      resourceType: 'PractitionerRole',
      id: 'role',
      practitioner: { reference: '#doc' },
    };
    const body = request({
      provider: { reference: '#role' },
      contained: [patient(), payer(), doctor(), role],
    });
    const { upstream } = await parseSubmit(body, options);
    expect(upstream).toMatchObject({ doctorName: 'Dr Omar Haddad', doctorId: 'DHA-P-0012345' });
  });

  it('sends no doctor when the request has no provider', async () => {
    const { upstream } = await parseSubmit(
      request({ provider: undefined, contained: [patient(), payer()] }),
      options,
    );
    expect(upstream.doctorName).toBe('');
    expect(upstream).not.toHaveProperty('doctorId');
  });
});

describe('parseSubmit: 400 for what is not a FHIR request', () => {
  const twoRequests = bundleOf('urn');
  twoRequests.entry!.push({ fullUrl: 'urn:uuid:second', resource: request() });
  const cases: { name: string; body: unknown; code: string; expression: string }[] = [
    { name: 'null', body: null, code: 'structure', expression: 'resourceType' },
    { name: 'an array', body: [request()], code: 'structure', expression: 'resourceType' },
    { name: 'a string', body: 'hello', code: 'structure', expression: 'resourceType' },
    { name: 'a Patient', body: patient(), code: 'invalid', expression: 'resourceType' },
    {
      name: 'an object without resourceType',
      body: { status: 'active' },
      code: 'invalid',
      expression: 'resourceType',
    },
    {
      name: 'a request with a status outside its required value set',
      body: request({ status: 'bogus' as 'active' }),
      code: 'code-invalid',
      expression: 'CoverageEligibilityRequest.status',
    },
    {
      name: 'a request with a malformed birthDate in a contained Patient',
      body: request({ contained: [patient({ birthDate: '12/04/1988' }), payer()] }),
      code: 'structure',
      expression: 'CoverageEligibilityRequest.contained[0].birthDate',
    },
    {
      name: 'a transaction Bundle',
      body: { ...bundleOf('urn'), type: 'transaction' },
      code: 'invalid',
      expression: 'Bundle.type',
    },
    {
      name: 'a Bundle with no request',
      body: {
        resourceType: 'Bundle',
        type: 'collection',
        entry: [{ fullUrl: 'urn:uuid:p', resource: patient() }],
      },
      code: 'structure',
      expression: 'Bundle.entry',
    },
    {
      name: 'a Bundle with two requests',
      body: twoRequests,
      code: 'structure',
      expression: 'Bundle.entry[4].resource',
    },
    {
      name: 'Parameters without a resource part',
      body: { resourceType: 'Parameters', parameter: [{ name: 'other', valueString: 'x' }] },
      code: 'structure',
      expression: 'Parameters.parameter',
    },
    {
      name: 'Parameters holding a Patient',
      body: parametersOf(patient()),
      code: 'invalid',
      expression: 'Parameters.parameter[0].resource.resourceType',
    },
  ];

  it.each(cases)('answers 400 $code at $expression for $name', async ({ body, code, expression }) => {
    const error = await rejection(body);
    expect(error.status).toBe(400);
    expect(error.outcome.issue).toContainEqual(expect.objectContaining({ code, expression: [expression] }));
  });
});

describe('parseSubmit: 422 for valid FHIR that lacks what a check needs', () => {
  const cases: {
    name: string;
    body: () => unknown;
    opts?: () => ParseSubmitOptions;
    code: string;
    expression: string;
  }[] = [
    {
      name: 'an Emirates ID of the wrong shape',
      body: () =>
        request({
          contained: [patient({ identifier: [{ type: type('NI'), value: '12345' }] }), payer(), doctor()],
        }),
      code: 'value',
      expression: 'CoverageEligibilityRequest.contained[0].identifier[0]',
    },
    {
      name: 'a logical patient whose Emirates ID has the wrong shape',
      body: () => request({ patient: { identifier: { system: EID_SYSTEM, value: '785199012345671' } } }),
      code: 'value',
      expression: 'CoverageEligibilityRequest.patient.identifier',
    },
    {
      name: 'a patient with no usable identifier',
      body: () =>
        request({
          contained: [
            patient({ identifier: [{ system: 'urn:ehr:mrn', value: 'MRN-1' }] }),
            payer(),
            doctor(),
          ],
        }),
      code: 'required',
      expression: 'CoverageEligibilityRequest.contained[0].identifier',
    },
    {
      name: 'a display-only patient',
      body: () => request({ patient: { display: 'Aisha' } }),
      code: 'required',
      expression: 'CoverageEligibilityRequest.patient',
    },
    {
      name: 'a literal patient reference without SOURCE_FHIR_BASE_URL',
      body: () => request({ patient: { reference: 'Patient/77' } }),
      code: 'not-supported',
      expression: 'CoverageEligibilityRequest.patient',
    },
    {
      name: 'a contained reference to nothing',
      body: () => request({ insurer: { reference: '#nope' }, contained: [patient(), doctor()] }),
      code: 'not-found',
      expression: 'CoverageEligibilityRequest.insurer',
    },
    {
      name: 'a facility reference to no contained Location',
      body: () => request({ facility: { reference: '#nope' } }),
      code: 'not-found',
      expression: 'CoverageEligibilityRequest.facility',
    },
    {
      name: 'a Bundle reference to no entry',
      body: () => {
        const bundle = bundleOf('urn');
        (bundle.entry![0]!.resource as CoverageEligibilityRequest).patient = {
          reference: 'urn:uuid:missing',
        };
        return bundle;
      },
      code: 'not-found',
      expression: 'Bundle.entry[0].resource.patient',
    },
    {
      name: 'a patient reference pointing at an Organization',
      body: () => request({ patient: { reference: '#payer' } }),
      code: 'value',
      expression: 'CoverageEligibilityRequest.patient',
    },
    {
      name: 'a display-only insurer on a single-payer check',
      body: () => request({ insurer: { display: 'Daman' }, contained: [patient(), doctor()] }),
      code: 'required',
      expression: 'CoverageEligibilityRequest.insurer',
    },
    {
      name: 'an insurer Organization without identifiers',
      body: () => request({ contained: [patient(), payer('DAMAN', { identifier: undefined }), doctor()] }),
      code: 'required',
      expression: 'CoverageEligibilityRequest.insurer',
    },
    {
      name: 'an insurer Organization with several untyped identifiers',
      body: () =>
        request({
          contained: [
            patient(),
            payer('DAMAN', {
              identifier: [
                { system: 'urn:a', value: 'X' },
                { system: 'urn:b', value: 'Y' },
              ],
            }),
            doctor(),
          ],
        }),
      code: 'required',
      expression: 'CoverageEligibilityRequest.insurer',
    },
    {
      name: 'an unknown service category',
      body: () => request({ item: [{ category: { coding: [{ system: BENEFIT, code: '76' }] } }] }),
      code: 'value',
      expression: 'CoverageEligibilityRequest.item[0].category',
    },
    {
      name: 'an unknown service category in a Parameters body',
      body: () =>
        parametersOf(
          request({ item: [{ category: { coding: [{ system: 'http://snomed.info/sct', code: '1' }] } }] }),
        ),
      code: 'value',
      expression: 'Parameters.parameter[0].resource.item[0].category',
    },
    {
      name: 'a literal patient the EHR server does not have (404)',
      body: () => request({ patient: { reference: 'Patient/404' } }),
      opts: () => ({ ...options, resolver: memoryResolver({}) }),
      code: 'not-found',
      expression: 'CoverageEligibilityRequest.patient',
    },
    {
      name: 'an EHR server that cannot be reached',
      body: () => request({ insurer: { reference: 'Organization/9' }, contained: [patient(), doctor()] }),
      opts: () => ({
        ...options,
        resolver: {
          resolve: (ref: string) =>
            Promise.reject(new ReferenceResolutionError('unreachable', ref, 'ECONNREFUSED')),
        },
      }),
      code: 'transient',
      expression: 'CoverageEligibilityRequest.insurer',
    },
    {
      name: 'a resolver that throws something unexpected',
      body: () => request({ provider: { reference: 'Practitioner/5' }, contained: [patient(), payer()] }),
      opts: () => ({ ...options, resolver: { resolve: () => Promise.reject(new Error('boom\n at stack')) } }),
      code: 'processing',
      expression: 'CoverageEligibilityRequest.provider',
    },
  ];

  it.each(cases)('answers 422 $code at $expression for $name', async ({ body, opts, code, expression }) => {
    const error = await rejection(body(), opts?.() ?? options);
    expect(error.status).toBe(422);
    expect(error.outcome.issue).toHaveLength(1);
    expect(error.outcome.issue[0]).toMatchObject({ code, expression: [expression] });
    expect(error.outcome.issue[0]?.details?.text).toBeTruthy();
    expect(JSON.stringify(error.outcome)).not.toMatch(/\bat .*\.(ts|js)|stack/);
  });

  it('names the facility and the missing #id when the facility reference is unresolvable', async () => {
    const error = await rejection(request({ facility: { reference: '#nope' } }));
    expect(error.outcome.issue[0]).toMatchObject({
      severity: 'error',
      code: 'not-found',
      expression: ['CoverageEligibilityRequest.facility'],
    });
    expect(error.outcome.issue[0]?.details?.text).toBe('The facility reference names no contained resource');
    expectValidFhir(error.outcome);
  });

  it('says in plain words that literal references need SOURCE_FHIR_BASE_URL', async () => {
    const error = await rejection(request({ patient: { reference: 'Patient/77' } }));
    expect(error.outcome.issue[0]?.details?.text).toContain('SOURCE_FHIR_BASE_URL');
  });
});

describe('parseSubmit: patient identifiers', () => {
  it.each([
    ['784199012345676', '784-1990-1234567-6'],
    ['784-1990-1234567-6', '784-1990-1234567-6'],
    [' 784 1990 1234567 6 ', '784-1990-1234567-6'],
    ['78419901234567-6', '784-1990-1234567-6'],
    ['78419901234567', null],
    ['7841990123456712', null],
    ['123-1990-1234567-1', null],
    ['784-1990-123456A-1', null],
  ])('normalizes the Emirates ID %j to %j', (raw, expected) => {
    expect(normalizeEmiratesId(raw)).toBe(expected);
  });

  it('recognises an Emirates ID by its system when it has no type', async () => {
    const body = request({
      contained: [patient({ identifier: [{ system: EID_SYSTEM, value: '784199012345676' }] }), payer()],
      provider: undefined,
    });
    const { upstream } = await parseSubmit(body, options);
    expect(upstream).toMatchObject({ emirates_id: '784-1990-1234567-6', id_type: 'EMIRATESID' });
  });

  it('prefers the Emirates ID (NI) over a member card (MB)', async () => {
    const identifier = [
      { type: type('MB'), value: 'CARD-1' },
      { type: type('NI'), value: '784199012345676' },
    ];
    const { upstream } = await parseSubmit(
      request({ contained: [patient({ identifier }), payer(), doctor()] }),
      options,
    );
    expect(upstream).toMatchObject({ emirates_id: '784-1990-1234567-6', id_type: 'EMIRATESID' });
  });

  it('checks by card number (CARDNUMBER) when the patient has only a member card', async () => {
    const identifier = [{ type: type('MB'), system: 'urn:payer:daman:card', value: ' 1234-5678-9012 ' }];
    const input = await parseSubmit(
      request({ contained: [patient({ identifier }), payer(), doctor()] }),
      options,
    );
    expect(input.upstream).toMatchObject({ emirates_id: '1234-5678-9012', id_type: 'CARDNUMBER' });
    expect(input.patientKey).toBe('urn:payer:daman:card|1234-5678-9012');
    expect(input.patient).toEqual({
      identifier: { type: type('MB'), system: 'urn:payer:daman:card', value: '1234-5678-9012' },
    });
  });

  const coverage = (overrides: Partial<Coverage>): Coverage => ({
    resourceType: 'Coverage',
    id: 'cov',
    status: 'active',
    beneficiary: { reference: '#pat' },
    payor: [{ reference: '#payer' }],
    ...overrides,
  });

  it.each([
    ['Coverage.subscriberId', coverage({ subscriberId: 'SUB-998877' }), 'SUB-998877', '|SUB-998877'],
    [
      'a Coverage identifier typed MB',
      coverage({ identifier: [{ type: type('MB'), system: 'urn:card', value: 'MB-55' }] }),
      'MB-55',
      'urn:card|MB-55',
    ],
  ])('falls back to the card number in %s', async (_name, cov, value, key) => {
    const body = request({
      contained: [patient({ identifier: undefined }), payer(), doctor(), cov],
      insurance: [{ focal: true, coverage: { reference: '#cov' } }],
    });
    const input = await parseSubmit(body, options);
    expect(input.upstream).toMatchObject({ emirates_id: value, id_type: 'CARDNUMBER' });
    expect(input.patientKey).toBe(key);
    expectValidFhir(input.request);
  });

  it('keeps names out of the patient reference', async () => {
    const input = await parseSubmit(request(), options);
    expect(JSON.stringify(input.patient)).not.toMatch(/Aisha|Testpatient/);
  });

  it('sends an empty phone and a null dob when the patient has none (or only a partial birth date)', async () => {
    const body = request({
      contained: [patient({ telecom: undefined, birthDate: '1988' }), payer(), doctor()],
    });
    const { upstream } = await parseSubmit(body, options);
    expect(upstream).toMatchObject({ phone: '', dob: null });
  });

  it('prefers a mobile phone and reads name.text', async () => {
    const p = patient({
      name: [{ text: 'Aisha Al Testpatient', given: ['X'] }],
      telecom: [
        { system: 'email', value: 'a@example.org' },
        { system: 'phone', use: 'home', value: '+97141234567' },
        { system: 'phone', use: 'mobile', value: '+971509999999' },
      ],
    });
    const { upstream } = await parseSubmit(request({ contained: [p, payer(), doctor()] }), options);
    expect(upstream).toMatchObject({ name: 'Aisha Al Testpatient', phone: '+971509999999' });
  });
});

describe('parseSubmit: payer', () => {
  it('passes an unlisted payer code through, named from the Organization', async () => {
    const body = request({ contained: [patient(), payer('ACME-HEALTH', { name: 'Acme Health' }), doctor()] });
    const input = await parseSubmit(body, options);
    expect(input.upstream).toMatchObject({ tpa_name: 'ACME-HEALTH', payerName: 'Acme Health' });
    expect(input.insurer).toEqual({
      identifier: { system: PAYER_SYSTEM, value: 'ACME-HEALTH' },
      display: 'Acme Health',
    });
  });

  it.each([
    [
      'typed NIIP',
      [
        { system: 'urn:other', value: 'X' },
        { type: type('NIIP'), value: 'THIQA' },
      ],
    ],
    [
      'in a payer-code system',
      [
        { system: 'urn:other', value: 'X' },
        { system: PAYER_SYSTEM, value: 'THIQA' },
      ],
    ],
    ['its only identifier', [{ system: 'urn:whatever', value: 'THIQA' }]],
  ])('reads the payer code from the identifier %s', async (_name, identifier) => {
    const body = request({ contained: [patient(), payer('X', { identifier }), doctor()] });
    const { upstream } = await parseSubmit(body, options);
    expect(upstream).toMatchObject({ tpa_name: 'THIQA', payerName: 'Thiqa' });
  });

  it('sends an empty payerName for an unlisted logical payer without display', async () => {
    const input = await parseSubmit(request({ insurer: { identifier: { value: 'NEWPAYER' } } }), options);
    expect(input.upstream).toMatchObject({ tpa_name: 'NEWPAYER', payerName: '' });
    expect(input.insurer).toEqual({ identifier: { system: PAYER_SYSTEM, value: 'NEWPAYER' } });
  });

  it('runs a search-all for purpose discovery, with a display-only insurer', async () => {
    const body = request({
      purpose: ['discovery'],
      insurer: { display: 'Any payer' },
      contained: [patient(), doctor()],
    });
    const input = await parseSubmit(body, options);
    expect(input.upstream).toMatchObject({ tpa_name: 'ALL', is_search_all: true, payerName: '' });
    expect(input.isSearchAll).toBe(true);
    expect(input.payerCode).toBe('ALL');
    expect(input.insurer).toEqual({ display: 'All payers (search-all)' });
    expectValidFhir(input.request);
  });

  it('does not mark a single-payer check as search-all', async () => {
    const { upstream } = await parseSubmit(request(), options);
    expect(upstream).not.toHaveProperty('is_search_all');
  });
});

describe('parseSubmit: visit type', () => {
  const withCategory = (system: string, code: string) =>
    request({ item: [{ category: { coding: [{ system, code }] } }] });

  it.each([
    [BENEFIT, '3', 'Consultation', false],
    [BENEFIT, '69', 'Maternity', true],
    [BENEFIT, '35', 'Dental', false],
    [BENEFIT, 'F6', 'Optical', false],
    [`${CANONICAL_BASE}/CodeSystem/visit-type`, 'maternity', 'Maternity', true],
    [`${CANONICAL_BASE}/CodeSystem/visit-type`, 'pharmacy', 'Pharmacy', false],
  ])('maps %s|%s to OUTPATIENT titled %s (maternity %s)', async (system, code, title, maternity) => {
    const { upstream } = await parseSubmit(withCategory(system, code), options);
    expect(upstream.visit_type).toBe('OUTPATIENT');
    expect(upstream.extra_args.title).toBe(title);
    expect(upstream.extra_args.value).toBe('Outpatient');
    if (maternity) expect(upstream.extra_args.is_maternity).toBe(true);
    else expect(upstream.extra_args).not.toHaveProperty('is_maternity');
  });

  it('uses the default (outpatient consultation) when no item has a category', async () => {
    const { upstream } = await parseSubmit(request({ item: undefined }), options);
    expect(upstream.visit_type).toBe('OUTPATIENT');
    expect(upstream.extra_args).toEqual({
      title: 'Consultation',
      value: 'Outpatient',
      request_start_time: 1795336200,
    });
  });

  it('names the item index of an unknown category', async () => {
    const body = request({
      item: [
        { category: { coding: [{ system: BENEFIT, code: '3' }] } },
        { category: { coding: [{ system: BENEFIT, code: '49' }] } },
      ],
    });
    const error = await rejection(body);
    expect(error.outcome.issue[0]?.expression).toEqual(['CoverageEligibilityRequest.item[1].category']);
  });
});

describe('parseSubmit: user and request keys', () => {
  it('takes user_id from the enterer identifier, else the caller, else fhir-adapter', async () => {
    const enterer = {
      resourceType: 'Practitioner',
      id: 'ent',
      identifier: [{ value: 'nurse-7' }],
    } as Practitioner;
    const withEnterer = request({
      enterer: { reference: '#ent' },
      contained: [patient(), payer(), doctor(), enterer],
    });
    expect((await parseSubmit(withEnterer, options)).upstream.user_id).toBe('nurse-7');
    expect((await parseSubmit(request(), { ...options, userId: 'api-user' })).upstream.user_id).toBe(
      'api-user',
    );
    expect((await parseSubmit(request(), options)).upstream.user_id).toBe('fhir-adapter');
  });

  it('has a null idempotency key when the request has no identifier', async () => {
    expect((await parseSubmit(request({ identifier: undefined }), options)).idempotencyKey).toBeNull();
  });

  it('writes request_start_time as epoch seconds of now', async () => {
    const { upstream } = await parseSubmit(request(), { ...options, now: new Date(1_700_000_000_999) });
    expect(upstream.extra_args.request_start_time).toBe(1_700_000_000);
  });
});

describe('parseSubmit: never fails any other way', () => {
  const expectOutcomeError = async (body: unknown) => {
    const error = await rejection(body);
    expect([400, 422]).toContain(error.status);
  };

  it('answers random junk with a 400/422 OperationOutcomeError', async () => {
    const junk = fc.oneof(
      fc.anything(),
      fc.record({
        resourceType: fc.constantFrom('CoverageEligibilityRequest', 'Bundle', 'Parameters', 'Patient', ''),
        status: fc.oneof(fc.constant('active'), fc.string()),
        purpose: fc.oneof(fc.constant(['benefits']), fc.anything()),
        patient: fc.anything(),
        insurer: fc.anything(),
        created: fc.constantFrom('2026-11-22', 'yesterday'),
        type: fc.constantFrom('collection', 'batch'),
        entry: fc.anything(),
        parameter: fc.anything(),
      }),
    );
    await fc.assert(fc.asyncProperty(junk, expectOutcomeError), { numRuns: 300 });
  });

  it('answers a mangled request with a valid CheckInput or a 400/422, never another exception', async () => {
    const reference = fc.oneof(
      fc.constantFrom('#pat', '#payer', '#doc', '#nope', 'Patient/1', 'urn:uuid:x', 'http://x/y', ''),
      fc.string(),
    );
    const value = fc.oneof(
      fc.jsonValue(),
      reference.map((r) => ({ reference: r })),
      fc.record({
        identifier: fc.record({ system: fc.constantFrom(EID_SYSTEM, PAYER_SYSTEM), value: fc.string() }),
      }),
    );
    const field = fc.constantFrom(
      'patient',
      'insurer',
      'provider',
      'enterer',
      'facility',
      'purpose',
      'item',
      'contained',
      'identifier',
      'insurance',
    );
    const resolver = memoryResolver({ 'Patient/1': patient() });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(field, value), { minLength: 1, maxLength: 3 }), async (edits) => {
        const body: Record<string, unknown> = { ...request() };
        for (const [key, v] of edits) body[key] = v;
        const outcome = await parseSubmit(body, { ...options, resolver }).then(
          (input) => ({ input }),
          (error: unknown) => ({ error }),
        );
        if ('error' in outcome) {
          expect(outcome.error).toBeInstanceOf(OperationOutcomeError);
          expect([400, 422]).toContain((outcome.error as OperationOutcomeError).status);
        } else expectValidFhir(outcome.input.request);
      }),
      { numRuns: 300 },
    );
  });
});
