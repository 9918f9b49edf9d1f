/**
 * The narrative of every OperationOutcome (src/fhir/outcomes.ts, docs/validation.md "Narratives"):
 * one line per issue, its text escaped, valid FHIR XHTML, and the whole answer still within the
 * bound docs/input-limits.md gives, whatever the issues hold.
 */
import type { OperationOutcomeIssue } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import {
  OUTCOME_LIMITS,
  badRequest,
  outcome,
  outcomeOf,
  withOutcomeNarrative,
} from '../../src/fhir/outcomes.js';
import { expectValidFhir } from '../support/fhir.js';
import { OUTCOME_MAX_BYTES } from '../support/fuzz.js';
import { narrativeProblem } from '../support/package-references.js';

describe('the narrative of an OperationOutcome', () => {
  it('says each issue: severity, code, text and where, escaped', () => {
    const error = badRequest('Unknown status "<script>" & more', 'CoverageEligibilityRequest.status');
    expect(error.outcome.text).toEqual({
      status: 'generated',
      div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>Error (invalid): Unknown status &quot;&lt;script&gt;&quot; &amp; more (at CoverageEligibilityRequest.status)</p></div>',
    });
    expect(narrativeProblem(error.outcome)).toBeUndefined();
    expectValidFhir(error.outcome);

    const two = outcomeOf([
      { severity: 'warning', code: 'business-rule', details: { text: 'A warning' } },
      { severity: 'information', code: 'informational', diagnostics: 'Eligibility service message: ok' },
    ]);
    expect(two.text?.div).toBe(
      '<div xmlns="http://www.w3.org/1999/xhtml"><ul><li>Warning (business-rule): A warning</li><li>Information (informational): Eligibility service message: ok</li></ul></div>',
    );
    expect(narrativeProblem(two)).toBeUndefined();
  });

  it('follows the issues: a bounded outcome says what is left of them, and any old narrative is replaced', () => {
    const many: OperationOutcomeIssue[] = Array.from({ length: 150 }, (_, i) => ({
      severity: 'error',
      code: 'invalid',
      details: { text: `issue ${i}` },
    }));
    const bounded = outcomeOf(many);
    expect(bounded.issue).toHaveLength(OUTCOME_LIMITS.issues);
    expect(bounded.text?.div.match(/<li>/g)).toHaveLength(OUTCOME_LIMITS.issues);
    expect(bounded.text?.div).toContain('Error (too-costly): 51 more issues were left out');
    const stale = {
      ...outcome('not-found', 'Not found'),
      text: { status: 'generated' as const, div: 'old' },
    };
    expect(withOutcomeNarrative(stale).text?.div).toContain('Error (not-found): Not found');
  });

  it('keeps the answer within its bound whatever the issues hold (each character escaped to six)', () => {
    const quotes = (n: number) => '"'.repeat(n);
    const worst: OperationOutcomeIssue[] = Array.from({ length: 200 }, () => ({
      severity: 'error',
      code: 'invalid',
      details: { text: quotes(10_000) },
      diagnostics: quotes(10_000),
      expression: Array.from({ length: 9 }, () => quotes(1_000)),
    }));
    const bounded = outcomeOf(worst);
    expect(narrativeProblem(bounded)).toBeUndefined();
    // The narrative's share of the bound, and the whole answer as the fuzz test bounds it (its
    // characters, each at most two bytes of JSON here: `\"`).
    const perIssue = 6 * (OUTCOME_LIMITS.narrativeTextChars + OUTCOME_LIMITS.expressionChars) + 100;
    expect(bounded.text!.div.length).toBeLessThanOrEqual(OUTCOME_LIMITS.issues * perIssue);
    expect(Buffer.byteLength(JSON.stringify(bounded))).toBeLessThanOrEqual(OUTCOME_MAX_BYTES);
    // One line: the first 200 characters of the text, the first expression, the others counted.
    expect(bounded.text?.div).toContain(' and 4 more)</li>');
  });
});
