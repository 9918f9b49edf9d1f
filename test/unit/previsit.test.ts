/**
 * The pre-visit re-check rule as a pure function (src/checks/previsit.ts, docs/previsit.md): when
 * a request is an appointment and when it starts (date and dateTime, across zones), when its
 * re-check is due, the skip rule, waiting for a running booking check, and cancel.
 */
import { describe, expect, it } from 'vitest';
import {
  appointmentStart,
  dayBounds,
  decideRecheck,
  localDay,
  previsitSettings,
  recheckDueAt,
  servicedProblem,
  servicedStart,
} from '../../src/checks/previsit.js';
import type { RecheckFacts } from '../../src/checks/previsit.js';

const DUBAI = previsitSettings({}, 120);
const MIN = 60_000;
const HOUR = 60 * MIN;
/** 2026-11-26 10:00 in Dubai (UTC+4). */
const NOW = Date.UTC(2026, 10, 26, 6, 0);

describe('the start of an appointment', () => {
  it.each([
    [
      'servicedDate in Dubai starts at 08:00 local (04:00 UTC)',
      {},
      { servicedDate: '2026-11-27' },
      '2026-11-27T04:00:00.000Z',
    ],
    [
      'servicedDate in London (winter, UTC+0) at its dayStart 09:30',
      { timeZone: 'Europe/London', previsitDayStart: '09:30' },
      { servicedDate: '2026-11-27' },
      '2026-11-27T09:30:00.000Z',
    ],
    [
      'servicedDate in New York in summer (UTC-4)',
      { timeZone: 'America/New_York' },
      { servicedDate: '2026-07-01' },
      '2026-07-01T12:00:00.000Z',
    ],
    [
      'servicedDate in New York in winter (UTC-5)',
      { timeZone: 'America/New_York' },
      { servicedDate: '2026-12-01' },
      '2026-12-01T13:00:00.000Z',
    ],
    [
      'servicedPeriod.start with its zone',
      {},
      { servicedPeriod: { start: '2026-11-27T09:15:00+04:00' } },
      '2026-11-27T05:15:00.000Z',
    ],
    [
      'servicedPeriod.start in UTC whatever the clinic zone',
      { timeZone: 'Asia/Tokyo' },
      { servicedPeriod: { start: '2026-11-27T09:15:00Z' } },
      '2026-11-27T09:15:00.000Z',
    ],
    [
      'a date-only servicedPeriod.start is a day',
      {},
      { servicedPeriod: { start: '2026-11-28' } },
      '2026-11-28T04:00:00.000Z',
    ],
  ])('%s', (_name, tenant, request, iso) => {
    const start = servicedStart(request, previsitSettings(tenant, 120));
    expect(start && new Date(start.at).toISOString()).toBe(iso);
  });

  it('reads no start from a partial date or a period without a start', () => {
    expect(servicedStart({ servicedDate: '2026-11' }, DUBAI)).toBeNull();
    expect(servicedStart({ servicedPeriod: { end: '2026-11-27T10:00:00Z' } }, DUBAI)).toBeNull();
    expect(servicedStart({}, DUBAI)).toBeNull();
  });

  it('a servicedDate of today in the clinic zone is never an appointment, tomorrow is', () => {
    expect(appointmentStart({ servicedDate: '2026-11-26' }, DUBAI, NOW)).toBeNull();
    expect(appointmentStart({ servicedDate: '2026-11-27' }, DUBAI, NOW)).not.toBeNull();
  });

  it('the clinic zone decides which day is today', () => {
    // 22:00 UTC on the 26th is already the 27th in Dubai, still the 26th in New York.
    const late = Date.UTC(2026, 10, 26, 22, 0);
    expect(appointmentStart({ servicedDate: '2026-11-27' }, DUBAI, late)).toBeNull();
    const ny = previsitSettings({ timeZone: 'America/New_York' }, 120);
    expect(appointmentStart({ servicedDate: '2026-11-27' }, ny, late)).not.toBeNull();
  });

  it('a dateTime in the past or now is no appointment; a minute ahead is one', () => {
    expect(appointmentStart({ servicedPeriod: { start: '2026-11-26T06:00:00Z' } }, DUBAI, NOW)).toBeNull();
    expect(appointmentStart({ servicedPeriod: { start: '2026-11-26T06:01:00Z' } }, DUBAI, NOW)?.at).toBe(
      NOW + MIN,
    );
  });

  it('the due time is start - lead, decimals allowed', () => {
    const start = Date.UTC(2026, 10, 27, 5, 0);
    expect(recheckDueAt(start, DUBAI)).toBe(start - 2 * HOUR);
    expect(recheckDueAt(start, previsitSettings({ previsitLeadMinutes: 0.5 }, 120))).toBe(start - 30_000);
    expect(recheckDueAt(start, previsitSettings({}, 0))).toBe(start);
  });

  it('a day in a zone is its local midnight to the next', () => {
    const { from, before } = dayBounds('2026-11-27', 'Asia/Dubai');
    expect(new Date(from).toISOString()).toBe('2026-11-26T20:00:00.000Z');
    expect(before - from).toBe(24 * HOUR);
    expect(localDay(from, 'Asia/Dubai')).toBe('2026-11-27');
    // A daylight-saving day is 23 hours long.
    const spring = dayBounds('2026-03-08', 'America/New_York');
    expect(spring.before - spring.from).toBe(23 * HOUR);
  });
});

