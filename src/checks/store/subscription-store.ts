/**
 * The subscription store: FHIR Subscriptions (R4 backport of R5 topic-based subscriptions,
 * https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/) and their events, kept in the same
 * database as the checks (docs/notifications.md). An event row is the outbox: it is written in the
 * same transaction as the CER's first final version (SqlStore.update with `final`), so a crash
 * between "final" and "sent" loses nothing. Delivery state lives on the subscription row, claimed
 * with a lease like a check, so one replica at a time sends a subscription's events, in order.
 */
import type { CoverageEligibilityResponse, Subscription } from 'fhir/r4.js';
import { ELIGIBILITY_FINAL_TOPIC } from '../../fhir/canonical.js';

type CerOutcome = CoverageEligibilityResponse['outcome'];

export { ELIGIBILITY_FINAL_TOPIC };

/** https://hl7.org/fhir/R4/valueset-subscription-status.html */
export const SUBSCRIPTION_STATUSES = ['requested', 'active', 'error', 'off'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/**
 * The event filter of a subscription, from its backport-filter-criteria extensions: each list is
 * an AND of ORs (one entry per parameter given, its comma-separated values ORed), as a search is.
 * An absent key does not filter.
 */
export interface EventFilter {
  /** Patient identifier tokens: `system|value`, or a bare value (any system). */
  patient?: string[][];
  outcome?: string[][];
  /** Check ids (the CoverageEligibilityRequest's id). */
  request?: string[][];
}

/** What the filter of a subscription is evaluated on: the check whose CER turned final. */
export interface FinalCheckFacts {
  tenantId: string;
  checkId: string;
  patientKey: string | null;
  outcome: CerOutcome;
  /** meta.versionId of the CER's final version. */
  cerVersion: number;
}

/** Whether an event of the check matches the filter (every group holds; within one, any value). */
export function matchesFilter(filter: EventFilter, facts: FinalCheckFacts): boolean {
  const all = <T>(groups: T[][] | undefined, one: (value: T) => boolean) =>
    (groups ?? []).every((group) => group.some(one));
  return (
    all(filter.patient, (token) => patientMatches(token, facts.patientKey)) &&
    all(filter.outcome, (code) => code === facts.outcome) &&
    all(filter.request, (id) => id === facts.checkId)
  );
}

function patientMatches(token: string, patientKey: string | null): boolean {
  if (patientKey === null) return false;
  // `system|value` is the key itself; a bare value matches the key's value under any system.
  return token.includes('|')
    ? token === patientKey
    : patientKey.endsWith(`|${token}`) || token === patientKey;
}

export interface StoredSubscription {
  id: string;
  tenantId: string;
  /** The topic canonical (Subscription.criteria). */
  topic: string;
  status: SubscriptionStatus;
  /** The Subscription as accepted (channel.header in full: never returned as is, never logged). */
  resource: Subscription;
  filter: EventFilter;
  /** Events recorded so far (the last event number). */
  eventsCount: number;
  /** The highest event number the endpoint acknowledged (2xx). */
  deliveredThrough: number;
  /** A handshake is still to be sent (requested). */
  handshakeDue: boolean;
  /** Earliest time of the next delivery attempt (backoff), epoch ms. */
  nextAttemptAt: number;
  /** When the next heartbeat is due, epoch ms; null without a heartbeat period. */
  heartbeatAt: number | null;
  /** Consecutive failed attempts. */
  failures: number;
  /** When the current run of failures began; null while deliveries succeed. */
  failingSince: number | null;
  /** The last failure, in words without the endpoint's answer body (for $status). */
  lastError: string | null;
  /** End of life (Subscription.end), epoch ms. */
  endAt: number | null;
  leaseOwner: string | null;
  leaseUntil: number | null;
  createdAt: number;
  updatedAt: number;
}

export type NewSubscription = Pick<
  StoredSubscription,
  'id' | 'tenantId' | 'topic' | 'resource' | 'filter' | 'heartbeatAt' | 'endAt'
> & { now: number };

/** One recorded event of a subscription. */
export interface SubscriptionEvent {
  subscriptionId: string;
  /** 1, 2, 3... per subscription, no gap. */
  number: number;
  checkId: string;
  cerVersion: number;
  /** When the CER turned final (the event's timestamp), epoch ms. */
  occurredAt: number;
}

/** What a delivery may change on its subscription (fenced by the claim token). */
export type DeliveryPatch = Partial<
  Pick<
    StoredSubscription,
    | 'status'
    | 'handshakeDue'
    | 'deliveredThrough'
    | 'nextAttemptAt'
    | 'heartbeatAt'
    | 'failures'
    | 'failingSince'
    | 'lastError'
    | 'leaseUntil'
  >
>;

export interface SubscriptionClaim {
  owner: string;
  now: number;
  leaseMs: number;
  limit: number;
}

export interface SubscriptionStore {
  create(subscription: NewSubscription): Promise<StoredSubscription>;
  /** A subscription of the tenant; another tenant's is null (404). */
  get(tenantId: string, id: string): Promise<StoredSubscription | null>;
  /** The tenant's subscriptions, optionally of some statuses, oldest first, at most `limit`. */
  list(
    tenantId: string,
    statuses: readonly SubscriptionStatus[] | undefined,
    limit: number,
  ): Promise<StoredSubscription[]>;
  /**
   * Replaces a subscription's resource, filter and end (PUT) and starts it over with a new
   * handshake: status `requested`, failures cleared. Its events and their numbers stay; those not
   * yet delivered go out once the handshake succeeds. Null when the tenant has none of that id.
   */
  replace(
    tenantId: string,
    id: string,
    update: Pick<StoredSubscription, 'resource' | 'filter' | 'endAt'>,
    now: number,
  ): Promise<StoredSubscription | null>;
  /** Deletes a subscription and its events; false when the tenant has none of that id. */
  delete(tenantId: string, id: string): Promise<boolean>;
  /** Events numbered `from` and up (inclusive), in order, at most `limit`. */
  events(subscriptionId: string, from: number, limit: number): Promise<SubscriptionEvent[]>;
  /**
   * Claims subscriptions with work due (a handshake, undelivered events, a heartbeat, the end) whose backoff
   * is over and whose lease is free: `requested` and `active` ones only. PostgreSQL uses FOR UPDATE
   * SKIP LOCKED, so two replicas never hold one subscription (never send one event twice at once).
   */
  claimDue(claim: SubscriptionClaim): Promise<StoredSubscription[]>;
  /** Applies a delivery's patch while `owner` still holds the claim; false when it was lost. */
  settle(id: string, owner: string, patch: DeliveryPatch, now: number, release?: boolean): Promise<boolean>;
  /** Drops every lease of this owner's claim tokens (`owner:round`). */
  releaseAll(owner: string): Promise<void>;
}
