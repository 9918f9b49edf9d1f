/**
 * The Subscriptions R5 Backport IG's definitions this service uses (STU 1.1,
 * https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/), copied into the package so that it
 * needs no other dependency than R4 core: the extensions a Subscription carries and the
 * CapabilityStatement names, the profiles of the Subscription, its notification Bundle and status
 * Parameters, and the code system and value set they bind. Written from the IG's source
 * (input/fsh of HL7/fhir-subscription-backport-ig) with its urls, ids, names, cardinalities,
 * types and texts unchanged; their snapshots are generated like the service's own.
 *
 * The topic's Basic carries R5 and R4B cross-version extensions; their definitions are here too.
 * The status profile binds `type` to http://hl7.org/fhir/ValueSet/subscription-notification-type,
 * which R4 core lacks; the copy of R4B's (4.3.0) value set and code system is here too.
 */
import type { CodeSystem, ElementDefinition, Resource, StructureDefinition, ValueSet } from 'fhir/r4.js';

const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport';
const SD = `${BACKPORT}/StructureDefinition`;
const VERSION = '1.1.0';
const PUBLISHER = 'HL7 International - FHIR Infrastructure Work Group';
const JURISDICTION = [
  { coding: [{ system: 'http://unstats.un.org/unsd/methods/m49/m49.htm', code: '001' }] },
];
const CONTENT_VALUE_SET = `${BACKPORT}/ValueSet/backport-content-value-set`;
const NOTIFICATION_TYPE_VALUE_SET = 'http://hl7.org/fhir/ValueSet/subscription-notification-type';

const common = {
  version: VERSION,
  status: 'active' as const,
  publisher: PUBLISHER,
  jurisdiction: JURISDICTION,
  fhirVersion: '4.0.1' as const,
  abstract: false,
  derivation: 'constraint' as const,
};

interface SimpleExtension {
  id: string;
  name: string;
  title: string;
  description: string;
  context: string[];
  type: string;
  short: string;
  definition: string;
  comment?: string;
  valueSet?: string;
}

function simpleExtension(e: SimpleExtension): StructureDefinition {
  const url = `${SD}/${e.id}`;
  const value: ElementDefinition = {
    id: 'Extension.value[x]',
    path: 'Extension.value[x]',
    short: e.short,
    definition: e.definition,
    ...(e.comment ? { comment: e.comment } : {}),
    type: [{ code: e.type }],
    ...(e.valueSet ? { binding: { strength: 'required' as const, valueSet: e.valueSet } } : {}),
  };
  return {
    resourceType: 'StructureDefinition',
    id: e.id,
    url,
    ...common,
    name: e.name,
    title: e.title,
    description: e.description,
    kind: 'complex-type',
    context: e.context.map((expression) => ({ type: 'element' as const, expression })),
    type: 'Extension',
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension',
    differential: {
      element: [
        { id: 'Extension', path: 'Extension', short: e.title, definition: e.description },
        { id: 'Extension.extension', path: 'Extension.extension', max: '0' },
        { id: 'Extension.url', path: 'Extension.url', fixedUri: url },
        value,
      ],
    },
  };
}

const PAYLOAD =
  'How much of the resource content to deliver in the notification payload. The choices are an empty payload, only the resource id, or the full resource content.';
const PAYLOAD_COMMENT =
  'Sending the payload has obvious security implications. The server is responsible for ensuring that the content is appropriately secured.';
const FILTER =
  'Search-style filters to be applied to narrow the subscription topic stream. Keys can be either search parameters appropriate to the filtering resource or keys defined within the subscription topic.';
const FILTER_COMMENT =
  'When multiple filters are applied, evaluates to true if all the conditions are met; otherwise it returns false. (i.e., logical AND).';
const HEARTBEAT =
  "If present, a 'hearbeat' notification (keepalive) is sent via this channel with an the interval period equal to this elements integer value in seconds. If not present, a heartbeat notification is not sent.";
const TIMEOUT =
  'If present, the maximum amount of time a server will allow before failing a notification attempt.';
const MAX_COUNT =
  'If present, the maximum number of triggering resources that will be included in a notification bundle (e.g., a server will not include more than this number of trigger resources in a single notification). Note that this is not a strict limit on the number of entries in a bundle, as dependent resources can be included.';
