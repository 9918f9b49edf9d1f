/**
 * $submit body -> CheckInput: everything a check needs, or a 400/422 OperationOutcomeError.
 * Field table, shapes and rules: docs/request-mapping.md. Pure except for the optional resolver
 * (literal references, SOURCE_FHIR_BASE_URL).
 * https://hl7.org/fhir/R4/coverageeligibilityrequest-operation-submit.html
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import { unprocessable } from '../../fhir/outcomes.js';
import type { UpstreamTaskRequest } from '../../upstream/contract.js';
import type { CheckInput } from '../types.js';
import { normalizeRequest } from './normalize.js';
import {
  demographics,
  EMIRATES_ID_WARNING_TEXT,
  patientIdentity,
  patientReference,
  type CheckDigitRule,
} from './patient.js';
import { payerOf, SEARCH_ALL_PAYER } from './payer.js';
import { doctorOf, userIdOf } from './practitioner.js';
import { resolveReference, type ResolutionContext, type Scope, type Target } from './references.js';
import type { ReferenceResolver } from './resolver.js';
import { list, readSubmitBody } from './submit-body.js';
import { visitOf } from './visit-type.js';

export interface ParseSubmitOptions {
  /** The tenant's practice id (request_dump.practice_id). */
  practiceId: string;
  /** Clock reading for extra_args.request_start_time. */
  now: Date;
  /** Looks up literal references; without it they are a 422. */
  resolver?: ReferenceResolver;
  /** Caller's user, used for user_id when the request has no enterer. */
  userId?: string;
  /** The tenant's rule for an Emirates ID whose check digit does not add up; default `refuse`. */
  checkDigit?: CheckDigitRule;
}

/** Parses and checks a $submit body. Throws OperationOutcomeError: 400 for non-FHIR / not a request, 422 for what a check lacks. */
export async function parseSubmit(body: unknown, options: ParseSubmitOptions): Promise<CheckInput> {
  const submitted = readSubmitBody(body);
  const { request, path } = submitted;
  const scope: Scope = { container: request, path };
  const context: ResolutionContext = {
    ...(submitted.bundle ? { bundle: submitted.bundle } : {}),
    ...(options.resolver ? { resolver: options.resolver } : {}),
    cache: new Map(),
  };
  const at = (element: string, label: string, types: readonly string[]) => ({
    path: `${path}.${element}`,
    label,
    types,
  });

  const patient = await resolveReference(
    request.patient,
    at('patient', 'patient', ['Patient']),
    scope,
    context,
  );
  if (!patient)
    throw unprocessable(
      'The patient must be a contained Patient, a Bundle entry, a reference the adapter can look up, or an identifier (Emirates ID)',
      `${path}.patient`,
      'required',
    );
  const coverages = await resolveCoverages(request, path, scope, context);
  const identity = patientIdentity(
    patient,
    coverages,
    patient.kind === 'resource' ? `${patient.path}.identifier` : patient.path,
    options.checkDigit,
  );
  const person = demographics(patient);

  const isSearchAll = request.purpose.includes('discovery');
  const payer = isSearchAll
    ? SEARCH_ALL_PAYER
    : payerOf(
        await resolveReference(
          request.insurer,
          at('insurer', 'insurance company', ['Organization']),
          scope,
          context,
        ),
        `${path}.insurer`,
      );
  const providerTypes = ['Practitioner', 'PractitionerRole', 'Organization'];
  const provider = await resolveReference(
    request.provider,
    at('provider', 'doctor', providerTypes),
    scope,
    context,
  );
  const doctor = await doctorOf(provider, scope, context);
  await resolveReference(request.facility, at('facility', 'facility', ['Location']), scope, context);
  const enterer = await resolveReference(
    request.enterer,
    at('enterer', 'person who entered the request', ['Practitioner', 'PractitionerRole']),
    scope,
    context,
  );
  const visit = visitOf(request, path);

  const upstream: UpstreamTaskRequest = {
    emirates_id: identity.value,
    id_type: identity.idType,
    phone: person.phone,
    practice_id: options.practiceId,
    tpa_name: payer.code,
    payerName: payer.name,
    visit_type: visit.visitType,
    name: person.name,
    doctorName: doctor.name,
    ...(doctor.licence ? { doctorId: doctor.licence } : {}),
    user_id: userIdOf(enterer, options.userId),
    dob: person.dob,
    ...(isSearchAll ? { is_search_all: true } : {}),
    extra_args: {
      title: visit.title,
      value: visit.value,
      ...(visit.isMaternity ? { is_maternity: true } : {}),
      request_start_time: Math.floor(options.now.getTime() / 1000),
    },
  };

  return {
    request: normalizeRequest(submitted),
    upstream,
    payerCode: payer.code,
    isSearchAll,
    idempotencyKey: idempotencyKeyOf(request),
    patientKey: identity.key,
    patientValue: identity.value,
    requestIdentifierValue: idempotencyKeyOf(request) === null ? null : list(request.identifier)[0]!.value!,
    patient: patientReference(patient, identity),
    insurer: payer.reference,
    ...(identity.checkDigitWarningAt
      ? {
          warnings: [
            {
              severity: 'warning',
              code: 'value',
              details: { text: EMIRATES_ID_WARNING_TEXT },
              expression: [identity.checkDigitWarningAt],
            },
          ],
        }
      : {}),
  };
}

/** insurance[].coverage, the focal one first. */
async function resolveCoverages(
  request: CoverageEligibilityRequest,
  path: string,
  scope: Scope,
  context: ResolutionContext,
): Promise<Target[]> {
  const targets: { target: Target; focal: boolean }[] = [];
  for (const [index, insurance] of list(request.insurance).entries()) {
    const element = {
      path: `${path}.insurance[${index}].coverage`,
      label: 'insurance policy',
      types: ['Coverage'],
    };
    const target = await resolveReference(insurance.coverage, element, scope, context);
    if (target) targets.push({ target, focal: insurance.focal === true });
  }
  return [...targets.filter((t) => t.focal), ...targets.filter((t) => !t.focal)].map((t) => t.target);
}

/** `system|value` of the first request identifier: the per-tenant idempotency key (the README). */
function idempotencyKeyOf(request: CoverageEligibilityRequest): string | null {
  const identifier = list(request.identifier)[0];
  if (!identifier?.value) return null;
  return `${identifier.system ?? ''}|${identifier.value}`;
}
