/**
 * A patient's appointment (a CDS hook's, or one read from the EHR's schedule) as the check `$submit` would run: a Bundle (collection) holding a
 * CoverageEligibilityRequest, the prefetched Patient, one Coverage and the Organizations that
 * came with it, read by the same parser as `$submit` (so the patient identifier, the payer from
 * `Coverage.payor`, as `insurer`, and the visit type follow the same rules and tables). For an
 * appointment the request carries `servicedPeriod.start` = `Appointment.start` and the identifier
 * `cds-appointment|<hookInstance>/<Appointment.id>` (the idempotency key: a repeated call never
 * books twice).
 */
import { randomUUID } from 'node:crypto';
import type {
  Appointment,
  BundleEntry,
  CodeableConcept,
  Coding,
  Coverage,
  CoverageEligibilityRequest,
  Organization,
  Patient,
  Resource,
} from 'fhir/r4.js';
import { CANONICAL_BASE } from '../../fhir/canonical.js';
import { parseSubmit } from './parse-submit.js';
import { visitTypeOf } from './tables.js';
import { patientIdentity, type CheckDigitRule } from './patient.js';
import { payerOf } from './payer.js';
import type { ReferenceResolver } from './resolver.js';
import { resolveReference, type ResolutionContext, type Target } from './references.js';
import type { CheckInput } from '../types.js';

/** The system of an appointment's request identifier booked by a CDS hook (the contract's name). */
export const CDS_APPOINTMENT_SYSTEM = `${CANONICAL_BASE}/cds-appointment`;
/** The system of an appointment's request identifier read from the EHR's schedule (the contract's name). */
export const EHR_APPOINTMENT_SYSTEM = `${CANONICAL_BASE}/ehr-appointment`;

/** A patient as the EHR gives it: the Patient, its active Coverages and their payers. */
export interface PatientData {
  patient: Patient;
  /** Active Coverages, in the order given. */
  coverages: Coverage[];
  /** Organizations that came with the Coverages (`_include`), to resolve their payor references. */
  organizations: Organization[];
  /** Looks literal references up on the client's FHIR server; absent when it may not be called. */
  resolver?: ReferenceResolver;
}

/** Where resources without a server of their own are placed in the Bundle (never fetched). */
const NO_SERVER = 'https://cds-client.invalid/fhir';

/** The Appointment's serviceCategory or appointmentType coding the visit-type table knows, if any. */
function visitCategoryOf(appointment: Appointment | undefined): Coding | undefined {
  const concepts: CodeableConcept[] = [
    ...(appointment?.serviceCategory ?? []),
    ...(appointment?.appointmentType ? [appointment.appointmentType] : []),
  ];
  for (const concept of concepts) {
    const known = concept.coding?.find((coding) => visitTypeOf(coding) !== undefined);
    if (known) return known;
  }
  return undefined;
}

export interface HookCheck {
  /** Which Coverage (index in PatientData.coverages) it came from. */
  coverageIndex: number;
  input: CheckInput;
}

export interface ParseOptions {
  practiceId: string;
  /** The tenant's rule for an Emirates ID whose check digit does not add up. */
  checkDigit: CheckDigitRule;
  now: number;
  fhirServer?: string;
  appointment?: Appointment & { start: string };
  /** The request identifier's system (default: the CDS hook's). */
  identifierSystem?: string;
}

/** Where the Bundle places a resource: under the client's FHIR server, as its own id says. */
function fullUrlOf(fhirServer: string | undefined): (resource: Resource) => string {
  const base = fhirServer?.replace(/\/+$/, '') ?? NO_SERVER;
  return (resource) =>
    resource.id ? `${base}/${resource.resourceType}/${resource.id}` : `urn:uuid:${randomUUID()}`;
}

/**
 * Reads the Coverage at `index` as `$submit` reads a request: a CheckInput, or its refusal thrown.
 * The request holds the Patient, the Coverage and its payer Organization contained (as an EHR's
 * `$submit` usually does): validating that form costs about a quarter of a Bundle's, whose
 * invariants are FHIRPath (bench/README.md, bench:cds).
 */
