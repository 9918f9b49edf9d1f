/**
 * The FHIR core's view of a request and its answer. Nothing here knows about express
 * (after Medplum's FhirRequest / [OperationOutcome, Resource?]).
 */
import type { Resource } from 'fhir/r4.js';
import type { Tenant } from '../config.js';

export interface FhirRequest {
  params: Record<string, string>;
  query: Record<string, string | string[] | undefined>;
  body: unknown;
  /** RFC 7240 Prefer header, raw. */
  prefer?: string;
  ifNoneMatch?: string;
  /** Cache-Control header, raw: `no-cache` and `max-age=N` steer the reuse of recent answers. */
  cacheControl?: string;
  tenant: Tenant;
  requestId: string;
}

export interface FhirAnswer {
  status: number;
  body?: Resource;
  /** The resource as JSON text already (a stored CER), sent as is instead of `body`. */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}
