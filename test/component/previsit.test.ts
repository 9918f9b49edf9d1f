/**
 * Pre-visit checks (docs/previsit.md) through the real HTTP API against the sandbox, with an
 * injected clock that the test moves forward (no test sleeps for hours): the booking check runs
 * at once; the re-check at start - lead is a new check of the same stored request, notified and
 * reused at check-in; it is skipped when the booking answer is still reusable at the start, not
 * doubled while the booking check runs, never sent after a cancel; bad serviced[x] is a 422.
 */
import type { Bundle, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import type { RequestOptions } from '../support/requests.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const counts = { create: 0, poll: 0 };
/** The service's clock runs with real time, plus this offset the tests move forward. */
let offset = 0;
const now = () => Date.now() + offset;
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    reuseWindowMinutes: 240,
    overrides: { upstream: countingUpstream(counts), now },
  });
});
afterAll(async () => {
  await h.stop();
});

/** Moves the service's clock forward and lets the re-check worker look at once. */
function advance(ms: number): void {
  offset += ms;
  h.server.previsit.wake();
}

let patients = 0;
/** A fresh patient, so reuse between tests never mixes them up. */
function patient(): string {
  patients += 1;
  return `784-1985-${String(7_000_000 + patients)}-${patients % 10}`;
}

async function book(options: RequestOptions) {
  const res = await postSubmit(h.url, h.auth, options, { Prefer: 'wait=10' });
  expectValidFhir(res.body);
  return res;
}

/** The appointment stored for a booking answer's request. */
async function appointmentOf(requestId: string) {
  const appointment = await h.server.store.appointments.get('clinic-a', requestId);
  if (!appointment) throw new Error(`no appointment ${requestId}`);
  return appointment;
}

function requestIdOf(cer: CoverageEligibilityResponse): string {
  return (cer.request?.reference ?? '').split('/')[1] ?? '';
}

