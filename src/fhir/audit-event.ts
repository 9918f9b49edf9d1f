/**
 * The AuditEvent (https://hl7.org/fhir/R4/auditevent.html) this service records for each FHIR
 * interaction, after IHE Basic Audit Log Patterns (BALP,
 * https://profiles.ihe.net/ITI/BALP/): type `rest`, subtype the FHIR interaction
 * (http://hl7.org/fhir/restful-interaction) plus the operation's name for an operation, the
 * client as the requesting agent (DICOM "Source Role ID") and this server (DICOM "Destination
 * Role ID"), the check as the entity by its relative reference only: never patient data.
 */
import type { AuditEvent, AuditEventAgent, AuditEventEntity, Coding, Narrative, Reference } from 'fhir/r4.js';
import { escapeXml, generatedNarrative } from './xhtml.js';

/** AuditEvent.action (http://hl7.org/fhir/ValueSet/audit-event-action). */
export type AuditAction = 'C' | 'R' | 'U' | 'D' | 'E';
/** AuditEvent.outcome (http://hl7.org/fhir/ValueSet/audit-event-outcome): success, minor, serious, major failure. */
export type AuditOutcome = '0' | '4' | '8' | '12';

/** What one audit record says; the builder turns it into the resource. */
export interface AuditRecord {
  tenantId: string;
  /**
   * A SMART client id, or an API key id (`key-` and a prefix of the key's SHA-256), or `operator`,
   * or a person's `sub` (see `person`).
   */
  agentId: string;
  agentKind: 'client' | 'api-key' | 'operator' | 'person';
  /** A person signed in to the page (docs/signin.md): the agent is named by the provider's issuer and `sub`. */
  person?: AuditPerson;
  action: AuditAction;
  /** A restful-interaction code: read, vread, search-type, create, update, delete, operation. */
  interaction: string;
  /** For an operation: its name (`$submit`); for other events a name of this service (`guard-reset`). */
  operation?: AuditOperation;
  /** Relative references of what the event concerns (`CoverageEligibilityResponse/{id}`). */
  entities?: string[];
  outcome: AuditOutcome;
  /** Why it failed, in words without patient data. */
  outcomeDesc?: string;
}

/** A person as the audit trail names them: never a token, only who the provider said they are. */
export interface AuditPerson {
  issuer: string;
  subject: string;
  name: string;
  /** SMART App Launch: the `fhirUser` reference (Practitioner/..., as the EHR gave it). */
  reference?: string;
}

/**
 * The interactions of sign-in and sign-out: DICOM `110114` User Authentication, subtype `110122`
 * Login or `110123` Logout (https://hl7.org/fhir/R4/valueset-audit-event-type.html, BALP).
 */
export const LOGIN_INTERACTIONS = {
  login: { code: '110122', display: 'Login' },
  logout: { code: '110123', display: 'Logout' },
} as const;

/**
 * Every operation name an AuditEvent may carry, each a code of the package's CodeSystem
 * audit-operation (mappings/conformance/code-systems.json; a unit test holds the two equal).
 */
export const AUDIT_OPERATIONS = [
  '$submit',
  '$estimate',
  '$status',
  '$events',
  'token',
  'guard-reset',
  'operator-view',
  'appointments',
  'recent-names',
  'smart-launch',
  'launch-context',
  'ehr-schedule-read',
  // A CDS Hooks call and its feedback, named after the service (docs/cds-hooks.md).
  'cds:eligibility-appointment-book',
  'cds:eligibility-patient-view',
  'cds:eligibility-appointment-book/feedback',
  'cds:eligibility-patient-view/feedback',
] as const;
export type AuditOperation = (typeof AUDIT_OPERATIONS)[number];

export const AUDIT_AGENT_SYSTEM = 'http://fhir-eligibility-adapter.org/fhir/sid/agent';
export const AUDIT_TENANT_SYSTEM = 'http://fhir-eligibility-adapter.org/fhir/sid/tenant';
const OPERATION_SYSTEM = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/audit-operation';
const DCM = 'http://dicom.nema.org/resources/ontology/DCM';

/** The subtype of a record as it is stored and searched: the operation's name, else the interaction. */
export function auditSubtype(record: Pick<AuditRecord, 'interaction' | 'operation'>): string {
  return record.operation ?? record.interaction;
}

