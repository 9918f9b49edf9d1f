/**
 * What reading the EHR's schedule keeps (docs/ehr-schedule.md), on SQLite and PostgreSQL: a
 * round is taken by one owner while due, its end sets the next; "read now" makes it due (twice is
 * one round); the entries of appointments read are written and found again, the not-checked ones
 * by start; a moved appointment moves its start, its re-check and its request together.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { newCheckOf } from '../../src/checks/service.js';
import type { ScheduleEntry } from '../../src/checks/store/ehr-schedule-store.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import { checkInput } from '../support/requests.js';

const T0 = Date.UTC(2026, 10, 26, 6, 0);
const HOUR = 3_600_000;
const COUNTS = { read: 3, booked: 1, moved: 0, cancelled: 0, notChecked: 1, requests: 4 };

function entry(url: string, rest: Partial<ScheduleEntry> = {}): ScheduleEntry {
  return {
    tenantId: 'tenant-a',
    appointmentUrl: url,
    startAt: T0 + 5 * HOUR,
    status: 'booked',
    requestIds: [],
    reason: null,
    patientName: null,
    updatedAt: T0,
    ...rest,
  };
}

describe.each([sqliteBackend(), postgresBackend()])('EhrScheduleStore on $name', (backend) => {
  const opener = storesOn(backend);
  const open = () => opener.open(backend.create());

  it('gives a due round to one owner, and the next once it ends', async () => {
    const store = await open();
    const rounds = store.ehrSchedule;
    expect(await rounds.claimRound('tenant-a', 'a', T0, T0 + 60_000)).toBe(true);
    expect(await rounds.claimRound('tenant-a', 'b', T0 + 1, T0 + 60_000)).toBe(false);
    await rounds.finishRound(
      'tenant-a',
      'a',
      { at: T0, outcome: 'ok', counts: COUNTS, problem: null },
      T0 + 900_000,
    );
    expect(await rounds.round('tenant-a')).toMatchObject({
      lastAt: T0,
      lastOutcome: 'ok',
      lastCounts: COUNTS,
      nextRunAt: T0 + 900_000,
    });
    expect(await rounds.claimRound('tenant-a', 'b', T0 + 2, T0 + 60_000)).toBe(false);
    await rounds.dueNow('tenant-a', T0 + 3);
    await rounds.dueNow('tenant-a', T0 + 4);
    expect(await rounds.claimRound('tenant-a', 'b', T0 + 5, T0 + 60_000)).toBe(true);
    expect(await rounds.claimRound('tenant-a', 'a', T0 + 6, T0 + 60_000)).toBe(false);
    // A lease run out (a replica gone mid-round) gives the round to another.
    expect(await rounds.claimRound('tenant-a', 'a', T0 + 60_001, T0 + 120_000)).toBe(true);
    expect(await rounds.round('tenant-b')).toBeNull();
  });

  it('writes entries, finds them again, and lists the not checked of a day by start', async () => {
    const store = await open();
    const s = store.ehrSchedule;
    await s.putEntries([
      entry('https://ehr/fhir/Appointment/1', { requestIds: ['r1', 'r2'] }),
      entry('https://ehr/fhir/Appointment/2', {
        reason: 'no active Coverage',
        patientName: 'Layla',
        startAt: T0 + 7 * HOUR,
      }),
      entry('https://ehr/fhir/Appointment/3', { reason: 'no active Coverage', startAt: T0 + 6 * HOUR }),
    ]);
    await s.putEntries([
      entry('https://ehr/fhir/Appointment/1', { requestIds: ['r1', 'r2'], status: 'cancelled' }),
    ]);
    const found = await s.entries('tenant-a', [
      'https://ehr/fhir/Appointment/1',
      'https://ehr/fhir/Appointment/9',
    ]);
    expect(found).toEqual([
      entry('https://ehr/fhir/Appointment/1', { requestIds: ['r1', 'r2'], status: 'cancelled' }),
    ]);
    const listed = await s.notChecked('tenant-a', T0, T0 + 24 * HOUR);
    expect(listed.map((e) => e.appointmentUrl)).toEqual([
      'https://ehr/fhir/Appointment/3',
      'https://ehr/fhir/Appointment/2',
    ]);
    expect(await s.notChecked('tenant-b', T0, T0 + 24 * HOUR)).toEqual([]);
  });

  it('moves an appointment: its start, its re-check and its request, a run re-check pending again', async () => {
    const store = await open();
    const id = randomUUID();
    const start = new Date(T0 + 24 * HOUR).toISOString();
    const given = checkInput({ startedAt: T0, key: 'urn:ehr|moving', servicedPeriod: { start } });
    const check = newCheckOf(given, {
      id,
      tenantId: 'tenant-a',
      now: T0,
      timeoutMs: 60_000,
      baseUrl: 'http://localhost',
    });
    await store.appointments.book(
      {
        id,
        tenantId: 'tenant-a',
        idempotencyKey: given.idempotencyKey,
        input: { ...given, request: { ...given.request, id } },
        bookingCheckId: id,
        startAt: T0 + 24 * HOUR,
        dueAt: T0 + 22 * HOUR,
        now: T0,
      },
      check,
    );
    const later = T0 + 26 * HOUR;
    const request = { ...given.request, id, servicedPeriod: { start: new Date(later).toISOString() } };
    const moved = await store.appointments.move(
      'tenant-a',
      id,
      { startAt: later, dueAt: later - 2 * HOUR, request },
      T0 + 1,
    );
    expect(moved).toMatchObject({ startAt: later, dueAt: later - 2 * HOUR, state: 'scheduled' });
    expect(moved?.input.request.servicedPeriod?.start).toBe(new Date(later).toISOString());
    expect((await store.get('tenant-a', id))?.request.servicedPeriod?.start).toBe(
      new Date(later).toISOString(),
    );
    expect(
      await store.appointments.move('tenant-b', id, { startAt: later, dueAt: later, request }, T0),
    ).toBeNull();
  });
});
