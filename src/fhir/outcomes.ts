/**
 * OperationOutcome constants and factories: the one way this service fails.
 * Shape after Medplum's packages/core/src/outcomes.ts. Issue codes are from the required
 * binding http://hl7.org/fhir/ValueSet/issue-type (https://hl7.org/fhir/R4/valueset-issue-type.html).
 */
import type { OperationOutcome, OperationOutcomeIssue } from 'fhir/r4.js';

export type IssueType = OperationOutcomeIssue['code'];
export type IssueSeverity = OperationOutcomeIssue['severity'];

/** An OperationOutcome carried with its HTTP status. Thrown from deep helpers, caught once in the shell. */
export class OperationOutcomeError extends Error {
  constructor(
    readonly outcome: OperationOutcome,
    readonly status: number,
    readonly headers: Record<string, string> = {},
  ) {
    super(outcome.issue[0]?.details?.text ?? outcome.issue[0]?.diagnostics ?? 'OperationOutcome');
    this.name = 'OperationOutcomeError';
  }
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
  return { resourceType: 'OperationOutcome', issue: [issue] };
}

/** An OperationOutcome with several issues (validator output). */
export function outcomeOf(issues: OperationOutcomeIssue[]): OperationOutcome {
  return { resourceType: 'OperationOutcome', issue: issues };
}

export const allOk = (text = 'All OK'): OperationOutcome =>
  outcome('informational', text, { severity: 'information' });

export const badRequest = (text: string, expression?: string): OperationOutcomeError =>
  new OperationOutcomeError(outcome('invalid', text, expression ? { expression: [expression] } : {}), 400);

export const structureError = (text: string, expression?: string): OperationOutcomeError =>
  new OperationOutcomeError(outcome('structure', text, expression ? { expression: [expression] } : {}), 400);

/** Valid FHIR that lacks what a check needs: 422 (DESIGN.md section 2). */
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
  new OperationOutcomeError(outcome('too-costly', `The request body is larger than the ${limit} limit`), 413);

export const unsupportedMediaType = (contentType: string): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome('not-supported', `Content type '${contentType}' is not supported; send application/fhir+json`),
    415,
  );

export const notAcceptable = (): OperationOutcomeError =>
  new OperationOutcomeError(
    outcome('not-supported', 'Only application/fhir+json (or application/json) is served'),
    406,
  );

export const methodNotAllowed = (method: string): OperationOutcomeError =>
  new OperationOutcomeError(outcome('not-supported', `Method ${method} is not allowed here`), 405);

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
