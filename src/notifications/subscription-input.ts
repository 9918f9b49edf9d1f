/**
 * A Subscription as a client sends it, checked and read into what the store keeps
 * (docs/notifications.md): the topic, the rest-hook channel, the payload content, the filters,
 * the heartbeat and timeout, the end, and the SSRF guard on the endpoint. Also how a stored
 * Subscription is shown on read: its current status, and every channel.header value masked.
 * Rules from the IG's pages: https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/channels.html
 * (rest-hook), payloads.html (content codes), conformance.html, errors.html.
 */
import type { Narrative, Subscription } from 'fhir/r4.js';
import { escapeXml, generatedNarrative } from '../fhir/xhtml.js';
import type { OperationOutcomeIssue } from 'fhir/r4.js';
import { badRequest, OperationOutcomeError, outcomeOf, unprocessable } from '../fhir/outcomes.js';
import { echo } from '../fhir/text.js';
import { validateFhir } from '../fhir/validator.js';
import type { EventFilter, StoredSubscription } from '../checks/store/subscription-store.js';
import { ELIGIBILITY_FINAL_TOPIC } from '../checks/store/subscription-store.js';
import { EXT, SUBSCRIPTION_PROFILE, type PayloadContent } from './bundles.js';
import { endpointAllowed } from '../ehr/addresses.js';

/** What a notification carries by default (the IG: id-only is the baseline). */
export const DEFAULT_CONTENT: PayloadContent = 'id-only';
/** backport-timeout when absent, seconds. */
export const DEFAULT_TIMEOUT_SECONDS = 10;
/** The longest timeout a subscription may ask for, seconds (a delivery holds its lease that long). */
export const MAX_TIMEOUT_SECONDS = 60;
/** Events in one notification when backport-max-count is absent, and the most it may ask for. */
export const DEFAULT_MAX_COUNT = 20;
export const MAX_MAX_COUNT = 100;
/** The shortest heartbeat period, seconds. */
export const MIN_HEARTBEAT_SECONDS = 1;
/** Headers the service sets itself; a subscription may not send its own. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'transfer-encoding',
  'connection',
]);
/** RFC 9110 field name, then the value: visible ASCII, spaces and tabs, no CR or LF. */
const HEADER = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([\t\x20-\x7e]*)$/;
const CONTENTS: readonly PayloadContent[] = ['empty', 'id-only', 'full-resource'];
const FINAL_OUTCOMES = new Set(['complete', 'partial', 'error']);
/** What a masked header value reads as (`Authorization: ****`). */
export const MASK = '****';

/** The channel of a stored subscription, as the delivery worker uses it. */
export interface Channel {
  endpoint: string;
  /** Name and value of each channel.header entry, as given. */
  headers: Array<[string, string]>;
  content: PayloadContent;
  heartbeatSeconds: number | null;
  timeoutSeconds: number;
  /** Most events in one notification (backport-max-count). */
  maxCount: number;
}

export interface AcceptedSubscription {
  resource: Subscription;
  filter: EventFilter;
  channel: Channel;
  endAt: number | null;
}

function extension(
  extensions:
    | Array<{ url?: string; valueCode?: string; valueUnsignedInt?: number; valuePositiveInt?: number }>
    | undefined,
  url: string,
) {
  const index = (extensions ?? []).findIndex((e) => e.url === url);
  return index < 0 ? undefined : { index, value: extensions![index]! };
}

