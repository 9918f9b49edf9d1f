/**
 * The outcome table (mappings/outcomes.json, the README): what an upstream envelope
 * means for the CER outcome, the $submit HTTP status, the OperationOutcome and retries.
 * Code derives a key from the envelope; the table says what the key means.
 */
import type { CoverageEligibilityResponse, OperationOutcome, OperationOutcomeIssue } from 'fhir/r4.js';
import { z } from 'zod';
import { loadMappingTable } from '../mapping-table.js';
import { outcomeNarrative } from '../../fhir/outcomes.js';
import type { Envelope, EligibilityResult, ResultData } from '../../upstream/contract.js';
import { isTerminalStatus, parseLooseNumber } from '../../upstream/contract.js';
import { OUTCOME_SYSTEM, extensionUrl } from './codes.js';

// Issue types of the required binding http://hl7.org/fhir/ValueSet/issue-type (R4).
const ISSUE_TYPES = [
  'invalid',
  'structure',
  'required',
  'value',
  'invariant',
  'security',
  'login',
  'unknown',
  'expired',
  'forbidden',
  'suppressed',
  'processing',
  'not-supported',
  'duplicate',
  'multiple-matches',
  'not-found',
  'deleted',
  'too-long',
  'code-invalid',
  'extension',
  'too-costly',
  'business-rule',
  'conflict',
  'transient',
  'lock-error',
  'no-store',
  'exception',
  'timeout',
  'incomplete',
  'throttled',
  'informational',
] as const;

/** Every key `outcomeKey` can return; the table must have a row for each (checked at load). */
export const OUTCOME_KEYS = [
  'in_flight',
  'found_eligible',
  'found_eligible_multi_card',
  'found_not_eligible',
  'found_not_eligible_multi_card',
  'found_no_determination',
  'member_not_found',
  'invalid_credentials',
  'tpa_not_configured',
  'backoff',
  'failed',
  'error',
  'task_failed',
  'task_cancelled',
  'missing_result',
  'unknown_outcome',
  'search_all_processing',
  'search_all_complete',
] as const;
export type OutcomeKey = (typeof OUTCOME_KEYS)[number];

const ruleSchema = z.strictObject({
  upstream: z.enum(OUTCOME_KEYS),
  cerOutcome: z.enum(['queued', 'complete', 'error', 'partial']),
  httpStatus: z.number().int().min(200).max(599),
  issueCode: z.enum(ISSUE_TYPES),
  retry: z.enum(['once', 'never', 'later', 'none']),
  guard: z.enum(['credentials', 'backoff']).optional(),
  retryAfterSeconds: z.number().int().positive().optional(),
  errorCode: z
    .string()
    .regex(/^[a-z0-9-]+$/)
    .optional(),
  text: z.string().min(1),
});

const tableSchema = z
  .object({
    description: z.string(),
    searchAll: z.object({ foundStatuses: z.array(z.string().min(1)).min(1) }),
    rules: z.array(ruleSchema),
  })
  .superRefine((table, ctx) => {
    for (const key of OUTCOME_KEYS) {
      const rows = table.rules.filter((r) => r.upstream === key);
      if (rows.length !== 1) ctx.addIssue({ code: 'custom', message: `${rows.length} rows for ${key}` });
    }
    for (const rule of table.rules) {
      if (rule.cerOutcome === 'error' && !rule.errorCode) {
        ctx.addIssue({ code: 'custom', message: `${rule.upstream}: an error row needs an errorCode` });
      }
    }
  });

/** One row of the outcome table. */
export type OutcomeRule = z.infer<typeof ruleSchema>;

const table = loadMappingTable('outcomes.json', tableSchema);
const byKey = new Map<string, OutcomeRule>(table.rules.map((r) => [r.upstream, r]));

/** All rows (for the conformance CodeSystem and docs). */
export function outcomeRules(): readonly OutcomeRule[] {
  return table.rules;
}

export function ruleOf(key: OutcomeKey): OutcomeRule {
  return byKey.get(key) as OutcomeRule; // every key has a row: checked when the table loads
}

/** The payer-account guard an upstream outcome opens (the table's `guard`), for a search-all entry's status too. */
export function guardOf(outcome: string): OutcomeRule['guard'] {
  return byKey.get(outcome)?.guard;
}

/** True for a search-all entry status that means the payer found the member (found, member_found). */
export function isFoundStatus(status: string): boolean {
  return table.searchAll.foundStatuses.includes(status);
}

/** True when the envelope is a search-all task (docs/upstream.md, Search-all tasks). */
export function isSearchAllEnvelope(envelope: Envelope): boolean {
  return (
    envelope.is_search_all === true ||
    Array.isArray(envelope.aggregated_results) ||
    (envelope.search_all_status ?? '').startsWith('SEARCH_ALL_')
  );
}

/** Multi-card: multi_card_total greater than 1 "signals a partial picture" (docs/upstream.md, Members with several cards). */
export function isMultiCard(data: ResultData | null | undefined): boolean {
  return (parseLooseNumber(data?.multi_card_total) ?? 0) > 1;
}

