/**
 * The cards of the two hooks (CDS Hooks 2.0 "Card Attributes":
 * https://cds-hooks.hl7.org/2.0/#card-attributes): `uuid`, `summary` (under 140 characters),
 * `indicator` (`info` when eligible or still checking, `warning` when not eligible, not found or
 * anything an operator must look at; never `critical`), `detail` in GitHub-flavoured Markdown
 * with the next step, `source.label`, and one `absolute` link to the answer on the front-desk
 * page (https://cds-hooks.hl7.org/2.0/#link). Pure: no clock, no I/O. No card carries an
 * identifier, a phone number or a birth date: the patient is never named in a card at all (the
 * EHR shows the card on the patient's chart), and portal text is scrubbed of such values.
 */
import { randomUUID } from 'node:crypto';
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import type { Check } from '../../checks/store/check-store.js';
import { isAnswered } from '../../checks/store/check-store.js';
import {
  escapeMarkdown,
  summaryLine,
  summaryMarkdown,
  visitSummary,
  type VisitSummary,
} from '../../mapping/response/visit-summary.js';

export type Indicator = 'info' | 'warning' | 'critical';

/** A CDS Hooks 2.0 card as this service sends it. */
export interface Card {
  uuid: string;
  summary: string;
  indicator: Indicator;
  detail?: string;
  source: { label: string; url?: string };
  links?: { label: string; url: string; type: 'absolute' | 'smart' }[];
}

/** The spec: "summary ... SHALL be less than 140 characters". */
export const MAX_SUMMARY = 139;
const SOURCE_LABEL = 'Insurance eligibility (payer portal)';

/** What a card may show of a check; everything else comes from the check itself. */
export interface CardContext {
  baseUrl: string;
  /** Hides the values never to show (the patient's identifiers, phone, birth date): scrubberOf. */
  scrub: (text: string) => string;
}

/** The words of an answer: what the desk reads first. */
type AnswerKind = 'eligible' | 'not-eligible' | 'member-not-found' | 'checking' | 'needs-operator';

function answerKind(check: Pick<Check, 'state' | 'outcome' | 'cer'>): AnswerKind {
  if (!isAnswered(check)) return 'checking';
  const cer = check.cer;
  if (cer.outcome === 'complete' || cer.outcome === 'partial') {
    const inforce = cer.insurance?.[0]?.inforce;
    if (inforce === true) return 'eligible';
    if (inforce === false) return 'not-eligible';
  }
  const codes = (cer.error ?? []).flatMap((e) => (e.code.coding ?? []).map((c) => c.code));
  return codes.includes('member-not-found') ? 'member-not-found' : 'needs-operator';
}

/** The next step the desk takes for each kind of answer (Markdown). */
const NEXT_STEP: Record<AnswerKind, string> = {
  eligible: 'Collect the patient share at check-in.',
  'not-eligible':
    'Tell the patient before the visit: the visit is not covered as asked. Offer self-pay, or ask for another insurance card.',
  'member-not-found':
    'Ask the patient for the insurance card: the member may be insured with another payer, or the Emirates ID may not yet be linked at this payer. Then check again with the card number.',
  checking: 'Nothing to do now: the answer appears on the chart when the payer portal has answered.',
  'needs-operator':
    'No determination was made. Ask the operator to look at the answer on the front-desk page; until then, check eligibility at the payer portal by hand.',
};

function payerName(cer: CoverageEligibilityResponse, fallback: string): string {
  return cer.insurer?.display ?? fallback;
}

/** Anything shaped like an Emirates ID, whoever it belongs to. */
const EMIRATES_ID_SHAPE = /784[-\s]?\d{4}[-\s]?\d{7}[-\s]?\d/g;
/** What may stand between the digits of a hidden value (784-1990-..., +971 50 ..., 1979/03/14). */
const DIGITS_AND_SEPARATORS = /^[\d\s./+-]*$/;
const HIDDEN = '[hidden]';

/**
 * A function that hides every secret in a text: each value as given, its digits with any
 * separators between them (so 784-1990-... and 7841990... both go), and anything shaped like an
 * Emirates ID. Plain string searches over the text's digits: no regular expression is built per
 * call (a new one runs in V8's interpreter, about 2 ms per card on a portal's disposition).
 */
export function scrubberOf(secrets: readonly string[]): (text: string) => string {
  const values = [...new Set(secrets.filter((s) => s.length >= 4))];
  // A phone number is also written without its country code (+971 50 ... as 050 ...): the last
  // nine digits of any long value are hidden too.
  const digitValues = [
    ...new Set(
      secrets
        .map((s) => s.replace(/\D/g, ''))
        .flatMap((d) => (d.length >= 10 ? [d, d.slice(-9)] : [d]))
        .filter((d) => d.length >= 6),
    ),
  ];
  return (text) => {
    let clean = text;
    for (const value of values) if (clean.includes(value)) clean = clean.split(value).join(HIDDEN);
    if (digitValues.length > 0) clean = hideDigits(clean, digitValues);
    return clean.replace(EMIRATES_ID_SHAPE, HIDDEN);
  };
}

