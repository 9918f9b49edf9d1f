/**
 * The delivery worker: claims subscriptions with work due (a handshake, undelivered events, a
 * heartbeat) with a lease, as the check scheduler claims checks, and POSTs their notifications
 * (docs/notifications.md). Per subscription, events go one notification each, in event-number
 * order; a failure stops the subscription's run and schedules a retry with exponential backoff
 * and jitter (capped at 60 s) until it has failed for SUBSCRIPTION_RETRY_MINUTES, then the
 * subscription turns `error` (its events stay readable with $events). Delivery is at least once:
 * an event acknowledged by the endpoint but not yet recorded when a replica dies is sent again.
 * Rules: https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/channels.html#rest-hook (handshake,
 * heartbeat, the POST of a Bundle) and errors.html (the subscription turns error).
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import { Agent, request } from 'undici';
import type { CheckStore } from '../checks/store/check-store.js';
import type { StoredSubscription, SubscriptionEvent } from '../checks/store/subscription-store.js';
import type { Logger } from '../log.js';
import { RoundLoop } from '../checks/round-loop.js';
import { notificationBundle } from './bundles.js';
import type { EventWithFocus, NotificationContext, NotificationType } from './bundles.js';
import { channelOf, type Channel } from './subscription-input.js';

/** Backoff cap between attempts (the contract). */
export const MAX_BACKOFF_MS = 60_000;
/** The first retry waits about this long; each failure doubles it. */
const FIRST_BACKOFF_MS = 500;
/** Of an endpoint's answer, at most this much is read (then the connection is dropped). */
const BODY_LIMIT = 4096;
/** Events sent per claim of a subscription, so one busy subscription does not hold a slot forever. */
const EVENTS_PER_CLAIM = 200;
/** A claim's lease: the default timeout (10 s) and a margin; renewed with each acknowledged event. */
const CLAIM_LEASE_MS = 15_000;
/** What a lease must cover beyond one attempt's timeout. */
const LEASE_MARGIN_MS = 5_000;

export interface DeliveryMetrics {
  sent(type: NotificationType): void;
  failed(type: NotificationType): void;
  retried(): void;
  /** From the CER's final write (the event) to the endpoint's 2xx, seconds. */
  lag(seconds: number): void;
}

export interface WorkerOptions {
  store: CheckStore;
  logger: Logger;
  owner: string;
  now: () => number;
  /** `${PUBLIC_BASE_URL}/fhir`. */
  fhirBase: string;
  /** How long failures are retried before the subscription turns `error`. */
  retryMs: number;
  /** Idle wait between rounds when nothing was due (another replica's events are found then). */
  idleMs: number;
  /** Subscriptions delivered at once. */
  concurrency: number;
  metrics?: DeliveryMetrics;
}