describe('a booked appointment', () => {
  it('is checked at booking, re-checked at start - lead as a new check of the same request, and answered by reuse at check-in', async () => {
    const id = patient();
    const start = now() + 24 * HOUR;
    const before = counts.create;
    const booked = await book({ emiratesId: id, servicedPeriod: { start: new Date(start).toISOString() } });
    expect(booked.status).toBe(200);
    const bookingCer = booked.body as CoverageEligibilityResponse;
    expect(bookingCer.outcome).toBe('complete');
    const requestId = requestIdOf(bookingCer);
    const appointment = await appointmentOf(requestId);
    expect(appointment).toMatchObject({ state: 'scheduled', bookingCheckId: bookingCer.id, startAt: start });
    expect(appointment.dueAt).toBe(start - 2 * HOUR);
    expect(counts.create).toBe(before + 1);

    // A minute before it is due: nothing.
    advance(22 * HOUR - MIN);
    await new Promise((r) => setTimeout(r, 300));
    expect((await appointmentOf(requestId)).state).toBe('scheduled');

    advance(MIN);
    const rechecked = await until(
      async () => {
        const a = await appointmentOf(requestId);
        return a.state === 'rechecked' ? a : undefined;
      },
      10_000,
      'the re-check',
    );
    const recheckId = rechecked.recheckId ?? '';
    expect(recheckId).not.toBe(bookingCer.id);
    const recheck = await until(async () => {
      const res = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${recheckId}`).set(h.auth);
      const cer = res.body as CoverageEligibilityResponse;
      return cer.outcome === 'complete' ? cer : undefined;
    });
    expectValidFhir(recheck);
    expect(recheck.request?.reference).toBe(`CoverageEligibilityRequest/${requestId}`);
    // `created`: when it ran (the service's clock), 22 hours after the booking answer.
    expect(Date.parse(recheck.created) - Date.parse(bookingCer.created)).toBeGreaterThan(22 * HOUR - MIN);
    expect(counts.create).toBe(before + 2);
    // The booking CER stays as it was.
    const booking = await request(h.url)
      .get(`/fhir/CoverageEligibilityResponse/${bookingCer.id}`)
      .set(h.auth);
    expect((booking.body as CoverageEligibilityResponse).meta?.versionId).toBe(bookingCer.meta?.versionId);

    // Check-in at the start: the EHR's fresh $submit is answered by reuse of the re-check.
    advance(2 * HOUR);
    const checkIn = await postSubmit(h.url, h.auth, { emiratesId: id });
    expect(checkIn.status).toBe(200);
    expect((checkIn.body as CoverageEligibilityResponse).id).toBe(recheckId);
    expect(checkIn.headers.age).toBeDefined();
    expect(counts.create).toBe(before + 2);

    const metrics = (await request(h.url).get('/metrics')).text;
    expect(metrics).toMatch(/previsit_rechecks_total\{tenant="clinic-a",result="run"\} [1-9]/);
    expect(metrics).toMatch(/previsit_checkins_reused_total\{tenant="clinic-a"\} [1-9]/);
  });

  it('is not re-checked when the booking answer is still reusable at the start (one portal session)', async () => {
    const id = patient();
    const start = now() + 3 * HOUR;
    const before = counts.create;
    const booked = await book({ emiratesId: id, servicedPeriod: { start: new Date(start).toISOString() } });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    advance(HOUR);
    await until(
      async () => ((await appointmentOf(requestId)).state === 'skipped' ? true : undefined),
      10_000,
    );
    expect(counts.create).toBe(before + 1);
    expect((await request(h.url).get('/metrics')).text).toMatch(
      /previsit_rechecks_total\{tenant="clinic-a",result="skipped"\} [1-9]/,
    );
  });

  it('booked less than one lead ahead: the booking check is the pre-visit check, never doubled while it runs', async () => {
    const id = patient();
    const start = now() + 30 * MIN;
    const before = counts.create;
    // Answered queued at once: the booking check is still running when the re-check is due.
    const booked = await postSubmit(
      h.url,
      h.auth,
      { emiratesId: id, servicedPeriod: { start: new Date(start).toISOString() } },
      { Prefer: 'wait=0' },
    );
    const cer = booked.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('queued');
    const requestId = requestIdOf(cer);
    h.server.previsit.wake();
    await until(
      async () => ((await appointmentOf(requestId)).state === 'skipped' ? true : undefined),
      15_000,
    );
    expect(counts.create).toBe(before + 1);
  });

  it('a servicedDate of a later day is an appointment at the clinic day start; today is none', async () => {
    const tomorrow = new Date(now() + 48 * HOUR).toISOString().slice(0, 10);
    const booked = await book({ emiratesId: patient(), servicedDate: tomorrow });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    const appointment = await appointmentOf(requestId);
    // 08:00 in Asia/Dubai is 04:00 UTC.
    expect(new Date(appointment.startAt).toISOString()).toBe(`${tomorrow}T04:00:00.000Z`);
    const today = new Date(now() + 4 * HOUR).toISOString().slice(0, 10);
    const plain = await book({ emiratesId: patient(), servicedDate: today });
    expect(
      await h.server.store.appointments.get(
        'clinic-a',
        requestIdOf(plain.body as CoverageEligibilityResponse),
      ),
    ).toBeNull();
  });

  it('a batch entry books an appointment too', async () => {
    const start = now() + 30 * HOUR;
    const res = await request(h.url)
      .post('/fhir')
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send({
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
            resource: eligibilityRequest({
              emiratesId: patient(),
              servicedPeriod: { start: new Date(start).toISOString() },
            }),
          },
        ],
      });
    expect(res.status).toBe(200);
    const entry = (res.body as Bundle).entry?.[0];
    const cer = entry?.resource as CoverageEligibilityResponse;
    expect((await appointmentOf(requestIdOf(cer))).startAt).toBe(start);
  });

  it('the same identifier again returns the appointment booked, never a second one', async () => {
    const start = now() + 26 * HOUR;
    const options = {
      emiratesId: patient(),
      identifier: `appt-${Date.now()}`,
      servicedPeriod: { start: new Date(start).toISOString() },
    };
    const first = await book(options);
    const again = await book(options);
    expect(again.headers.location).toBe(first.headers.location);
  });

  it('a cancelled appointment is never re-checked', async () => {
    const start = now() + 24 * HOUR;
    const booked = await book({
      emiratesId: patient(),
      servicedPeriod: { start: new Date(start).toISOString() },
    });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    const appointment = await appointmentOf(requestId);
    await h.server.store.appointments.cancel(
      'clinic-a',
      requestId,
      { ...appointment.input.request, status: 'cancelled' },
      now(),
    );
    const before = counts.create;
    advance(23 * HOUR);
    await new Promise((r) => setTimeout(r, 500));
    expect((await appointmentOf(requestId)).state).toBe('cancelled');
    expect(counts.create).toBe(before);
  });
});

describe('bad serviced[x]', () => {
  it.each([
    [
      'a period that ends before it starts',
      { servicedPeriod: { start: '2030-01-02T10:00:00Z', end: '2030-01-02T09:00:00Z' } },
      'CoverageEligibilityRequest.servicedPeriod.end',
    ],
    [
      'an appointment more than 366 days ahead',
      { servicedDate: '2099-01-01' },
      'CoverageEligibilityRequest.servicedDate',
    ],
  ])('%s is a 422 naming the element, and nothing is stored', async (_name, serviced, expression) => {
    const before = counts.create;
    const res = await postSubmit(h.url, h.auth, { emiratesId: patient(), ...serviced });
    expect(res.status).toBe(422);
    const outcome = res.body as OperationOutcome;
    expectValidFhir(outcome);
    expect(outcome.issue[0]?.expression).toEqual([expression]);
    expect(counts.create).toBe(before);
  });
});
