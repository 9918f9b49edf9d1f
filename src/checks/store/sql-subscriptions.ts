/**
 * The subscription store on SQLite and PostgreSQL (subscription-store.ts), on the check store's
 * driver: the same statements on both databases, their differences in the dialect (row locks of a
 * claim, JSON and boolean columns). `recordEvents` is the outbox write, run by SqlStore inside the
 * transaction that stores a CER's first final version.
 */
import type { Subscription } from 'fhir/r4.js';
import { matchesFilter, SUBSCRIPTION_STATUSES } from './subscription-store.js';
import type {
  DeliveryPatch,
  EventFilter,
  FinalCheckFacts,
  NewSubscription,
  StoredSubscription,
  SubscriptionClaim,
  SubscriptionEvent,
  SubscriptionStatus,
  SubscriptionStore,
} from './subscription-store.js';
import { bool, int, nullableInt, nullableText, oneOf, text } from './rows.js';
import type { Row } from './rows.js';
import type { Dialect, SqlDriver, Work } from './driver.js';
import { query } from './driver.js';
import { claimLeased, releaseOwner } from './sql-leases.js';

/** Columns a delivery may patch, by DeliveryPatch key. */
const DELIVERY_COLUMNS: Record<keyof DeliveryPatch, string> = {
  status: 'status',
  handshakeDue: 'handshake_due',
  deliveredThrough: 'delivered_through',
  nextAttemptAt: 'next_attempt_at',
  heartbeatAt: 'heartbeat_at',
  failures: 'failures',
  failingSince: 'failing_since',
  lastError: 'last_error',
  leaseUntil: 'lease_until',
};

/** Work is due: a handshake, undelivered events, a heartbeat, or the end (to turn off); $1 is now. */
const DUE = `status IN ('requested', 'active') AND next_attempt_at <= $1
  AND (lease_until IS NULL OR lease_until <= $1)
  AND (handshake_due = $2 OR delivered_through < events_count OR heartbeat_at <= $1 OR end_at <= $1)`;

function rowToSubscription(row: Row, readJson: (value: unknown) => unknown): StoredSubscription {
  return {
    id: text(row, 'id'),
    tenantId: text(row, 'tenant_id'),
    topic: text(row, 'topic'),
    status: oneOf(row, 'status', SUBSCRIPTION_STATUSES),
    resource: readJson(row.resource) as Subscription,
    filter: readJson(row.filter) as EventFilter,
    eventsCount: int(row, 'events_count'),
    deliveredThrough: int(row, 'delivered_through'),
    handshakeDue: bool(row, 'handshake_due'),
    nextAttemptAt: int(row, 'next_attempt_at'),
    heartbeatAt: nullableInt(row, 'heartbeat_at'),
    failures: int(row, 'failures'),
    failingSince: nullableInt(row, 'failing_since'),
    lastError: nullableText(row, 'last_error'),
    endAt: nullableInt(row, 'end_at'),
    leaseOwner: nullableText(row, 'lease_owner'),
    leaseUntil: nullableInt(row, 'lease_until'),
    createdAt: int(row, 'created_at'),
    updatedAt: int(row, 'updated_at'),
  };
}

function rowToEvent(row: Row): SubscriptionEvent {
  return {
    subscriptionId: text(row, 'subscription_id'),
    number: int(row, 'event_number'),
    checkId: text(row, 'check_id'),
    cerVersion: int(row, 'cer_version'),
    occurredAt: int(row, 'occurred_at'),
  };
}

/**
 * The outbox write: one event for each live subscription of the tenant whose filter matches the
 * check, numbered one past the subscription's last (the UPDATE takes the row's lock, so two
 * replicas finishing checks at once still number 1, 2, 3... with no gap: a rolled-back write
 * takes its number back with it). Subscriptions in `error` keep counting, so their events stay
 * readable with $events; `off` and ended ones do not.
 */