const CHANNEL = 'The type of channel to send notifications on.';
const CHANNEL_COMMENT =
  'This extension allows for the use of additional channel types that were not defined in the FHIR R4 subscription definition.';

function extensions(): StructureDefinition[] {
  return [
    simpleExtension({
      id: 'backport-filter-criteria',
      name: 'BackportFilterCriteria',
      title: 'Backported R5 FilterBy Criteria',
      description: 'Criteria for topic-based filtering (filter-by).',
      context: ['Subscription.criteria'],
      type: 'string',
      short: 'Filtering critiera applied to events',
      definition: FILTER,
      comment: FILTER_COMMENT,
    }),
    simpleExtension({
      id: 'backport-payload-content',
      name: 'BackportPayloadContent',
      title: 'Backport R5 Subscription Payload Content Information',
      description: PAYLOAD,
      context: ['Subscription.channel.payload'],
      type: 'code',
      short: 'Notification content level',
      definition: PAYLOAD,
      comment: PAYLOAD_COMMENT,
      valueSet: CONTENT_VALUE_SET,
    }),
    simpleExtension({
      id: 'backport-heartbeat-period',
      name: 'BackportHeartbeatPeriod',
      title: 'Backport R5 Subscription Heartbeat Period',
      description: "Interval in seconds to send 'heartbeat' notifications.",
      context: ['Subscription.channel'],
      type: 'unsignedInt',
      short: "Interval in seconds to send 'heartbeat' notification",
      definition: HEARTBEAT,
    }),
    simpleExtension({
      id: 'backport-timeout',
      name: 'BackportTimeout',
      title: 'Backport R5 Subscription Timeout',
      description: 'Timeout in seconds to attempt notification delivery.',
      context: ['Subscription.channel'],
      type: 'unsignedInt',
      short: 'Timeout in seconds to attempt notification delivery',
      definition: TIMEOUT,
    }),
    simpleExtension({
      id: 'backport-max-count',
      name: 'BackportMaxCount',
      title: 'Backported R5 Subscription MaxCount',
      description: 'Maximum number of triggering resources included in notification bundles.',
      context: ['Subscription.channel'],
      type: 'positiveInt',
      short: 'Maximum number of triggering resources included in notification bundles',
      definition: MAX_COUNT,
    }),
    simpleExtension({
      id: 'backport-channel-type',
      name: 'BackportChannelType',
      title: 'Backported R5 Additional Channel Types',
      description: 'Additional channel types not defined before FHIR R5.',
      context: ['Subscription.channel.type'],
      type: 'Coding',
      short: 'Extended channel type for notifications',
      definition: CHANNEL,
      comment: CHANNEL_COMMENT,
    }),
    simpleExtension({
      id: 'capabilitystatement-subscriptiontopic-canonical',
      name: 'CapabilityStatementSubscriptionTopic',
      title: 'CapabilityStatement SubscriptionTopic Canonical',
      description:
        'Extension used to advertise supported SubscriptionTopic canonical URLs in a CapabilityStatement.',
      context: ['CapabilityStatement.rest.resource'],
      type: 'canonical',
      short: 'Extension',
      definition: 'An Extension',
    }),
  ];
}

/** An extension slice of a profile: `{path}:{name}` of type Extension(profile). */
function slice(
  path: string,
  name: string,
  extension: string,
  min: number,
  max: string,
  text?: { short: string; definition: string; comment?: string },
  mustSupport = false,
): ElementDefinition {
  return {
    id: `${path}:${name}`,
    path,
    sliceName: name,
    ...(text ? { short: text.short, definition: text.definition } : {}),
    ...(text?.comment ? { comment: text.comment } : {}),
    min,
    max,
    type: [{ code: 'Extension', profile: [`${SD}/${extension}`] }],
    ...(mustSupport ? { mustSupport: true, isSummary: true } : {}),
  };
}

const SLICED_BY_URL = { discriminator: [{ type: 'value' as const, path: 'url' }], rules: 'open' as const };

