/**
 * The resources of notifications, as the Subscriptions R5 Backport IG (STU 1.1) shapes them for
 * FHIR R4: the notification Bundle (type `history`, first entry the `backport-subscription-status-r4`
 * Parameters; https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/notifications.html), the
 * $status answer, and the topic as a `Basic` resource (the IG's R4 representation of a
 * SubscriptionTopic: https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/components.html#subscription-topics-in-r4).
 * Pure functions: no store, no HTTP.
 */
import { randomUUID } from 'node:crypto';
import type {
  Basic,
  Bundle,
  BundleEntry,
  CoverageEligibilityResponse,
  Parameters,
  ParametersParameter,
} from 'fhir/r4.js';
import { escapeXml, generatedNarrative } from '../fhir/xhtml.js';
import type { StoredSubscription, SubscriptionEvent } from '../checks/store/subscription-store.js';
import { ELIGIBILITY_FINAL_TOPIC } from '../checks/store/subscription-store.js';

export const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport';
export const STATUS_PROFILE = `${BACKPORT}/StructureDefinition/backport-subscription-status-r4`;
export const NOTIFICATION_PROFILE = `${BACKPORT}/StructureDefinition/backport-subscription-notification-r4`;
export const SUBSCRIPTION_PROFILE = `${BACKPORT}/StructureDefinition/backport-subscription`;
export const EXT = {
  filterCriteria: `${BACKPORT}/StructureDefinition/backport-filter-criteria`,
  payloadContent: `${BACKPORT}/StructureDefinition/backport-payload-content`,
  heartbeatPeriod: `${BACKPORT}/StructureDefinition/backport-heartbeat-period`,
  timeout: `${BACKPORT}/StructureDefinition/backport-timeout`,
  maxCount: `${BACKPORT}/StructureDefinition/backport-max-count`,
} as const;

/** The topic's id, as served at /fhir/Basic/{id}. */
export const TOPIC_ID = 'eligibility-final';

/** Notification types (https://hl7.org/fhir/R4B/valueset-subscription-notification-type.html). */
export type NotificationType =
  'handshake' | 'heartbeat' | 'event-notification' | 'query-status' | 'query-event';

export type PayloadContent = 'empty' | 'id-only' | 'full-resource';

/** One event with the CER it is about (full-resource: the CER, when it is still stored). */
export interface EventWithFocus {
  event: SubscriptionEvent;
  cer?: CoverageEligibilityResponse;
}

export interface NotificationContext {
  /** `${PUBLIC_BASE_URL}/fhir`. */
  fhirBase: string;
  subscription: StoredSubscription;
  content: PayloadContent;
  /** The status to report (the subscription's, or `active` once a handshake succeeded). */
  status: StoredSubscription['status'];
  now: number;
}

const focusUrl = (fhirBase: string, checkId: string) => `${fhirBase}/CoverageEligibilityResponse/${checkId}`;

/** The status Parameters (profile backport-subscription-status-r4). */
export function statusParameters(
  context: NotificationContext,
  type: NotificationType,
  events: readonly EventWithFocus[],
): Parameters {
  const { subscription, content, fhirBase } = context;
  const parameter: ParametersParameter[] = [
    { name: 'subscription', valueReference: { reference: `${fhirBase}/Subscription/${subscription.id}` } },
  ];
  // The topic SHOULD NOT be present with `empty` payloads (the status profile's comment on topic).
  if (content !== 'empty') parameter.push({ name: 'topic', valueCanonical: subscription.topic });
  parameter.push(
    { name: 'status', valueCode: context.status },
    { name: 'type', valueCode: type },
    // Not incremented by handshakes and heartbeats (the profile's definition). The count was read
    // at claim time; events recorded since may be in this notification: never below their numbers.
    {
      name: 'events-since-subscription-start',
      valueString: String(Math.max(subscription.eventsCount, ...events.map(({ event }) => event.number))),
    },
  );
  for (const { event } of events) {
    const part: ParametersParameter[] = [
      { name: 'event-number', valueString: String(event.number) },
      { name: 'timestamp', valueInstant: new Date(event.occurredAt).toISOString() },
    ];
    // `empty` carries no resource ids at all (payloads.html#empty).
    if (content !== 'empty')
      part.push({ name: 'focus', valueReference: { reference: focusUrl(fhirBase, event.checkId) } });
    parameter.push({ name: 'notification-event', part });
  }
  if (subscription.status === 'error' && subscription.lastError) {
    parameter.push({
      name: 'error',
      valueCodeableConcept: {
        coding: [{ system: 'http://terminology.hl7.org/CodeSystem/subscription-error', code: 'no-response' }],
        text: subscription.lastError,
      },
    });
  }
  return {
    resourceType: 'Parameters',
    id: randomUUID(),
    meta: { profile: [STATUS_PROFILE] },
    parameter,
  };
}