/** The channel of a Subscription already accepted (read back from the store). */
export function channelOf(resource: Subscription): Channel {
  const channel = resource.channel;
  const content = extension(channel._payload?.extension, EXT.payloadContent)?.value.valueCode;
  const heartbeat = extension(channel.extension, EXT.heartbeatPeriod)?.value.valueUnsignedInt;
  const timeout = extension(channel.extension, EXT.timeout)?.value.valueUnsignedInt;
  const maxCount = extension(channel.extension, EXT.maxCount)?.value.valuePositiveInt;
  return {
    endpoint: channel.endpoint ?? '',
    headers: (channel.header ?? []).map((line) => {
      const match = HEADER.exec(line);
      return [match?.[1] ?? '', match?.[2] ?? ''];
    }),
    content: CONTENTS.find((c) => c === content) ?? DEFAULT_CONTENT,
    heartbeatSeconds: heartbeat && heartbeat > 0 ? heartbeat : null,
    timeoutSeconds: timeout && timeout > 0 ? timeout : DEFAULT_TIMEOUT_SECONDS,
    maxCount: maxCount && maxCount > 0 ? Math.min(maxCount, MAX_MAX_COUNT) : DEFAULT_MAX_COUNT,
  };
}

/** Moved to the EHR client's floor (src/ehr/addresses.ts), where every outside address is checked. */
export { endpointAllowed };

/**
 * Reads a Subscription a client POSTs. Invalid FHIR: 400 with the validator's issues; valid FHIR
 * this service cannot honour (another topic, channel or payload, an endpoint off the tenant's
 * list, an unknown filter): 422 naming the element.
 */
export function acceptSubscription(
  body: unknown,
  allowedPrefixes: readonly string[],
  now: number,
): AcceptedSubscription {
  if (
    typeof body !== 'object' ||
    body === null ||
    (body as { resourceType?: unknown }).resourceType !== 'Subscription'
  )
    throw badRequest('The body must be a Subscription resource', 'resourceType');
  const { valid, issues } = validateFhir(body);
  if (!valid) throw new OperationOutcomeError(outcomeOf(issues.filter(isError)), 400);
  const input = body as Subscription;
  if (input.criteria !== ELIGIBILITY_FINAL_TOPIC)
    throw unprocessable(
      `Subscription.criteria must be the topic ${ELIGIBILITY_FINAL_TOPIC}`,
      'Subscription.criteria',
      'not-supported',
    );
  const channel = input.channel;
  if (channel.type !== 'rest-hook')
    throw unprocessable(
      'Only the rest-hook channel is supported',
      'Subscription.channel.type',
      'not-supported',
    );
  if (channel.payload !== 'application/fhir+json')
    throw unprocessable(
      'Subscription.channel.payload must be application/fhir+json',
      'Subscription.channel.payload',
      'not-supported',
    );
  const content = extension(channel._payload?.extension, EXT.payloadContent);
  if (content && !CONTENTS.some((c) => c === content.value.valueCode))
    throw unprocessable(
      'backport-payload-content must be empty, id-only or full-resource',
      `Subscription.channel.payload.extension[${content.index}]`,
      'code-invalid',
    );
  if (!channel.endpoint || !endpointAllowed(channel.endpoint, allowedPrefixes))
    throw unprocessable(
      "Subscription.channel.endpoint is not under one of this tenant's registered subscription endpoints",
      'Subscription.channel.endpoint',
      'business-rule',
    );
  (channel.header ?? []).forEach((line, index) => {
    const match = HEADER.exec(line);
    // The header's value is never echoed: it is often a bearer token.
    if (!match)
      throw badRequest(
        'A channel.header entry must be "Name: value"',
        `Subscription.channel.header[${index}]`,
      );
    if (RESERVED_HEADERS.has(match[1]!.toLowerCase()))
      throw unprocessable(
        `The header ${match[1]!} is set by the service`,
        `Subscription.channel.header[${index}]`,
        'business-rule',
      );
  });
  const heartbeat = extension(channel.extension, EXT.heartbeatPeriod);
  const heartbeatValue = heartbeat?.value.valueUnsignedInt;
  if (heartbeat && (heartbeatValue === undefined || heartbeatValue < MIN_HEARTBEAT_SECONDS))
    throw unprocessable(
      `backport-heartbeat-period must be at least ${MIN_HEARTBEAT_SECONDS} second`,
      `Subscription.channel.extension[${heartbeat.index}]`,
      'value',
    );
  const timeout = extension(channel.extension, EXT.timeout);
  const timeoutValue = timeout?.value.valueUnsignedInt;
  if (timeout && (timeoutValue === undefined || timeoutValue < 1 || timeoutValue > MAX_TIMEOUT_SECONDS))
    throw unprocessable(
      `backport-timeout must be 1 to ${MAX_TIMEOUT_SECONDS} seconds`,
      `Subscription.channel.extension[${timeout.index}]`,
      'value',
    );
  const maxCount = extension(channel.extension, EXT.maxCount);
  const maxCountValue = maxCount?.value.valuePositiveInt;
  if (maxCount && (maxCountValue === undefined || maxCountValue > MAX_MAX_COUNT))
    throw unprocessable(
      `backport-max-count must be 1 to ${MAX_MAX_COUNT}`,
      `Subscription.channel.extension[${maxCount.index}]`,
      'value',
    );
  let endAt: number | null = null;
  if (input.end !== undefined) {
    endAt = Date.parse(input.end);
    if (!Number.isFinite(endAt) || endAt <= now)
      throw unprocessable('Subscription.end must be in the future', 'Subscription.end', 'value');
  }
  const filter = parseFilters(input);
  // Stored as accepted, with the server's status (the client's `requested` or anything else is
  // replaced: the handshake decides) and the profile it conforms to.
  const { id: _id, meta: _meta, text: _text, error: _error, ...rest } = input;
  const resource: Subscription = { ...rest, meta: { profile: [SUBSCRIPTION_PROFILE] }, status: 'requested' };
  // The profile makes the payload content 1..1: a client that left it to the default reads back
  // the content it gets (docs/validation.md).
  const payload = resource.channel._payload;
  if (!extension(payload?.extension, EXT.payloadContent)) {
    const content = { url: EXT.payloadContent, valueCode: DEFAULT_CONTENT };
    resource.channel = {
      ...resource.channel,
      _payload: { ...payload, extension: [...(payload?.extension ?? []), content] },
    };
  }
  return { resource, filter, channel: channelOf(resource), endAt };
}

