/**
 * CoverageEligibilityRequest/$submit (https://hl7.org/fhir/R4/coverageeligibilityrequest-operation-submit.html).
 * Answers per the README: the final CER within the wait, a queued CER with Location
 * after it, or 202 + Content-Location with Prefer: respond-async (https://hl7.org/fhir/R4/async.html);
 * a recent found-member answer to the same question is given again (docs/batch-and-reuse.md).
 */
import type { CheckService } from '../checks/service.js';
import type { ReferenceResolver } from '../mapping/request/resolver.js';
import { parseSubmit, type ParseSubmitOptions } from '../mapping/request/parse-submit.js';
import { answerForCheck, reusedAnswer } from './check-answer.js';
import { parseCacheControl } from '../fhir/cache-control.js';
import { outcome } from '../fhir/outcomes.js';
import { parsePrefer } from '../fhir/prefer.js';
import type { FhirAnswer, FhirRequest } from './types.js';

export interface SubmitDeps {
  checks: CheckService;
  baseUrl: string;
  submitWaitMs: number;
  /** Upper bound of Prefer: wait=N. */
  maxWaitMs: number;
  resolver?: ReferenceResolver;
  now: () => number;
}

/** How $submit, batch entries and $validate read a request body for this tenant. */
export function parseOptionsOf(req: FhirRequest, deps: SubmitDeps): ParseSubmitOptions {
  return {
    practiceId: req.tenant.practiceId,
    now: new Date(deps.now()),
    resolver: deps.resolver,
    checkDigit: req.tenant.emiratesIdCheckDigit ?? 'refuse',
  };
}

/** Runs $submit for one request. Throws OperationOutcomeError (400/422) on bad input. */
export async function submit(req: FhirRequest, deps: SubmitDeps): Promise<FhirAnswer> {
  const input = await parseSubmit(req.body, parseOptionsOf(req, deps));
  const prefer = parsePrefer(req.prefer);
  const { check, reused } = await deps.checks.accept(req.tenant, input, parseCacheControl(req.cacheControl));
  if (prefer.respondAsync) {
    const status = `${deps.baseUrl}/fhir/_async/${check.id}`;
    return {
      status: 202,
      body: outcome('informational', `Check accepted; poll ${status} for the result`, {
        severity: 'information',
      }),
      headers: { 'Content-Location': status },
    };
  }
  if (reused) return reusedAnswer(check, deps.baseUrl, deps.now());
  const waitMs =
    prefer.waitSeconds !== undefined
      ? Math.min(prefer.waitSeconds * 1000, deps.maxWaitMs)
      : deps.submitWaitMs;
  const latest = await deps.checks.waitForDone(check, waitMs);
  const answer = answerForCheck(latest, deps.baseUrl, await deps.checks.retryAfterSeconds(latest));
  if (prefer.waitSeconds !== undefined)
    answer.headers = { ...answer.headers, 'Preference-Applied': `wait=${Math.round(waitMs / 1000)}` };
  return answer;
}
