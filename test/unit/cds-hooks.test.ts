/**
 * The pure parts of the CDS Hooks services (docs/cds-hooks.md): the registered-prefix test of a
 * fhirServer, the card text's bound and scrubbing, the appointment time and lead in words.
 */
import { describe, expect, it } from 'vitest';
import { bounded, MAX_SUMMARY, scrubberOf } from '../../src/operations/cds-hooks/cards.js';
import { fhirServerAllowed } from '../../src/operations/cds-hooks/fhir-server.js';
import { appointmentsOf } from '../../src/operations/cds-hooks/request.js';
import { leadText, startedAt, visitTime } from '../../src/operations/cds-hooks/visit-time.js';
import {
  EMIRATES_ID_PROBLEM_SHORT,
  EMIRATES_ID_PROBLEM_TEXT,
  emiratesIdProblemOfText,
} from '../../src/mapping/request/patient.js';

describe('fhirServerAllowed', () => {
  const prefixes = ['https://ehr.example.org/fhir'];
  it.each([
    ['https://ehr.example.org/fhir', true],
    ['https://ehr.example.org/fhir/', true],
    ['https://ehr.example.org/fhir/r4', true],
    ['https://ehr.example.org/fhir-evil', false],
    ['https://ehr.example.org/fhirx/r4', false],
    ['https://ehr.example.org.evil.test/fhir', false],
    ['http://ehr.example.org/fhir', false],
    ['https://ehr.example.org:8443/fhir', false],
    ['https://user:pw@ehr.example.org/fhir', false],
    ['https://ehr.example.org/fhir/%2e%2e/admin', false],
    ['https://ehr.example.org/fhir/../admin', false],
    ['https://ehr.example.org/other', false],
    [undefined, false],
  ])('%s is %s', (server, allowed) => {
    expect(fhirServerAllowed(server, prefixes)).toBe(allowed);
  });
});

describe('card text', () => {
  it('keeps a summary under 140 characters, the date suffix whole', () => {
    const long = `Eligible: ${'Plan '.repeat(40)}`;
    const text = bounded(long, ' (checked 2026-11-26)');
    expect(text.length).toBeLessThanOrEqual(MAX_SUMMARY);
    expect(text.endsWith('… (checked 2026-11-26)')).toBe(true);
    expect(bounded('short')).toBe('short');
  });

  it('hides identifiers, phone numbers and birth dates however they are written', () => {
    const scrub = scrubberOf(['784-1990-0001234-6', '+971509998877', '1979-03-14', '4410-9999-0000777']);
    const text = scrub(
      'ids 784-1990-0001234-6, 784199000012346, 784 1990 0001234 4; phone +971 50 999 8877 or 050 999 8877; born 1979/03/14; card 4410 9999 0000777; another 784-2000-1234567-2',
    );
    for (const secret of ['0001234', '999 8877', '1979', '0000777', '1234567'])
      expect(text).not.toContain(secret);
    expect(scrub('consultation 20% up to AED 50, PA-2291')).toBe('consultation 20% up to AED 50, PA-2291');
  });
});

describe('the typo guard on a card', () => {
  it('names each Emirates ID problem in a summary that fits 140 characters whole', () => {
    for (const [problem, short] of Object.entries(EMIRATES_ID_PROBLEM_SHORT)) {
      const summary = `Eligibility not checked: ${short}`;
      expect(summary.length, problem).toBeLessThanOrEqual(MAX_SUMMARY);
      expect(bounded(summary)).toBe(summary);
    }
    expect(EMIRATES_ID_PROBLEM_SHORT['check-digit']).toBe('the Emirates ID looks mistyped (check digit)');
    expect(EMIRATES_ID_PROBLEM_SHORT.placeholder).toMatch(/placeholder/);
  });

  it('knows the problem from the refusal text, and nothing else', () => {
    expect(emiratesIdProblemOfText(EMIRATES_ID_PROBLEM_TEXT['check-digit'])).toBe('check-digit');
    expect(emiratesIdProblemOfText(EMIRATES_ID_PROBLEM_TEXT.placeholder)).toBe('placeholder');
    expect(emiratesIdProblemOfText('No Emirates ID or insurance card number was found')).toBeUndefined();
  });
});

describe('appointments', () => {
  const appointment = (status: string, start?: string) => ({
    resourceType: 'Appointment',
    id: `a-${status}`,
    status,
    ...(start ? { start } : {}),
    participant: [],
  });

  it('books proposed, pending and booked appointments only, keyed by id', () => {
    const booked = appointmentsOf({
      appointments: {
        resourceType: 'Bundle',
        entry: ['proposed', 'pending', 'booked', 'cancelled'].map((s) => ({
          resource: appointment(s, '2026-12-03T05:30:00Z'),
        })),
      },
    });
    expect(booked.map((b) => b.key)).toEqual(['a-proposed', 'a-pending', 'a-booked']);
  });

  it('refuses an Appointment without start, naming it', () => {
    expect(() => appointmentsOf({ appointments: [appointment('booked')] })).toThrow(
      expect.objectContaining({
        outcome: expect.objectContaining({
          issue: [expect.objectContaining({ expression: ['context.appointments[0].start'] })],
        }),
      }),
    );
  });
});

describe('visit time and lead', () => {
  it('shows the appointment in the clinic zone and the lead in words', () => {
    expect(visitTime('2026-12-03T05:30:00Z', 'Asia/Dubai')).toBe('2026-12-03 09:30');
    expect(leadText(120)).toBe('2 hours');
    expect(leadText(60)).toBe('1 hour');
    expect(leadText(90)).toBe('90 minutes');
  });

  it('says when the re-check runs only when the appointment is more than one lead away', () => {
    const settings = { leadMinutes: 120, dayStart: '08:00', timeZone: 'Asia/Dubai' };
    const start = '2026-12-03T05:30:00Z';
    const at = Date.parse(start);
    expect(startedAt(start, settings, at - 3 * 3_600_000)).toBe(
      'Eligibility check started for the appointment of 2026-12-03 09:30; re-checked 2 hours before it',
    );
    expect(startedAt(start, settings, at - 3_600_000)).toBe(
      'Eligibility check started for the appointment of 2026-12-03 09:30',
    );
  });
});
