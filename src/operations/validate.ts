/**
 * CoverageEligibilityRequest/$validate, a dry run of $submit (https://hl7.org/fhir/R4/resource-operation-validate.html:
 * the answer is 200 with an OperationOutcome whatever the result). It takes every body $submit
 * takes and answers:
 * - an `error` issue for each thing $submit would refuse in the request's content, with the same
 *   code and expression (the same parser raises them);
 * - `warning` and `information` issues for what depends on the moment: a payer guard open (and
 *   until when), the checks ahead in the tenant's queue with a rough wait, an answer that would
 *   be reused, the identifier already stored, a payer code passed through unknown;
 * - one `information` issue when all is well.
 * It never calls the upstream and never writes to the store (docs/batch-and-reuse.md).
 */
import type { OperationOutcomeIssue } from 'fhir/r4.js';
import { CheckService } from '../checks/service.js';
import { guardRefusal } from '../checks/guards.js';
import { servicedProblem } from '../checks/previsit.js';
import { parseCacheControl } from '../fhir/cache-control.js';
import { isOperationOutcomeError, outcomeOf } from '../fhir/outcomes.js';
import { parseSubmit } from '../mapping/request/parse-submit.js';
import { payerDisplay } from '../mapping/request/tables.js';
import type { CheckInput } from '../mapping/types.js';
import { parseOptionsOf, type SubmitDeps } from './submit.js';
import type { FhirAnswer, FhirRequest } from './types.js';

/**
 * The rough time one check holds a slot, for the wait reported ahead of a queue: a portal session
 * takes 1 to 10 minutes (README); 3 is a typical one. A rough figure, said to be one.
 */
const TYPICAL_CHECK_MINUTES = 3;

function info(
  text: string,
  severity: 'information' | 'warning' = 'information',
  expression?: string,
): OperationOutcomeIssue {
  return {
    severity,
    code: severity === 'warning' ? 'business-rule' : 'informational',
    details: { text },
    ...(expression ? { expression: [expression] } : {}),
  };
}

export async function validateSubmit(req: FhirRequest, deps: SubmitDeps): Promise<FhirAnswer> {
  let input: CheckInput;
  try {
    input = await parseSubmit(req.body, parseOptionsOf(req, deps));
  } catch (error) {
    if (!isOperationOutcomeError(error)) throw error;
    // What $submit would answer with 400 or 422, as issues of a 200 (resource-operation-validate.html).
    return { status: 200, body: error.outcome };
  }
  const issues = [...(input.warnings ?? []), ...(await momentIssues(req, deps, input))];
  if (issues.some((i) => i.severity === 'error')) return { status: 200, body: outcomeOf(issues) };
  if (issues.length === 0)
    issues.push(info('All OK: $submit would accept this request and start a check now.'));
  return { status: 200, body: outcomeOf(issues) };
}

async function momentIssues(
  req: FhirRequest,
  deps: SubmitDeps,
  input: CheckInput,
): Promise<OperationOutcomeIssue[]> {
  const { tenant } = req;
  const { checks } = deps;
  const now = deps.now();
  const issues: OperationOutcomeIssue[] = [];
  // $submit's 422 for serviced[x] (docs/previsit.md), with the same expression.
  const serviced = servicedProblem(input.request, checks.previsitSettings(tenant), now);
  if (serviced)
    issues.push({
      severity: 'error',
      code: 'value',
      details: { text: serviced.text },
      expression: [serviced.expression],
    });
  const existing = await checks.existingFor(tenant, input);
  if (existing && !CheckService.sameCheck(existing, input)) {
    // $submit's 409, with the same code and expression.
    issues.push({
      severity: 'error',
      code: 'conflict',
      details: {
        text: 'This request identifier was already used for a different check (another patient, payer or service). Send a new identifier for a new check.',
      },
      expression: ['CoverageEligibilityRequest.identifier[0]'],
    });
    return issues;
  }
  if (existing) {
    issues.push(
      info(
        `This request identifier is already stored: $submit would answer check ${existing.id} (outcome ${existing.cer.outcome}) again, without a new check.`,
        'information',
        'CoverageEligibilityRequest.identifier[0]',
      ),
    );
    return issues;
  }
  const reusable = await checks.reusableFor(tenant, input, parseCacheControl(req.cacheControl));
  if (reusable) {
    const age = Math.max(0, Math.floor((now - reusable.updatedAt) / 1000));
    issues.push(
      info(
        `A recent answer would be given again instead of a new check: CoverageEligibilityResponse/${reusable.id}, checked at ${new Date(reusable.createdAt).toISOString()} and answered ${age} s ago (send Cache-Control: no-cache for a new check).`,
      ),
    );
    return issues;
  }
  const refusal = guardRefusal(await checks.store.getGuard(tenant.id, input.payerCode), now);
  if (refusal === 'credentials-guard')
    issues.push(
      info(
        `The clinic's credentials for payer ${input.payerCode} were refused by the portal: every check with this payer is refused at once until an operator resets the guard.`,
        'warning',
        'CoverageEligibilityRequest.insurer',
      ),
    );
  if (refusal === 'backoff-guard') {
    const guard = await checks.store.getGuard(tenant.id, input.payerCode);
    const until = guard?.until != null ? new Date(guard.until).toISOString() : 'later';
    issues.push(
      info(
        `The payer portal of ${input.payerCode} asked to back off: a check with this payer is refused until ${until}.`,
        'warning',
        'CoverageEligibilityRequest.insurer',
      ),
    );
  }
  if (!input.isSearchAll && payerDisplay(input.payerCode) === undefined)
    issues.push(
      info(
        `The payer code ${input.payerCode} is not in this service's payer list; it is passed to the eligibility service as it is.`,
        'information',
        'CoverageEligibilityRequest.insurer',
      ),
    );
  if (!refusal) {
    const { waiting, inFlight } = await checks.store.countQueue(tenant.id);
    if (waiting > 0 || inFlight >= tenant.maxInFlight) {
      const rounds = Math.floor(waiting / tenant.maxInFlight) + 1;
      issues.push(
        info(
          `${waiting} checks are waiting ahead of this one and ${inFlight} running (at most ${tenant.maxInFlight} at once for this clinic): it would start in roughly ${rounds * TYPICAL_CHECK_MINUTES} minutes (a rough figure: a check takes 1 to 10 minutes).`,
        ),
      );
    }
  }
  return issues;
}
