/**
 * Subscription interactions and operations (docs/notifications.md), tenant-scoped like checks:
 * create (201, status `requested`, the handshake follows at once), read, search by `status`,
 * delete, `$status` and `$events`
 * (https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/operations.html), and the topic as a
 * readable `Basic`. Another tenant's subscription is 404, as an unknown one is.
 */
import { randomUUID } from 'node:crypto';
import type { Bundle, CoverageEligibilityResponse } from 'fhir/r4.js';
import type { CheckStore } from '../checks/store/check-store.js';
import { SUBSCRIPTION_STATUSES } from '../checks/store/subscription-store.js';
import type { StoredSubscription, SubscriptionStatus } from '../checks/store/subscription-store.js';
import { badRequest, notFound } from '../fhir/outcomes.js';
import { echo } from '../fhir/text.js';
import { notificationBundle, statusBundle, topicResource } from '../notifications/bundles.js';
import type { EventWithFocus, NotificationContext, PayloadContent } from '../notifications/bundles.js';
import {
  acceptSubscription,
  channelOf,
  keepMaskedHeaders,
  shownSubscription,
} from '../notifications/subscription-input.js';
import type { FhirAnswer, FhirRequest } from './types.js';

export interface SubscriptionDeps {
  store: CheckStore;
  baseUrl: string;
  now: () => number;
  /** Tells the delivery worker there is work (the handshake of a new subscription). */
  wake: () => void;
}

/** A search answers at most this many subscriptions (a tenant has a handful). */
const SEARCH_LIMIT = 500;
/** $events answers at most this many events per call; ask again from the next number. */
const EVENTS_LIMIT = 100;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const CONTENTS: readonly PayloadContent[] = ['empty', 'id-only', 'full-resource'];

const fhirBase = (deps: SubscriptionDeps) => `${deps.baseUrl}/fhir`;

async function find(req: FhirRequest, deps: SubscriptionDeps): Promise<StoredSubscription> {
  const id = req.params.id ?? '';
  const found = ID.test(id) ? await deps.store.subscriptions.get(req.tenant.id, id) : null;
  if (!found) throw notFound(`Subscription/${echo(id)} is not known`);
  return found;
}

function context(
  deps: SubscriptionDeps,
  subscription: StoredSubscription,
  content?: PayloadContent,
): NotificationContext {
  return {
    fhirBase: fhirBase(deps),
    subscription,
    content: content ?? channelOf(subscription.resource).content,
    status: subscription.status,
    now: deps.now(),
  };
}

export async function createSubscription(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  const now = deps.now();
  const accepted = acceptSubscription(req.body, req.tenant.subscriptionEndpoints ?? [], now);
  const stored = await deps.store.subscriptions.create({
    id: randomUUID(),
    tenantId: req.tenant.id,
    topic: accepted.resource.criteria,
    resource: accepted.resource,
    filter: accepted.filter,
    heartbeatAt: null,
    endAt: accepted.endAt,
    now,
  });
  deps.wake();
  const location = `${fhirBase(deps)}/Subscription/${stored.id}`;
  return { status: 201, body: shownSubscription(stored), headers: { Location: location } };
}

/**
 * PUT: the subscription as given replaces the stored one (the same checks as create) and starts
 * over with a new handshake (status `requested`): this is how one in `error` is reactivated. Its
 * events keep their numbers; those not yet delivered follow the handshake. Only an existing
 * subscription is updated (no create by PUT: 404); a body `id` must match the URL's.
 */
export async function updateSubscription(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  const existing = await find(req, deps);
  const bodyId = (req.body as { id?: unknown } | null)?.id;
  if (bodyId !== undefined && bodyId !== existing.id)
    throw badRequest('Subscription.id must be the id in the URL', 'Subscription.id');
  const now = deps.now();
  // A header sent back as it was read (`Name: ****`) keeps its stored value.
  const accepted = keepMaskedHeaders(
    acceptSubscription(req.body, req.tenant.subscriptionEndpoints ?? [], now),
    existing.resource,
  );
  const stored = await deps.store.subscriptions.replace(
    req.tenant.id,
    existing.id,
    { resource: accepted.resource, filter: accepted.filter, endAt: accepted.endAt },
    now,
  );
  if (!stored) throw notFound(`Subscription/${echo(existing.id)} is not known`);
  deps.wake();
  return { status: 200, body: shownSubscription(stored) };
}

