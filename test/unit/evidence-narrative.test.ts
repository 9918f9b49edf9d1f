/**
 * A document's keeping as the CER says it (docs/evidence.md), on the sandbox's found-eligible
 * answer (letters, the screenshot and a warning's own screenshot): not kept yet with the next try,
 * kept after all (back exactly as it was), not kept with why. Never a link to one not kept.
 */
import { readFileSync } from 'node:fs';
import type { CoverageEligibilityResponse, DocumentReference } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { mapEnvelope } from '../../src/mapping/response/index.js';
import { markKept, markNotKept, markNotKeptYet } from '../../src/mapping/response/evidence.js';
import { withNarrative } from '../../src/mapping/response/narrative.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import { cerContext } from '../support/cer-context.js';
import { expectValidFhir } from '../support/fhir.js';

const cer: CoverageEligibilityResponse = mapEnvelope(
  envelopeSchema.parse(
    JSON.parse(readFileSync(new URL('../fixtures/upstream/found-eligible.json', import.meta.url), 'utf8')),
  ),
  cerContext(),
);

/** The Binary ids of the CER's contained DocumentReferences. */
const binaryIds = (of: CoverageEligibilityResponse) =>
  (of.contained ?? []).flatMap((r) => {
    const url =
      r.resourceType === 'DocumentReference' ? (r as DocumentReference).content[0]?.attachment.url : '';
    const id = /\/fhir\/Binary\/([^/]+)$/.exec(url ?? '')?.[1];
    return id ? [id] : [];
  });

const NEXT = Date.parse('2026-11-22T10:28:41Z');

describe('a document not kept yet', () => {
  const ids = binaryIds(cer);
  const letter = ids.find((id) => /\.d0$/.test(id))!;
  const warningShot = ids.find((id) => /\.s\d+$/.test(id))!;

  it('has the documents this test needs', () => {
    expect(letter).toBeDefined();
    expect(warningShot).toBeDefined();
  });

  it('says so with the next try, and links it nowhere', () => {
    const noted = withNarrative(markNotKeptYet(cer, letter, 'expired', NEXT));
    expectValidFhir(noted);
    const div = String(noted.text?.div);
    expect(div).toContain('<p>Documents not kept yet:</p>');
    expect(div).toContain(
      'Not kept yet: the payer portal refused its link; the next try is at 2026-11-22 10:28 UTC.',
    );
    expect(div).not.toContain(`/fhir/Binary/${letter}"`);
    expect(div).not.toContain('Documents not kept:');
  });

  it('kept after all: exactly as it was, a warning screenshot too', () => {
    for (const id of [letter, warningShot]) {
      const back = markKept(markNotKeptYet(cer, id, 'unavailable', NEXT), id);
      expect(back.contained).toEqual(cer.contained);
      expect(withNarrative(back).text).toEqual(withNarrative(cer).text);
    }
    // markKept leaves a document that was never noted alone.
    expect(markKept(cer, letter)).toEqual(cer);
  });

  it('given up: "not kept" with why, the note of the next try gone', () => {
    const given = withNarrative(markNotKept(markNotKeptYet(cer, letter, 'expired', NEXT), letter, 'refused'));
    expectValidFhir(given);
    const div = String(given.text?.div);
    expect(div).toContain('<p>Documents not kept:</p>');
    expect(div).toContain('Could not be kept: the payer portal refused its link at every try.');
    expect(div).not.toContain('Not kept yet');
    expect(binaryIds(given)).not.toContain(letter);
  });
});
