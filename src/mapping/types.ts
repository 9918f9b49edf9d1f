/**
 * The data that flows between the request mapper, the store and the response mapper.
 * Pure data: no I/O.
 */
import type { CoverageEligibilityRequest, OperationOutcomeIssue, Reference } from 'fhir/r4.js';
import type { UpstreamTaskRequest } from '../upstream/contract.js';

/** What the request mapper produces from a $submit body: everything a check needs. */
export interface CheckInput {
  /** The normalized request as it will be stored and read back (contained resources kept). */
  request: CoverageEligibilityRequest;
  /** The create-task body. */
  upstream: UpstreamTaskRequest;
  /** Payer code (tpa_name); 'ALL' for a search-all. */
  payerCode: string;
  isSearchAll: boolean;
  /** `system|value` of CoverageEligibilityRequest.identifier[0]; null when absent. */
  idempotencyKey: string | null;
  /** `system|value` of the patient identifier used for the check. */
  patientKey: string | null;
  /** The bare values of patientKey and idempotencyKey (a `|` may be inside the system). */
  patientValue?: string | null;
  requestIdentifierValue?: string | null;
  /** Reference to put in CoverageEligibilityResponse.patient (literal when the input had one, else logical). */
  patient: Reference;
  /** Reference to put in CoverageEligibilityResponse.insurer (logical, payer code identifier + display). */
  insurer: Reference;
  /** What the request was let through with (a tenant's `warn` rule), for $validate to say. */
  warnings?: OperationOutcomeIssue[];
}

/** What the response mapper needs besides the upstream envelope. */
export interface CerContext {
  /** Check id = CoverageEligibilityResponse.id = stored CoverageEligibilityRequest.id. */
  checkId: string;
  patient: Reference;
  insurer: Reference;
  /** The stored request (purpose, servicedDate, items asked for). */
  request: CoverageEligibilityRequest;
  isSearchAll: boolean;
  /** PUBLIC_BASE_URL, no trailing slash; stable document URLs are built on it. */
  baseUrl: string;
  /** ISO 8601 instant used for CoverageEligibilityResponse.created. */
  now: string;
}
