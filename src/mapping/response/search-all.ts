/**
 * A search-all envelope -> one CER (the README, search across all payers; docs/upstream.md, Search-all tasks).
 * One insurance entry per payer that found the member (status found or member_found), in the
 * order the upstream gives them: created_at is when a payer answered and never ranks them.
 * Every payer that answered is recorded in a search-all-response extension.
 */
import type {
  Coverage,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsurance,
  Extension,
  Reference,
} from 'fhir/r4.js';
import type { CerContext } from '../types.js';
import type { Envelope, SearchAllEntry } from '../../upstream/contract.js';
import { PAYER_CODE_SYSTEM, booleanPart, complexExtension, fhirText, stringPart } from './codes.js';
import type { CerOutcome } from './base.js';
import { baseCer, dispositionOf, errorOf, upstreamOutcomeExtension } from './base.js';
import { insuranceOf } from './coverage.js';
import { multiCardStatement, portalMessages } from './extensions.js';
import { isFoundStatus, upstreamError } from './outcome-rules.js';
import type { OutcomeRule } from './outcome-rules.js';

interface Answer {
  entry: SearchAllEntry;
  code: string | undefined;
  name: string;
  found: boolean;
  coverageId: string;
}

function answersOf(envelope: Envelope): Answer[] {
  return (envelope.aggregated_results ?? []).map((entry, i) => {
    const data = entry.data;
    const code = fhirText(entry.tpa_name ?? entry.tpa ?? data?.adjusted_tpa_name ?? data?.payer_id);
    const name = fhirText(data?.policy_network?.payer_name) ?? code ?? `payer ${i + 1}`;
    return { entry, code, name, found: isFoundStatus(entry.status), coverageId: `coverage-${i + 1}` };
  });
}

function payorOf(answer: Answer, ctx: CerContext): Reference {
  const system = ctx.insurer.identifier?.system ?? PAYER_CODE_SYSTEM;
  return { ...(answer.code ? { identifier: { system, value: answer.code } } : {}), display: answer.name };
}

function responseExtension(answer: Answer, withCoverage: boolean): Extension | undefined {
  return complexExtension('search-all-response', [
    stringPart('payer', answer.code),
    stringPart('payerName', answer.name),
    stringPart('status', answer.entry.status),
    booleanPart('eligible', answer.entry.data?.is_eligible),
    withCoverage && answer.found
      ? { url: 'coverage', valueReference: { reference: `#${answer.coverageId}` } }
      : undefined,
  ]);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** What a finished search says: the eligible payers, or that none was found (docs/upstream.md, "Search-all tasks"). */
function summary(answers: Answer[], complete: boolean): string[] {
  const found = answers.filter((a) => a.found);
  const eligible = found.filter((a) => a.entry.data?.is_eligible === true);
  const notEligible = found.filter((a) => a.entry.data?.is_eligible === false);
  const undetermined = found.filter((a) => typeof a.entry.data?.is_eligible !== 'boolean');
  const sentences: string[] = [];
  if (!complete) {
    sentences.push(`${plural(answers.length, 'payer')} answered so far; ${found.length} found the member.`);
  } else if (eligible.length === 0 && undetermined.length === 0) {
    sentences.push(
      `No matching coverage found in the payers that responded (${plural(answers.length, 'payer')}).`,
    );
  }
  if (eligible.length === 1) sentences.push(`The member is eligible at ${eligible[0]?.name}.`);
  if (eligible.length > 1) {
    sentences.push(
      `The member is eligible at ${eligible.length} payers: ${eligible.map((a) => a.name).join(', ')}. A patient may hold several active policies: choose the one that applies to this visit (listed in the order the payers answered, not ranked).`,
    );
  }
  if (notEligible.length > 0) {
    const list = notEligible.map((a) => {
      const reason = fhirText(a.entry.data?.failure_reason);
      return reason ? `${a.name} (${reason})` : a.name;
    });
    sentences.push(`Found but not eligible at: ${list.join('; ')}.`);
  }
  if (undetermined.length > 0) {
    sentences.push(
      `Found, but no eligibility determination, at: ${undetermined.map((a) => a.name).join('; ')}. Nothing is assumed: check that payer at its portal.`,
    );
  }
  for (const a of found) {
    const statement = a.entry.data ? multiCardStatement(a.entry.data) : undefined;
    if (statement) sentences.push(`${a.name}: ${statement}`);
  }
  if (complete)
    sentences.push(
      `${plural(answers.length, 'payer')} responded; a payer that did not respond is not covered by this answer.`,
    );
  return sentences;
}

/**
 * The CER of a search-all. `outcome` queued while SEARCH_ALL_PROCESSING (or still checking),
 * complete on SEARCH_ALL_COMPLETE, error on FAILED/CANCELLED (then no insurance, as for every error).
 */
export function mapSearchAll(
  envelope: Envelope,
  ctx: CerContext,
  rule: OutcomeRule,
  lead?: string,
): CoverageEligibilityResponse {
  const answers = answersOf(envelope);
  const outcome: CerOutcome = rule.cerOutcome;
  const withInsurance = outcome !== 'error';
  const contained: Coverage[] = [];
  const insurance: CoverageEligibilityResponseInsurance[] = [];
  if (withInsurance) {
    for (const answer of answers.filter((a) => a.found)) {
      const data = answer.entry.data ?? {};
      const built = insuranceOf(data, {
        coverageId: answer.coverageId,
        patient: ctx.patient,
        payor: payorOf(answer, ctx),
        extraExtensions: portalMessages(data.warning_messages ?? []),
      });
      contained.push(built.coverage);
      insurance.push(built.insurance);
    }
  }
  const extension = [
    upstreamOutcomeExtension(envelope, answers.length),
    ...answers.map((a) => responseExtension(a, withInsurance)),
  ].filter((e): e is Extension => e !== undefined);
  if (outcome === 'error') {
    const { errorType, message } = upstreamError(envelope);
    const detail = message
      ? `Eligibility service message: ${errorType ? `${errorType}: ` : ''}${message}`
      : undefined;
    const disposition = dispositionOf([
      lead ?? rule.text,
      detail,
      `${plural(answers.length, 'payer')} had answered.`,
    ]);
    return baseCer(ctx, 'error', disposition, {
      extension,
      error: [errorOf(rule.errorCode ?? 'task-failed', message ?? rule.text)],
    });
  }
  const disposition = dispositionOf([lead ?? rule.text, ...summary(answers, outcome !== 'queued')]);
  return baseCer(ctx, outcome, disposition, { contained, extension, insurance });
}