export function coverageParser(
  data: PatientData,
  options: ParseOptions,
): (index: number, identifierValue?: string) => Promise<CheckInput> {
  const category = visitCategoryOf(options.appointment);
  const parseOptions = {
    practiceId: options.practiceId,
    now: new Date(options.now),
    checkDigit: options.checkDigit,
    ...(data.resolver ? { resolver: data.resolver } : {}),
  };
  return (index, identifierValue) => {
    const request: CoverageEligibilityRequest = {
      resourceType: 'CoverageEligibilityRequest',
      ...(identifierValue
        ? {
            identifier: [
              { system: options.identifierSystem ?? CDS_APPOINTMENT_SYSTEM, value: identifierValue },
            ],
          }
        : {}),
      status: 'active',
      purpose: ['benefits', 'validation'],
      created: new Date(options.now).toISOString(),
      patient: { reference: '#patient' },
      insurer: {},
      insurance: [{ focal: true, coverage: { reference: '#coverage' } }],
      ...(category ? { item: [{ category: { coding: [category] } }] } : {}),
      ...(options.appointment
        ? {
            servicedPeriod: {
              start: options.appointment.start,
              ...(options.appointment.end ? { end: options.appointment.end } : {}),
            },
          }
        : {}),
    };
    return parseSubmit(containing(request, data, data.coverages[index]!), parseOptions);
  };
}

/**
 * A resource as it is contained: its local id, no meta (dom-4), and its own contained resources
 * beside it (dom-2), renamed `<id>-<their id>` with the references to them rewritten.
 */
function local<T extends Resource>(resource: T, id: string): [T, Resource[]] {
  const { meta: _meta, contained, ...rest } = resource as T & { contained?: Resource[] };
  const own = contained ?? [];
  const renamed = new Map(own.map((r) => [`#${r.id ?? ''}`, `#${id}-${r.id ?? ''}`]));
  const rename = <R>(value: R): R => (renamed.size > 0 ? rewriteLocal(value, renamed) : value);
  const hoisted = own.map((r) => {
    const { meta: _innerMeta, ...inner } = r;
    return rename<Resource>({ ...inner, id: `${id}-${r.id ?? ''}` });
  });
  return [rename({ ...rest, id } as T), hoisted];
}

/** A copy of `value` with each local reference (`#id`) that `renamed` knows replaced. */
function rewriteLocal<R>(value: R, renamed: ReadonlyMap<string, string>): R {
  if (Array.isArray(value)) return value.map((v: unknown) => rewriteLocal(v, renamed)) as R;
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [
      key,
      key === 'reference' && typeof child === 'string'
        ? (renamed.get(child) ?? child)
        : rewriteLocal(child, renamed),
    ]),
  ) as R;
}

/**
 * The request with the Patient, the Coverage and the Organization its payor points to (one that
 * came with the Coverages) contained, `insurer` = the payor as `$submit` reads it; a payor given
 * otherwise (an identifier, or a literal reference the guarded client may look up) stays as it is.
 */
function containing(
  request: CoverageEligibilityRequest,
  data: PatientData,
  coverage: Coverage,
): CoverageEligibilityRequest {
  const [patient, patientOwn] = local(data.patient, 'patient');
  const [held, coverageOwn] = local(coverage, 'coverage');
  const payor = held.payor[0];
  const target = payor?.reference?.replace(/\/_history\/[^/]+$/, '');
  const organization =
    target === undefined || target.startsWith('#')
      ? undefined
      : data.organizations.find(
          (o) =>
            o.id !== undefined &&
            (target === `Organization/${o.id}` || target.endsWith(`/Organization/${o.id}`)),
        );
  const payer = organization ? { reference: '#payer' } : payor;
  const contained: Coverage = {
    ...held,
    beneficiary: { reference: '#patient' },
    payor: payer ? [payer] : [],
  };
  return {
    ...request,
    contained: [
      patient,
      contained,
      ...patientOwn,
      ...coverageOwn,
      ...(organization ? [local(organization, 'payer')[0]] : []),
    ],
    insurer: payer ?? {},
  };
}

