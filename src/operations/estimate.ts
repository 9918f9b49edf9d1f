/**
 * POST /fhir/CoverageEligibilityResponse/{id}/$estimate (issue 28, docs/estimate.md): the
 * patient's share of one or more fees, from a stored final answer of a found member whose
 * coverage is in force. Input: Parameters (https://hl7.org/fhir/R4/parameters.html) with one or
 * more `item` parts, each with parts `category` (valueCoding: this service's service-category
 * codes or ex-benefitcategory) and `fee` (valueMoney, AED). Answer: 200 with a ClaimResponse
 * (use predetermination; mapping/response/estimate.ts). Never calls the upstream, never writes:
 * the CER is unchanged whatever the input. Another tenant's id is 404 (as a read).
 */
import type { Coding, CoverageEligibilityResponse, Money, ParametersParameter } from 'fhir/r4.js';
import type { CheckService } from '../checks/service.js';
import { OperationOutcomeError, badRequest, outcome, outcomeOf, unprocessable } from '../fhir/outcomes.js';
import { echo } from '../fhir/text.js';
import { validateFhir } from '../fhir/validator.js';
import { BENEFIT_CATEGORY_SYSTEM, SERVICE_CATEGORY_SYSTEM } from '../mapping/response/codes.js';
import type { EstimateItem } from '../mapping/response/estimate.js';
import { ESTIMATE_CURRENCY, estimateClaimResponse, estimateItems } from '../mapping/response/estimate.js';
import { isFoundInForce, serviceCategoryOf } from '../mapping/response/visit-summary.js';
import { findCheck } from './read.js';
import type { FhirAnswer, FhirRequest } from './types.js';

/** Categories the operation takes (the contract): a coding of another system is refused. */
const CATEGORY_SYSTEMS = [SERVICE_CATEGORY_SYSTEM, BENEFIT_CATEGORY_SYSTEM];
/** Fees up to AED 100,000,000 (a bound that keeps the arithmetic in fils exact). */
const MAX_FEE = 100_000_000;
const MAX_ITEMS = 50;

/** The body as Parameters valid in FHIR R4, else 400 with the validator's issues. */
function parametersOf(body: unknown): ParametersParameter[] {
  const result = validateFhir(body);
  if (!result.valid) throw new OperationOutcomeError(outcomeOf(result.issues), 400);
  const resource = body as { resourceType: string; parameter?: ParametersParameter[] };
  if (resource.resourceType !== 'Parameters')
    throw badRequest(`$estimate takes Parameters, not ${echo(resource.resourceType)}`, 'resourceType');
  return resource.parameter ?? [];
}

function partOf(
  param: ParametersParameter,
  name: string,
  at: string,
): { part: ParametersParameter; path: string } {
  const parts = param.part ?? [];
  const index = parts.findIndex((p) => p.name === name);
  if (index < 0 || parts.findIndex((p, i) => i > index && p.name === name) >= 0)
    throw badRequest(`Each item needs exactly one part ${name}`, `${at}.part`);
  return { part: parts[index]!, path: `${at}.part[${index}]` };
}

function categoryOf(param: ParametersParameter, at: string): EstimateItem['category'] {
  const { part, path } = partOf(param, 'category', at);
  const coding: Coding | undefined = part.valueCoding;
  if (!coding) throw badRequest('The category part must be a valueCoding', `${path}.value`);
  if (!CATEGORY_SYSTEMS.includes(coding.system ?? ''))
    throw unprocessable(
      `The category system ${echo(coding.system ?? '(none)')} is not one $estimate reads: use ${SERVICE_CATEGORY_SYSTEM} or ${BENEFIT_CATEGORY_SYSTEM}`,
      `${path}.valueCoding.system`,
      'code-invalid',
    );
  const category = serviceCategoryOf(coding);
  if (!category)
    throw unprocessable(
      `The category code ${echo(coding.code ?? '(none)')} is not known in ${echo(coding.system ?? '')}`,
      `${path}.valueCoding.code`,
      'code-invalid',
    );
  return category;
}

function feeOf(param: ParametersParameter, at: string): number {
  const { part, path } = partOf(param, 'fee', at);
  const fee: Money | undefined = part.valueMoney;
  if (!fee) throw badRequest('The fee part must be a valueMoney', `${path}.value`);
  if (fee.value === undefined) throw badRequest('The fee needs a value', `${path}.valueMoney.value`);
  if (fee.currency !== ESTIMATE_CURRENCY)
    throw unprocessable(
      `The fee must be in ${ESTIMATE_CURRENCY} (currency ${echo(fee.currency ?? '(none)')} given): the portal's figures are in ${ESTIMATE_CURRENCY}`,
      `${path}.valueMoney.currency`,
      'value',
    );
  const value = fee.value;
  if (!(value >= 0 && value <= MAX_FEE))
    throw unprocessable(
      `The fee must be between 0 and ${MAX_FEE} ${ESTIMATE_CURRENCY}`,
      `${path}.valueMoney.value`,
      'value',
    );
  if (Math.abs(Math.round(value * 100) - value * 100) > 1e-6)
    throw unprocessable('The fee has at most 2 decimals (fils)', `${path}.valueMoney.value`, 'value');
  return value;
}

/** The items asked, each with its category and fee; 400/422 with the element's FHIRPath. */
export function estimateInput(body: unknown): EstimateItem[] {
  const parameters = parametersOf(body);
  const items: EstimateItem[] = [];
  parameters.forEach((param, index) => {
    const at = `Parameters.parameter[${index}]`;
    if (param.name !== 'item')
      throw badRequest(
        `Unknown parameter ${echo(param.name)}: $estimate takes item parameters only`,
        `${at}.name`,
      );
    items.push({ category: categoryOf(param, at), fee: feeOf(param, at) });
  });
  if (items.length === 0)
    throw badRequest('$estimate needs at least one item parameter', 'Parameters.parameter');
  if (items.length > MAX_ITEMS) throw badRequest(`At most ${MAX_ITEMS} items`, 'Parameters.parameter');
  return items;
}

/** Why a CER has no estimate: 422 with the reason, or undefined when it has one. */
function refusal(cer: CoverageEligibilityResponse): string | undefined {
  if (isFoundInForce(cer)) return undefined;
  if (cer.outcome === 'queued') return 'The check is still running: estimate once its answer is final.';
  if (cer.outcome === 'error')
    return 'The check made no determination (an error or member not found): there are no benefits to estimate from.';
  return 'The coverage is not in force (not eligible): there are no benefits to estimate from.';
}

export interface EstimateDeps {
  checks: CheckService;
  now: () => number;
}

export async function estimate(req: FhirRequest, deps: EstimateDeps): Promise<FhirAnswer> {
  const check = await findCheck(req, deps.checks, 'CoverageEligibilityResponse');
  // Input first: a bad body is a 400/422 whatever the CER.
  const asked = estimateInput(req.body);
  const why = refusal(check.cer);
  if (why)
    throw new OperationOutcomeError(
      outcome('business-rule', why, { expression: ['CoverageEligibilityResponse'] }),
      422,
    );
  const inForce = (check.cer.insurance ?? []).filter((i) => i.inforce === true);
  const insurance = inForce[0]!;
  const first: string[] = [];
  if (inForce.length > 1)
    first.push(
      `The member is eligible at ${inForce.length} payers; this estimate uses the figures of the first eligible coverage of the answer.`,
    );
  const estimates = estimateItems(insurance.item ?? [], asked);
  const claim = estimateClaimResponse(check.cer, estimates, new Date(deps.now()).toISOString(), first);
  return { status: 200, body: claim };
}
