/**
 * The parts every CoverageEligibilityResponse of this service shares
 * (https://hl7.org/fhir/R4/coverageeligibilityresponse.html): id = check id, status active,
 * purpose from the request, patient, created, request, insurer, outcome, disposition, error.
 */
import type {
  CodeableConcept,
  CoverageEligibilityRequest,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseError,
  Extension,
} from 'fhir/r4.js';
import { PROFILES } from '../../fhir/canonical.js';
import type { CerContext } from '../types.js';
import type { Envelope, WarningEntry } from '../../upstream/contract.js';
import { OUTCOME_SYSTEM, complexExtension, fhirText, stringPart } from './codes.js';
import { messageTypeOf } from './extensions.js';
import { narrativeOf } from './narrative.js';
import { upstreamError } from './outcome-rules.js';
import { checkDigitWarning } from '../request/patient.js';

export type CerOutcome = CoverageEligibilityResponse['outcome'];
type Purpose = CoverageEligibilityResponse['purpose'][number];

const PURPOSES: readonly string[] = ['auth-requirements', 'benefits', 'discovery', 'validation'];

/** purpose is 1..* with a required binding: the request's codes, else discovery/benefits. */
function purposeOf(ctx: CerContext): Purpose[] {
  const asked = (ctx.request.purpose ?? []).filter((p) => PURPOSES.includes(p));
  if (asked.length > 0) return asked;
  return [ctx.isSearchAll ? 'discovery' : 'benefits'];
}

function servicedOf(
  request: CoverageEligibilityRequest,
): Pick<CoverageEligibilityResponse, 'servicedDate' | 'servicedPeriod'> {
  if (request.servicedDate) return { servicedDate: request.servicedDate };
  if (request.servicedPeriod) return { servicedPeriod: request.servicedPeriod };
  return {};
}

/** A sentence ends in . ! ? (optionally inside closing quotes) or gets a full stop; the text itself is kept. */
function asSentence(text: string): string {
  const trimmed = text.trim();
  return /[.!?]["')\]]*$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

/** Sentences joined into `disposition`; undefined when there are none. */
export function dispositionOf(sentences: (string | undefined)[]): string | undefined {
  const present = sentences.map((s) => fhirText(s)).filter((s): s is string => s !== undefined);
  return fhirText(present.map(asSentence).join(' '));
}

/** Portal warnings as disposition sentences: each verbatim in quotes, with its type. */
export function warningSentences(warnings: WarningEntry[]): string[] {
  // A loop that pushes, not flatMap and an array per warning: this runs on every mapping.
  const sentences: string[] = [];
  for (const w of warnings) {
    const message = fhirText(w.message);
    if (message) sentences.push(`Payer portal ${messageTypeOf(w)}: "${message}"`);
  }
  return sentences;
}

/**
 * A CER with the shared elements; `extra` (extension, contained, insurance, error) fills the rest.
 * Every CER gets its narrative here, from its own structured elements (narrative.ts).
 */
export function baseCer(
  ctx: CerContext,
  outcome: CerOutcome,
  disposition: string | undefined,
  extra: Pick<CoverageEligibilityResponse, 'extension' | 'contained' | 'insurance' | 'error'> = {},
): CoverageEligibilityResponse {
  // A check let through with a wrong check digit says so in every answer (docs/request-mapping.md).
  const warning = checkDigitWarning(ctx.patient);
  const text = warning ? dispositionOf([disposition, warning]) : fhirText(disposition);
  // Key order follows the R4 element order, for readers of the JSON.
  const cer: CoverageEligibilityResponse = {
    resourceType: 'CoverageEligibilityResponse',
    id: ctx.checkId,
    meta: { profile: [PROFILES.eligibilityResponse] },
    ...(extra.contained?.length ? { contained: extra.contained } : {}),
    ...(extra.extension?.length ? { extension: extra.extension } : {}),
    status: 'active',
    purpose: purposeOf(ctx),
    patient: ctx.patient,
    ...servicedOf(ctx.request),
    created: ctx.now,
    // A pre-visit re-check answers its appointment's request (docs/previsit.md), not one of its own.
    request: { reference: `CoverageEligibilityRequest/${ctx.request.id ?? ctx.checkId}` },
    outcome,
    ...(text ? { disposition: text } : {}),
    insurer: ctx.insurer,
    ...(extra.insurance?.length ? { insurance: extra.insurance } : {}),
    ...(extra.error?.length ? { error: extra.error } : {}),
  };
  // R4 element order: text right after id and meta.
  const { resourceType, id, meta, ...rest } = cer;
  return { resourceType, id, meta, text: narrativeOf(cer, askedOf(ctx.request)), ...rest };
}

/** The categories the request asked: its item[].category, for the visit summary. */
export function askedOf(request: CoverageEligibilityRequest | undefined): (CodeableConcept | undefined)[] {
  return (request?.item ?? []).map((item) => item.category);
}

/** CER.error with a code of the service's outcome CodeSystem (adapter-errors.json shares it). */
export function errorOf(code: string, text: string | undefined): CoverageEligibilityResponseError {
  const clean = fhirText(text);
  return { code: { coding: [{ system: OUTCOME_SYSTEM, code }], ...(clean ? { text: clean } : {}) } };
}

/** What the upstream said, for support: task id and status, result status, error type and message. */
export function upstreamOutcomeExtension(
  envelope: Envelope,
  payersResponded?: number,
): Extension | undefined {
  const { errorType, message } = upstreamError(envelope);
  return complexExtension('upstream-outcome', [
    stringPart('taskId', envelope.task_id),
    stringPart('taskStatus', envelope.status),
    stringPart('resultStatus', envelope.eligibility_result?.status),
    stringPart('searchAllStatus', envelope.search_all_status),
    payersResponded === undefined ? undefined : { url: 'payersResponded', valueUnsignedInt: payersResponded },
    stringPart('errorType', errorType),
    stringPart('message', message),
  ]);
}