/**
 * A PUT of a subscription as it was read (headers shown `Name: ****`): each header whose value is
 * the mask keeps the stored value of the header of that name (the n-th masked `Name` the n-th
 * stored one, names compared case-insensitively); 422 at the header when there is none to keep.
 */
export function keepMaskedHeaders(
  accepted: AcceptedSubscription,
  stored: Subscription,
): AcceptedSubscription {
  const lines = accepted.resource.channel.header;
  if (!lines?.length) return accepted;
  const storedByName = new Map<string, string[]>();
  for (const line of stored.channel.header ?? []) {
    const match = HEADER.exec(line);
    if (!match) continue;
    const name = match[1]!.toLowerCase();
    storedByName.set(name, [...(storedByName.get(name) ?? []), match[2]!]);
  }
  const used = new Map<string, number>();
  let changed = false;
  const header = lines.map((line, index) => {
    const match = HEADER.exec(line)!;
    if (match[2] !== MASK) return line;
    const name = match[1]!.toLowerCase();
    const nth = used.get(name) ?? 0;
    used.set(name, nth + 1);
    const value = storedByName.get(name)?.[nth];
    if (value === undefined)
      throw unprocessable(
        `The header ${match[1]!} is masked, and the subscription has no stored value for it: send its value`,
        `Subscription.channel.header[${index}]`,
        'business-rule',
      );
    changed = true;
    return `${match[1]!}: ${value}`;
  });
  if (!changed) return accepted;
  const resource: Subscription = { ...accepted.resource, channel: { ...accepted.resource.channel, header } };
  return { ...accepted, resource, channel: channelOf(resource) };
}

function isError(issue: OperationOutcomeIssue): boolean {
  return issue.severity === 'error' || issue.severity === 'fatal';
}

