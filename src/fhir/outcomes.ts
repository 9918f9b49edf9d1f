/**
 * OperationOutcome constants and factories: the one way this service fails.
 * Shape after Medplum's packages/core/src/outcomes.ts. Issue codes are from the required
 * binding http://hl7.org/fhir/ValueSet/issue-type (https://hl7.org/fhir/R4/valueset-issue-type.html).
 */
import type { Narrative, OperationOutcome, OperationOutcomeIssue } from 'fhir/r4.js';
import { echo, fhirString, truncate } from './text.js';
import { escapeXml, generatedNarrative } from './xhtml.js';

export type IssueType = OperationOutcomeIssue['code'];
export type IssueSeverity = OperationOutcomeIssue['severity'];

/** An OperationOutcome carried with its HTTP status. Thrown from deep helpers, caught once in the shell. */
export class OperationOutcomeError extends Error {
  readonly outcome: OperationOutcome;

  constructor(
    outcome: OperationOutcome,
    readonly status: number,
    readonly headers: Record<string, string> = {},
  ) {
    const bounded = boundOutcome(outcome);
    super(bounded.issue[0]?.details?.text ?? bounded.issue[0]?.diagnostics ?? 'OperationOutcome');
    this.outcome = bounded;
    this.name = 'OperationOutcomeError';
  }
}

/** What one error answer may cost, whatever the input (docs/input-limits.md). */
export const OUTCOME_LIMITS = {
  /** Issues per OperationOutcome; past it, one more issue says how many were left out. */
  issues: 100,
  /** Characters of one `details.text` or `diagnostics`. */
  textChars: 500,
  /** Characters of one `expression`, and expressions per issue. */
  expressionChars: 200,
  expressions: 5,
  /** Characters of an issue's text in the narrative (its first expression is there too). */
  narrativeTextChars: 200,
} as const;

/**
 * The most characters a bounded OperationOutcome can hold: its texts, expressions and their JSON,
 * and its narrative's line per issue (a text and an expression, each character escaped to at most
 * six, `&quot;`).
 */
export const OUTCOME_MAX_CHARS =
  OUTCOME_LIMITS.issues *
  (2 * OUTCOME_LIMITS.textChars +
    OUTCOME_LIMITS.expressions * OUTCOME_LIMITS.expressionChars +
    200 +
    6 * (OUTCOME_LIMITS.narrativeTextChars + OUTCOME_LIMITS.expressionChars) +
    100);

/**
 * The OperationOutcome as it may be sent: at most OUTCOME_LIMITS.issues issues (the last one
 * counting the rest), every text a valid FHIR string of bounded length. Every error answer of the
 * service passes through here (the OperationOutcomeError constructor), so no input can make an
 * answer large or invalid.
 */
export function boundOutcome(outcome: OperationOutcome): OperationOutcome {
  const max = OUTCOME_LIMITS.issues;
  const kept = outcome.issue.length > max ? outcome.issue.slice(0, max - 1) : outcome.issue;
  const issues = kept.map(boundIssue);
  if (outcome.issue.length > max) {
    issues.push({
      severity: 'error',
      code: 'too-costly',
      details: { text: `${outcome.issue.length - kept.length} more issues were left out` },
    });
  }
  return withOutcomeNarrative({ ...outcome, issue: issues });
}

const SEVERITY: Readonly<Record<IssueSeverity, string>> = {
  fatal: 'Fatal error',
  error: 'Error',
  warning: 'Warning',
  information: 'Information',
};

/** `Error (invalid): text (at expression)`: the text's first characters and the first expression, so the line stays short. */
function issueXhtml(issue: OperationOutcomeIssue): string {
  const text = issue.details?.text ?? issue.diagnostics;
  let html = `${SEVERITY[issue.severity]} (${issue.code})`;
  if (text) html += `: ${escapeXml(truncate(text, OUTCOME_LIMITS.narrativeTextChars))}`;
  const expressions = issue.expression ?? [];
  if (expressions.length > 0)
    html += ` (at ${escapeXml(truncate(expressions[0]!, OUTCOME_LIMITS.expressionChars))}${
      expressions.length > 1 ? ` and ${expressions.length - 1} more` : ''
    })`;
  return html;
}

/**
 * The narrative of an OperationOutcome (https://hl7.org/fhir/R4/narrative.html, dom-6): each
 * issue's severity, code, text and where, so nothing the issues do not already carry. A few string
 * joins: every error answer pays it.
 */
export function outcomeNarrative(issues: readonly OperationOutcomeIssue[]): Narrative {
  if (issues.length === 1) return generatedNarrative(`<p>${issueXhtml(issues[0]!)}</p>`);
  if (issues.length === 0) return generatedNarrative('<p>No issues</p>');
  let items = '';
  for (const issue of issues) items += `<li>${issueXhtml(issue)}</li>`;
  return generatedNarrative(`<ul>${items}</ul>`);
}

/** The OperationOutcome with the narrative of its issues (any narrative it had is replaced). */
export function withOutcomeNarrative(outcome: OperationOutcome): OperationOutcome {
  const { resourceType, text: _old, ...rest } = outcome;
  return { resourceType, text: outcomeNarrative(outcome.issue), ...rest };
}