function subscriptionProfile(): StructureDefinition {
  const S = 'Subscription';
  return {
    resourceType: 'StructureDefinition',
    id: 'backport-subscription',
    url: `${SD}/backport-subscription`,
    ...common,
    name: 'BackportSubscription',
    title: 'R4/B Topic-Based Subscription',
    description:
      'Profile on the Subscription resource to enable R5-style topic-based subscriptions in FHIR R4 or R4B.',
    kind: 'resource',
    type: S,
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Subscription',
    differential: {
      element: [
        { id: S, path: S },
        {
          id: `${S}.criteria`,
          path: `${S}.criteria`,
          short: 'Canonical URL for the topic used to generate events',
          definition:
            'When using topic-based subscriptions, the primary criteria is always the topic, indicated by its canonical URL.',
          min: 1,
          max: '1',
          mustSupport: true,
        },
        {
          id: `${S}.criteria.extension`,
          path: `${S}.criteria.extension`,
          slicing: SLICED_BY_URL,
          min: 0,
          max: '*',
        },
        slice(
          `${S}.criteria.extension`,
          'filterCriteria',
          'backport-filter-criteria',
          0,
          '*',
          { short: 'Filtering critiera applied to events', definition: FILTER, comment: FILTER_COMMENT },
          true,
        ),
        { id: `${S}.channel.extension`, path: `${S}.channel.extension`, slicing: SLICED_BY_URL },
        slice(`${S}.channel.extension`, 'heartbeatPeriod', 'backport-heartbeat-period', 0, '1', {
          short: "Interval in seconds to send 'heartbeat' notification",
          definition: HEARTBEAT,
        }),
        slice(`${S}.channel.extension`, 'timeout', 'backport-timeout', 0, '1', {
          short: 'Timeout in seconds to attempt notification delivery',
          definition: TIMEOUT,
        }),
        slice(`${S}.channel.extension`, 'maxCount', 'backport-max-count', 0, '1', {
          short: 'Maximum number of triggering resources included in notification bundles',
          definition: MAX_COUNT,
        }),
        { id: `${S}.channel.type.extension`, path: `${S}.channel.type.extension`, slicing: SLICED_BY_URL },
        slice(
          `${S}.channel.type.extension`,
          'customChannelType',
          'backport-channel-type',
          0,
          '1',
          { short: 'Extended channel type for notifications', definition: CHANNEL, comment: CHANNEL_COMMENT },
          true,
        ),
        { id: `${S}.channel.payload`, path: `${S}.channel.payload`, min: 1 },
        {
          id: `${S}.channel.payload.extension`,
          path: `${S}.channel.payload.extension`,
          slicing: SLICED_BY_URL,
        },
        slice(
          `${S}.channel.payload.extension`,
          'content',
          'backport-payload-content',
          1,
          '1',
          { short: 'Notification content level', definition: PAYLOAD, comment: PAYLOAD_COMMENT },
          true,
        ),
      ],
    },
  };
}

interface ParameterSlice {
  slice: string;
  name: string;
  min: number;
  max: string;
  short: string;
  value?: {
    type: string;
    min: number;
    short: string;
    definition?: string;
    comment?: string;
    targetProfile?: string;
    valueSet?: string;
  };
}

/** The elements of one `parameter` (or `part`) slice, discriminated by its fixed name. */
function parameterSlice(path: string, p: ParameterSlice): ElementDefinition[] {
  const id = `${path}:${p.slice}`;
  const elements: ElementDefinition[] = [
    { id, path, sliceName: p.slice, short: p.short, min: p.min, max: p.max, mustSupport: true },
    {
      id: `${id}.name`,
      path: `${path}.name`,
      short: `Slice discriminator: ${p.short.replace(/^Parameter containing /, '')}`,
      fixedString: p.name,
    },
  ];
  if (p.value) {
    const v = p.value;
    elements.push({
      id: `${id}.value[x]`,
      path: `${path}.value[x]`,
      short: v.short,
      ...(v.definition ? { definition: v.definition } : {}),
      ...(v.comment ? { comment: v.comment } : {}),
      min: v.min,
      max: '1',
      type: [v.targetProfile ? { code: v.type, targetProfile: [v.targetProfile] } : { code: v.type }],
      mustSupport: true,
      ...(v.valueSet ? { binding: { strength: 'required' as const, valueSet: v.valueSet } } : {}),
    });
  }
  return elements;
}

const SLICED_BY_NAME = (description: string) => ({
  discriminator: [{ type: 'value' as const, path: 'name' }],
  description,
  ordered: false,
  rules: 'open' as const,
});