export function* recordEvents(
  dialect: Dialect,
  topic: string,
  facts: FinalCheckFacts,
  now: number,
): Work<number> {
  // In id order (PostgreSQL: locked in that order), so two transactions finishing checks of one
  // tenant at once wait for each other instead of deadlocking.
  const subscriptions = yield* query(
    `SELECT id, filter FROM subscriptions
     WHERE tenant_id = $1 AND topic = $2 AND status IN ('requested', 'active', 'error')
       AND (end_at IS NULL OR end_at > $3)
     ORDER BY id${dialect.types.kind === 'postgres' ? ' FOR UPDATE' : ''}`,
    [facts.tenantId, topic, now],
  );
  const matching = subscriptions
    .filter((row) => matchesFilter(dialect.readJson(row.filter) as EventFilter, facts))
    .map((row) => text(row, 'id'));
  if (matching.length === 0) return 0;
  const values = [facts.tenantId, facts.checkId, facts.cerVersion, now];
  if (dialect.types.kind === 'postgres') {
    // One round trip for all of them: the transaction holds a connection of the shared pool.
    yield {
      sql: `WITH counted AS (
              UPDATE subscriptions SET events_count = events_count + 1 WHERE id = ANY($1::text[])
              RETURNING id, events_count)
            INSERT INTO subscription_events (subscription_id, event_number, tenant_id, check_id, cer_version, occurred_at)
            SELECT id, events_count, $2, $3, $4, $5 FROM counted`,
      params: [matching, ...values],
    };
    return matching.length;
  }
  let recorded = 0;
  for (const id of matching) {
    const [counted] = yield* query(
      'UPDATE subscriptions SET events_count = events_count + 1 WHERE id = $1 RETURNING events_count',
      [id],
    );
    if (!counted) continue;
    yield {
      sql: `INSERT INTO subscription_events (subscription_id, event_number, tenant_id, check_id, cer_version, occurred_at)
            VALUES ($1, $2, $3, $4, $5, $6)`,
      params: [id, int(counted, 'events_count'), ...values],
    };
    recorded += 1;
  }
  return recorded;
}

export class SqlSubscriptionStore implements SubscriptionStore {
  private readonly dialect: Dialect;
  private readonly toSubscription: (row: Row) => StoredSubscription;

  constructor(private readonly driver: SqlDriver) {
    this.dialect = driver.dialect;
    const { readJson } = this.dialect;
    this.toSubscription = (row) => rowToSubscription(row, readJson);
  }

  async create(s: NewSubscription): Promise<StoredSubscription> {
    const { json, bool: asBool } = this.dialect;
    const [row] = await this.rows(
      `INSERT INTO subscriptions (id, tenant_id, topic, status, resource, filter, events_count,
         delivered_through, handshake_due, next_attempt_at, heartbeat_at, failures, end_at, created_at, updated_at)
       VALUES ($1, $2, $3, 'requested', ${json('$4')}, ${json('$5')}, 0, 0, $6, $7, $8, 0, $9, $7, $7)
       RETURNING *`,
      [
        s.id,
        s.tenantId,
        s.topic,
        JSON.stringify(s.resource),
        JSON.stringify(s.filter),
        asBool(true),
        s.now,
        s.heartbeatAt,
        s.endAt,
      ],
      'write',
    );
    if (!row) throw new Error(`subscription ${s.id} was not stored`);
    return this.toSubscription(row);
  }

