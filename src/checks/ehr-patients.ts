/**
 * The patients of the EHR's schedule (docs/ehr-schedule.md): each one's Patient and active
 * Coverages with their payers, read through the EHR client under its base only, and the literal
 * references of those (a payor `Organization/7`) looked up there once each. A round reads a few
 * patients at a time.
 */
import type { Coverage, Organization, Patient, Resource } from 'fhir/r4.js';
import type { EhrClient } from '../ehr/client.js';
import { EhrError } from '../ehr/http.js';
import type { PatientData } from '../mapping/request/check-input.js';
import { coverageSearch } from '../mapping/request/ehr-schedule.js';
import { parseLiteralReference, ReferenceResolutionError } from '../mapping/request/resolver.js';
import type { ReferenceResolver } from '../mapping/request/resolver.js';

/** Patients read from the EHR at once in a round. */
export const READ_CONCURRENCY = 4;

/** Runs `work` over `items`, at most `limit` at a time. */
export async function eachAtMost<T>(
  limit: number,
  items: readonly T[],
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next]!;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/**
 * A patient's Patient (the one included with the appointments, else read) and active Coverages
 * with their payers, or why it cannot be read (the EHR refused this one record: 403, 404, 410).
 */
export async function readPatient(
  client: EhrClient,
  id: string,
  included: Patient | undefined,
  base: string,
): Promise<PatientData | { unreadable: string }> {
  try {
    const patient = included ?? ((await client.read('Patient', id)) as Patient);
    const found = await client.search('Coverage', coverageSearch(id));
    const coverages = found
      .map((f) => f.resource)
      .filter((r): r is Coverage => r.resourceType === 'Coverage' && (r as Coverage).status === 'active');
    const organizations = found
      .map((f) => f.resource)
      .filter((r): r is Organization => r.resourceType === 'Organization');
    return { patient, coverages, organizations, resolver: resolverOf(client, base) };
  } catch (error) {
    if (error instanceof EhrError && [403, 404, 410].includes(error.status ?? 0))
      return { unreadable: "the EHR did not give the patient's record" };
    throw error;
  }
}

/** Literal references (a Coverage's payor `Organization/7`) read under the EHR's base, once each. */
function resolverOf(client: EhrClient, base: string): ReferenceResolver {
  const seen = new Map<string, Promise<Resource>>();
  return {
    resolve(reference) {
      let found = seen.get(reference);
      if (!found) {
        found = (async () => {
          const target = parseLiteralReference(reference, base);
          try {
            return await client.read(target.resourceType, target.id);
          } catch (error) {
            if (!(error instanceof EhrError)) throw error;
            const reason =
              error.status === 404 || error.status === 410
                ? 'not-found'
                : error.reason === 'timeout'
                  ? 'timeout'
                  : error.reason === 'unreachable'
                    ? 'unreachable'
                    : 'server-error';
            throw new ReferenceResolutionError(reason, reference, error.message, error.status);
          }
        })();
        seen.set(reference, found);
      }
      return found;
    },
  };
}