const ERROR_OUTCOMES: ReadonlySet<string> = new Set([
  'invalid_credentials',
  'tpa_not_configured',
  'backoff',
  'failed',
  'error',
]);
/** Inside a FAILED task, the outcomes whose row must win: they open guards or forbid retries. */
const DECISIVE_IN_FAILED: ReadonlySet<string> = new Set([
  'invalid_credentials',
  'tpa_not_configured',
  'backoff',
]);

function resultKey(result: EligibilityResult): OutcomeKey {
  const data = result.data_dump?.data;
  if (isFoundStatus(result.status)) {
    const multi = isMultiCard(data);
    // is_eligible null or absent is no determination, never "not eligible" (docs/upstream.md).
    if (data?.is_eligible === true) return multi ? 'found_eligible_multi_card' : 'found_eligible';
    if (data?.is_eligible === false) return multi ? 'found_not_eligible_multi_card' : 'found_not_eligible';
    return 'found_no_determination';
  }
  if (result.status === 'member_not_found') return 'member_not_found';
  if (ERROR_OUTCOMES.has(result.status)) return result.status as OutcomeKey;
  return 'unknown_outcome';
}

/** The table key of an envelope; `searchAll` when the check (not only the envelope) says so. */
export function outcomeKey(envelope: Envelope, searchAll = isSearchAllEnvelope(envelope)): OutcomeKey {
  const result = envelope.eligibility_result;
  if (envelope.status === 'CANCELLED') return 'task_cancelled';
  if (envelope.status === 'FAILED') {
    // A FAILED task may say why; invalid_credentials and backoff must still open their guards.
    // failed/error inside FAILED stay task_failed: no second real portal session.
    return result && DECISIVE_IN_FAILED.has(result.status) ? (result.status as OutcomeKey) : 'task_failed';
  }
  if (searchAll) {
    return envelope.search_all_status === 'SEARCH_ALL_COMPLETE'
      ? 'search_all_complete'
      : 'search_all_processing';
  }
  if (!isTerminalStatus(envelope.status)) return 'in_flight';
  return result ? resultKey(result) : 'missing_result';
}

/** The outcome-table row for an envelope (in flight, terminal, or search-all). */
export function outcomeRuleFor(envelope: Envelope): OutcomeRule {
  return ruleOf(outcomeKey(envelope));
}

/** error_type and message wherever the upstream put them ("exact location not shown"). */
export function upstreamError(envelope: Envelope): { errorType?: string; message?: string } {
  const result = envelope.eligibility_result;
  const dump = result?.data_dump;
  const errorType = result?.error_type ?? dump?.error_type ?? dump?.data?.error_type ?? undefined;
  const message = result?.message ?? dump?.message ?? dump?.data?.message ?? undefined;
  return { ...(errorType ? { errorType } : {}), ...(message ? { message } : {}) };
}

/** The upstream message recorded in a CER's upstream-outcome extension, if any. */
function upstreamMessageOf(cer: CoverageEligibilityResponse): string | undefined {
  const recorded = cer.extension?.find((e) => e.url === extensionUrl('upstream-outcome'));
  const part = (name: string) => recorded?.extension?.find((e) => e.url === name)?.valueString;
  const message = part('message');
  if (!message) return undefined;
  const errorType = part('errorType');
  return errorType ? `${errorType}: ${message}` : message;
}

/**
 * The OperationOutcome $submit answers for a row that made no determination: the CER (stored
 * with outcome = error) explains it; this points at its error element
 * (https://hl7.org/fhir/R4/operationoutcome.html).
 */
/** Outcomes about the clinic's account at the payer: the request element to look at is the insurer. */
const PAYER_ACCOUNT_OUTCOMES = new Set(['invalid_credentials', 'tpa_not_configured', 'backoff']);

export function submitOutcome(cer: CoverageEligibilityResponse, rule: OutcomeRule): OperationOutcome {
  const errorCoding = cer.error?.[0]?.code.coding?.find((c) => c.system === OUTCOME_SYSTEM);
  const code = rule.errorCode ?? errorCoding?.code;
  const issue: OperationOutcomeIssue = {
    severity: rule.httpStatus < 300 ? 'information' : 'error',
    code: rule.issueCode,
    details: {
      ...(code ? { coding: [{ system: OUTCOME_SYSTEM, code }] } : {}),
      text: cer.disposition ?? rule.text,
    },
    expression: PAYER_ACCOUNT_OUTCOMES.has(rule.upstream)
      ? ['CoverageEligibilityResponse.error', 'CoverageEligibilityRequest.insurer']
      : ['CoverageEligibilityResponse.error'],
  };
  const issues = [issue];
  const message = upstreamMessageOf(cer);
  if (message) {
    issues.push({
      severity: 'information',
      code: 'informational',
      diagnostics: `Eligibility service message: ${message}`,
    });
  }
  return { resourceType: 'OperationOutcome', text: outcomeNarrative(issues), issue: issues };
}