function statusProfile(): StructureDefinition {
  const P = 'Parameters.parameter';
  const part = `${P}.part`;
  const event = `${P}:notificationEvent`;
  const eventPart = `${event}.part`;
  const slices: ElementDefinition[] = [
    ...parameterSlice(P, {
      slice: 'subscription',
      name: 'subscription',
      min: 1,
      max: '1',
      short: 'Parameter containing the reference to a subscription',
      value: {
        type: 'Reference',
        min: 1,
        targetProfile: 'http://hl7.org/fhir/StructureDefinition/Subscription',
        short: 'Reference to the Subscription responsible for this notification',
        definition: 'The reference to the Subscription which generated this notification.',
      },
    }),
    ...parameterSlice(P, {
      slice: 'topic',
      name: 'topic',
      min: 0,
      max: '1',
      short: 'Parameter containing the canonical reference to a subscription topic',
      value: {
        type: 'canonical',
        min: 0,
        short: 'Canonical reference to the SubscriptionTopic this notification relates to',
        definition:
          'Canonical reference to the SubscriptionTopic for the Subscription which generated this notification.',
        comment:
          'This value SHOULD NOT be present when using `empty` payloads, MAY be present when using id-only payloads, and SHOULD be present when using `full-resource` payloads.',
      },
    }),
    ...parameterSlice(P, {
      slice: 'status',
      name: 'status',
      min: 1,
      max: '1',
      short: 'Parameter containing the subscription status',
      value: {
        type: 'code',
        min: 1,
        short: 'Status of the subscription when this notification was generated',
        definition:
          'The status of the subscription, which marks the server state for managing the subscription.',
        valueSet: 'http://hl7.org/fhir/ValueSet/subscription-status',
      },
    }),
    ...parameterSlice(P, {
      slice: 'type',
      name: 'type',
      min: 1,
      max: '1',
      short: 'Parameter containing the type of event for this notification',
      value: {
        type: 'code',
        min: 1,
        short: 'The type of event being conveyed with this notificaiton.',
        valueSet: NOTIFICATION_TYPE_VALUE_SET,
      },
    }),
    ...parameterSlice(P, {
      slice: 'eventsSinceSubscriptionStart',
      name: 'events-since-subscription-start',
      min: 0,
      max: '1',
      short: 'Parameter containing the number of events since this subscription started',
      value: {
        type: 'string',
        min: 0,
        short: 'Events since the Subscription was created',
        definition:
          'The total number of actual events which have been generated since the Subscription was created (inclusive of this notification) - regardless of how many have been successfully communicated. This number is NOT incremented for handshake and heartbeat notifications.',
      },
    }),
    ...parameterSlice(P, {
      slice: 'notificationEvent',
      name: 'notification-event',
      min: 0,
      max: '*',
      short: 'Parameter containing the event notification details',
    }),
    {
      id: eventPart,
      path: part,
      slicing: SLICED_BY_NAME('Slice on notification event parameter name'),
      min: 0,
      max: '*',
      mustSupport: true,
    },
    ...parameterSlice(part, {
      slice: 'eventNumber',
      name: 'event-number',
      min: 1,
      max: '1',
      short: 'Parameter containing the event number',
      value: {
        type: 'string',
        min: 1,
        short: 'Event number',
        definition: 'The sequential number of this event in this subscription context.',
      },
    }),
    ...parameterSlice(part, {
      slice: 'eventTimestamp',
      name: 'timestamp',
      min: 0,
      max: '1',
      short: 'Parameter containing the event timestamp',
      value: {
        type: 'instant',
        min: 0,
        short: 'The instant this event occurred',
        definition: 'The actual time this event occured on the server.',
      },
    }),
    ...parameterSlice(part, {
      slice: 'eventFocus',
      name: 'focus',
      min: 0,
      max: '1',
      short: 'Parameter containing the event focus',
      value: {
        type: 'Reference',
        min: 0,
        short: 'The focus of this event',
        definition:
          'The focus of this event. While this will usually be a reference to the focus resource of the event, it MAY contain a reference to a non-FHIR object.',
      },
    }),
    ...parameterSlice(part, {
      slice: 'eventAdditionalContext',
      name: 'additional-context',
      min: 0,
      max: '*',
      short: 'Parameter containing additional context for this event',
      value: {
        type: 'Reference',
        min: 0,
        short: 'Additional context for this event',
        definition:
          'Additional context information for this event. Generally, this will contain references to additional resources included with the event (e.g., the Patient relevant to an Encounter), however it MAY refer to non-FHIR objects.',
      },
    }),
    ...parameterSlice(P, {
      slice: 'error',
      name: 'error',
      min: 0,
      max: '*',
      short: 'Parameter containing errors on the subscription',
      value: {
        type: 'CodeableConcept',
        min: 0,
        short: 'An error on the subscription',
        definition: 'A record of errors that occurred when the server processed a notification.',
      },
    }),
  ];
  // The part slices belong under the notification-event slice: their ids carry its name.
  const elements = slices.map((e) =>
    e.path.startsWith(part) && !e.id?.startsWith(event)
      ? { ...e, id: `${event}.${(e.id ?? '').slice(P.length + 1)}` }
      : e,
  );
  return {
    resourceType: 'StructureDefinition',
    id: 'backport-subscription-status-r4',
    url: `${SD}/backport-subscription-status-r4`,
    ...common,
    name: 'BackportSubscriptionStatusR4',
    title: 'R4 Backported R5 SubscriptionStatus',
    description: 'Profile on Parameters for topic-based subscription notifications in R4.',
    kind: 'resource',
    type: 'Parameters',
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Parameters',
    differential: {
      element: [
        {
          id: 'Parameters',
          path: 'Parameters',
          short: 'Parameter containing subscription status information',
        },
        {
          id: P,
          path: P,
          short: 'Slices containing subscription status information',
          slicing: SLICED_BY_NAME('Slice on parameter name'),
        },
        ...elements,
      ],
    },
  };
}

