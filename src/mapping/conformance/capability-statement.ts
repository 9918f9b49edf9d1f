/**
 * The CapabilityStatement (https://hl7.org/fhir/R4/capabilitystatement.html): what this service
 * really supports. Built from the list of features the app has switched on, so it stays true.
 */
import type {
  CapabilityStatement,
  CapabilityStatementRestResource,
  CapabilityStatementRestResourceSearchParam,
  CapabilityStatementRestSecurity,
  Narrative,
} from 'fhir/r4.js';
import { escapeXml, generatedNarrative } from '../../fhir/xhtml.js';
import { ELIGIBILITY_FINAL_TOPIC, PROFILES, canonical } from '../../fhir/canonical.js';
import { ESTIMATE_OPERATION_ID, SUBMIT_OPERATION_ID, VALIDATE_OPERATION_ID } from './operations.js';
import { SERVICED_PARAMETER_ID } from './search-parameters.js';

export interface CapabilityFeatures {
  /** $submit, reads, search and async status of checks are served. */
  checks: boolean;
  /** Resource types of the service's own conformance resources that are served (StructureDefinition, CodeSystem). */
  conformance: readonly string[];
  /** Stable document links (Binary). */
  documents: boolean;
  /** CORS headers are served (CORS_ORIGINS is set). */
  cors?: boolean;
  /** Topic-based Subscriptions (R4 backport) are served (docs/notifications.md). */
  subscriptions?: boolean;
  /** SMART Backend Services: the token endpoint's URL (docs/auth.md). */
  smartTokenUrl?: string;
  /** AuditEvent read and search are served. */
  auditEvents?: boolean;
}

/**
 * Subscriptions as the backport IG's R4 server CapabilityStatement asks them to be declared: the
 * topic in capabilitystatement-subscriptiontopic-canonical on the Subscription entry, the
 * backport-subscription profile, $status and $events
 * (https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/CapabilityStatement-backport-subscription-server-r4.html).
 */
const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport';
const SUBSCRIPTION_SERVER = `${BACKPORT}/CapabilityStatement/backport-subscription-server-r4`;

function subscriptionResources(): CapabilityStatementRestResource[] {
  return [
    {
      type: 'Subscription',
      extension: [
        {
          url: `${BACKPORT}/StructureDefinition/capabilitystatement-subscriptiontopic-canonical`,
          valueCanonical: ELIGIBILITY_FINAL_TOPIC,
        },
      ],
      supportedProfile: [`${BACKPORT}/StructureDefinition/backport-subscription`],
      interaction: [
        { code: 'create' },
        { code: 'read' },
        {
          code: 'update',
          documentation: 'Replaces it and starts over with a new handshake (reactivates one in error)',
        },
        { code: 'delete' },
        { code: 'search-type' },
      ],
      updateCreate: false,
      searchParam: [
        { name: 'status', type: 'token', documentation: 'requested | active | error | off; comma = OR' },
      ],
      operation: [
        { name: 'status', definition: `${BACKPORT}/OperationDefinition/backport-subscription-status` },
        {
          name: 'events',
          definition: `${BACKPORT}/OperationDefinition/backport-subscription-events`,
          documentation: 'eventsSinceNumber and eventsUntilNumber (inclusive), at most 100 events per call',
        },
      ],
      documentation:
        "rest-hook channel, payload application/fhir+json, content id-only (default), full-resource or empty; channel.endpoint must be under one of the tenant's registered prefixes (else 422); channel.header values are sent as given and masked on read. Details: docs/notifications.md.",
    },
    // Not stored: what $status and $events answer (and the notifications are), by the backport's profiles.
    {
      type: 'Bundle',
      supportedProfile: [`${BACKPORT}/StructureDefinition/backport-subscription-notification-r4`],
      documentation:
        'Not stored nor read: the history Bundle of Subscription/$events and of each notification.',
    },
    {
      type: 'Parameters',
      supportedProfile: [`${BACKPORT}/StructureDefinition/backport-subscription-status-r4`],
      documentation:
        'Not stored nor read: the status of a subscription, in the Bundles of $status and $events and of each notification.',
    },
    {
      type: 'Basic',
      interaction: [{ code: 'read' }],
      documentation:
        'The subscription topic, as the backport IG represents a SubscriptionTopic in R4: Basic/eligibility-final.',
    },
  ];
}

/** The service's own OperationDefinitions (src/mapping/conformance/operations.ts), readable here. */
const SUBMIT_DEFINITION = canonical('OperationDefinition', SUBMIT_OPERATION_ID);
const VALIDATE_DEFINITION = canonical('OperationDefinition', VALIDATE_OPERATION_ID);
const ESTIMATE_DEFINITION = canonical('OperationDefinition', ESTIMATE_OPERATION_ID);

