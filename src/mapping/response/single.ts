/**
 * A single-payer envelope -> CER, by its row of the outcome table.
 * found: one insurance entry with a contained Coverage; inforce from is_eligible.
 * Error rows: outcome error, error.code from the table, the upstream's error_type and message,
 * never insurance and never inforce (docs/upstream.md: a missing is_eligible is not false).
 */
import type { CoverageEligibilityResponse, DocumentReference, Extension } from 'fhir/r4.js';
import type { CerContext } from '../types.js';
import type { Envelope, ResultData } from '../../upstream/contract.js';
import { PAYER_CODE_SYSTEM, fhirText } from './codes.js';
import { baseCer, dispositionOf, errorOf, upstreamOutcomeExtension, warningSentences } from './base.js';
import { documentsOf, screenshotOf } from './binary.js';
import { insuranceOf } from './coverage.js';
import { documentExtensions, multiCardStatement, portalMessageParts } from './extensions.js';
import type { OutcomeKey, OutcomeRule } from './outcome-rules.js';
import { upstreamError } from './outcome-rules.js';
import { gatekeeperRequired } from './vocabulary.js';

/** The payor of a Coverage: the request's insurer, with the payer code when the request had none. */
export function payorOf(
  ctx: CerContext,
  code: string | null | undefined,
  name?: string | null,
): CoverageEligibilityResponse['insurer'] {
  if (ctx.insurer.identifier || ctx.insurer.reference) return ctx.insurer;
  const value = fhirText(code);
  const display = fhirText(name) ?? ctx.insurer.display;
  return {
    ...(value ? { identifier: { system: PAYER_CODE_SYSTEM, value } } : {}),
    ...(display ? { display } : {}),
  };
}

function gpSentence(data: ResultData): string | undefined {
  const value = fhirText(data.policy_network?.is_gatekeeper);
  if (gatekeeperRequired(value) !== true) return undefined;
  return `A GP referral is required for specialist visits (payer portal: is_gatekeeper = "${value}").`;
}

/**
 * Extensions on the CER root (upstream outcome, portal messages, documents and screenshot) and
 * the contained DocumentReferences they point at.
 */
function rootParts(
  envelope: Envelope,
  ctx: CerContext,
  data: ResultData | null | undefined,
): { extension: Extension[]; contained: DocumentReference[] } {
  const ids = { baseUrl: ctx.baseUrl, checkId: ctx.checkId };
  const documents = documentExtensions(
    documentsOf(envelope),
    screenshotOf(envelope),
    ctx.baseUrl,
    ctx.checkId,
  );
  const messages = portalMessageParts(data?.warning_messages ?? [], ids);
  const extension = [
    upstreamOutcomeExtension(envelope),
    ...messages.extension,
    ...documents.extension,
  ].filter((e): e is Extension => e !== undefined);
  return { extension, contained: [...documents.contained, ...messages.contained] };
}

function foundCer(
  envelope: Envelope,
  ctx: CerContext,
  rule: OutcomeRule,
  data: ResultData,
): CoverageEligibilityResponse {
  const result = envelope.eligibility_result;
  const payor = payorOf(ctx, result?.tpa_name ?? data.adjusted_tpa_name, data.policy_network?.payer_name);
  const { insurance, coverage } = insuranceOf(data, { coverageId: 'coverage', patient: ctx.patient, payor });
  // found + is_eligible false: the payer's reason is the disposition (the outcome table, mappings/outcomes.json).
  const lead = data.is_eligible === false ? (fhirText(data.failure_reason) ?? rule.text) : rule.text;
  const disposition = dispositionOf([
    lead,
    multiCardStatement(data),
    gpSentence(data),
    ...warningSentences(data.warning_messages ?? []),
  ]);
  const root = rootParts(envelope, ctx, data);
  return baseCer(ctx, rule.cerOutcome, disposition, {
    contained: [coverage, ...root.contained],
    extension: root.extension,
    insurance: [insurance],
  });
}

function errorDisposition(envelope: Envelope, rule: OutcomeRule, key: OutcomeKey): string[] {
  const { errorType, message } = upstreamError(envelope);
  const sentences = [rule.text];
  if (key === 'unknown_outcome')
    sentences.push(`Outcome as given: "${envelope.eligibility_result?.status ?? ''}".`);
  if (message) sentences.push(`Eligibility service message: ${errorType ? `${errorType}: ` : ''}${message}`);
  else if (errorType) sentences.push(`Error type: ${errorType}.`);
  return sentences;
}

function errorCer(
  envelope: Envelope,
  ctx: CerContext,
  rule: OutcomeRule,
  key: OutcomeKey,
): CoverageEligibilityResponse {
  const data = envelope.eligibility_result?.data_dump?.data;
  const { message } = upstreamError(envelope);
  const disposition = dispositionOf([
    ...errorDisposition(envelope, rule, key),
    ...warningSentences(data?.warning_messages ?? []),
  ]);
  const root = rootParts(envelope, ctx, data);
  return baseCer(ctx, 'error', disposition, {
    ...(root.contained.length ? { contained: root.contained } : {}),
    extension: root.extension,
    error: [errorOf(rule.errorCode ?? 'unknown-outcome', message ?? rule.text)],
  });
}

function inFlightCer(
  envelope: Envelope,
  ctx: CerContext,
  rule: OutcomeRule,
  note?: string,
): CoverageEligibilityResponse {
  const disposition = dispositionOf([note ?? rule.text]);
  const root = rootParts(envelope, ctx, undefined);
  return baseCer(ctx, 'queued', disposition, {
    ...(root.contained.length ? { contained: root.contained } : {}),
    extension: root.extension,
  });
}

/** A single-payer envelope by its outcome row. `note` replaces the text of a queued answer. */
export function mapSingle(
  envelope: Envelope,
  ctx: CerContext,
  rule: OutcomeRule,
  key: OutcomeKey,
  note?: string,
): CoverageEligibilityResponse {
  if (rule.cerOutcome === 'queued') return inFlightCer(envelope, ctx, rule, note);
  const data = envelope.eligibility_result?.data_dump?.data;
  if (rule.cerOutcome !== 'error' && data) return foundCer(envelope, ctx, rule, data);
  return errorCer(envelope, ctx, rule, key);
}
