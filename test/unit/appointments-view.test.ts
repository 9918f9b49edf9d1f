/**
 * The state in words of an appointment row (src/operations/appointments-view.ts, issue 35): the
 * check that is running, if one is; a pending re-check with its time only when that time is before
 * the start; else the latest answer's.
 */
import type { CoverageEligibilityRequest, CoverageEligibilityResponse } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import type { AppointmentState } from '../../src/checks/store/appointment-store.js';
import { stateInWords } from '../../src/operations/appointments-view.js';

const START = Date.UTC(2026, 10, 22, 15, 23); // 19:23 in Dubai
const MINUTE = 60_000;
const request: CoverageEligibilityRequest = {
  resourceType: 'CoverageEligibilityRequest',
  status: 'active',
  purpose: ['benefits'],
  patient: { reference: '#p' },
  created: '2026-11-22',
  insurer: { display: 'Daman' },
};
const cer = (
  outcome: CoverageEligibilityResponse['outcome'],
  inforce?: boolean,
): CoverageEligibilityResponse => ({
  resourceType: 'CoverageEligibilityResponse',
  status: 'active',
  purpose: ['benefits'],
  patient: { reference: '#p' },
  created: '2026-11-22T14:00:00Z',
  request: { reference: 'CoverageEligibilityRequest/x' },
  outcome,
  insurer: { display: 'Daman' },
  ...(inforce === undefined ? {} : { insurance: [{ coverage: { reference: '#c' }, inforce }] }),
});

describe('the state of an appointment row', () => {
  it.each<[string, AppointmentState, number, CoverageEligibilityResponse | null, string]>([
    ['booked inside the lead, its booking check running', 'scheduled', START, cer('queued'), 'Checking'],
    [
      'booking check running, re-check due before the start',
      'scheduled',
      START - 30 * MINUTE,
      cer('queued'),
      'Checking',
    ],
    ['no answer yet', 'scheduled', START - 120 * MINUTE, null, 'Checking'],
    [
      'answered, re-check due before the start',
      'scheduled',
      START - 120 * MINUTE,
      cer('complete', true),
      'Scheduled re-check at 17:23',
    ],
    [
      'answered, a re-check time at the start is never shown',
      'scheduled',
      START,
      cer('complete', true),
      'Eligible',
    ],
    [
      'answered, a re-check time after the start is never shown',
      'scheduled',
      START + 5 * MINUTE,
      cer('complete', false),
      'Not eligible',
    ],
    ['the re-check running', 'rechecked', START - 120 * MINUTE, cer('queued'), 'Checking'],
    ['cancelled while its check runs', 'cancelled', START, cer('queued'), 'Cancelled'],
  ])('%s: %s', (_name, state, dueAt, latest, words) => {
    expect(stateInWords({ state, dueAt, startAt: START }, request, latest, 'Asia/Dubai')).toBe(words);
  });
});