/**
 * One CheckInput per Coverage of the patient (or a parse failure, the $submit OperationOutcomeError
 * it threw), for a visit now (patient-view) or for an appointment.
 */
export async function checkInputs(
  data: PatientData,
  options: ParseOptions & {
    /** The identifier value of each check; given the payer when the patient has several. */
    identifierValue?: (payerCode: string | null) => string;
  },
): Promise<(HookCheck | { coverageIndex: number; error: unknown })[]> {
  const parse = coverageParser(data, options);
  const first = await Promise.all(
    data.coverages.map((_, index) =>
      parse(index, options.identifierValue?.(null)).then(
        (input) => ({ coverageIndex: index, input }),
        (error: unknown) => ({ coverageIndex: index, error }),
      ),
    ),
  );
  // Several active Coverages: one check per payer (the first Coverage of each payer).
  const seen = new Set<string>();
  const unique = first.filter((entry) => {
    if (!('input' in entry)) return true;
    if (seen.has(entry.input.payerCode)) return false;
    seen.add(entry.input.payerCode);
    return true;
  });
  if (seen.size <= 1 || !options.identifierValue) return unique;
  // Each payer's check needs an identifier of its own (the idempotency key is per check).
  const withPayer = options.identifierValue;
  return Promise.all(
    unique.map((entry) =>
      'input' in entry
        ? parse(entry.coverageIndex, withPayer(entry.input.payerCode)).then(
            (input) => ({ coverageIndex: entry.coverageIndex, input }),
            (error: unknown) => ({ coverageIndex: entry.coverageIndex, error }),
          )
        : Promise.resolve(entry),
    ),
  );
}

/** What patient-view needs to find the patient's answers: the identifier and each Coverage's payer. */
export interface LookupKeys {
  /** The patient identifier a check would use (system '' when it has none); null when none. */
  patient: { system: string; value: string } | null;
  /** Each Coverage's payer code, by index; undefined when it cannot be read (the full parse says why). */
  payers: (string | undefined)[];
}

/**
 * The patient identifier and the Coverages' payer codes, by the same rules as a check (patient.ts,
 * payer.ts, references.ts) but without validating and building one: opening a chart whose answers
 * are stored needs no more (bench/README.md, bench:cds). Nothing here throws.
 */
export async function lookupKeys(data: PatientData, fhirServer: string | undefined): Promise<LookupKeys> {
  const fullUrl = fullUrlOf(fhirServer);
  const entries: BundleEntry[] = [...data.coverages, ...data.organizations].map((resource) => ({
    fullUrl: fullUrl(resource),
    resource,
  }));
  const context: ResolutionContext = {
    bundle: { entries, path: 'prefetch.coverage' },
    ...(data.resolver ? { resolver: data.resolver } : {}),
    cache: new Map(),
  };
  const coverageTargets: Target[] = data.coverages.map((resource, index) => ({
    kind: 'resource',
    resource,
    path: `prefetch.coverage.entry[${index}].resource`,
    via: 'bundle',
  }));
  const payers = await Promise.all(
    data.coverages.map(async (coverage, index) => {
      const path = `prefetch.coverage.entry[${index}].resource`;
      try {
        const target = await resolveReference(
          coverage.payor[0],
          { path: `${path}.payor[0]`, label: 'insurance company', types: ['Organization'] },
          { container: coverage, path },
          context,
        );
        return payerOf(target, `${path}.payor[0]`).code;
      } catch {
        return undefined;
      }
    }),
  );
  let patient: LookupKeys['patient'] = null;
  try {
    const identity = patientIdentity(
      { kind: 'resource', resource: data.patient, path: 'prefetch.patient', via: 'bundle' },
      coverageTargets,
      'prefetch.patient.identifier',
      // Only a look-up of the patient's answers, which starts nothing: a mistyped ID finds none.
      'warn',
    );
    patient = { system: identity.identifier.system ?? '', value: identity.value };
  } catch {
    patient = null;
  }
  return { patient, payers };
}
