/** The status Parameters of a notification (docs/notifications.md, "What arrives"). */
import { describe, expect, it } from 'vitest';
import { statusParameters } from '../../src/notifications/bundles.js';
import type { StoredSubscription } from '../../src/checks/store/subscription-store.js';
import { ELIGIBILITY_FINAL_TOPIC } from '../../src/checks/store/subscription-store.js';

const T0 = Date.UTC(2026, 0, 1);

function stored(eventsCount: number): StoredSubscription {
  return {
    id: 's1',
    tenantId: 'a',
    topic: ELIGIBILITY_FINAL_TOPIC,
    status: 'active',
    resource: {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'test',
      criteria: ELIGIBILITY_FINAL_TOPIC,
      channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook', payload: 'application/fhir+json' },
    },
    filter: {},
    eventsCount,
    deliveredThrough: 0,
    handshakeDue: false,
    nextAttemptAt: T0,
    heartbeatAt: null,
    failures: 0,
    failingSince: null,
    lastError: null,
    endAt: null,
    leaseOwner: null,
    leaseUntil: null,
    createdAt: T0,
    updatedAt: T0,
  };
}

const since = (eventsCount: number, numbers: number[]) =>
  statusParameters(
    {
      fhirBase: 'http://x/fhir',
      subscription: stored(eventsCount),
      content: 'id-only',
      status: 'active',
      now: T0,
    },
    numbers.length ? 'event-notification' : 'heartbeat',
    numbers.map((number) => ({
      event: { subscriptionId: 's1', number, checkId: `c${number}`, cerVersion: 2, occurredAt: T0 },
    })),
  ).parameter?.find((p) => p.name === 'events-since-subscription-start')?.valueString;

describe('events-since-subscription-start', () => {
  it('is never below the event numbers the notification carries (events recorded after the claim)', () => {
    expect(since(1, [1, 2, 3])).toBe('3');
    expect(since(5, [2, 3])).toBe('5');
    expect(since(4, [])).toBe('4');
  });
});
