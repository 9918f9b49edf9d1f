/**
 * The narrative of the stored CoverageEligibilityRequest (src/mapping/request/request-narrative.ts,
 * docs/validation.md "Narratives"): what was asked, of whom and for when; never the patient, and
 * the client's own narrative (which may name the patient) replaced.
 */
import { describe, expect, it } from 'vitest';
import { parseSubmit } from '../../src/mapping/request/parse-submit.js';
import { requestNarrative } from '../../src/mapping/request/request-narrative.js';
import { expectValidFhir } from '../support/fhir.js';
import { narrativeProblem } from '../support/package-references.js';
import { eligibilityRequest } from '../support/requests.js';

const options = { practiceId: 'P-001', now: new Date('2026-11-22T08:30:00Z') };
const EMIRATES_ID = '784-1990-0000001-0';

describe('the narrative of a stored request', () => {
  it('says the status, purpose, insurer, date and categories, and nothing of the patient', async () => {
    const body = {
      ...eligibilityRequest({ emiratesId: EMIRATES_ID, payer: 'DAMAN', servicedDate: '2026-11-23' }),
      text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Aisha Testpatient</div>' },
    };
    const { request } = await parseSubmit(body, options);
    expectValidFhir(request);
    expect(narrativeProblem(request)).toBeUndefined();
    const div = request.text?.div ?? '';
    expect(div).toBe(
      '<div xmlns="http://www.w3.org/1999/xhtml"><p><b>Eligibility request</b> (active; benefits, validation)</p><ul><li>Insurer: DAMAN</li><li>Date of service: 2026-11-23</li><li>Asked about: Consultation</li><li>Made by the client: 2026-11-22</li></ul></div>',
    );
    for (const patientData of [EMIRATES_ID, '784199000000010', 'Aisha', 'Testpatient', '1988-04-12'])
      expect(div).not.toContain(patientData);
  });

  it('follows a cancellation, and escapes what the client wrote', () => {
    const request = eligibilityRequest({ emiratesId: EMIRATES_ID });
    const cancelled = requestNarrative({
      ...request,
      status: 'cancelled',
      item: [{ category: { text: 'Dental <check> & "cleaning"' } }],
    });
    expect(cancelled.div).toContain('(cancelled; ');
    expect(cancelled.div).toContain('Asked about: Dental &lt;check&gt; &amp; &quot;cleaning&quot;');
  });
});
