/**
 * How a step reads and writes its check: the documents (request, create-task body, CER, answer)
 * are read only when the step needs them (bench/README.md, figure 3), and each patch is written
 * under the step's lease, the last one dropping it in the same statement (figure 1).
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import { decideAnswer } from '../../mapping/response/answer.js';
import { isAnswered } from '../store/check-store.js';
import type { Check, CheckPatch, ClaimedCheck } from '../store/check-store.js';
import type { NewEvidence } from '../store/evidence-store.js';
import type { StepDeps } from './shared.js';

/** Compares two CERs without their meta, so a poll that changes nothing keeps the version. */
function sameCer(a: CoverageEligibilityResponse, b: CoverageEligibilityResponse): boolean {
  // Cheap differences first: a check's final CER is never compared as text with its queued one.
  if (a.outcome !== b.outcome || a.disposition !== b.disposition) return false;
  const strip = ({ meta: _meta, ...rest }: CoverageEligibilityResponse) => JSON.stringify(rest);
  return strip(a) === strip(b);
}

/** Whether a check carries its documents (read in full, or loaded by withDocuments). */
function hasDocuments(check: ClaimedCheck | Check): check is Check {
  return 'request' in check;
}

/** The check with its documents, read now when the claim did not; null when the row is gone. */
export async function withDocuments(check: ClaimedCheck | Check, deps: StepDeps): Promise<Check | null> {
  if (hasDocuments(check)) return check;
  const documents = await deps.store.documents(check.id);
  if (!documents) {
    deps.logger.warn('check gone; step dropped', { checkId: check.id });
    return null;
  }
  return { ...check, ...documents };
}

/** What a step may write without the check's documents: the schedule of its next poll. */
export type SchedulePatch = Pick<CheckPatch, 'nextRunAt' | 'pollFailures' | 'taskPolls' | 'taskStartedAt'>;

/**
 * Writes a step's patch. A patch that schedules the next step (`nextRunAt`) or ends the check
 * (`state: done`) is the step's last write: it drops the lease in the same statement, which saves
 * one write transaction per step (bench/README.md, figure 1).
 */
export async function write(
  check: Check,
  deps: StepDeps,
  patch: CheckPatch,
  why: string,
  evidence?: NewEvidence,
): Promise<Check | null>;
export async function write(
  check: ClaimedCheck,
  deps: StepDeps,
  patch: SchedulePatch,
  why: string,
): Promise<ClaimedCheck | null>;
export async function write(
  check: ClaimedCheck | Check,
  deps: StepDeps,
  patch: CheckPatch,
  why: string,
  evidence?: NewEvidence,
): Promise<ClaimedCheck | null> {
  const documents = hasDocuments(check) ? check : null;
  // (Typed out too: a check claimed without its documents is written only its next poll's
  // schedule. A CER, answer or envelope written without them would skip the comparisons below.)
  if (!documents && ['cer', 'answer', 'envelope'].some((field) => field in patch)) {
    throw new Error("a document written without the check's documents");
  }
  if (patch.cer && documents && sameCer(patch.cer, documents.cer)) delete patch.cer;
  if (patch.state !== undefined || patch.outcome !== undefined) {
    if (!documents) throw new Error("a state change written without the check's documents");
    // The answer is decided here, once, when the check becomes answered (done, or an error while
    // its slot is held), and stored with it: $submit and the async status read it as it is.
    const answered = isAnswered({
      state: patch.state ?? check.state,
      outcome: patch.outcome ?? check.outcome,
    });
    const envelope = 'envelope' in patch ? patch.envelope : check.envelope;
    patch.answer = answered ? decideAnswer(patch.cer ?? documents.cer, envelope, check.isSearchAll) : null;
  }
  const token = check.leaseOwner ?? deps.owner;
  const release = patch.nextRunAt !== undefined || patch.state === 'done';
  // The claim token (unique per scheduler round) fences a step that outlived its lease: once the
  // check was claimed again, the old step's writes are refused.
  const now = deps.now();
  // The CER's first final version: the store writes the subscriptions' events with it (outbox).
  const final = patch.answer != null && !isAnswered(check) && (patch.outcome ?? check.outcome) !== 'queued';
  // The documents to keep are written with the CER's first final version (docs/evidence.md).
  const keep = final && evidence?.items.length ? { evidence } : {};
  const updated = await deps.store.update(check.id, token, patch, now, check, { release, final, ...keep });
  if (!updated) {
    deps.logger.warn('lease lost; step dropped', { checkId: check.id, why });
    return null;
  }
  if (release) deps.released = true;
  // One PHI-free line per decision, for an operator following a check at LOG_LEVEL=debug
  // (guarded: a disabled winston level still costs a stream write, about 3 µs).
  if (deps.logger.isDebugEnabled())
    deps.logger.debug('check step', {
      checkId: check.id,
      tenantId: check.tenantId,
      state: updated.state,
      why,
      ...(patch.nextRunAt !== undefined ? { nextStepInMs: Math.max(0, patch.nextRunAt - now) } : {}),
      ...(release ? { lease: 'released' } : {}),
    });
  return updated;
}
