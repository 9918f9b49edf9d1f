/**
 * The CDS Hooks 2.0 request body (https://cds-hooks.hl7.org/2.0/#http-request): `hook`,
 * `hookInstance`, `fhirServer`, `fhirAuthorization`, `context`, `prefetch`; and the contexts of
 * the two hooks served (https://cds-hooks.org/hooks/appointment-book/,
 * https://cds-hooks.org/hooks/patient-view/). Anything that is not such a request is a 400
 * OperationOutcome whose expression names the element (its JSON path in the body).
 */
import type { Appointment } from 'fhir/r4.js';
import { z } from 'zod';
import { badRequest } from '../../fhir/outcomes.js';

/** At most this many appointments in one appointment-book call (each is a check). */
export const MAX_APPOINTMENTS = 50;

/** Appointment statuses booked as a check (the others, cancelled or noshow, are not). */
const BOOKABLE = new Set(['proposed', 'pending', 'booked']);

const fhirId = z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/, 'must be a FHIR id');

const requestSchema = z.object({
  hook: z.string().min(1),
  // A UUID in the spec; any opaque token is taken (it is only part of an identifier value).
  hookInstance: z.string().regex(/^[A-Za-z0-9\-._:]{1,128}$/, 'must be a UUID'),
  fhirServer: z.string().url().optional(),
  // "fhirAuthorization ... SHALL" come with a fhirServer (cds-r-1); its token is never logged.
  fhirAuthorization: z
    .object({ access_token: z.string().min(1), token_type: z.string().optional() })
    .passthrough()
    .nullish(),
  context: z.object({ patientId: fhirId, userId: z.string().optional() }).passthrough(),
  prefetch: z.record(z.string(), z.unknown()).nullish(),
});

/** A checked CDS Hooks request. */
export interface CdsRequest {
  hook: string;
  hookInstance: string;
  fhirServer?: string;
  accessToken?: string;
  patientId: string;
  context: Record<string, unknown>;
  /** Prefetched values by key; a null value (the client could not fetch it) counts as missing. */
  prefetch: Record<string, unknown>;
}

/** Reads the body of a call to the service of `hook`; throws a 400 OperationOutcomeError. */
export function readCdsRequest(body: unknown, hook: string): CdsRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badRequest(
      'The body is not a CDS Hooks request (a JSON object with hook, hookInstance and context)',
    );
  const parsed = requestSchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join('.') || 'hook';
    throw badRequest(`Not a CDS Hooks request: ${path} ${issue?.message ?? 'is not valid'}`, path);
  }
  const request = parsed.data;
  if (request.hook !== hook)
    throw badRequest(`This service answers the hook ${hook}, not ${request.hook.slice(0, 64)}`, 'hook');
  if (request.fhirAuthorization && !request.fhirServer)
    throw badRequest('fhirAuthorization is given without a fhirServer', 'fhirServer');
  return {
    hook: request.hook,
    hookInstance: request.hookInstance,
    ...(request.fhirServer ? { fhirServer: request.fhirServer } : {}),
    ...(request.fhirAuthorization ? { accessToken: request.fhirAuthorization.access_token } : {}),
    patientId: request.context.patientId,
    context: request.context,
    prefetch: Object.fromEntries(
      Object.entries(request.prefetch ?? {}).filter(([, value]) => value !== null && value !== undefined),
    ),
  };
}

/** One appointment of an appointment-book call: its Appointment and the element path in the body. */
export interface BookedAppointment {
  appointment: Appointment & { start: string };
  path: string;
  /** The Appointment's id, or its position (1-based) when it has none. */
  key: string;
}

/**
 * `context.appointments`: a Bundle of Appointments (the hook's definition; a plain array is taken
 * too). More than MAX_APPOINTMENTS, an entry that is not an Appointment, or one without `start`:
 * 400. Appointments not `proposed`, `pending` or `booked` are left out (nothing to check).
 */
export function appointmentsOf(context: Record<string, unknown>): BookedAppointment[] {
  const given = context.appointments;
  const bundle = given as { resourceType?: unknown; entry?: unknown } | undefined;
  let entries: { value: unknown; path: string }[];
  if (Array.isArray(given)) {
    entries = (given as unknown[]).map((value, index) => ({ value, path: `context.appointments[${index}]` }));
  } else if (
    bundle?.resourceType === 'Bundle' &&
    (bundle.entry === undefined || Array.isArray(bundle.entry))
  ) {
    entries = ((bundle.entry ?? []) as unknown[]).map((entry, index) => ({
      value: (entry as { resource?: unknown } | null)?.resource,
      path: `context.appointments.entry[${index}].resource`,
    }));
  } else {
    throw badRequest(
      'context.appointments must be a Bundle of Appointment resources',
      'context.appointments',
    );
  }
  if (entries.length > MAX_APPOINTMENTS)
    throw badRequest(
      `At most ${MAX_APPOINTMENTS} appointments can be booked in one call (${entries.length} were sent)`,
      'context.appointments',
    );
  const booked: BookedAppointment[] = [];
  for (const [index, { value, path }] of entries.entries()) {
    const appointment = value as Partial<Appointment> | null | undefined;
    if (appointment?.resourceType !== 'Appointment')
      throw badRequest('Each entry of context.appointments must be an Appointment', path);
    if (typeof appointment.start !== 'string' || Number.isNaN(Date.parse(appointment.start)))
      throw badRequest(
        'The Appointment has no start (an instant), so it cannot be checked for',
        `${path}.start`,
      );
    if (appointment.id !== undefined && !fhirId.safeParse(appointment.id).success)
      throw badRequest('The Appointment id is not a FHIR id', `${path}.id`);
    if (!BOOKABLE.has(String(appointment.status))) continue;
    booked.push({
      appointment: appointment as Appointment & { start: string },
      path,
      key: appointment.id ?? String(index + 1),
    });
  }
  return booked;
}
