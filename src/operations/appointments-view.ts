/**
 * The front-desk page's appointments of a day (docs/previsit.md, docs/front-desk.md): one row per
 * appointment of the tenant whose start is on that local day (the clinic's timeZone), with its
 * time, the patient's name as the request gave it, the payer, and its state in words, and the
 * path of its latest answer. No patient identifier leaves in a row.
 */
import type {
  CoverageEligibilityRequest,
  CoverageEligibilityResponse,
  Organization,
  Patient,
} from 'fhir/r4.js';
import { dayBounds, localDay, localTime, type PrevisitSettings } from '../checks/previsit.js';
import type { Appointment, Store } from '../checks/store/appointment-store.js';
import type { Tenant } from '../config.js';
import { badRequest } from '../fhir/outcomes.js';
import { CDS_APPOINTMENT_SYSTEM, EHR_APPOINTMENT_SYSTEM } from '../mapping/request/check-input.js';

export interface AppointmentRow {
  id: string;
  /** `HH:MM` in the clinic's zone. */
  time: string;
  name: string;
  payer: string;
  state: string;
  /**
   * Where the appointment came from when the row alone does not say: `EHR schedule` (read from the
   * EHR's FHIR API, docs/ehr-schedule.md), `CDS hook`, or '' (a `$submit` or batch of the EHR).
   */
  source: string;
  /** The latest answer's path (/fhir/CoverageEligibilityResponse/{id}); null when not checked. */
  answer: string | null;
}

/** The source of an appointment by its request identifier's system (check-input.ts). */
const SOURCES: Readonly<Record<string, string>> = {
  [EHR_APPOINTMENT_SYSTEM]: 'EHR schedule',
  [CDS_APPOINTMENT_SYSTEM]: 'CDS hook',
};

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The state in words: the check that is running, if one is (`Checking`); else a pending re-check
 * with its time, when that time is before the start (a re-check at or after the start is no
 * re-check before the visit: never shown); else the latest answer's.
 */
export function stateInWords(
  appointment: Pick<Appointment, 'state' | 'dueAt' | 'startAt'>,
  request: CoverageEligibilityRequest,
  latest: CoverageEligibilityResponse | null,
  timeZone: string,
): string {
  if (appointment.state === 'cancelled' || request.status === 'cancelled') return 'Cancelled';
  if (!latest || latest.outcome === 'queued') return 'Checking';
  if (appointment.state === 'scheduled' && appointment.dueAt < appointment.startAt)
    return `Scheduled re-check at ${localTime(appointment.dueAt, timeZone)}`;
  const notFound = latest.error?.some((e) => e.code.coding?.some((c) => c.code === 'member-not-found'));
  if (notFound) return 'Member not found';
  if (latest.outcome === 'error') return 'Needs an operator';
  return latest.insurance?.some((i) => i.inforce === true) ? 'Eligible' : 'Not eligible';
}

function nameOf(request: CoverageEligibilityRequest): string {
  const patient = request.contained?.find((r): r is Patient => r.resourceType === 'Patient');
  const name = patient?.name?.[0];
  if (!name) return '';
  return name.text ?? [...(name.given ?? []), name.family ?? ''].join(' ').trim();
}

function payerOf(request: CoverageEligibilityRequest, payerCode: string): string {
  const organization = request.contained?.find((r): r is Organization => r.resourceType === 'Organization');
  return request.insurer?.display ?? organization?.name ?? payerCode;
}

/** The appointments of `day` (default: today in the clinic's zone), by start. */
export async function appointmentsView(
  store: Store,
  tenant: Tenant,
  settings: PrevisitSettings,
  day: string | undefined,
  now: number,
): Promise<{ day: string; timeZone: string; rows: AppointmentRow[] }> {
  const { timeZone } = settings;
  if (day !== undefined && !DAY.test(day)) throw badRequest('day is a date YYYY-MM-DD', 'day');
  const chosen = day ?? localDay(now, timeZone);
  const bounds = dayBounds(chosen, timeZone);
  const found = await store.appointments.search(tenant.id, [bounds], 500);
  const rows: (AppointmentRow & { at: number })[] = [];
  for (const appointment of found) {
    const latestId = appointment.recheckId ?? appointment.bookingCheckId;
    const latest = await store.get(tenant.id, latestId);
    const request = appointment.input.request;
    rows.push({
      id: appointment.id,
      at: appointment.startAt,
      time: localTime(appointment.startAt, timeZone),
      name: nameOf(request),
      payer: payerOf(request, appointment.input.payerCode),
      state: stateInWords(appointment, request, latest?.cer ?? null, timeZone),
      source: SOURCES[request.identifier?.[0]?.system ?? ''] ?? '',
      answer: `/fhir/CoverageEligibilityResponse/${latestId}`,
    });
  }
  // Appointments read from the EHR that could not be checked: listed, never left out in silence.
  if (tenant.ehrSchedule)
    for (const entry of await store.ehrSchedule.notChecked(tenant.id, bounds.from, bounds.before))
      rows.push({
        id: entry.appointmentUrl,
        at: entry.startAt,
        time: localTime(entry.startAt, timeZone),
        name: entry.patientName ?? '',
        payer: '',
        state: `Not checked: ${entry.reason ?? ''}`,
        source: 'EHR schedule',
        answer: null,
      });
  rows.sort((a, b) => a.at - b.at);
  return { day: chosen, timeZone, rows: rows.map(({ at: _at, ...row }) => row) };
}