const BATCH_DOC =
  'The id of a batch (the batch-response Bundle.id): the checks its entries started or found again; comma = OR';
const DATE_DOC = 'Prefixes eq ne gt lt ge le sa eb ap; repeat for a range (AND); a date without time is UTC';
const PATIENT_DOC =
  'The patient identifier used for the check, as a token (system|value, |value, system| or value), with or without :identifier; comma = OR';

/** Search parameters of CoverageEligibilityResponse (docs/search.md); each one is applied by the store. */
const responseSearchParams: CapabilityStatementRestResourceSearchParam[] = [
  { name: '_id', type: 'token', documentation: 'CER id (= check id); comma = OR' },
  {
    name: 'identifier',
    type: 'token',
    documentation:
      'The CER carries no identifier of its own, so this matches nothing (an empty Bundle); search by the request identifier with request.identifier',
  },
  { name: 'patient', type: 'reference', documentation: PATIENT_DOC },
  {
    name: 'request',
    type: 'reference',
    documentation:
      'CoverageEligibilityRequest/{id} or the id; chain request.identifier (token: system|value or value) finds the check by the identifier the client sent',
  },
  {
    name: 'insurer',
    type: 'reference',
    documentation: 'The payer code (for example DAMAN), case-insensitive; comma = OR',
  },
  { name: 'outcome', type: 'token', documentation: 'queued | complete | error | partial; comma = OR' },
  { name: 'created', type: 'date', documentation: `When the check was accepted. ${DATE_DOC}` },
  { name: '_lastUpdated', type: 'date', documentation: DATE_DOC },
  { name: 'batch', type: 'token', documentation: BATCH_DOC },
];

/** Search parameters of CoverageEligibilityRequest. */
const requestSearchParams: CapabilityStatementRestResourceSearchParam[] = [
  { name: '_id', type: 'token', documentation: 'Request id (= check id); comma = OR' },
  {
    name: 'identifier',
    type: 'token',
    documentation: 'The request identifier the client sent (the idempotency key): system|value or value',
  },
  { name: 'patient', type: 'reference', documentation: PATIENT_DOC },
  {
    name: 'created',
    type: 'date',
    documentation: `When the check was accepted by this service (not the request's own created element). ${DATE_DOC}`,
  },
  { name: 'batch', type: 'token', documentation: BATCH_DOC },
  {
    name: 'serviced',
    definition: canonical('SearchParameter', SERVICED_PARAMETER_ID),
    type: 'date',
    documentation:
      "The tenant's appointments by start (eq, ge, le, gt, lt; a day is the clinic's local day); with _revinclude=CoverageEligibilityResponse:request, their booking and re-check answers (docs/previsit.md)",
  },
];

const SEARCH_DOC =
  'Search: _count (default 20, at most 100: larger values are clamped), _offset, _sort (_lastUpdated, created; - for descending; default newest _lastUpdated first), _total (none, estimate, accurate), _summary (count, true, text, data, false), _elements (mandatory elements always kept; tagged SUBSETTED). Unknown parameters are ignored unless Prefer: handling=strict (then 400). Details: docs/search.md.';

function checkResources(): CapabilityStatementRestResource[] {
  return [
    {
      type: 'CoverageEligibilityRequest',
      supportedProfile: [PROFILES.eligibilityRequest],
      interaction: [
        { code: 'read' },
        { code: 'search-type', documentation: SEARCH_DOC },
        {
          code: 'patch',
          documentation:
            'JSON Patch [{"op":"replace","path":"/status","value":"cancelled"}] only: cancels the request and its pending pre-visit re-check (docs/previsit.md)',
        },
      ],
      searchRevInclude: ['CoverageEligibilityResponse:request'],
      searchParam: requestSearchParams,
      operation: [
        {
          name: 'submit',
          definition: SUBMIT_DEFINITION,
          documentation:
            'One eligibility check. Body: a CoverageEligibilityRequest with contained resources, a collection Bundle, or Parameters.resource. Honours Prefer: wait=N and Prefer: respond-async. ' +
            'purpose = discovery runs a search across all payers: one CER whose insurance grows as payers answer (one entry per payer that found the member, none ranked), queued until the search completes, with the list of payers that answered in an extension; a payer not covered by search-all needs a single-payer request. ' +
            'A member holding several cards: the CER shows the one card the portal returned (index, total, card number, package, network), says so in disposition, and has outcome partial. ' +
            'Referral documents and the portal screenshot are linked as Binary URLs of this service, which fetch a freshly signed file on every read. ' +
            'A recent found-member answer to the same question (payer, visit type, patient identifier) is given again with an Age header, unless Cache-Control: no-cache (max-age=N narrows the window).',
        },
        {
          name: 'validate',
          definition: VALIDATE_DEFINITION,
          documentation:
            'Dry run of $submit: 200 with an OperationOutcome (errors $submit would give, and what would happen now); never calls the payer portal service, never stores a check.',
        },
      ],
    },
    {
      type: 'CoverageEligibilityResponse',
      supportedProfile: [PROFILES.eligibilityResponse],
      interaction: [{ code: 'read' }, { code: 'vread' }, { code: 'search-type', documentation: SEARCH_DOC }],
      // Only the current version of a CER is kept (vread answers it, 404 for an older one).
      versioning: 'versioned',
      readHistory: false,
      conditionalRead: 'not-match',
      searchInclude: ['CoverageEligibilityResponse:request'],
      searchParam: responseSearchParams,
      operation: [
        {
          name: 'estimate',
          definition: ESTIMATE_DEFINITION,
          documentation:
            "POST {id}/$estimate with Parameters (item: category, fee in AED): the patient's share as a ClaimResponse (predetermination), from a final found-member answer in force; 422 otherwise. An estimate, not the payer's adjudication (docs/estimate.md).",
        },
      ],
    },
  ];
}

