/**
 * CDS Hooks 2.0 from the EHR's side, for the tests: the JWT a CDS Client signs for each call
 * (https://cds-hooks.hl7.org/2.0/#trusting-cds-clients), the request body of each hook, the
 * patient's FHIR data, a local FHIR server for prefetch, and a schema of the 2.0 card
 * (https://cds-hooks.hl7.org/2.0/#card-attributes) every card is held against.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Appointment, Bundle, Coverage, Organization, Patient } from 'fhir/r4.js';
import { SignJWT } from 'jose';
import type { JWTPayload } from 'jose';
import { z } from 'zod';
import type { ClientKey } from './smart.js';

const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

/** A CDS Hooks 2.0 Card: the attributes and their rules this service's cards must meet. */
export const cardSchema = z
  .object({
    uuid: z.string().uuid(),
    // "summary ... SHALL be less than 140 characters"
    summary: z.string().min(1).max(139),
    detail: z.string().min(1).optional(),
    indicator: z.enum(['info', 'warning', 'critical']),
    source: z
      .object({
        label: z.string().min(1),
        url: z.string().url().optional(),
        icon: z.string().url().optional(),
        topic: z.object({ code: z.string() }).passthrough().optional(),
      })
      .strict(),
    suggestions: z.array(z.unknown()).optional(),
    selectionBehavior: z.enum(['at-most-one', 'any']).optional(),
    overrideReasons: z.array(z.unknown()).optional(),
    links: z
      .array(
        z
          .object({
            label: z.string().min(1),
            url: z.string().url(),
            type: z.enum(['absolute', 'smart']),
            appContext: z.string().optional(),
          })
          .strict(),
      )
      .optional(),
  })
  .strict();

export const responseSchema = z
  .object({ cards: z.array(cardSchema), systemActions: z.array(z.unknown()).optional() })
  .strict();

export type CdsCard = z.infer<typeof cardSchema>;

/** Parses a hook's answer with the 2.0 card schema; throws (failing the test) when it does not fit. */
export function cardsOf(body: unknown): CdsCard[] {
  return responseSchema.parse(body).cards;
}

export interface JwtOptions {
  aud: string;
  iss?: string;
  /** Seconds from now; default 240. */
  expIn?: number;
  jti?: string;
  alg?: string;
  claims?: JWTPayload;
  omit?: ('jti' | 'exp' | 'iat')[];
}

/** The JWT of one call, signed with the EHR's key. */
export function cdsJwt(key: ClientKey, options: JwtOptions): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const omit = new Set(options.omit ?? []);
  let jwt = new SignJWT({ ...options.claims })
    .setProtectedHeader({ alg: options.alg ?? key.alg, kid: key.kid, typ: 'JWT' })
    .setIssuer(options.iss ?? 'https://ehr.example.org')
    .setAudience(options.aud);
  if (!omit.has('exp')) jwt = jwt.setExpirationTime(now + (options.expIn ?? 240));
  if (!omit.has('iat')) jwt = jwt.setIssuedAt(now);
  if (!omit.has('jti')) jwt = jwt.setJti(options.jti ?? randomUUID());
  return jwt.sign(key.privateKey);
}

export interface PatientOptions {
  id?: string;
  emiratesId?: string;
  payer?: string;
  cardNumber?: string;
}

export const PATIENT_PHONE = '+971509998877';
export const PATIENT_BIRTH_DATE = '1979-03-14';

/** The patient as the EHR holds it: Emirates ID, name, phone, birth date. */
export function patient(options: PatientOptions = {}): Patient {
  return {
    resourceType: 'Patient',
    id: options.id ?? 'p1',
    identifier: [
      {
        type: { coding: [{ system: V2_0203, code: 'NI' }] },
        system: 'http://uae.gov/fhir/identifier/emirates-id',
        value: options.emiratesId ?? '784-1990-0000001-0',
      },
    ],
    name: [{ given: ['Mariam'], family: 'Cardtest' }],
    birthDate: PATIENT_BIRTH_DATE,
    telecom: [{ system: 'phone', value: PATIENT_PHONE }],
  };
}

