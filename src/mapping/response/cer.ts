/**
 * The public mapping: upstream envelope (or no envelope yet) -> CoverageEligibilityResponse.
 * Pure: the clock and the base URL come in through CerContext.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import type { CerContext } from '../types.js';
import type { Envelope } from '../../upstream/contract.js';
import { baseCer, errorOf } from './base.js';
import { isSearchAllEnvelope, outcomeKey, ruleOf } from './outcome-rules.js';
import { mapSearchAll } from './search-all.js';
import { mapSingle } from './single.js';

const IN_PROGRESS = 'Eligibility check in progress at the payer portal.';
const STILL_CHECKING =
  'Still checking: the payer portal has not answered within the usual time. The check continues, and this response is updated when the answer arrives.';

/** outcome = queued: accepted, or running at the payer portal (IHE FAIS: a slow answer is a queued CER). */
export function queuedCer(ctx: CerContext, note?: string): CoverageEligibilityResponse {
  return baseCer(ctx, 'queued', note ?? IN_PROGRESS);
}

/** An envelope (terminal, in flight, or search-all at any stage) -> CER, by the outcome table. */
export function mapEnvelope(envelope: Envelope, ctx: CerContext): CoverageEligibilityResponse {
  const searchAll = ctx.isSearchAll || isSearchAllEnvelope(envelope);
  const key = outcomeKey(envelope, searchAll);
  if (searchAll) return mapSearchAll(envelope, ctx, ruleOf(key));
  return mapSingle(envelope, ctx, ruleOf(key), key);
}

const CUT_OFF =
  'The search had not completed when its task ended and the timeout passed: this is the answer of the payers that responded.';

/**
 * A search-all whose task is over (PROCESS_COMPLETE) without a completion rule holding, past the
 * timeout: finished with what answered (completion never promised every payer), saying so. The
 * envelope is shown as the upstream sent it (search_all_status stays as it was).
 */
export function searchAllCutOffCer(envelope: Envelope, ctx: CerContext): CoverageEligibilityResponse {
  return mapSearchAll(envelope, ctx, ruleOf('search_all_complete'), CUT_OFF);
}

/**
 * Past the check's timeout and still running (docs/upstream.md, "When a poll fails"): queued, saying
 * so; a search-all lists the payers that already answered.
 */
export function stillCheckingCer(ctx: CerContext, envelope?: Envelope | null): CoverageEligibilityResponse {
  if (!envelope) return queuedCer(ctx, STILL_CHECKING);
  if (ctx.isSearchAll || isSearchAllEnvelope(envelope)) {
    return mapSearchAll(envelope, ctx, ruleOf('search_all_processing'), STILL_CHECKING);
  }
  return mapSingle(envelope, ctx, ruleOf('in_flight'), 'in_flight', STILL_CHECKING);
}

/** A failure decided by the adapter (mappings/adapter-errors.json): outcome error, its code, its text. */
export function adapterErrorCer(
  ctx: CerContext,
  error: { code: string; text: string },
): CoverageEligibilityResponse {
  return baseCer(ctx, 'error', error.text, { error: [errorOf(error.code, error.text)] });
}
