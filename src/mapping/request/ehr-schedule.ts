/**
 * The EHR's schedule as bookings (docs/ehr-schedule.md), pure: the Appointment search a round
 * sends, the appointments it found (with a Patient participant and a start), and each one as the
 * checks of 5.1, one per payer of the patient's active Coverages, by the same parser as the CDS
 * hook (check-input.ts), or the reason it cannot be checked, in words for the page.
 */
import type { Appointment, Patient, Resource } from 'fhir/r4.js';
import { isOperationOutcomeError } from '../../fhir/outcomes.js';
import type { CheckInput } from '../types.js';
import { checkInputs, EHR_APPOINTMENT_SYSTEM, type PatientData } from './check-input.js';
import type { CheckDigitRule } from './patient.js';
import { EMIRATES_ID_PROBLEM_TEXT } from './patient.js';

/** Appointment statuses that cancel a booked one (as the PATCH of a stored request does). */
export const CANCELLING_STATUSES: ReadonlySet<string> = new Set(['cancelled', 'noshow', 'entered-in-error']);
/** Appointment statuses that are booked (a CDS hook books the first three). */
export const BOOKABLE_STATUSES: ReadonlySet<string> = new Set([
  'proposed',
  'pending',
  'booked',
  'arrived',
  'checked-in',
]);

/** The reasons an appointment is not checked, as the page says them after `Not checked: `. */
export const NOT_CHECKED = {
  noIdentifier: 'no Emirates ID or card number',
  checkDigit: 'the Emirates ID fails its check digit',
  noCoverage: 'no active Coverage',
  noPayer: 'the payer cannot be named',
} as const;

/** An appointment of the schedule the adapter may book: a Patient participant and a start. */
export interface ScheduledAppointment {
  id: string;
  /** `<fhirBaseUrl>/Appointment/<id>`: the request identifier's value (with the payer when several). */
  url: string;
  start: string;
  startAt: number;
  status: string;
  patientId: string;
  appointment: Appointment & { start: string };
}

/**
 * The Appointment search of a round: `date=ge<from>&date=lt<before>` (local days of the clinic),
 * `_count=100`, the patients included where the server offers it, and the tenant's own parameters.
 */
export function scheduleSearch(
  from: string,
  before: string,
  extra: readonly [string, string][],
): [string, string][] {
  return [
    ['date', `ge${from}`],
    ['date', `lt${before}`],
    ['_count', '100'],
    ['_include', 'Appointment:patient'],
    ...extra,
  ];
}

/** The Coverage search of one patient: active ones, their payer Organizations included. */
export function coverageSearch(patientId: string): [string, string][] {
  return [
    ['patient', patientId],
    ['status', 'active'],
    ['_include', 'Coverage:payor'],
  ];
}

/** The local id of a `Patient/<id>` reference (relative, or absolute under the base). */
function patientIdOf(reference: string | undefined, base: string): string | undefined {
  if (!reference) return undefined;
  const relative = reference.startsWith(`${base}/`) ? reference.slice(base.length + 1) : reference;
  const match = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(relative);
  return match?.[1];
}

/**
 * The appointments of a search's resources that can be booked or followed (a Patient participant,
 * a start that is a dateTime), and the Patients that came with them.
 */
export function scheduleOf(
  found: readonly { resource: Resource; mode: 'match' | 'include' }[],
  base: string,
): { appointments: ScheduledAppointment[]; patients: Map<string, Patient> } {
  const appointments: ScheduledAppointment[] = [];
  const patients = new Map<string, Patient>();
  for (const { resource, mode } of found) {
    if (resource.resourceType === 'Patient' && resource.id) patients.set(resource.id, resource as Patient);
    if (resource.resourceType !== 'Appointment' || mode !== 'match') continue;
    const appointment = resource as Appointment;
    const startAt = appointment.start ? Date.parse(appointment.start) : NaN;
    const patientId = (appointment.participant ?? [])
      .map((p) => patientIdOf(p.actor?.reference, base))
      .find((id) => id !== undefined);
    if (!appointment.id || !appointment.start || Number.isNaN(startAt) || !patientId) continue;
    appointments.push({
      id: appointment.id,
      url: `${base}/Appointment/${appointment.id}`,
      start: appointment.start,
      startAt,
      status: appointment.status,
      patientId,
      appointment: { ...appointment, start: appointment.start },
    });
  }
  return { appointments, patients };
}

/** The patient's name as the EHR gives it (the page's row), or ''. */
export function patientNameOf(patient: Patient | undefined): string {
  const name = patient?.name?.[0];
  if (!name) return '';
  return name.text ?? [...(name.given ?? []), name.family ?? ''].join(' ').trim();
}

/** What a booking of an appointment reads: the clinic's rules and the clock. */
export interface BookingOptions {
  practiceId: string;
  checkDigit: CheckDigitRule;
  now: number;
  fhirBaseUrl: string;
}

/**
 * An appointment as the checks to book (one per payer of the active Coverages, identifier
 * `ehr-appointment|<url>`, `|<url>/<payer>` when there are several), or why it cannot be checked.
 */
export async function bookingsOf(
  scheduled: ScheduledAppointment,
  data: PatientData,
  options: BookingOptions,
): Promise<{ inputs: CheckInput[] } | { notChecked: string }> {
  if (data.coverages.length === 0) return { notChecked: NOT_CHECKED.noCoverage };
  const entries = await checkInputs(data, {
    practiceId: options.practiceId,
    checkDigit: options.checkDigit,
    now: options.now,
    fhirServer: options.fhirBaseUrl,
    appointment: scheduled.appointment,
    identifierSystem: EHR_APPOINTMENT_SYSTEM,
    identifierValue: (payer) => (payer === null ? scheduled.url : `${scheduled.url}/${payer}`),
  });
  const inputs = entries.flatMap((e) => ('input' in e ? [e.input] : []));
  if (inputs.length > 0) return { inputs };
  const failed = entries.find((e) => 'error' in e);
  return {
    notChecked: failed && 'error' in failed ? notCheckedReason(failed.error) : NOT_CHECKED.noCoverage,
  };
}

/** The reason in words of a refused check ($submit's 422), never quoting patient data. */
export function notCheckedReason(error: unknown): string {
  if (!isOperationOutcomeError(error)) throw error;
  const issue = error.outcome.issue[0];
  const text = issue?.details?.text ?? '';
  if (text === EMIRATES_ID_PROBLEM_TEXT['check-digit']) return NOT_CHECKED.checkDigit;
  if (text.startsWith('No Emirates ID or insurance card number')) return NOT_CHECKED.noIdentifier;
  if (text.startsWith('The insurance company has no payer code')) return NOT_CHECKED.noPayer;
  const expression = issue?.expression?.[0] ?? '';
  if (/insurer|payor/.test(expression)) return NOT_CHECKED.noPayer;
  // Any other refusal: its own text (the parser's texts never repeat a value).
  return text.replace(/\.$/, '') || 'the record cannot be read';
}
