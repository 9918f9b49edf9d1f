/**
 * One round of reading a clinic's schedule from its EHR (docs/ehr-schedule.md): the appointments
 * of today and the next `daysAhead` days, every page; for each one new (or still not checked) its
 * Patient and active Coverages, read once per patient per round, booked as a pre-visit check
 * through the same path as `$submit` (CheckService.accept: maxInFlight, payer guards, every rule of
 * a check), one per payer; a moved start moves the stored start and its re-check; a cancelled,
 * no-show or entered-in-error appointment cancels as the PATCH of a stored request does. An
 * appointment seen before, unchanged, costs no read and no write.
 */
import type { EhrSchedule, Tenant } from '../config.js';
import type { EhrClient } from '../ehr/client.js';
import { isOperationOutcomeError } from '../fhir/outcomes.js';
import type { Logger } from '../log.js';
import type { PatientData } from '../mapping/request/check-input.js';
import { eachAtMost, readPatient, READ_CONCURRENCY } from './ehr-patients.js';
import {
  BOOKABLE_STATUSES,
  bookingsOf,
  CANCELLING_STATUSES,
  notCheckedReason,
  patientNameOf,
  scheduleOf,
  scheduleSearch,
  type ScheduledAppointment,
} from '../mapping/request/ehr-schedule.js';
import { localDay, recheckDueAt, servicedStart, type PrevisitEvent } from './previsit.js';
import type { CheckService } from './service.js';
import type { Store } from './store/appointment-store.js';
import type { RoundCounts, ScheduleEntry } from './store/ehr-schedule-store.js';

/** What a round counts, appointment by appointment (metrics). */
export type ScheduleEvent = 'booked' | 'moved' | 'cancelled' | 'not checked';

export interface RoundContext {
  tenant: Tenant;
  settings: EhrSchedule;
  client: EhrClient;
  checks: CheckService;
  store: Store;
  logger: Logger;
  now: number;
  onEvent?: (event: ScheduleEvent) => void;
  onPrevisit?: (event: PrevisitEvent) => void;
}

/** Reads the schedule once and follows it; throws an EhrError when the EHR fails the round. */
export async function readSchedule(context: RoundContext): Promise<Omit<RoundCounts, 'requests'>> {
  const { tenant, settings, client, store, now } = context;
  const timeZone = context.checks.previsitSettings(tenant).timeZone;
  const from = localDay(now, timeZone);
  const before = localDay(now + settings.daysAhead * 86_400_000, timeZone);
  const found = await client.search('Appointment', scheduleSearch(from, before, settings.search));
  const { appointments, patients } = scheduleOf(found, settings.fhirBaseUrl);
  const known = new Map(
    (
      await store.ehrSchedule.entries(
        tenant.id,
        appointments.map((a) => a.url),
      )
    ).map((e) => [e.appointmentUrl, e]),
  );
  const counts = { read: appointments.length, booked: 0, moved: 0, cancelled: 0, notChecked: 0 };
  const patientData = new Map<string, Promise<PatientData | { unreadable: string }>>();
  const dataOf = (id: string) => {
    let data = patientData.get(id);
    if (!data) {
      data = readPatient(client, id, patients.get(id), settings.fhirBaseUrl);
      patientData.set(id, data);
    }
    return data;
  };
  // The patients of the appointments to book are read a few at a time ahead of the bookings: a
  // round of many new appointments waits on the EHR's round trips, not on the adapter.
  const toRead = appointments
    .filter((a) => BOOKABLE_STATUSES.has(a.status) && !known.get(a.url)?.requestIds.length)
    .map((a) => a.patientId);
  await eachAtMost(READ_CONCURRENCY, [...new Set(toRead)], (id) =>
    dataOf(id).then(
      () => undefined,
      // Read again (and thrown) where the appointment needs it.
      () => undefined,
    ),
  );
  const written: ScheduleEntry[] = [];
  const entryOf = (scheduled: ScheduledAppointment, rest: Partial<ScheduleEntry>): ScheduleEntry => ({
    tenantId: tenant.id,
    appointmentUrl: scheduled.url,
    startAt: scheduled.startAt,
    status: scheduled.status,
    requestIds: [],
    reason: null,
    patientName: null,
    updatedAt: now,
    ...rest,
  });
  for (const scheduled of appointments) {
    const entry = known.get(scheduled.url);
    const booked = entry !== undefined && entry.requestIds.length > 0;
    if (CANCELLING_STATUSES.has(scheduled.status)) {
      if (!entry || CANCELLING_STATUSES.has(entry.status)) continue;
      if (booked) {
        await cancel(context, entry.requestIds);
        counts.cancelled += 1;
        context.onEvent?.('cancelled');
      }
      written.push(entryOf(scheduled, { requestIds: entry.requestIds }));
      continue;
    }
    if (!BOOKABLE_STATUSES.has(scheduled.status)) continue;
    if (booked) {
      if (entry.startAt === scheduled.startAt || CANCELLING_STATUSES.has(entry.status)) continue;
      await move(context, entry.requestIds, scheduled);
      counts.moved += 1;
      context.onEvent?.('moved');
      written.push(entryOf(scheduled, { requestIds: entry.requestIds }));
      continue;
    }
    const data = await dataOf(scheduled.patientId);
    const result =
      'unreadable' in data
        ? { notChecked: data.unreadable }
        : await book(context, scheduled, data).catch((error: unknown) => ({
            notChecked: notCheckedReason(error),
          }));
    if ('requestIds' in result) {
      counts.booked += 1;
      context.onEvent?.('booked');
      written.push(entryOf(scheduled, { requestIds: result.requestIds }));
      continue;
    }
    counts.notChecked += 1;
    // Listed once: a row already saying the same about the same time is not written again.
    if (entry?.reason === result.notChecked && entry.startAt === scheduled.startAt) continue;
    context.onEvent?.('not checked');
    const name = 'unreadable' in data ? '' : patientNameOf(data.patient);
    written.push(entryOf(scheduled, { reason: result.notChecked, patientName: name }));
  }
  await store.ehrSchedule.putEntries(written);
  return counts;
}

