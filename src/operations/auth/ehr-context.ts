/**
 * The patient the EHR opened the page on (docs/smart-launch.md): `Patient/<patient>`,
 * `Coverage?patient=<patient>&status=active` and the Appointment in context, read from the EHR's
 * FHIR base with its access token, and what the form needs of them (nothing retyped): the Emirates
 * ID or card number, the payer code, the visit's start. Reads only ever go to the launch's `iss`.
 */
import type { Appointment, Bundle, Coverage, HumanName, Patient } from 'fhir/r4.js';
import type { CheckStore } from '../../checks/store/check-store.js';
import { formatName, patientIdentity } from '../../mapping/request/patient.js';
import { payerOf } from '../../mapping/request/payer.js';
import { DEFAULT_EHR_LIMITS, EhrError, EhrHttp } from '../../ehr/http.js';
import { LaunchError } from './smart-app.js';

/** What the page is opened with. Patient data: only in the page's own API answer, never a log. */
export interface LaunchContext {
  patient: {
    /** The Emirates ID or insurance card number the check runs on; '' when the EHR has neither. */
    identifier: string;
    kind: 'emirates-id' | 'card-number' | null;
    name: string;
  };
  /** The payer code of the active Coverage's payor identifier, '' when none. */
  payer: string;
  /** The Appointment's start (a FHIR instant), when the EHR put one in context. */
  visitStart: string | null;
}

const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;
const READ_TIMEOUT_MS = 10_000;

/** The EHR client's guarded exchange (src/ehr/http.ts): only under the launch's iss, bounded in time and size. */
const ehr = new EhrHttp({ ...DEFAULT_EHR_LIMITS, timeoutMs: READ_TIMEOUT_MS });

async function read<T>(iss: string, path: string, accessToken: string): Promise<T> {
  const resourceType = path.split(/[/?]/)[0];
  try {
    return (await ehr.json(`${iss}/${path}`, { allowed: [iss], accessToken })) as T;
  } catch (error) {
    if (!(error instanceof EhrError)) throw error;
    if (error.status !== undefined)
      throw new LaunchError(502, `The EHR answered ${error.status} to the ${resourceType} read.`);
    if (error.reason === 'unreachable' || error.reason === 'timeout')
      throw new LaunchError(502, 'The EHR could not be reached to read the patient.');
    throw new LaunchError(502, `The EHR did not answer the ${resourceType} read with FHIR JSON.`);
  }
}

/** The identifier and name of the patient, from the Patient and its active Coverages. */
function patientOf(patient: Patient, coverages: Coverage[]): LaunchContext['patient'] {
  const name = formatName(patient.name);
  try {
    const identity = patientIdentity(
      { kind: 'resource', resource: patient, path: 'Patient', via: 'literal' },
      coverages.map((resource, i) => ({
        kind: 'resource',
        resource,
        path: `Coverage[${i}]`,
        via: 'literal',
      })),
      'Patient.identifier',
    );
    return { identifier: identity.value, kind: identity.kind, name };
  } catch {
    // No usable identifier in the EHR: the desk types it (the form says so).
    return { identifier: '', kind: null, name };
  }
}

/** The payer code of the first active Coverage whose payor carries an identifier. */
function payerCodeOf(coverages: Coverage[]): string {
  for (const coverage of coverages) {
    for (const [i, payor] of (coverage.payor ?? []).entries()) {
      if (!payor.identifier?.value) continue;
      try {
        return payerOf(
          { kind: 'logical', identifier: payor.identifier, path: `Coverage.payor[${i}]` },
          'Coverage.payor',
        ).code;
      } catch {
        continue;
      }
    }
  }
  return '';
}

/** Reads the launch's patient, coverage and appointment from the EHR. */
export async function readLaunchContext(input: {
  iss: string;
  accessToken: string;
  patient: string;
  appointment: string | undefined;
}): Promise<LaunchContext> {
  const { iss, accessToken } = input;
  if (!FHIR_ID.test(input.patient)) throw new LaunchError(502, 'The EHR named no usable patient.');
  const id = encodeURIComponent(input.patient);
  const [patient, coverageBundle, appointment] = await Promise.all([
    read<Patient>(iss, `Patient/${id}`, accessToken),
    read<Bundle>(iss, `Coverage?patient=${id}&status=active`, accessToken),
    input.appointment ? read<Appointment>(iss, input.appointment, accessToken) : Promise.resolve(undefined),
  ]);
  if (patient.resourceType !== 'Patient') throw new LaunchError(502, 'The EHR did not answer a Patient.');
  const coverages = (coverageBundle.entry ?? [])
    .map((entry) => entry.resource)
    .filter((resource): resource is Coverage => resource?.resourceType === 'Coverage');
  return {
    patient: patientOf(patient, coverages),
    payer: payerCodeOf(coverages),
    visitStart: appointment?.resourceType === 'Appointment' ? (appointment.start ?? null) : null,
  };
}

/** A `fhirUser` the page may read: a relative reference, or an absolute one under `iss`. */
const FHIR_USER = /^(Practitioner|PractitionerRole|Patient|RelatedPerson|Person)\/[A-Za-z0-9\-.]{1,64}$/;

/**
 * The EHR user's name, read from their `fhirUser` resource with the EHR's token (the `fhirUser`
 * scope lets the app read it: https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html);
 * undefined when it cannot be read or has no name. Only ever from `iss`.
 */
export async function readUserName(
  iss: string,
  accessToken: string,
  fhirUser: string,
): Promise<string | undefined> {
  const relative = fhirUser.startsWith(`${iss}/`) ? fhirUser.slice(iss.length + 1) : fhirUser;
  if (!FHIR_USER.test(relative)) return undefined;
  try {
    const user = await read<{ name?: HumanName[] }>(iss, relative, accessToken);
    return formatName(user.name) || undefined;
  } catch {
    return undefined;
  }
}

/** The newest check of the launch's patient and payer: what the page shows before any click. */
export interface LatestAnswer {
  /** The answer's path on this service (/fhir/CoverageEligibilityResponse/{id}). */
  answer: string;
  /** When it was checked (the check's creation, an ISO instant). */
  checkedAt: string;
}

/** The tenant's newest check for this identifier (any system) and payer, or null. */
export async function latestAnswer(
  store: Pick<CheckStore, 'search'>,
  tenantId: string,
  context: LaunchContext,
): Promise<LatestAnswer | null> {
  if (!context.patient.identifier || !context.payer) return null;
  const { checks } = await store.search(
    tenantId,
    { patient: [[{ value: context.patient.identifier }]], insurer: [[context.payer]] },
    { count: 1, offset: 0, sort: [{ field: 'created', descending: true }], total: false },
  );
  const check = checks[0];
  if (!check) return null;
  return {
    answer: `/fhir/CoverageEligibilityResponse/${check.id}`,
    checkedAt: new Date(check.createdAt).toISOString(),
  };
}