/** Read by id, and search by url (and version): how a validator resolves a canonical. */
/** The ClaimResponse is not stored: $estimate returns one, which names its profile. */
const claimResponse: CapabilityStatementRestResource = {
  type: 'ClaimResponse',
  supportedProfile: [PROFILES.estimateClaimResponse],
  documentation:
    'Not stored nor read: the answer of CoverageEligibilityResponse/$estimate (use predetermination), which names this profile in meta.profile.',
};

function conformanceResources(types: readonly string[]): CapabilityStatementRestResource[] {
  return types.map((type): CapabilityStatementRestResource => ({
    type: type as CapabilityStatementRestResource['type'],
    interaction: [{ code: 'read' }, { code: 'search-type' }],
    searchParam: [
      { name: 'url', type: 'uri', documentation: 'The canonical URL (exact match)' },
      { name: 'version', type: 'token', documentation: 'The business version (exact match), with url' },
    ],
  }));
}

/**
 * rest.security: CORS, and SMART when it is on: the service coding SMART-on-FHIR
 * (https://hl7.org/fhir/R4/valueset-restful-security-service.html). The endpoints are declared in
 * /fhir/.well-known/smart-configuration, as SMART App Launch 2 requires
 * (https://hl7.org/fhir/smart-app-launch/conformance.html). No oauth-uris extension: SMART 1's way,
 * its `authorize` part is 1..1 in R4 core, and this server has no authorize endpoint (it grants
 * client_credentials only), so the extension could not be filled truthfully and the HL7
 * validator would refuse it.
 */
function security(features: CapabilityFeatures): CapabilityStatementRestSecurity {
  // https://hl7.org/fhir/R4/capabilitystatement-definitions.html#CapabilityStatement.rest.security.cors
  const result: CapabilityStatementRestSecurity = {
    cors: features.cors === true,
    description: 'Bearer API key per tenant (clinic); a tenant sees only its own checks.',
  };
  if (features.smartTokenUrl) {
    result.description =
      'Bearer API key per tenant (clinic), or a SMART Backend Services access token (client_credentials with a private_key_jwt assertion, RS384 or ES384) with system scopes; a tenant sees only its own checks.';
    result.service = [
      {
        coding: [
          {
            system: 'http://terminology.hl7.org/CodeSystem/restful-security-service',
            code: 'SMART-on-FHIR',
            display: 'SMART-on-FHIR',
          },
        ],
      },
    ];
  }
  return result;
}

/** The id of the CapabilityStatement, and of the ImplementationGuide it names. */
export const CAPABILITY_STATEMENT_ID = 'fhir-eligibility-adapter';

/** The narrative (dom-6): per resource type what is served, its profiles and operations. */
function capabilityNarrative(
  resources: readonly CapabilityStatementRestResource[],
  version: string,
): Narrative {
  let rows = '';
  for (const r of resources) {
    const interactions = (r.interaction ?? []).map((i) => i.code).join(', ');
    const operations = (r.operation ?? []).map((o) => `$${o.name}`).join(', ');
    const profiles = (r.supportedProfile ?? []).join(', ');
    rows += `<tr><td>${r.type}</td><td>${escapeXml(interactions || '-')}</td><td>${escapeXml(operations || '-')}</td><td>${escapeXml(profiles || '-')}</td></tr>`;
  }
  return generatedNarrative(
    `<p><b>fhir-eligibility-adapter ${escapeXml(version)}</b>: a FHIR R4 (4.0.1) server, JSON only; eligibility checks at UAE payer portals.</p><table><tr><th>Resource</th><th>Interactions</th><th>Operations</th><th>Profiles</th></tr>${rows}</table>`,
  );
}
export const IMPLEMENTATION_GUIDE_URL = canonical('ImplementationGuide', 'fhir-eligibility-adapter');

