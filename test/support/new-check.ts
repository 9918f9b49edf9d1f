/**
 * A stored check as a store test writes it (NewCheck): a minimal valid row, waiting, with its
 * queued CER; only what a test names differs between checks.
 */
import { randomUUID } from 'node:crypto';
import type { CoverageEligibilityRequest, CoverageEligibilityResponse } from 'fhir/r4.js';
import type { CerOutcome, CheckState, NewCheck } from '../../src/checks/store/check-store.js';
import { upstreamTaskRequest } from './requests.js';

export const T0 = Date.UTC(2025, 0, 1, 8, 0, 0);

export interface CheckSpec {
  tenantId?: string;
  idempotencyKey?: string | null;
  patientKey?: string | null;
  patientValue?: string | null;
  requestIdentifierValue?: string | null;
  payerCode?: string;
  state?: CheckState;
  outcome?: CerOutcome;
  now?: number;
  nextRunAt?: number;
  deadlineAt?: number;
}

/** A minimal valid NewCheck; only what a test names differs between checks. */
export function newCheck(spec: CheckSpec = {}): NewCheck {
  const id = randomUUID();
  const now = spec.now ?? T0;
  const outcome = spec.outcome ?? 'queued';
  const request: CoverageEligibilityRequest = {
    resourceType: 'CoverageEligibilityRequest',
    id,
    status: 'active',
    purpose: ['benefits'],
    patient: { reference: 'Patient/p1' },
    created: '2025-01-01',
    insurer: { identifier: { system: 'urn:payer', value: 'DAMAN' } },
  };
  const cer: CoverageEligibilityResponse = {
    resourceType: 'CoverageEligibilityResponse',
    id,
    status: 'active',
    purpose: ['benefits'],
    patient: { reference: 'Patient/p1' },
    created: new Date(now).toISOString(),
    request: { reference: `CoverageEligibilityRequest/${id}` },
    outcome,
    insurer: { identifier: { system: 'urn:payer', value: 'DAMAN' } },
  };
  return {
    id,
    tenantId: spec.tenantId ?? 'tenant-a',
    idempotencyKey: spec.idempotencyKey === undefined ? null : spec.idempotencyKey,
    payerCode: spec.payerCode ?? 'DAMAN',
    isSearchAll: false,
    patientKey: spec.patientKey === undefined ? 'urn:eid|784-1990-1234567-6' : spec.patientKey,
    ...(spec.patientValue === undefined ? {} : { patientValue: spec.patientValue }),
    ...(spec.requestIdentifierValue === undefined
      ? {}
      : { requestIdentifierValue: spec.requestIdentifierValue }),
    request,
    upstreamRequest: upstreamTaskRequest('784-1990-1234567-6', now),
    state: spec.state ?? 'waiting',
    upstreamTaskId: null,
    upstreamStatus: null,
    tasksCreated: 0,
    pollFailures: 0,
    nextRunAt: spec.nextRunAt ?? now,
    deadlineAt: spec.deadlineAt ?? now + 60_000,
    envelope: null,
    cer,
    outcome,
    answer: null,
    now,
  };
}
