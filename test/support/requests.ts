/**
 * Real-looking FHIR inputs for component tests, built the way an EHR would send them.
 */
import type { CoverageEligibilityRequest, Organization, Patient, Period } from 'fhir/r4.js';
import type { CheckInput } from '../../src/mapping/types.js';
import type { UpstreamTaskRequest } from '../../src/upstream/contract.js';

const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

export interface RequestOptions {
  /** Emirates ID (type NI) or, with `cardNumber`, a member card (type MB). */
  emiratesId?: string;
  cardNumber?: string;
  payer?: string;
  /** The idempotency key value; a fresh one is made when absent. */
  identifier?: string | null;
  discovery?: boolean;
  category?: string;
  /** serviced[x]: an appointment when it lies in the future (docs/previsit.md). */
  servicedDate?: string;
  servicedPeriod?: { start?: string; end?: string };
  /** CoverageEligibilityRequest.priority (processpriority): where the check waits (docs/queue.md). */
  priority?: 'stat' | 'normal' | 'deferred';
}

let counter = 0;

/** A CoverageEligibilityRequest with its Patient and insurer Organization contained. */
export function eligibilityRequest(options: RequestOptions = {}): CoverageEligibilityRequest {
  counter += 1;
  const identifierValue =
    options.identifier === undefined ? `visit-${Date.now()}-${counter}` : options.identifier;
  const patientIdentifier = options.cardNumber
    ? { type: { coding: [{ system: V2_0203, code: 'MB' }] }, value: options.cardNumber }
    : {
        type: { coding: [{ system: V2_0203, code: 'NI' }] },
        system: 'http://uae.gov/fhir/identifier/emirates-id',
        value: options.emiratesId ?? '784-1990-1234567-6',
      };
  const patient: Patient = {
    resourceType: 'Patient',
    id: 'pat',
    identifier: [patientIdentifier],
    name: [{ given: ['Aisha'], family: 'Testpatient' }],
    birthDate: '1988-04-12',
    telecom: [{ system: 'phone', value: '+971501112233' }],
  };
  const payer: Organization = {
    resourceType: 'Organization',
    id: 'payer',
    identifier: [{ type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: options.payer ?? 'DAMAN' }],
    name: options.payer ?? 'Daman',
  };
  const request: CoverageEligibilityRequest = {
    resourceType: 'CoverageEligibilityRequest',
    status: 'active',
    purpose: options.discovery ? ['discovery'] : ['benefits', 'validation'],
    created: '2026-11-22',
    patient: { reference: '#pat' },
    insurer: options.discovery ? { display: 'Any payer' } : { reference: '#payer' },
    item: [
      {
        category: {
          coding: [
            {
              system: 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory',
              code: options.category ?? '3',
            },
          ],
        },
      },
    ],
    contained: options.discovery ? [patient] : [patient, payer],
  };
  if (options.servicedDate) request.servicedDate = options.servicedDate;
  if (options.servicedPeriod) request.servicedPeriod = options.servicedPeriod;
  if (options.priority)
    request.priority = {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/processpriority', code: options.priority }],
    };
  if (identifierValue !== null)
    request.identifier = [{ system: 'urn:example:ehr:eligibility', value: identifierValue }];
  return request;
}

/** A create-task body as the request mapper writes it (store tests and benchmarks). */
export function upstreamTaskRequest(emiratesId: string, startedAt: number): UpstreamTaskRequest {
  return {
    emirates_id: emiratesId,
    id_type: 'EMIRATESID',
    phone: '0500000000',
    practice_id: 'P-001',
    tpa_name: 'DAMAN',
    payerName: 'Daman',
    visit_type: 'OUTPATIENT',
    name: 'Test Patient',
    doctorName: 'Dr Test',
    user_id: 'u1',
    extra_args: { title: 'x', value: 'y', request_start_time: startedAt },
  };
}

export interface CheckInputOptions {
  /** When the request was made: the upstream's request_start_time, and its date is `created`. */
  startedAt: number;
  emiratesId?: string;
  /** The request.identifier value (system urn:ehr); none when null or absent. */
  key?: string | null;
  servicedPeriod?: Period;
}

/**
 * What the request mapper would hand the store for a benefits check at Daman by Emirates ID
 * (contained #pat and #payer), for the store tests that insert checks without the mapper.
 */
export function checkInput(options: CheckInputOptions): CheckInput {
  const eid = options.emiratesId ?? '784-1990-1234567-6';
  const key = options.key ?? null;
  return {
    request: {
      resourceType: 'CoverageEligibilityRequest',
      status: 'active',
      purpose: ['benefits'],
      patient: { reference: '#pat' },
      created: new Date(options.startedAt).toISOString().slice(0, 10),
      insurer: { reference: '#payer' },
      ...(options.servicedPeriod ? { servicedPeriod: options.servicedPeriod } : {}),
    },
    upstream: upstreamTaskRequest(eid, options.startedAt),
    payerCode: 'DAMAN',
    isSearchAll: false,
    idempotencyKey: key === null ? null : `urn:ehr|${key}`,
    requestIdentifierValue: key,
    patientKey: `urn:eid|${eid}`,
    patient: { identifier: { system: 'urn:eid', value: eid } },
    insurer: { identifier: { value: 'DAMAN' }, display: 'Daman' },
  };
}
