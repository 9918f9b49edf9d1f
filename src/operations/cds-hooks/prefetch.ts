/**
 * The data a hook needs: the Patient and the patient's active Coverages, from the request's
 * `prefetch` (keys `patient` and `coverage`, the templates of the discovery document), else read
 * from the CDS Client's `fhirServer` with its `fhirAuthorization` through the guarded client
 * (https://cds-hooks.hl7.org/2.0/#prefetch-template, #fhir-resource-access). When the data is
 * missing and cannot be read (no fhirServer, one not registered for the client, or a failed
 * read), the answer is 412, as the spec asks ("If the CDS Service is unable to obtain the required
 * data, it SHOULD respond with an HTTP 412 Precondition Failed status code").
 */
import type { Bundle, Coverage, Organization, Patient, Resource } from 'fhir/r4.js';
import type { CdsClient } from '../../config.js';
import { OperationOutcomeError, outcome } from '../../fhir/outcomes.js';
import type { ReferenceResolver } from '../../mapping/request/resolver.js';
import type { PatientData } from '../../mapping/request/check-input.js';
import type { CdsRequest } from './request.js';
import { FhirServerError, fhirServerAllowed, type GuardedFhirClient } from './fhir-server.js';

/** The prefetch templates this service asks for (discovery), by key. */
export const PREFETCH = {
  patient: 'Patient/{{context.patientId}}',
  coverage: 'Coverage?patient={{context.patientId}}&status=active',
} as const;

export type { PatientData };

const preconditionFailed = (text: string, expression: string, diagnostics?: string) =>
  new OperationOutcomeError(
    outcome('processing', text, { expression: [expression], ...(diagnostics ? { diagnostics } : {}) }),
    412,
  );

/** Reads (or fetches) the Patient and Coverages of a request; throws 412 when it cannot. */
export async function patientData(
  request: CdsRequest,
  client: CdsClient,
  fhir: GuardedFhirClient,
): Promise<PatientData> {
  const allowed = fhirServerAllowed(request.fhirServer, client.fhirServers);
  const base = request.fhirServer?.replace(/\/+$/, '');
  const fetchOne = async (key: keyof typeof PREFETCH): Promise<unknown> => {
    if (!allowed || base === undefined)
      throw preconditionFailed(
        request.fhirServer === undefined
          ? `The prefetch ${key} is missing and the request names no fhirServer to read it from`
          : `The prefetch ${key} is missing and the fhirServer is not registered for this CDS client`,
        `prefetch.${key}`,
      );
    const path = PREFETCH[key].replaceAll('{{context.patientId}}', encodeURIComponent(request.patientId));
    try {
      return await fhir.read(`${base}/${path}`, client.fhirServers, request.accessToken);
    } catch (error) {
      if (!(error instanceof FhirServerError)) throw error;
      throw preconditionFailed(
        `The prefetch ${key} is missing and could not be read from the fhirServer`,
        `prefetch.${key}`,
        error.message,
      );
    }
  };

  const patient = request.prefetch.patient ?? (await fetchOne('patient'));
  if ((patient as Resource).resourceType !== 'Patient')
    throw preconditionFailed('The prefetch patient is not a Patient', 'prefetch.patient');
  const coverage = request.prefetch.coverage ?? (await fetchOne('coverage'));
  const { coverages, organizations } = coveragesOf(coverage);
  return {
    patient: patient as Patient,
    coverages,
    organizations,
    ...(allowed && base !== undefined
      ? { resolver: once(fhir.resolver(base, client.fhirServers, request.accessToken)) }
      : {}),
  };
}

/** The active Coverages of a searchset Bundle (or one Coverage), and the Organizations with them. */
function coveragesOf(value: unknown): { coverages: Coverage[]; organizations: Organization[] } {
  const resource = value as Resource;
  if (resource.resourceType === 'Coverage')
    return { coverages: active([resource as Coverage]), organizations: [] };
  if (resource.resourceType !== 'Bundle')
    throw preconditionFailed('The prefetch coverage is not a Bundle of Coverages', 'prefetch.coverage');
  const resources = ((resource as Bundle).entry ?? []).flatMap((e) => (e?.resource ? [e.resource] : []));
  return {
    coverages: active(resources.filter((r): r is Coverage => r.resourceType === 'Coverage')),
    organizations: resources.filter((r): r is Organization => r.resourceType === 'Organization'),
  };
}

/** The template asks for active ones; a client that sends others anyway has them left out. */
function active(coverages: Coverage[]): Coverage[] {
  return coverages.filter((c) => c.status === 'active');
}

/** One look-up per reference per call: the payer codes and each check read the same references. */
function once(resolver: ReferenceResolver): ReferenceResolver {
  const seen = new Map<string, Promise<Resource>>();
  return {
    resolve(reference) {
      let found = seen.get(reference);
      if (!found) {
        found = resolver.resolve(reference);
        seen.set(reference, found);
      }
      return found;
    },
  };
}