/** Exponential backoff with full jitter in its upper half, capped: attempt 1 -> ~0.5 s, 2 -> ~1 s... */
export function backoffMs(failures: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

type Attempt = { ok: true } | { ok: false; reason: string };

export class DeliveryWorker {
  private readonly loop: RoundLoop;
  private round = 0;
  private readonly active = new Set<Promise<void>>();
  /** Connections to endpoints: no redirect is followed (undici's request never follows one). */
  private readonly agent = new Agent({ connections: 16, keepAliveTimeout: 10_000 });

  constructor(private readonly options: WorkerOptions) {
    this.loop = new RoundLoop({
      logger: options.logger,
      what: 'delivery round',
      idleMs: options.idleMs,
      round: () => this.tick(),
      settle: () => Promise.allSettled([...this.active]),
      release: {
        what: 'delivery worker',
        leases: () => options.store.subscriptions.releaseAll(options.owner),
      },
    });
  }

  start(): void {
    this.loop.start();
  }

  /**
   * Runs a round now (a check turned final, or a subscription was created). Call it once the write
   * that made work due has committed: the round's first look (claimDue) reads committed rows, so a
   * write still queued in SQLite's group commit would be found a round (idleMs) later.
   */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.agent.close();
  }

  /** One round: claims due subscriptions and delivers each. Returns how many were claimed. */
  async tick(): Promise<number> {
    const capacity = this.options.concurrency - this.active.size;
    if (capacity <= 0) return 0;
    this.round += 1;
    const token = `${this.options.owner}:${this.round}`;
    const claimed = await this.options.store.subscriptions.claimDue({
      owner: token,
      now: this.options.now(),
      // Covers one attempt at the default timeout; deliver() extends it for longer timeouts, and
      // each acknowledged event renews it. A replica that dies frees its subscriptions this soon.
      leaseMs: CLAIM_LEASE_MS,
      limit: capacity,
    });
    for (const subscription of claimed) {
      const run = this.deliver(subscription, token)
        .catch((error: unknown) => {
          this.options.logger.error('subscription delivery failed', {
            subscriptionId: subscription.id,
            error,
          });
        })
        .finally(() => {
          this.active.delete(run);
          // A run that stopped at EVENTS_PER_CLAIM has more: go again at once.
          this.wake();
        });
      this.active.add(run);
    }
    return claimed.length;
  }

  /** One claimed subscription: its handshake, its due events in order, or a heartbeat. */
  private async deliver(claimed: StoredSubscription, token: string): Promise<void> {
    let subscription = claimed;
    const { store, now } = this.options;
    const subs = store.subscriptions;
    const channel = channelOf(subscription.resource);
    const leaseMs = channel.timeoutSeconds * 1000 + LEASE_MARGIN_MS;
    if (
      leaseMs > CLAIM_LEASE_MS &&
      !(await subs.settle(subscription.id, token, { leaseUntil: now() + leaseMs }, now()))
    )
      return;
    if (subscription.endAt !== null && subscription.endAt <= now()) {
      // Subscription.end: the subscription is over (https://hl7.org/fhir/R4/subscription-definitions.html#Subscription.end).
      await subs.settle(subscription.id, token, { status: 'off' }, now(), true);
      return;
    }
    if (subscription.handshakeDue) {
      // The handshake: a 2xx turns the subscription active, anything else error (channels.html).
      const attempt = await this.post(subscription, channel, 'handshake', [], 'requested');
      const at = now();
      await subs.settle(
        subscription.id,
        token,
        attempt.ok
          ? {
              status: 'active',
              handshakeDue: false,
              heartbeatAt: heartbeatAfter(channel, at),
              lastError: null,
            }
          : { status: 'error', handshakeDue: false, lastError: `handshake failed: ${attempt.reason}` },
        at,
        true,
      );
      this.logOutcome(subscription, 'handshake', attempt);
      return;
    }
    let delivered = subscription.deliveredThrough;
    if (delivered < subscription.eventsCount) {
      const events = await subs.events(subscription.id, delivered + 1, EVENTS_PER_CLAIM);
      let next = 0;
      while (next < events.length) {
        // The next events in order, at most backport-max-count of them in one notification (a
        // backlog, after an outage or a burst, goes out in few requests); never a skipped number.
        const batch: SubscriptionEvent[] = [];
        while (batch.length < channel.maxCount && events[next]?.number === delivered + batch.length + 1)
          batch.push(events[next++]!);
        if (batch.length === 0) break;
        const withFocus: EventWithFocus[] = [];
        for (const event of batch)
          withFocus.push({ event, cer: await this.focus(subscription, channel, event) });
        const attempt = await this.post(subscription, channel, 'event-notification', withFocus, 'active');
        if (!attempt.ok) {
          await this.failed(subscription, token, attempt.reason, 'event-notification');
          return;
        }
        delivered = batch[batch.length - 1]!.number;
        // Acknowledged: a failure later in this run starts a new run of failures.
        subscription = { ...subscription, failures: 0, failingSince: null };
        const at = now();
        for (const event of batch) this.options.metrics?.lag(Math.max(0, at - event.occurredAt) / 1000);
        // The run's last write drops the lease with it (events that came meanwhile are claimed anew).
        const last = next >= events.length;
        const kept = await subs.settle(
          subscription.id,
          token,
          {
            deliveredThrough: delivered,
            failures: 0,
            failingSince: null,
            lastError: null,
            heartbeatAt: heartbeatAfter(channel, at),
            leaseUntil: at + leaseMs,
          },
          at,
          last,
        );
        if (!kept || last) return; // a lost claim: another replica goes on from what is recorded
      }
      await subs.settle(subscription.id, token, {}, now(), true);
      return;
    }
    // Nothing else was due: the heartbeat (channels.html#heartbeats).
    const attempt = await this.post(subscription, channel, 'heartbeat', [], 'active');
    if (!attempt.ok) {
      await this.failed(subscription, token, attempt.reason, 'heartbeat');
      return;
    }
    const at = now();
    await subs.settle(
      subscription.id,
      token,
      { heartbeatAt: heartbeatAfter(channel, at), failures: 0, failingSince: null, lastError: null },
      at,
      true,
    );
  }

  /** The CER of an event for a full-resource payload (absent when purged since). */
  private async focus(
    subscription: StoredSubscription,
    channel: Channel,
    event: SubscriptionEvent,
  ): Promise<CoverageEligibilityResponse | undefined> {
    if (channel.content !== 'full-resource') return undefined;
    const stored = await this.options.store.getCerJson(subscription.tenantId, event.checkId);
    return stored ? (JSON.parse(stored.json) as CoverageEligibilityResponse) : undefined;
  }

  /** A failed attempt: backoff, or `error` once failures have lasted the retry window. */
  private async failed(
    subscription: StoredSubscription,
    token: string,
    reason: string,
    type: NotificationType,
  ): Promise<void> {
    const at = this.options.now();
    const failures = subscription.failures + 1;
    const since = subscription.failingSince ?? at;
    const givingUp = at - since >= this.options.retryMs;
    await this.options.store.subscriptions.settle(
      subscription.id,
      token,
      givingUp
        ? { status: 'error', failures, failingSince: since, lastError: reason }
        : {
            failures,
            failingSince: since,
            lastError: reason,
            nextAttemptAt: at + backoffMs(failures),
            // A failed heartbeat is retried like an event, not rescheduled a period later.
            ...(type === 'heartbeat' ? { heartbeatAt: at } : {}),
          },
      at,
      true,
    );
    if (!givingUp) this.options.metrics?.retried();
    this.logOutcome(subscription, type, { ok: false, reason }, givingUp ? 'error' : undefined);
  }

  /** POSTs one notification Bundle; a 2xx within the timeout is success. */
  private async post(
    subscription: StoredSubscription,
    channel: Channel,
    type: NotificationType,
    events: readonly EventWithFocus[],
    status: StoredSubscription['status'],
  ): Promise<Attempt> {
    const context: NotificationContext = {
      fhirBase: this.options.fhirBase,
      subscription,
      content: channel.content,
      status,
      now: this.options.now(),
    };
    const body = JSON.stringify(notificationBundle(context, type, events));
    const timeoutMs = channel.timeoutSeconds * 1000;
    const headers: Record<string, string> = {};
    // Sent as given, and never logged (they often carry the engine's bearer token).
    for (const [name, value] of channel.headers) headers[name] = value;
    headers['content-type'] = 'application/fhir+json';
    let attempt: Attempt;
    try {
      const answer = await request(channel.endpoint, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.agent,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      // Only a little of the answer is read; a redirect (3xx) is a failure, never followed.
      await answer.body.dump({ limit: BODY_LIMIT }).catch(() => undefined);
      attempt =
        answer.statusCode >= 200 && answer.statusCode < 300
          ? { ok: true }
          : { ok: false, reason: `endpoint answered HTTP ${answer.statusCode}` };
    } catch (error) {
      const name = error instanceof Error ? error.name : 'Error';
      const timedOut =
        name === 'TimeoutError' || name === 'HeadersTimeoutError' || name === 'BodyTimeoutError';
      attempt = {
        ok: false,
        reason: timedOut ? `no answer within ${channel.timeoutSeconds} s` : 'endpoint unreachable',
      };
    }
    if (attempt.ok) this.options.metrics?.sent(type);
    else this.options.metrics?.failed(type);
    return attempt;
  }

  /** One line per handshake and per failure: ids and reasons only, never the endpoint's headers. */
  private logOutcome(
    subscription: StoredSubscription,
    type: NotificationType,
    attempt: Attempt,
    status?: string,
  ): void {
    const fields = {
      subscriptionId: subscription.id,
      tenantId: subscription.tenantId,
      type,
      ...(attempt.ok ? {} : { reason: attempt.reason }),
      ...(status ? { status } : {}),
    };
    if (attempt.ok) this.options.logger.info('notification delivered', fields);
    else this.options.logger.warn('notification failed', fields);
  }
}

function heartbeatAfter(channel: Channel, now: number): number | null {
  return channel.heartbeatSeconds === null ? null : now + channel.heartbeatSeconds * 1000;
}