describe('serviced[x] refused', () => {
  it('names servicedPeriod.end when it is before the start', () => {
    const problem = servicedProblem(
      { servicedPeriod: { start: '2026-11-27T09:00:00+04:00', end: '2026-11-27T08:00:00+04:00' } },
      DUBAI,
      NOW,
    );
    expect(problem?.expression).toBe('CoverageEligibilityRequest.servicedPeriod.end');
  });

  it('names the start of an appointment more than 366 days ahead', () => {
    expect(servicedProblem({ servicedDate: '2027-12-31' }, DUBAI, NOW)?.expression).toBe(
      'CoverageEligibilityRequest.servicedDate',
    );
    expect(servicedProblem({ servicedDate: '2027-11-25' }, DUBAI, NOW)).toBeNull();
  });
});

describe('the re-check decision', () => {
  const start = NOW + 24 * HOUR;
  const facts = (over: Partial<RecheckFacts> = {}): RecheckFacts => ({
    now: start - 2 * HOUR,
    dueAt: start - 2 * HOUR,
    startAt: start,
    cancelled: false,
    running: false,
    reusableAnsweredAt: null,
    reuseWindowMs: 240 * MIN,
    retryMs: 5000,
    ...over,
  });

  it('runs when it is due and no answer is reusable at the start', () => {
    expect(decideRecheck(facts())).toEqual({ action: 'run' });
  });

  it('waits until it is due', () => {
    expect(decideRecheck(facts({ now: start - 3 * HOUR }))).toEqual({
      action: 'wait',
      until: start - 2 * HOUR,
    });
  });

  it('is skipped when an answer is still reusable at the start', () => {
    expect(decideRecheck(facts({ reusableAnsweredAt: start - 3 * HOUR }))).toEqual({ action: 'skip' });
  });

  it('runs when the reusable answer expires before the start', () => {
    expect(decideRecheck(facts({ reusableAnsweredAt: start - 5 * HOUR }))).toEqual({ action: 'run' });
  });

  it('runs when reuse is off, whatever answer exists', () => {
    expect(decideRecheck(facts({ reusableAnsweredAt: start - MIN, reuseWindowMs: 0 }))).toEqual({
      action: 'run',
    });
  });

  it('does not double a booking check still running at start - lead', () => {
    const now = start - 2 * HOUR;
    expect(decideRecheck(facts({ now, running: true }))).toEqual({ action: 'wait', until: now + 5000 });
  });

  it('booked less than one lead ahead: waits for the booking check, then skips on its answer', () => {
    const booked = start - 30 * MIN;
    expect(decideRecheck(facts({ now: booked, running: true }))).toEqual({
      action: 'wait',
      until: booked + 5000,
    });
    expect(decideRecheck(facts({ now: booked + 3 * MIN, reusableAnsweredAt: booked + 2 * MIN }))).toEqual({
      action: 'skip',
    });
  });

  it('never runs a cancelled appointment, due or not', () => {
    expect(decideRecheck(facts({ cancelled: true }))).toEqual({ action: 'cancelled' });
    expect(decideRecheck(facts({ cancelled: true, now: start - 9 * HOUR }))).toEqual({ action: 'cancelled' });
  });
});