function boundIssue(issue: OperationOutcomeIssue): OperationOutcomeIssue {
  const bounded: OperationOutcomeIssue = { ...issue };
  const text = boundText(issue.details?.text, OUTCOME_LIMITS.textChars);
  if (issue.details) {
    const { text: _old, ...details } = issue.details;
    bounded.details = text ? { ...details, text } : details;
    if (Object.keys(bounded.details).length === 0) delete bounded.details;
  }
  const diagnostics = boundText(issue.diagnostics, OUTCOME_LIMITS.textChars);
  if (diagnostics) bounded.diagnostics = diagnostics;
  else delete bounded.diagnostics;
  const expressions = (issue.expression ?? [])
    .slice(0, OUTCOME_LIMITS.expressions)
    .flatMap((e) => boundText(e, OUTCOME_LIMITS.expressionChars) ?? []);
  if (expressions.length > 0) bounded.expression = expressions;
  else delete bounded.expression;
  return bounded;
}

function boundText(text: string | undefined, max: number): string | undefined {
  return text === undefined ? undefined : fhirString(truncate(text, max));
}

/** Builds an OperationOutcome with one issue. */
export function outcome(
  code: IssueType,
  text: string,
  options: { severity?: IssueSeverity; expression?: string[]; diagnostics?: string } = {},
): OperationOutcome {
  const issue: OperationOutcomeIssue = {
    severity: options.severity ?? 'error',
    code,
    details: { text },
  };
  if (options.expression?.length) issue.expression = options.expression;
  if (options.diagnostics) issue.diagnostics = options.diagnostics;
  return { resourceType: 'OperationOutcome', text: outcomeNarrative([issue]), issue: [issue] };
}

/** An OperationOutcome with several issues (validator output), bounded as every error answer is. */
export function outcomeOf(issues: OperationOutcomeIssue[]): OperationOutcome {
  return boundOutcome({ resourceType: 'OperationOutcome', issue: issues });
}

export const allOk = (text = 'All OK'): OperationOutcome =>
  outcome('informational', text, { severity: 'information' });

export const badRequest = (text: string, expression?: string): OperationOutcomeError =>
  new OperationOutcomeError(outcome('invalid', text, expression ? { expression: [expression] } : {}), 400);

export const structureError = (text: string, expression?: string): OperationOutcomeError =>
  new OperationOutcomeError(outcome('structure', text, expression ? { expression: [expression] } : {}), 400);

/**
 * Valid FHIR that lacks what a check needs (a patient identifier, a payer code, a known service
 * category): 422, where input that is not valid FHIR is 400 (docs/request-mapping.md, section 4).
 */
export const unprocessable = (
  text: string,
  expression: string,
  code: IssueType = 'required',
): OperationOutcomeError => new OperationOutcomeError(outcome(code, text, { expression: [expression] }), 422);

export const notFound = (text = 'Not found'): OperationOutcomeError =>
  new OperationOutcomeError(outcome('not-found', text), 404);

export const unauthorized = (text = 'A valid bearer API key is required'): OperationOutcomeError =>
  new OperationOutcomeError(outcome('login', text), 401, { 'WWW-Authenticate': 'Bearer realm="fhir"' });

export const tooManyRequests = (
  retryAfterSeconds: number,
  text = 'Too many requests',
): OperationOutcomeError =>
  new OperationOutcomeError(outcome('throttled', text), 429, { 'Retry-After': String(retryAfterSeconds) });

export const payloadTooLarge = (limit: string): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome('too-costly', `The request body is larger than the ${limit} limit`, { expression: ['$this'] }),
    413,
  );

export const unsupportedMediaType = (
  contentType: string,
  expected = 'application/fhir+json',
): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome('not-supported', `Content type ${echo(contentType)} is not supported; send ${expected}`),
    415,
  );

export const notAcceptable = (): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome('not-supported', 'Only application/fhir+json (or application/json) is served'),
    406,
  );

export const methodNotAllowed = (method: string): OperationOutcomeError =>
  new OperationOutcomeError(outcome('not-supported', `Method ${method} is not allowed here`), 405);

/**
 * The store cannot be read or written now (a database restart, a failover, a full disk): a 503
 * the client may retry after Retry-After (https://hl7.org/fhir/R4/valueset-issue-type.html:
 * `transient`, "processing issues ... may be resolved by retrying").
 */
export const storeUnavailable = (retryAfterSeconds: number): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome(
      'transient',
      `The service cannot reach its database just now; try again in ${retryAfterSeconds} s`,
    ),
    503,
    { 'Retry-After': String(retryAfterSeconds) },
  );

/** Unknown failure: logged once with the request id, answered without a stack trace. */
export const serverError = (requestId: string): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome('exception', `Internal error; quote request id ${requestId} to the operator`),
    500,
  );

/** Narrow an unknown thrown value. */
export function isOperationOutcomeError(error: unknown): error is OperationOutcomeError {
  return error instanceof OperationOutcomeError;
}