/**
 * The backport-filter-criteria extensions on criteria (in R4 JSON: `_criteria.extension`): each one
 * `CoverageEligibilityResponse?name=value[&name=value...]`, names `patient`, `outcome`, `request`,
 * a comma ORing values; all of them ANDed (the IG: "logical AND").
 */
function parseFilters(input: Subscription): EventFilter {
  const filter: EventFilter = {};
  (input._criteria?.extension ?? []).forEach((ext, index) => {
    if (ext.url !== EXT.filterCriteria) return;
    const expression = `Subscription.criteria.extension[${index}]`;
    const value = ext.valueString ?? '';
    const prefix = 'CoverageEligibilityResponse?';
    if (!value.startsWith(prefix))
      throw unprocessable(`A filter must start with ${prefix}`, expression, 'not-supported');
    for (const pair of value.slice(prefix.length).split('&')) {
      const equals = pair.indexOf('=');
      const name = equals < 0 ? pair : pair.slice(0, equals);
      let values: string[];
      try {
        values = (equals < 0 ? '' : pair.slice(equals + 1)).split(',').map((v) => decodeURIComponent(v));
      } catch {
        throw unprocessable('A filter value is not correctly %-encoded', expression, 'value');
      }
      if (values.some((v) => v === ''))
        throw unprocessable(`The filter ${echo(name)} needs a value`, expression, 'value');
      if (name === 'patient') (filter.patient ??= []).push(values);
      else if (name === 'outcome') {
        if (!values.every((v) => FINAL_OUTCOMES.has(v)))
          throw unprocessable('outcome= takes complete, partial or error', expression, 'code-invalid');
        (filter.outcome ??= []).push(values);
      } else if (name === 'request') {
        // CoverageEligibilityRequest/{id}, its absolute URL, or the id.
        (filter.request ??= []).push(values.map((v) => v.replace(/^.*CoverageEligibilityRequest\//, '')));
      } else
        throw unprocessable(
          `Unknown filter ${echo(name)}: this topic filters by patient, outcome and request`,
          expression,
          'not-supported',
        );
    }
  });
  return filter;
}

/**
 * The narrative of a subscription as shown (dom-6): its status, topic, channel and content; not its
 * filters (a filter may name a patient) nor its headers.
 */
function subscriptionNarrative(stored: StoredSubscription): Narrative {
  const { resource } = stored;
  const content = extension(resource.channel._payload?.extension, EXT.payloadContent)?.value.valueCode;
  const error =
    stored.status === 'error' && stored.lastError ? `<li>Error: ${escapeXml(stored.lastError)}</li>` : '';
  return generatedNarrative(
    `<p><b>Subscription</b> (${stored.status}) to ${escapeXml(resource.criteria)}</p><ul><li>Channel: ${escapeXml(
      resource.channel.type,
    )} to ${escapeXml(resource.channel.endpoint ?? 'no endpoint')}</li><li>Content: ${escapeXml(content ?? DEFAULT_CONTENT)}</li>${error}</ul>`,
  );
}

/**
 * The Subscription as read back: id, meta, the current status (and `error` with the last failure
 * while in error), and every channel.header as `Name: ****`: the value never comes back.
 */
export function shownSubscription(stored: StoredSubscription): Subscription {
  const { resource } = stored;
  const headers = resource.channel.header?.map((line) => `${HEADER.exec(line)?.[1] ?? 'header'}: ${MASK}`);
  return {
    ...resource,
    id: stored.id,
    meta: { ...resource.meta, lastUpdated: new Date(stored.updatedAt).toISOString() },
    text: subscriptionNarrative(stored),
    status: stored.status,
    ...(stored.status === 'error' && stored.lastError ? { error: stored.lastError } : {}),
    channel: { ...resource.channel, ...(headers ? { header: headers } : {}) },
  };
}
