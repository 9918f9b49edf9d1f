/**
 * What $submit (and the async status URL) answer for a check, by the outcome table (README,
 * "Answers of $submit"; docs/response-mapping.md): the CER with 200, or an OperationOutcome with
 * the table's status while the CER with outcome = error stays stored at the Location URL.
 */
import type { CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import type { Check } from '../checks/store/check-store.js';
import { findAdapterError } from '../mapping/response/adapter-errors.js';
import { isFinished } from '../checks/lifecycle.js';
import { outcomeRuleFor, submitOutcome } from '../mapping/response/index.js';
import { envelopeSchema } from '../upstream/contract.js';
import type { IssueType } from '../fhir/outcomes.js';
import type { FhirAnswer } from './types.js';

/** URL of a check's CER. */
export function cerUrl(baseUrl: string, id: string): string {
  return `${baseUrl}/fhir/CoverageEligibilityResponse/${id}`;
}

/** Weak ETag of a version, as FHIR uses (https://hl7.org/fhir/R4/http.html#versioning). */
export function etagOf(version: number): string {
  return `W/"${version}"`;
}

function adapterAnswer(cer: CoverageEligibilityResponse): { status: number; body: OperationOutcome } | null {
  for (const error of cer.error ?? []) {
    for (const coding of error.code.coding ?? []) {
      const row = findAdapterError(coding.code);
      if (!row) continue;
      const body: OperationOutcome = {
        resourceType: 'OperationOutcome',
        issue: [
          {
            severity: 'error',
            code: row.issueCode as IssueType,
            details: { coding: [coding], text: row.text },
            expression: ['CoverageEligibilityResponse.error'],
          },
        ],
      };
      return { status: row.httpStatus, body };
    }
  }
  return null;
}

/**
 * The answer for a check as it stands: the CER, or the outcome table's OperationOutcome.
 * `retryAfterSeconds`: for a check refused by a backoff guard, the seconds until it closes.
 */
export function answerForCheck(check: Check, baseUrl: string, retryAfterSeconds?: number): FhirAnswer {
  const headers: Record<string, string> = {
    Location: cerUrl(baseUrl, check.id),
    ETag: etagOf(check.version),
  };
  if (check.outcome !== 'error') return { status: 200, body: check.cer, headers };
  const envelope = envelopeSchema.safeParse(check.envelope);
  if (envelope.success && isFinished(envelope.data, check.isSearchAll)) {
    const rule = outcomeRuleFor(envelope.data);
    if (rule.httpStatus < 300) return { status: 200, body: check.cer, headers };
    if (rule.retryAfterSeconds !== undefined) headers['Retry-After'] = String(rule.retryAfterSeconds);
    return { status: rule.httpStatus, body: submitOutcome(check.cer, rule), headers };
  }
  const adapter = adapterAnswer(check.cer);
  if (adapter) {
    // A guard's answer: Retry-After until the guard closes. Once it has closed, none: this check
    // (this request identifier) stays refused, and a new identifier is what starts a new check.
    if (adapter.status === 503 && retryAfterSeconds !== undefined)
      headers['Retry-After'] = String(retryAfterSeconds);
    return { status: adapter.status, body: adapter.body, headers };
  }
  return { status: 200, body: check.cer, headers };
}
