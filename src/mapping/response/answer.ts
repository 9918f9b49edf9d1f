/**
 * What `$submit` and the async status answer for a finished check, decided once when the check is
 * written answered (src/checks/lifecycle.ts) and stored with the row: 200 with the CER, or the
 * outcome table's HTTP status with an OperationOutcome, the CER (outcome error) staying readable at
 * its Location (README, "Answers of $submit"; mappings/outcomes.json, mappings/adapter-errors.json).
 */
import type { CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import type { IssueType } from '../../fhir/outcomes.js';
import { withOutcomeNarrative } from '../../fhir/outcomes.js';
import { envelopeSchema, isFinished } from '../../upstream/contract.js';
import { findAdapterError } from './adapter-errors.js';
import { outcomeRuleFor, submitOutcome } from './outcome-rules.js';

/** The stored answer of a check. */
export interface CheckAnswer {
  /** HTTP status of the answer. */
  status: number;
  /** Retry-After of the outcome table (a payer backoff), in seconds. */
  retryAfterSeconds?: number;
  /** The OperationOutcome answered instead of the CER (status 300 and up). */
  outcome?: OperationOutcome;
}

const OK: CheckAnswer = { status: 200 };

/**
 * The answer of a check whose CER is final, or in error: from the upstream's finished envelope by
 * the outcome table, else from the adapter's own error code in the CER, else the CER itself.
 */
export function decideAnswer(
  cer: CoverageEligibilityResponse,
  envelope: unknown,
  isSearchAll: boolean,
): CheckAnswer {
  if (cer.outcome !== 'error') return OK;
  const parsed = envelopeSchema.safeParse(envelope);
  if (parsed.success && isFinished(parsed.data, isSearchAll)) {
    const rule = outcomeRuleFor(parsed.data);
    if (rule.httpStatus < 300) return OK;
    return {
      status: rule.httpStatus,
      ...(rule.retryAfterSeconds !== undefined ? { retryAfterSeconds: rule.retryAfterSeconds } : {}),
      outcome: submitOutcome(cer, rule),
    };
  }
  return adapterAnswer(cer) ?? OK;
}

/** The answer of an error the adapter decided itself (a guard, an ambiguous create-task, ...). */
function adapterAnswer(cer: CoverageEligibilityResponse): CheckAnswer | null {
  for (const error of cer.error ?? []) {
    for (const coding of error.code.coding ?? []) {
      const row = findAdapterError(coding.code);
      if (!row) continue;
      return {
        status: row.httpStatus,
        outcome: withOutcomeNarrative({
          resourceType: 'OperationOutcome',
          issue: [
            {
              severity: 'error',
              code: row.issueCode as IssueType,
              details: { coding: [coding], text: row.text },
              expression: ['CoverageEligibilityResponse.error'],
            },
          ],
        }),
      };
    }
  }
  return null;
}