export async function readSubscription(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  return { status: 200, body: shownSubscription(await find(req, deps)) };
}

function single(value: string | string[] | undefined, name: string): string | undefined {
  if (Array.isArray(value)) throw badRequest(`${name} may be given once`, name);
  return value;
}

export async function searchSubscriptions(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  const status = single(req.query.status, 'status');
  let statuses: SubscriptionStatus[] | undefined;
  if (status !== undefined) {
    const codes = status.split(',');
    const unknown = codes.find((code) => !(SUBSCRIPTION_STATUSES as readonly string[]).includes(code));
    if (unknown !== undefined)
      throw badRequest(`status ${echo(unknown)} is not one of ${SUBSCRIPTION_STATUSES.join(', ')}`, 'status');
    statuses = codes as SubscriptionStatus[];
  }
  const found = await deps.store.subscriptions.list(req.tenant.id, statuses, SEARCH_LIMIT);
  const self = `${fhirBase(deps)}/Subscription${status === undefined ? '' : `?status=${encodeURIComponent(status)}`}`;
  const bundle: Bundle = {
    resourceType: 'Bundle',
    id: randomUUID(),
    type: 'searchset',
    total: found.length,
    link: [{ relation: 'self', url: self }],
    entry: found.map((subscription) => ({
      fullUrl: `${fhirBase(deps)}/Subscription/${subscription.id}`,
      resource: shownSubscription(subscription),
      search: { mode: 'match' },
    })),
  };
  return { status: 200, body: bundle };
}

export async function deleteSubscription(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  const subscription = await find(req, deps);
  // Deleted with its events: nothing more is sent to the endpoint.
  await deps.store.subscriptions.delete(req.tenant.id, subscription.id);
  return { status: 204 };
}

/** $status: a searchset Bundle holding the status Parameters (type query-status). */
export async function subscriptionStatus(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  return { status: 200, body: statusBundle([context(deps, await find(req, deps))]) };
}

function eventNumber(value: string | string[] | undefined, name: string): number | undefined {
  const text = single(value, name);
  if (text === undefined) return undefined;
  if (!/^\d{1,15}$/.test(text)) throw badRequest(`${name} must be a whole number`, name);
  return Number(text);
}

/**
 * $events: the events from eventsSinceNumber (inclusive, default 1) to eventsUntilNumber
 * (inclusive, default the last), at most EVENTS_LIMIT, as a history Bundle of type query-event;
 * `content` (a hint in the IG) picks the payload, else the subscription's.
 */
export async function subscriptionEvents(req: FhirRequest, deps: SubscriptionDeps): Promise<FhirAnswer> {
  const subscription = await find(req, deps);
  const since = Math.max(1, eventNumber(req.query.eventsSinceNumber, 'eventsSinceNumber') ?? 1);
  const until = eventNumber(req.query.eventsUntilNumber, 'eventsUntilNumber');
  const contentHint = single(req.query.content, 'content');
  if (contentHint !== undefined && !CONTENTS.some((c) => c === contentHint))
    throw badRequest('content must be empty, id-only or full-resource', 'content');
  const content = CONTENTS.find((c) => c === contentHint) ?? channelOf(subscription.resource).content;
  const events = (await deps.store.subscriptions.events(subscription.id, since, EVENTS_LIMIT)).filter(
    (event) => until === undefined || event.number <= until,
  );
  const withFocus: EventWithFocus[] = [];
  for (const event of events) {
    let cer: CoverageEligibilityResponse | undefined;
    if (content === 'full-resource') {
      const stored = await deps.store.getCerJson(subscription.tenantId, event.checkId);
      cer = stored ? (JSON.parse(stored.json) as CoverageEligibilityResponse) : undefined;
    }
    withFocus.push({ event, ...(cer ? { cer } : {}) });
  }
  return {
    status: 200,
    body: notificationBundle(context(deps, subscription, content), 'query-event', withFocus),
  };
}

/** The topic, public like the CapabilityStatement (it holds no tenant data). */
export function readTopic(id: string): FhirAnswer {
  const topic = topicResource();
  if (id !== topic.id) throw notFound(`Basic/${echo(id)} is not known`);
  return { status: 200, body: topic, headers: { 'Cache-Control': 'public, max-age=3600' } };
}