/**
 * A notification Bundle: type `history`, the status Parameters first (invariant
 * backport-notification-bundle-r4-1), then with `full-resource` each event's CER.
 */
export function notificationBundle(
  context: NotificationContext,
  type: NotificationType,
  events: readonly EventWithFocus[],
): Bundle {
  const status = statusParameters(context, type, events);
  const entry: BundleEntry[] = [
    {
      fullUrl: `urn:uuid:${status.id ?? randomUUID()}`,
      resource: status,
      request: { method: 'GET', url: `${context.fhirBase}/Subscription/${context.subscription.id}/$status` },
      response: { status: '200' },
    },
  ];
  if (context.content === 'full-resource') {
    for (const { event, cer } of events) {
      if (!cer) continue;
      entry.push({
        fullUrl: focusUrl(context.fhirBase, event.checkId),
        resource: cer,
        request: { method: 'PUT', url: `CoverageEligibilityResponse/${event.checkId}` },
        response: { status: '200' },
      });
    }
  }
  return {
    resourceType: 'Bundle',
    id: randomUUID(),
    meta: { profile: [NOTIFICATION_PROFILE] },
    type: 'history',
    timestamp: new Date(context.now).toISOString(),
    entry,
  };
}

/**
 * The answer of $status: a `searchset` Bundle of the status Parameters (type `query-status`), as
 * the IG's OperationDefinition backport-subscription-status says.
 */
export function statusBundle(contexts: readonly NotificationContext[]): Bundle {
  return {
    resourceType: 'Bundle',
    id: randomUUID(),
    type: 'searchset',
    total: contexts.length,
    entry: contexts.map((context) => {
      const resource = statusParameters(context, 'query-status', []);
      return { fullUrl: `urn:uuid:${resource.id ?? randomUUID()}`, resource, search: { mode: 'match' } };
    }),
  };
}

/**
 * The topic, wrapped in `Basic` with the R5 cross-version extensions, as the IG's R4 topic example
 * (Basic/r4-encounter-complete) does; discoverable by `code` fhir-types#SubscriptionTopic.
 */
export function topicResource(): Basic {
  const r5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic';
  const r4b = 'http://hl7.org/fhir/4.3/StructureDefinition/extension-SubscriptionTopic';
  return {
    resourceType: 'Basic',
    id: TOPIC_ID,
    text: generatedNarrative(
      `<p><b>Subscription topic EligibilityFinal</b> (${escapeXml(ELIGIBILITY_FINAL_TOPIC)}), active</p><p>One event per eligibility check, when its CoverageEligibilityResponse first becomes final (outcome complete, partial or error). Filters: patient, outcome, request.</p>`,
    ),
    modifierExtension: [{ url: `${r5}.status`, valueCode: 'active' }],
    extension: [
      { url: `${r5}.url`, valueUri: ELIGIBILITY_FINAL_TOPIC },
      { url: `${r5}.name`, valueString: 'EligibilityFinal' },
      { url: `${r5}.title`, valueString: 'Eligibility check final' },
      {
        url: `${r5}.description`,
        valueMarkdown:
          'One event per eligibility check, when its CoverageEligibilityResponse first becomes final (outcome complete, partial or error); a search across all payers when it completes.',
      },
      {
        url: `${r4b}.resourceTrigger`,
        extension: [
          { url: 'description', valueMarkdown: 'The CER of a check is stored with its first final outcome.' },
          {
            url: 'resource',
            valueUri: 'http://hl7.org/fhir/StructureDefinition/CoverageEligibilityResponse',
          },
          { url: 'supportedInteraction', valueCode: 'update' },
        ],
      },
      ...(
        [
          ['patient', 'The patient identifier of the check, system|value or value'],
          ['outcome', 'complete | partial | error'],
          ['request', 'CoverageEligibilityRequest/{id} of the check'],
        ] as const
      ).map(([parameter, description]) => ({
        url: `${r4b}.canFilterBy`,
        extension: [
          { url: 'description', valueMarkdown: description },
          { url: 'resource', valueUri: 'CoverageEligibilityResponse' },
          { url: 'filterParameter', valueString: parameter },
        ],
      })),
    ],
    code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  };
}
