/**
 * Search of the checks (https://hl7.org/fhir/R4/search.html), tenant-scoped, done by the store in
 * one query on indexed columns:
 * - GET /fhir/CoverageEligibilityResponse?_id, identifier (matches none: the CER has no identifier
 *   of its own; see request.identifier), patient, patient:identifier, request, request.identifier,
 *   insurer, outcome, created, _lastUpdated;
 * - GET /fhir/CoverageEligibilityRequest?_id, identifier, patient, patient:identifier, created
 *   (the check's creation time);
 * with _count (clamped to MAX_COUNT), _offset, _sort, _total, _summary (count, true, data, false),
 * _elements (subset.ts), and for the CER
 * _include=CoverageEligibilityResponse:request. Parameters and handling: params.ts, docs/search.md.
 */
import type { Bundle, BundleEntry, BundleLink, FhirResource } from 'fhir/r4.js';
import type { CheckService } from '../../checks/service.js';
import type { Check } from '../../checks/store/check-store.js';
import type { FhirAnswer, FhirRequest } from '../types.js';
import { REQUEST_PARAMS, RESPONSE_PARAMS, pageUrl, parseSearch } from './params.js';
import type { ParsedSearch } from './params.js';
import { subsetOf } from './subset.js';
import { searchAppointments } from './appointments.js';

type SearchedType = 'CoverageEligibilityResponse' | 'CoverageEligibilityRequest';

async function run(
  req: FhirRequest,
  checks: CheckService,
  baseUrl: string,
  type: SearchedType,
  parsed: ParsedSearch,
): Promise<FhirAnswer> {
  const { count, offset } = parsed;
  // _total=none (search.html#total): no total, even where nothing can match.
  let total: number | undefined = parsed.total ? 0 : undefined;
  let page: Check[] = [];
  let more = false;
  await batchFilters(req.tenant.id, checks, parsed);
  if (!parsed.matchesNothing) {
    // Without a total, one row more than the page says whether a next page exists.
    const found = await checks.store.search(req.tenant.id, parsed.filters, {
      count: parsed.total ? count : count + 1,
      offset,
      sort: parsed.sort,
      total: parsed.total,
    });
    total = found.total;
    page = found.checks.slice(0, count);
    more = total === undefined ? found.checks.length > count : offset + page.length < total;
  }
  const url = (at: number) => pageUrl(`${baseUrl}/fhir/${type}`, parsed.used, count, at);
  // Paging links (http.html#paging, search.html#count): offsets over a total order (the sort
  // keys, then the id). Each page is its own query: checks written between pages shift the
  // offsets, so a page can repeat or skip a check. Under _sort=created (ascending) only a new check
  // does, and it lands after the pages read; under _lastUpdated a queued check moves as it updates.
  const link: BundleLink[] = [{ relation: 'self', url: url(offset) }];
  if (!parsed.countOnly) {
    if (more) link.push({ relation: 'next', url: url(offset + count) });
    if (offset > 0) link.push({ relation: 'previous', url: url(Math.max(0, offset - count)) });
  }
  const entry: BundleEntry<FhirResource>[] = [];
  for (const check of page) {
    const whole = type === 'CoverageEligibilityResponse' ? check.cer : check.request;
    const resource: FhirResource = parsed.subset ? subsetOf(whole, type, parsed.subset) : whole;
    entry.push({ fullUrl: `${baseUrl}/fhir/${type}/${check.id}`, resource, search: { mode: 'match' } });
  }
  if (parsed.revIncludeResponses) {
    for (const check of page)
      entry.push({
        fullUrl: `${baseUrl}/fhir/CoverageEligibilityResponse/${check.id}`,
        resource: check.cer,
        search: { mode: 'include' },
      });
  }
  if (parsed.includeRequest) {
    for (const check of page) {
      entry.push({
        fullUrl: `${baseUrl}/fhir/CoverageEligibilityRequest/${check.id}`,
        resource: check.request,
        search: { mode: 'include' },
      });
    }
  }
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'searchset',
    ...(total === undefined ? {} : { total }),
    link,
    ...(entry.length ? { entry } : {}),
  };
  return { status: 200, body: bundle };
}

/**
 * `batch=` (docs/batch-and-reuse.md): each group of batch ids becomes the ids of the checks those
 * batches list (an unknown batch, or another tenant's, lists none).
 */
async function batchFilters(tenantId: string, checks: CheckService, parsed: ParsedSearch): Promise<void> {
  for (const group of parsed.batches ?? []) {
    const ids = new Set<string>();
    for (const batchId of group) {
      const batch = await checks.store.getBatch(tenantId, batchId);
      for (const entry of batch?.entries ?? []) if (entry.checkId) ids.add(entry.checkId);
    }
    if (ids.size === 0) parsed.matchesNothing = true;
    else parsed.filters.ids = [...(parsed.filters.ids ?? []), [...ids]];
  }
}

export function searchResponses(
  req: FhirRequest,
  checks: CheckService,
  baseUrl: string,
): Promise<FhirAnswer> {
  const parsed = parseSearch(req, RESPONSE_PARAMS, {
    type: 'CoverageEligibilityResponse',
    include: 'CoverageEligibilityResponse:request',
    sortable: ['lastUpdated', 'created'],
    baseUrl,
  });
  return run(req, checks, baseUrl, 'CoverageEligibilityResponse', parsed);
}

export function searchRequests(req: FhirRequest, checks: CheckService, baseUrl: string): Promise<FhirAnswer> {
  const parsed = parseSearch(req, REQUEST_PARAMS, {
    type: 'CoverageEligibilityRequest',
    sortable: ['created'],
    revInclude: 'CoverageEligibilityResponse:request',
  });
  if (parsed.serviced) return searchAppointments(req, checks, baseUrl, parsed);
  parsed.filters.ownRequestsOnly = true;
  // A request does not change: newest check first by default.
  if (parsed.sort.length === 0) parsed.sort = [{ field: 'created', descending: true }];
  return run(req, checks, baseUrl, 'CoverageEligibilityRequest', parsed);
}