function entity(reference: string): AuditEventEntity {
  return {
    what: { reference },
    type: {
      system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type',
      code: '2',
      display: 'System Object',
    },
    role: {
      system: 'http://terminology.hl7.org/CodeSystem/object-role',
      code: '4',
      display: 'Domain Resource',
    },
  };
}

/** The requesting agent: a person by their provider's issuer and `sub`, else the client or key. */
function whoOf(record: AuditRecord): Reference {
  const { person } = record;
  if (person) {
    return {
      ...(person.reference ? { reference: person.reference } : {}),
      identifier: { system: person.issuer, value: person.subject },
      display: person.name,
    };
  }
  if (record.agentKind === 'person') return { display: 'a person who was not signed in' };
  return {
    identifier: { system: AUDIT_AGENT_SYSTEM, value: record.agentId },
    display: `${record.agentKind} ${record.agentId} of tenant ${record.tenantId}`,
  };
}

/** AuditEvent.outcome in words (http://hl7.org/fhir/ValueSet/audit-event-outcome). */
const OUTCOMES: Readonly<Record<string, string>> = {
  '0': 'success',
  '4': 'minor failure',
  '8': 'serious failure',
  '12': 'major failure',
};

/** The narrative (dom-6): what was done, with what outcome and when; no person, no entity. */
function auditNarrative(event: AuditEvent): Narrative {
  const what = [event.type.display ?? event.type.code, ...(event.subtype ?? []).map((s) => s.code)]
    .filter((t): t is string => t !== undefined)
    .join(', ');
  return generatedNarrative(
    `<p><b>${escapeXml(what)}</b> (action ${escapeXml(event.action ?? '-')}): ${escapeXml(
      OUTCOMES[event.outcome ?? ''] ?? `outcome ${event.outcome ?? 'unknown'}`,
    )}, recorded ${escapeXml(event.recorded)}</p>`,
  );
}

/** Builds the AuditEvent of a record. */
export function buildAuditEvent(
  record: AuditRecord,
  id: string,
  recordedAt: number,
  serverName: string,
): AuditEvent {
  const client: AuditEventAgent = {
    type: {
      coding: [{ system: DCM, code: '110153', display: 'Source Role ID' }],
    },
    who: whoOf(record),
    requestor: true,
  };
  const tenant: AuditEventAgent = {
    type: {
      coding: [
        {
          system: 'http://terminology.hl7.org/CodeSystem/v3-RoleClass',
          code: 'PROV',
          display: 'healthcare provider',
        },
      ],
    },
    who: {
      identifier: { system: AUDIT_TENANT_SYSTEM, value: record.tenantId },
      display: `tenant ${record.tenantId}`,
    },
    requestor: false,
  };
  const server: AuditEventAgent = {
    type: { coding: [{ system: DCM, code: '110152', display: 'Destination Role ID' }] },
    who: { display: serverName },
    requestor: false,
  };
  const login = LOGIN_INTERACTIONS[record.interaction as keyof typeof LOGIN_INTERACTIONS] as
    { code: string; display: string } | undefined;
  const subtype: Coding[] = login
    ? [{ system: DCM, ...login }]
    : [{ system: 'http://hl7.org/fhir/restful-interaction', code: record.interaction }];
  if (record.operation) subtype.push({ system: OPERATION_SYSTEM, code: record.operation });
  const event: AuditEvent = {
    resourceType: 'AuditEvent',
    id,
    meta: { lastUpdated: new Date(recordedAt).toISOString() },
    type: login
      ? { system: DCM, code: '110114', display: 'User Authentication' }
      : {
          system: 'http://terminology.hl7.org/CodeSystem/audit-event-type',
          code: 'rest',
          display: 'RESTful Operation',
        },
    subtype,
    action: record.action,
    recorded: new Date(recordedAt).toISOString(),
    outcome: record.outcome,
    agent: [client, tenant, server],
    source: {
      observer: { display: serverName },
      type: [
        {
          system: 'http://terminology.hl7.org/CodeSystem/security-source-type',
          code: '4',
          display: 'Application Server',
        },
      ],
    },
  };
  event.text = auditNarrative(event);
  if (record.outcomeDesc) event.outcomeDesc = record.outcomeDesc;
  if (record.entities?.length) event.entity = record.entities.map(entity);
  return event;
}