function notificationProfile(): StructureDefinition {
  return {
    resourceType: 'StructureDefinition',
    id: 'backport-subscription-notification-r4',
    url: `${SD}/backport-subscription-notification-r4`,
    ...common,
    name: 'BackportSubscriptionNotificationR4',
    title: 'R4 Topic-Based Subscription Notification Bundle',
    description:
      'Profile on the R4 Bundle resource to enable R5-style topic-based subscription notifications in FHIR R4.',
    kind: 'resource',
    type: 'Bundle',
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Bundle',
    differential: {
      element: [
        {
          id: 'Bundle',
          path: 'Bundle',
          constraint: [
            {
              key: 'backport-notification-bundle-r4-1',
              severity: 'error',
              human: 'A notification bundle MUST have a Parameters as the first entry',
              expression: '(entry.first().resource.is(Parameters))',
              xpath: 'f:entry[1]/f:resource/f:Parameters',
              source: `${SD}/backport-subscription-notification-r4`,
            },
          ],
        },
        { id: 'Bundle.type', path: 'Bundle.type', fixedCode: 'history' },
        {
          id: 'Bundle.entry',
          path: 'Bundle.entry',
          slicing: {
            discriminator: [{ type: 'type', path: 'resource' }],
            description: 'Slice based on resource',
            ordered: false,
            rules: 'open',
          },
        },
        {
          id: 'Bundle.entry:subscriptionStatus',
          path: 'Bundle.entry',
          sliceName: 'subscriptionStatus',
          min: 1,
          max: '1',
          mustSupport: true,
        },
        {
          id: 'Bundle.entry:subscriptionStatus.resource',
          path: 'Bundle.entry.resource',
          min: 1,
          max: '1',
          type: [{ code: 'Parameters', profile: [`${SD}/backport-subscription-status-r4`] }],
          mustSupport: true,
        },
      ],
    },
  };
}