  async get(tenantId: string, id: string): Promise<StoredSubscription | null> {
    const [row] = await this.rows('SELECT * FROM subscriptions WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      id,
    ]);
    return row ? this.toSubscription(row) : null;
  }

  async list(
    tenantId: string,
    statuses: readonly SubscriptionStatus[] | undefined,
    limit: number,
  ): Promise<StoredSubscription[]> {
    const params: unknown[] = [tenantId, limit];
    let where = 'tenant_id = $1';
    if (statuses) {
      const placeholders = statuses.map((status) => {
        params.push(status);
        return `$${params.length}`;
      });
      where += placeholders.length ? ` AND status IN (${placeholders.join(', ')})` : ' AND FALSE';
    }
    const rows = await this.rows(
      `SELECT * FROM subscriptions WHERE ${where} ORDER BY created_at, id LIMIT $2`,
      params,
    );
    return rows.map(this.toSubscription);
  }

  async replace(
    tenantId: string,
    id: string,
    update: Pick<StoredSubscription, 'resource' | 'filter' | 'endAt'>,
    now: number,
  ): Promise<StoredSubscription | null> {
    const { json } = this.dialect;
    // The lease is dropped: a delivery under way (to the old endpoint) no longer holds it, so its
    // writes (settle checks lease_owner) cannot overwrite the new channel's state, and the next
    // claim sends the handshake to the new endpoint.
    const [row] = await this.rows(
      `UPDATE subscriptions SET resource = ${json('$3')}, filter = ${json('$4')}, end_at = $5,
         status = 'requested', handshake_due = $6, next_attempt_at = $7, heartbeat_at = NULL,
         failures = 0, failing_since = NULL, last_error = NULL, updated_at = $7,
         lease_owner = NULL, lease_until = NULL
       WHERE tenant_id = $1 AND id = $2 RETURNING *`,
      [
        tenantId,
        id,
        JSON.stringify(update.resource),
        JSON.stringify(update.filter),
        update.endAt,
        this.dialect.bool(true),
        now,
      ],
      'write',
    );
    return row ? this.toSubscription(row) : null;
  }

  async delete(tenantId: string, id: string): Promise<boolean> {
    return this.driver.run('write', this.deleting(tenantId, id));
  }

  async events(subscriptionId: string, from: number, limit: number): Promise<SubscriptionEvent[]> {
    const rows = await this.rows(
      `SELECT * FROM subscription_events WHERE subscription_id = $1 AND event_number >= $2
       ORDER BY event_number LIMIT $3`,
      [subscriptionId, from, limit],
    );
    return rows.map(rowToEvent);
  }

  async claimDue({ owner, now, leaseMs, limit }: SubscriptionClaim): Promise<StoredSubscription[]> {
    if (limit <= 0) return [];
    // Most rounds find nothing due (one runs each time a check turns final, and every 100 ms): the
    // read first saves about 0.25 ms of CPU a round on SQLite (bench:cost).
    const rows = await claimLeased(this.driver, {
      table: 'subscriptions',
      due: DUE,
      dueParams: [now, this.dialect.bool(true)],
      order: 'next_attempt_at, id',
      columns: '*',
      owner,
      leaseUntil: now + leaseMs,
      limit,
    });
    return rows.map(this.toSubscription);
  }

  async settle(
    id: string,
    owner: string,
    patch: DeliveryPatch,
    now: number,
    release = false,
  ): Promise<boolean> {
    const params: unknown[] = [];
    const add = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    const sets = [`updated_at = ${add(now)}`];
    for (const [key, column] of Object.entries(DELIVERY_COLUMNS) as Array<[keyof DeliveryPatch, string]>) {
      const value = patch[key];
      // A released lease has no end (and PostgreSQL refuses a column set twice).
      if (value === undefined || (release && key === 'leaseUntil')) continue;
      sets.push(`${column} = ${add(typeof value === 'boolean' ? this.dialect.bool(value) : value)}`);
    }
    if (release) sets.push('lease_owner = NULL', 'lease_until = NULL');
    const sql = `UPDATE subscriptions SET ${sets.join(', ')} WHERE id = ${add(id)} AND lease_owner = ${add(owner)}`;
    const result = await this.driver.run(
      'write',
      (function* (): Work<number> {
        return (yield { sql, params }).changed;
      })(),
    );
    return result === 1;
  }

  async releaseAll(owner: string): Promise<void> {
    await releaseOwner(this.driver, 'subscriptions', owner, 'single');
  }

  // ---- the work of each call --------------------------------------------------------------

  private rows(
    sql: string,
    params: readonly unknown[] = [],
    mode: 'single' | 'write' = 'single',
  ): Promise<Row[]> {
    return this.driver.run(mode, query(sql, params));
  }

  private *deleting(tenantId: string, id: string): Work<boolean> {
    const [row] = yield* query('DELETE FROM subscriptions WHERE tenant_id = $1 AND id = $2 RETURNING id', [
      tenantId,
      id,
    ]);
    if (!row) return false;
    yield { sql: 'DELETE FROM subscription_events WHERE subscription_id = $1', params: [id] };
    return true;
  }
}