/** Books an appointment's checks (one per payer) through the path of `$submit`. */
async function book(
  context: RoundContext,
  scheduled: ScheduledAppointment,
  data: PatientData,
): Promise<{ requestIds: string[] } | { notChecked: string }> {
  const { tenant, settings, checks, now } = context;
  const bookings = await bookingsOf(scheduled, data, {
    practiceId: tenant.practiceId,
    checkDigit: tenant.emiratesIdCheckDigit ?? 'refuse',
    now,
    fhirBaseUrl: settings.fhirBaseUrl,
  });
  if ('notChecked' in bookings) return bookings;
  const requestIds: string[] = [];
  for (const input of bookings.inputs) {
    try {
      // An appointment's check is background work (docs/queue.md), even one that starts now.
      const accepted = await checks.accept(tenant, input, {}, 'appointment');
      // A start already past is checked now, as any request: its check is the request.
      requestIds.push(accepted.appointment?.id ?? accepted.check.request.id ?? accepted.check.id);
    } catch (error) {
      if (!isOperationOutcomeError(error) || requestIds.length > 0) throw error;
      return { notChecked: notCheckedReason(error) };
    }
  }
  return { requestIds };
}

/** Cancels the stored requests of an appointment, as PATCH status = cancelled does. */
async function cancel(context: RoundContext, requestIds: readonly string[]): Promise<void> {
  const { tenant, store, now } = context;
  for (const id of requestIds) {
    const stored = await store.appointments.get(tenant.id, id);
    const request = stored?.input.request ?? (await store.get(tenant.id, id))?.request;
    if (!request || request.status === 'cancelled') continue;
    const result = await store.appointments.cancel(tenant.id, id, { ...request, status: 'cancelled' }, now);
    if (result?.previous === 'scheduled')
      context.onPrevisit?.({ type: 'recheck-cancelled', tenantId: tenant.id });
  }
}

/** Moves the stored requests of an appointment to its new start, and their re-checks. */
async function move(
  context: RoundContext,
  requestIds: readonly string[],
  scheduled: ScheduledAppointment,
): Promise<void> {
  const { tenant, store, checks, now } = context;
  const settings = checks.previsitSettings(tenant);
  for (const id of requestIds) {
    const stored = await store.appointments.get(tenant.id, id);
    if (!stored) continue;
    const { end } = scheduled.appointment;
    const request = {
      ...stored.input.request,
      servicedPeriod: { start: scheduled.start, ...(end ? { end } : {}) },
    };
    const start = servicedStart(request, settings);
    if (!start) continue;
    await store.appointments.move(
      tenant.id,
      id,
      { startAt: start.at, dueAt: recheckDueAt(start.at, settings), request },
      now,
    );
  }
}
