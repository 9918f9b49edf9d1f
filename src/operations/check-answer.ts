/**
 * What $submit (and the async status URL) answer for a check: the answer decided when the check
 * was written answered and stored with it (src/mapping/response/answer.ts), or, while it runs,
 * the CER with its queued outcome (README, "Answers of $submit").
 */
import type { Check } from '../checks/store/check-store.js';
import { isAnswered } from '../checks/store/check-store.js';
import { decideAnswer, type CheckAnswer } from '../mapping/response/answer.js';
import type { CoverageEligibilityResponse, OperationOutcome, Resource } from 'fhir/r4.js';
import { outcomeOf } from '../fhir/outcomes.js';
import { checkDigitWarning } from '../mapping/request/patient.js';
import type { FhirAnswer } from './types.js';

/** URL of a check's CER. */
export function cerUrl(baseUrl: string, id: string): string {
  return `${baseUrl}/fhir/CoverageEligibilityResponse/${id}`;
}

/** Weak ETag of a version, as FHIR uses (https://hl7.org/fhir/R4/http.html#versioning). */
export function etagOf(version: number): string {
  return `W/"${version}"`;
}

/**
 * The answer for a check as it stands. `retryAfterSeconds`: for a check refused by a backoff
 * guard, the seconds until the guard closes (the stored answer cannot know it).
 */
export function answerForCheck(check: Check, baseUrl: string, retryAfterSeconds?: number): FhirAnswer {
  const headers: Record<string, string> = {
    Location: cerUrl(baseUrl, check.id),
    ETag: etagOf(check.version),
  };
  const answer = check.answer ?? legacyAnswer(check);
  if (!answer?.outcome || answer.status < 300) return { status: 200, body: check.cer, headers };
  if (answer.retryAfterSeconds !== undefined) headers['Retry-After'] = String(answer.retryAfterSeconds);
  // A guard's answer: Retry-After until the guard closes. Once it has closed, none: this check
  // (this request identifier) stays refused, and a new identifier is what starts a new check.
  else if (answer.status === 503 && retryAfterSeconds !== undefined)
    headers['Retry-After'] = String(retryAfterSeconds);
  return { status: answer.status, body: answer.outcome, headers };
}

/**
 * A check answered with no stored answer can only have been finished by a replica of the previous
 * release, still running beside this one during an upgrade (that release never writes the column;
 * migration 6 decided the answers of the checks it had finished before): decided here, by the same
 * function, so its status is right whichever replica finished it.
 */
function legacyAnswer(check: Check): CheckAnswer | null {
  return isAnswered(check) ? decideAnswer(check.cer, check.envelope, check.isSearchAll) : null;
}

/**
 * The answer for a check given again instead of a new one (docs/batch-and-reuse.md): as
 * answerForCheck, with `Age` (RFC 9111 section 5.1: seconds since the answer was made, here since
 * the check finished) and `Last-Modified` (when it finished). The CER's `created` says when the
 * check was accepted, its meta.lastUpdated when it finished.
 */
export function reusedAnswer(check: Check, baseUrl: string, now: number): FhirAnswer {
  const answer = answerForCheck(check, baseUrl);
  answer.headers = {
    ...answer.headers,
    Age: String(Math.max(0, Math.floor((now - check.updatedAt) / 1000))),
    'Last-Modified': new Date(check.updatedAt).toUTCString(),
  };
  return answer;
}

/**
 * The warning issue an answer's Bundle entry carries when the check's Emirates ID failed its check
 * digit and a tenant's `warn` rule let it through (docs/request-mapping.md); its expression names
 * the identifier in the entry's CER.
 */
export function answerWarning(body: Resource | undefined): OperationOutcome | undefined {
  if (body?.resourceType !== 'CoverageEligibilityResponse') return undefined;
  const text = checkDigitWarning((body as CoverageEligibilityResponse).patient);
  return text
    ? outcomeOf([
        {
          severity: 'warning',
          code: 'value',
          details: { text },
          expression: ['CoverageEligibilityResponse.patient.identifier'],
        },
      ])
    : undefined;
}
