/**
 * GET /fhir/CoverageEligibilityResponse?request=&patient=&outcome=&_lastUpdated=&_count=&_offset=
 * (https://hl7.org/fhir/R4/search.html). Tenant-scoped; Bundle searchset with paging links.
 * Unknown parameters are ignored and left out of the self link, as search.html#errors allows.
 */
import type { Bundle, CoverageEligibilityResponse } from 'fhir/r4.js';
import type { CheckService } from '../checks/service.js';
import type { CerOutcome, SearchFilters } from '../checks/store/check-store.js';
import { badRequest } from '../fhir/outcomes.js';
import type { FhirAnswer, FhirRequest } from './types.js';

const OUTCOMES: readonly string[] = ['queued', 'complete', 'error', 'partial'];
const DEFAULT_COUNT = 20;
const MAX_COUNT = 100;

function single(req: FhirRequest, name: string): string | undefined {
  const value = req.query[name];
  if (Array.isArray(value)) throw badRequest(`Give ${name} once`, name);
  return value === undefined || value === '' ? undefined : value;
}

function integer(req: FhirRequest, name: string, fallback: number, max: number): number {
  const raw = single(req, name);
  if (raw === undefined) return fallback;
  if (!/^\d{1,6}$/.test(raw)) throw badRequest(`${name} must be a whole number`, name);
  return Math.min(Number(raw), max);
}

/** `_lastUpdated` with a prefix (search.html#prefix) -> store bounds. */
function lastUpdated(raw: string, filters: SearchFilters): void {
  const match = /^(eq|ge|gt|le|lt)?(\d{4}(-\d{2}(-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?)?)?)$/.exec(raw);
  const time = match?.[2] ? Date.parse(match[2]) : NaN;
  if (!match || Number.isNaN(time))
    throw badRequest('_lastUpdated must be a FHIR date or dateTime with an optional prefix', '_lastUpdated');
  const prefix = match[1] ?? 'eq';
  // The end of the period the value names (a day, a month, a year or an instant).
  const precision = match[2]!.length;
  const end = new Date(time);
  if (precision === 4) end.setUTCFullYear(end.getUTCFullYear() + 1);
  else if (precision === 7) end.setUTCMonth(end.getUTCMonth() + 1);
  else if (precision === 10) end.setUTCDate(end.getUTCDate() + 1);
  else end.setTime(end.getTime() + 1);
  if (prefix === 'ge' || prefix === 'eq') filters.updatedFrom = time;
  if (prefix === 'gt') filters.updatedFrom = end.getTime();
  if (prefix === 'lt') filters.updatedBefore = time;
  if (prefix === 'le' || prefix === 'eq') filters.updatedBefore = end.getTime();
}

function parseFilters(req: FhirRequest): { filters: SearchFilters; used: URLSearchParams } {
  const filters: SearchFilters = {};
  const used = new URLSearchParams();
  const request = single(req, 'request');
  if (request) {
    filters.requestId = request.replace(/^.*CoverageEligibilityRequest\//, '');
    used.set('request', request);
  }
  const patient = single(req, 'patient');
  if (patient) {
    filters.patientKey = patient;
    used.set('patient', patient);
  }
  const outcome = single(req, 'outcome');
  if (outcome) {
    if (!OUTCOMES.includes(outcome))
      throw badRequest(`outcome must be one of ${OUTCOMES.join(', ')}`, 'outcome');
    filters.outcome = outcome as CerOutcome;
    used.set('outcome', outcome);
  }
  const updated = single(req, '_lastUpdated');
  if (updated) {
    lastUpdated(updated, filters);
    used.set('_lastUpdated', updated);
  }
  return { filters, used };
}

export async function searchResponses(
  req: FhirRequest,
  checks: CheckService,
  baseUrl: string,
): Promise<FhirAnswer> {
  const { filters, used } = parseFilters(req);
  const count = integer(req, '_count', DEFAULT_COUNT, MAX_COUNT);
  const offset = integer(req, '_offset', 0, 1_000_000);
  const { total, checks: page } = await checks.store.search(req.tenant.id, filters, { count, offset });
  const url = (at: number) => {
    const params = new URLSearchParams(used);
    params.set('_count', String(count));
    params.set('_offset', String(at));
    return `${baseUrl}/fhir/CoverageEligibilityResponse?${params.toString()}`;
  };
  const link: Bundle['link'] = [{ relation: 'self', url: url(offset) }];
  if (offset + page.length < total) link.push({ relation: 'next', url: url(offset + count) });
  if (offset > 0) link.push({ relation: 'previous', url: url(Math.max(0, offset - count)) });
  const bundle: Bundle<CoverageEligibilityResponse> = {
    resourceType: 'Bundle',
    type: 'searchset',
    total,
    link,
    entry: page.map((check) => ({
      fullUrl: `${baseUrl}/fhir/CoverageEligibilityResponse/${check.id}`,
      resource: check.cer,
      search: { mode: 'match' },
    })),
  };
  return { status: 200, body: bundle };
}