/**
 * Builds the CapabilityStatement for the features switched on. `date` is the date of this version
 * of the conformance resources, never the start time: the same source answers the same statement
 * (the package carries it, docs/validation.md).
 */
export function capabilityStatement(
  features: CapabilityFeatures,
  baseUrl: string,
  version: string,
  date: string,
): CapabilityStatement {
  const resource: CapabilityStatementRestResource[] = [];
  if (features.checks) resource.push(...checkResources(), claimResponse);
  resource.push(...conformanceResources(features.conformance));
  if (features.subscriptions) resource.push(...subscriptionResources());
  if (features.documents) {
    resource.push({
      type: 'Binary',
      interaction: [{ code: 'read' }],
      documentation:
        'Referral documents and portal screenshots of a check: the kept copy once kept (docs/evidence.md), the same bytes whatever the upstream does later; before that, streamed through a link the upstream signs on each read; a document that could not be kept is a 404 saying why. Tenant-scoped.',
    });
    resource.push({
      type: 'DocumentReference',
      interaction: [{ code: 'search-type' }],
      searchParam: [
        {
          name: 'patient',
          type: 'token',
          documentation:
            'The patient identifier the check was made for, <system>|<value> (or a bare value); comma = OR',
        },
        { name: 'date', type: 'date', documentation: `When the document was kept. ${DATE_DOC}` },
        {
          name: 'related',
          type: 'reference',
          documentation: 'CoverageEligibilityResponse/<id>: the documents of that answer; comma = OR',
        },
        { name: '_count', type: 'number', documentation: 'At most 100 (default 50)' },
        { name: '_offset', type: 'number', documentation: 'Paging, as the next link gives it' },
      ],
      documentation:
        "The tenant's kept documents of final answers (the portal's screenshot and letters, docs/evidence.md), one DocumentReference each, newest kept first: type text the portal's label, date when kept, context.related the CER, content.attachment (url Binary/<id>, contentType, size, hash SHA-1, creation). Kept EVIDENCE_RETENTION_DAYS. Needs system/DocumentReference.rs.",
    });
  }
  if (features.auditEvents) {
    resource.push({
      type: 'AuditEvent',
      interaction: [{ code: 'read' }, { code: 'search-type' }],
      searchParam: [
        { name: 'entity', type: 'reference', documentation: 'CoverageEligibilityResponse/{id} (the check)' },
        { name: 'date', type: 'date', documentation: `When the event was recorded. ${DATE_DOC}` },
        { name: 'agent', type: 'token', documentation: 'The SMART client id or the API key id (key-...)' },
        { name: 'action', type: 'token', documentation: 'C R U D E' },
        { name: '_id', type: 'token' },
        { name: '_count', type: 'number', documentation: 'At most 100 (default 20)' },
      ],
      documentation:
        "The tenant's audit trail (IHE BALP): each $submit, read and search, and each refusal for a missing scope; newest first, _count up to 100, a next link while there is more (its _cursor is the last id of the page before). Needs system/AuditEvent.rs.",
    });
  }
  return {
    resourceType: 'CapabilityStatement',
    id: CAPABILITY_STATEMENT_ID,
    text: capabilityNarrative(resource, version),
    url: canonical('CapabilityStatement', CAPABILITY_STATEMENT_ID),
    version,
    name: 'FhirEligibilityAdapter',
    title: 'fhir-eligibility-adapter',
    status: 'active',
    date,
    publisher: 'fhir-eligibility-adapter',
    kind: 'instance',
    software: { name: 'fhir-eligibility-adapter', version },
    implementation: {
      description:
        'FHIR R4 eligibility checks at UAE payer portals, through an asynchronous payer-portal service',
      url: `${baseUrl}/fhir`,
    },
    ...(features.subscriptions ? { instantiates: [SUBSCRIPTION_SERVER] } : {}),
    fhirVersion: '4.0.1',
    format: ['application/fhir+json', 'json'],
    implementationGuide: [IMPLEMENTATION_GUIDE_URL],
    rest: [
      {
        mode: 'server',
        documentation: features.smartTokenUrl
          ? 'All interactions except metadata need Authorization: Bearer <api key or SMART access token>.'
          : 'All interactions except metadata need Authorization: Bearer <api key>.',
        security: security(features),
        resource,
        // Batch (https://hl7.org/fhir/R4/http.html#transaction): entries of $submit only.
        ...(features.checks
          ? {
              interaction: [
                {
                  code: 'batch' as const,
                  documentation:
                    'POST /fhir with a Bundle of type batch of up to 500 entries POST CoverageEligibilityRequest/$submit; answered at once with a batch-response (docs/batch-and-reuse.md).',
                },
              ],
            }
          : {}),
      },
    ],
  };
}
