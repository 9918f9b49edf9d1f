/**
 * GET /fhir/CoverageEligibilityRequest?serviced=... (docs/previsit.md): the tenant's appointments
 * by their start, a day being the clinic's local day (the tenant's timeZone), oldest start first;
 * `_revinclude=CoverageEligibilityResponse:request` adds the CERs of each (booking and re-check).
 * https://hl7.org/fhir/R4/search.html#date (prefixes), #revinclude.
 */
import type { Bundle, BundleEntry, FhirResource } from 'fhir/r4.js';
import type { CheckService } from '../../checks/service.js';
import { zonedTime } from '../../checks/previsit.js';
import type { DateRange } from '../../checks/store/check-store.js';
import { badRequest } from '../../fhir/outcomes.js';
import type { FhirAnswer, FhirRequest } from '../types.js';
import { pageUrl } from './params.js';
import type { ParsedSearch, ServicedRange } from './params.js';

/** The parameters a `serviced` search applies besides _count and _offset (docs/previsit.md). */
const APPLIED: ReadonlySet<string> = new Set(['serviced', '_revinclude']);

/** The most appointments one `serviced` search reads (a clinic's day is far fewer). */
const MAX_APPOINTMENTS = 1000;

/** A bound read as UTC wall-clock time, moved to the same wall-clock time in the zone. */
function inZone(at: number, timeZone: string): number {
  const d = new Date(at);
  const wall = zonedTime(
    timeZone,
    d.getUTCFullYear(),
    d.getUTCMonth() + 1,
    d.getUTCDate(),
    d.getUTCHours(),
    d.getUTCMinutes(),
  );
  return wall + d.getUTCSeconds() * 1000 + d.getUTCMilliseconds();
}

/** A range as the store searches it: a day's bounds (no time given) moved to the clinic's zone. */
function localRange(range: ServicedRange, timeZone: string): DateRange {
  const bound = (at: number) => (range.local ? inZone(at, timeZone) : at);
  return {
    ...(range.from === undefined ? {} : { from: bound(range.from) }),
    ...(range.before === undefined ? {} : { before: bound(range.before) }),
  };
}

export async function searchAppointments(
  req: FhirRequest,
  checks: CheckService,
  baseUrl: string,
  parsed: ParsedSearch,
): Promise<FhirAnswer> {
  const other = Object.keys(parsed.filters)[0] ?? (parsed.batches ? 'batch' : undefined);
  if (other !== undefined)
    throw badRequest('serviced is searched alone (with _count, _offset and _revinclude)', 'serviced');
  const { timeZone } = checks.previsitSettings(req.tenant);
  const ranges = (parsed.serviced ?? []).map((range) => localRange(range, timeZone));
  const found = await checks.store.appointments.search(req.tenant.id, ranges, MAX_APPOINTMENTS);
  const page = found.slice(parsed.offset, parsed.offset + parsed.count);
  const entry: BundleEntry<FhirResource>[] = page.map((appointment) => ({
    fullUrl: `${baseUrl}/fhir/CoverageEligibilityRequest/${appointment.id}`,
    resource: appointment.input.request,
    search: { mode: 'match' },
  }));
  if (parsed.revIncludeResponses) {
    for (const appointment of page) {
      for (const id of [appointment.bookingCheckId, appointment.recheckId]) {
        const check = id === null ? null : await checks.get(req.tenant.id, id);
        if (check)
          entry.push({
            fullUrl: `${baseUrl}/fhir/CoverageEligibilityResponse/${check.id}`,
            resource: check.cer,
            search: { mode: 'include' },
          });
      }
    }
  }
  // The self link names what this search applied (params.ts: an ignored parameter is absent from
  // it): serviced, _revinclude, _summary=count; not the sort or subset the checks search applies.
  const applied = new URLSearchParams(
    [...parsed.used].filter(
      ([name, value]) => APPLIED.has(name) || (name === '_summary' && value === 'count'),
    ),
  );
  const url = (at: number) =>
    pageUrl(`${baseUrl}/fhir/CoverageEligibilityRequest`, applied, parsed.count, at);
  const link = [{ relation: 'self', url: url(parsed.offset) }];
  // _count=0 (_summary=count) pages nothing: a next link would name this same page again.
  if (!parsed.countOnly && parsed.offset + page.length < found.length)
    link.push({ relation: 'next', url: url(parsed.offset + parsed.count) });
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'searchset',
    total: found.length,
    link,
    ...(entry.length ? { entry } : {}),
  };
  return { status: 200, body: bundle };
}