function contentTerminology(): [CodeSystem, ValueSet] {
  const title = 'Backported R5 Subscription Content';
  const description = 'Codes to represent how much resource content to send in the notification payload.';
  const system = `${BACKPORT}/CodeSystem/backport-content-code-system`;
  const meta = { version: VERSION, status: 'active' as const, experimental: false, publisher: PUBLISHER };
  return [
    {
      resourceType: 'CodeSystem',
      id: 'backport-content-code-system',
      url: system,
      ...meta,
      jurisdiction: JURISDICTION,
      name: 'BackportContentCodeSystem',
      title: `${title} Code System`,
      description,
      caseSensitive: true,
      content: 'complete',
      count: 3,
      concept: [
        {
          code: 'empty',
          display: 'Empty',
          definition: 'No resource content is transacted in the notification payload.',
        },
        {
          code: 'id-only',
          display: 'Id Only',
          definition: 'Only the resource id is transacted in the notification payload.',
        },
        {
          code: 'full-resource',
          display: 'Full Resource',
          definition: 'The entire resource is transacted in the notification payload.',
        },
      ],
    },
    {
      resourceType: 'ValueSet',
      id: 'backport-content-value-set',
      url: CONTENT_VALUE_SET,
      ...meta,
      jurisdiction: JURISDICTION,
      name: 'BackportContentValueSet',
      title: `${title} Value Set`,
      description,
      compose: { include: [{ system }] },
    },
  ];
}

/** R4B core's (4.3.0) notification types, which the status profile binds and R4 core lacks. */
function notificationTypeTerminology(): [CodeSystem, ValueSet] {
  const system = 'http://hl7.org/fhir/subscription-notification-type';
  const meta = {
    version: '4.3.0',
    status: 'active' as const,
    experimental: false,
    publisher: 'HL7 (FHIR Project)',
  };
  const description = 'The type of notification represented by the status message.';
  return [
    {
      resourceType: 'CodeSystem',
      id: 'subscription-notification-type',
      url: system,
      ...meta,
      name: 'SubscriptionNotificationType',
      title: 'SubscriptionNotificationType',
      description,
      caseSensitive: true,
      valueSet: NOTIFICATION_TYPE_VALUE_SET,
      content: 'complete',
      concept: [
        {
          code: 'handshake',
          display: 'Handshake',
          definition:
            'The status was generated as part of the setup or verification of a communications channel.',
        },
        {
          code: 'heartbeat',
          display: 'Heartbeat',
          definition: 'The status was generated to perform a heartbeat notification to the subscriber.',
        },
        {
          code: 'event-notification',
          display: 'Event Notification',
          definition: 'The status was generated for an event to the subscriber.',
        },
        {
          code: 'query-status',
          display: 'Query Status',
          definition: 'The status was generated in response to a status query/request.',
        },
        {
          code: 'query-event',
          display: 'Query Event',
          definition: 'The status was generated in response to an event query/request.',
        },
      ],
    },
    {
      resourceType: 'ValueSet',
      id: 'subscription-notification-type',
      url: NOTIFICATION_TYPE_VALUE_SET,
      ...meta,
      name: 'SubscriptionNotificationType',
      title: 'SubscriptionNotificationType',
      description,
      immutable: true,
      compose: { include: [{ system }] },
    },
  ];
}

const R5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic';
const R4B = 'http://hl7.org/fhir/4.3/StructureDefinition/extension-SubscriptionTopic';

interface CrossVersionPart {
  name: string;
  type: string;
  short: string;
  min?: number;
}

/**
 * The cross-version extensions (https://hl7.org/fhir/R4/versions.html#extensions) the topic's
 * Basic carries, as the backport IG's R4 topic example does: an R5 (or R4B) SubscriptionTopic
 * element at http://hl7.org/fhir/{version}/StructureDefinition/extension-{path}, on Basic. The HL7
 * validator can make these itself; a validator that cannot finds them here.
 */