/** The payer's Organization, with its payer code typed NIIP. */
export function payerOrganization(payer = 'DAMAN'): Organization {
  return {
    resourceType: 'Organization',
    id: `org-${payer.toLowerCase()}`,
    identifier: [{ type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: payer }],
    name: payer === 'DAMAN' ? 'Daman' : payer,
  };
}

/** A searchset Bundle of the patient's active Coverage, with its payer Organization included. */
export function coverageBundle(options: PatientOptions = {}): Bundle {
  const payer = options.payer ?? 'DAMAN';
  const organization = payerOrganization(payer);
  const coverage: Coverage = {
    resourceType: 'Coverage',
    id: `cov-${payer.toLowerCase()}`,
    status: 'active',
    subscriberId: options.cardNumber ?? '4410-7777-0000123',
    beneficiary: { reference: `Patient/${options.id ?? 'p1'}` },
    payor: [{ reference: `Organization/${organization.id}` }],
  };
  return {
    resourceType: 'Bundle',
    type: 'searchset',
    entry: [
      { resource: coverage, search: { mode: 'match' } },
      { resource: organization, search: { mode: 'include' } },
    ],
  };
}

/** An appointment tomorrow (or `start`). */
export function appointment(id: string, start?: string): Appointment {
  return {
    resourceType: 'Appointment',
    id,
    status: 'proposed',
    start: start ?? new Date(Date.now() + 86_400_000).toISOString(),
    participant: [{ actor: { reference: 'Patient/p1' }, status: 'accepted' }],
  };
}

/** A hook request body. */
export function hookRequest(
  hook: 'appointment-book' | 'patient-view',
  options: {
    patient?: PatientOptions;
    appointments?: Appointment[];
    prefetch?: boolean;
    fhirServer?: string;
    hookInstance?: string;
  } = {},
): Record<string, unknown> {
  const patientId = options.patient?.id ?? 'p1';
  return {
    hook,
    hookInstance: options.hookInstance ?? randomUUID(),
    ...(options.fhirServer
      ? {
          fhirServer: options.fhirServer,
          fhirAuthorization: {
            access_token: 'ehr-access-token-5b7e',
            token_type: 'Bearer',
            expires_in: 300,
            scope: 'patient/Patient.read patient/Coverage.read',
            subject: 'eligibility-adapter',
          },
        }
      : {}),
    context: {
      userId: 'Practitioner/dr-1',
      patientId,
      ...(hook === 'appointment-book'
        ? {
            appointments: {
              resourceType: 'Bundle',
              type: 'collection',
              entry: (options.appointments ?? [appointment('a1')]).map((resource) => ({ resource })),
            },
          }
        : {}),
    },
    ...(options.prefetch === false
      ? {}
      : { prefetch: { patient: patient(options.patient), coverage: coverageBundle(options.patient) } }),
  };
}

/** Listens on a free local port; resolves to `http://127.0.0.1:<port>`. */
export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export interface FhirStub {
  /** `http://127.0.0.1:<port>` */
  url: string;
  requests: { path: string; headers: IncomingHttpHeaders }[];
  /** Answers for a path (default: the patient's data under /fhir). */
  route: (path: string) => { status: number; body?: unknown; headers?: Record<string, string> };
  close(): Promise<void>;
}

/** A real local FHIR server (the EHR's) that records each request. */
export async function startFhirStub(data: PatientOptions = {}): Promise<FhirStub> {
  const stub: FhirStub = {
    url: '',
    requests: [],
    route: (path) => {
      if (path === `/fhir/Patient/${data.id ?? 'p1'}`) return { status: 200, body: patient(data) };
      if (path.startsWith('/fhir/Coverage?')) return { status: 200, body: coverageBundle(data) };
      if (path === '/fhir/Organization/org-daman') return { status: 200, body: payerOrganization() };
      return { status: 404, body: { resourceType: 'OperationOutcome', issue: [] } };
    },
    close: () => Promise.resolve(),
  };
  const server: Server = createServer((req, res) => {
    stub.requests.push({ path: req.url ?? '', headers: req.headers });
    const answer = stub.route(req.url ?? '');
    res.writeHead(answer.status, { 'Content-Type': 'application/fhir+json', ...answer.headers });
    res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
  });
  stub.url = await listen(server);
  stub.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return stub;
}