/** Hides each run of the text whose digits spell one of `values` with only separators between. */
function hideDigits(text: string, values: readonly string[]): string {
  let digits = '';
  const at: number[] = [];
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code >= 48 && code <= 57) {
      digits += text[i];
      at.push(i);
    }
  }
  const spans: [number, number][] = [];
  for (const value of values) {
    for (let from = digits.indexOf(value); from >= 0; from = digits.indexOf(value, from + 1)) {
      const start = at[from]!;
      const end = at[from + value.length - 1]! + 1;
      if (DIGITS_AND_SEPARATORS.test(text.slice(start, end))) spans.push([start, end]);
    }
  }
  if (spans.length === 0) return text;
  spans.sort((a, b) => a[0] - b[0]);
  let out = '';
  let cursor = 0;
  for (const [start, end] of spans) {
    if (end <= cursor) continue;
    out += `${text.slice(cursor, Math.max(start, cursor))}${start >= cursor ? HIDDEN : ''}`;
    cursor = end;
  }
  return out + text.slice(cursor);
}

/** A summary cut to the spec's bound at a word, with an ellipsis; `suffix` (a date) is always kept. */
export function bounded(text: string, suffix = ''): string {
  const room = MAX_SUMMARY - suffix.length;
  if (text.length <= room) return `${text}${suffix}`;
  const cut = text.slice(0, room - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > room / 2 ? cut.slice(0, space) : cut).trimEnd()}…${suffix}`;
}

/** The link to the answer on the front-desk page (app/main.js opens `#answer=<id>`). */
function answerLink(baseUrl: string, checkId: string): Card['links'] {
  return [
    {
      label: 'Open the answer',
      url: `${baseUrl}/app/#answer=${encodeURIComponent(checkId)}`,
      type: 'absolute',
    },
  ];
}

/** The summary of a final answer: for a found member the visit summary's line (issue 28). */
function answerSummary(check: Check, kind: AnswerKind, summaries: readonly VisitSummary[]): string {
  const cer = check.cer;
  const payer = payerName(cer, check.payerCode);
  switch (kind) {
    case 'eligible':
      return summaryLine(cer, summaries);
    case 'not-eligible':
      return `Not eligible with ${payer}`;
    case 'member-not-found':
      return `Member not found at ${payer}`;
    case 'needs-operator':
      return `No answer from ${payer}: needs an operator`;
    case 'checking':
      return `Checking eligibility with ${payer}`;
  }
}

/**
 * The card of a check. `started` is the summary of a check that has no answer yet (the hook says
 * what it started); `dated` adds the answer's date to the summary.
 */
export function checkCard(
  check: Check,
  context: CardContext,
  options: { started?: string; dated?: boolean } = {},
): Card {
  const kind = answerKind(check);
  // The visit summary of the categories the stored request asked (none: the visit type's usual ones).
  const summaries =
    kind === 'eligible'
      ? visitSummary(
          check.cer,
          check.request.item?.map((i) => i.category),
        )
      : [];
  const summary =
    kind === 'checking' && options.started ? options.started : answerSummary(check, kind, summaries);
  const dated = options.dated === true && kind !== 'checking';
  const disposition = kind === 'checking' ? undefined : check.cer.disposition;
  const detail = [
    summaries.length > 0 ? summaryMarkdown(summaries) : undefined,
    disposition ? escapeMarkdown(context.scrub(disposition)) : undefined,
    `**Next step:** ${NEXT_STEP[kind]}`,
  ]
    .filter(Boolean)
    .join('\n\n');
  return {
    uuid: randomUUID(),
    summary: bounded(
      context.scrub(summary),
      dated ? ` (checked ${new Date(check.updatedAt).toISOString().slice(0, 10)})` : '',
    ),
    indicator: kind === 'eligible' || kind === 'checking' ? 'info' : 'warning',
    detail,
    source: { label: SOURCE_LABEL },
    links: answerLink(context.baseUrl, check.id),
  };
}

/**
 * A card for what could not be checked at all (no payer code, no identifier, no Coverage): the
 * reason, scrubbed, and what to fix in the EHR; its link opens the front-desk page (there is no
 * answer to open).
 */
export function problemCard(summary: string, reason: string, context: CardContext): Card {
  return {
    uuid: randomUUID(),
    summary: bounded(context.scrub(summary)),
    indicator: 'warning',
    detail: `${escapeMarkdown(context.scrub(reason))}\n\n**Next step:** fix the patient's record in the EHR (identifier or insurance), then open the chart again, or check at the payer portal by hand.`,
    source: { label: SOURCE_LABEL },
    links: [{ label: 'Open the front-desk page', url: `${context.baseUrl}/app/`, type: 'absolute' }],
  };
}