function crossVersionExtension(
  base: string,
  element: string,
  release: string,
  short: string,
  value: string | CrossVersionPart[],
  options: { modifier?: boolean; max?: string } = {},
): StructureDefinition {
  const url = `${base}.${element}`;
  const id = url.slice(url.lastIndexOf('/') + 1).replace(/^extension-/, `extension-${release}-`);
  const root: ElementDefinition = {
    id: 'Extension',
    path: 'Extension',
    short: `${release} SubscriptionTopic.${element}`,
    definition: `${short} (SubscriptionTopic.${element} of FHIR ${release}, carried on Basic in R4).`,
    min: 0,
    max: options.max ?? '1',
    ...(options.modifier
      ? { isModifier: true, isModifierReason: 'SubscriptionTopic.status is a modifier element in R5' }
      : {}),
  };
  const elements: ElementDefinition[] =
    typeof value === 'string'
      ? [
          root,
          { id: 'Extension.extension', path: 'Extension.extension', max: '0' },
          { id: 'Extension.url', path: 'Extension.url', fixedUri: url },
          { id: 'Extension.value[x]', path: 'Extension.value[x]', min: 1, type: [{ code: value }] },
        ]
      : [
          root,
          { id: 'Extension.extension', path: 'Extension.extension', slicing: SLICED_BY_URL },
          ...value.flatMap((part): ElementDefinition[] => {
            const at = `Extension.extension:${part.name}`;
            return [
              {
                id: at,
                path: 'Extension.extension',
                sliceName: part.name,
                short: part.short,
                definition: part.short,
                min: part.min ?? 0,
                max: '1',
              },
              { id: `${at}.extension`, path: 'Extension.extension.extension', max: '0' },
              { id: `${at}.url`, path: 'Extension.extension.url', fixedUri: part.name },
              {
                id: `${at}.value[x]`,
                path: 'Extension.extension.value[x]',
                min: 1,
                type: [{ code: part.type }],
              },
            ];
          }),
          { id: 'Extension.url', path: 'Extension.url', fixedUri: url },
          { id: 'Extension.value[x]', path: 'Extension.value[x]', max: '0' },
        ];
  return {
    resourceType: 'StructureDefinition',
    id,
    url,
    version: release === 'R5' ? '5.0.0' : '4.3.0',
    name: `Extension_SubscriptionTopic_${element}_${release}`,
    title: `${release}: SubscriptionTopic.${element}`,
    status: 'active',
    publisher: 'HL7 International / FHIR Infrastructure',
    description: `${short}. A cross-version extension: SubscriptionTopic.${element} of FHIR ${release} in FHIR R4, where SubscriptionTopic is carried as Basic.`,
    fhirVersion: '4.0.1',
    kind: 'complex-type',
    abstract: false,
    context: [{ type: 'element', expression: 'Basic' }],
    type: 'Extension',
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension',
    derivation: 'constraint',
    differential: { element: elements },
  };
}

function topicExtensions(): StructureDefinition[] {
  return [
    crossVersionExtension(R5, 'url', 'R5', 'Canonical identifier for this subscription topic', 'uri'),
    crossVersionExtension(R5, 'name', 'R5', 'Name for this subscription topic (computer friendly)', 'string'),
    crossVersionExtension(R5, 'title', 'R5', 'Name for this subscription topic (human friendly)', 'string'),
    crossVersionExtension(
      R5,
      'description',
      'R5',
      'Natural language description of the subscription topic',
      'markdown',
    ),
    crossVersionExtension(R5, 'status', 'R5', 'draft | active | retired | unknown', 'code', {
      modifier: true,
    }),
    crossVersionExtension(
      R4B,
      'resourceTrigger',
      'R4B',
      'Definition of a resource-based trigger for the subscription topic',
      [
        { name: 'description', type: 'markdown', short: 'Text representation of the resource trigger' },
        {
          name: 'resource',
          type: 'uri',
          short: 'Data Type or Resource (reference to definition) for this trigger definition',
          min: 1,
        },
        { name: 'supportedInteraction', type: 'code', short: 'create | update | delete' },
      ],
      { max: '*' },
    ),
    crossVersionExtension(
      R4B,
      'canFilterBy',
      'R4B',
      'Properties by which a Subscription can filter notifications from the SubscriptionTopic',
      [
        { name: 'description', type: 'markdown', short: 'Description of this filter parameter' },
        {
          name: 'resource',
          type: 'uri',
          short: 'URL of the triggering Resource that this filter applies to',
        },
        {
          name: 'filterParameter',
          type: 'string',
          short:
            'Human-readable and computation-friendly name for a filter parameter usable by subscriptions on this topic, via Subscription.filterBy.filterParameter',
          min: 1,
        },
      ],
      { max: '*' },
    ),
  ];
}

/** The backport IG's resources the service uses, in a fixed order. */
export function backportResources(): Resource[] {
  return [
    subscriptionProfile(),
    statusProfile(),
    notificationProfile(),
    ...extensions(),
    ...topicExtensions(),
    ...contentTerminology(),
    ...notificationTypeTerminology(),
  ];
}
