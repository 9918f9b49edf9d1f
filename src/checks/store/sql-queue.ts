/**
 * The line of each tenant (docs/queue.md), in SQL: the claim that starts waiting checks within
 * maxInFlight, desk work first and background work kept off the desk's slots, and the counts of
 * the line (the operator view, a queued CER's wait, /metrics). SQLite and PostgreSQL alike; what
 * differs is the dialect's (row and tenant locks, index hints).
 */
import { SLOT_STATES } from './check-store.js';
import type { ClaimOptions, ClaimedCheck, QueueCounts } from './check-store.js';
import { CLAIMED_COLUMNS, int, planClaim, rowToCandidate, text } from './rows.js';
import type { Row } from './rows.js';
import type { Dialect, Work } from './driver.js';
import { query } from './driver.js';
import { QUEUE_ORDER } from './schema.js';
import { TERMINAL_STATUSES } from '../../upstream/contract.js';
import { deskSlotsOf } from '../../mapping/request/queue-place.js';
import type { QueueClass, QueuePlace } from '../../mapping/request/queue-place.js';

/** SLOT_STATES as an SQL list of literals (fixed values, never user input). */
const SLOT_STATES_SQL = `(${SLOT_STATES.map((state) => `'${state}'`).join(', ')})`;
/** A due row that is not leased: the condition of every claim query, `now` being $1. */
const DUE = 'next_run_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)';
/**
 * A row in SLOT_STATES that holds a tenant slot: all but a search-all whose upstream task is
 * terminal. A search-all holds its slot until its task is terminal or the search is complete,
 * whichever comes first (docs/lifecycle.md); after a terminal task it is still polled for the
 * payers that answer late, without a slot (the portal sessions of the task are over).
 */
const HOLDS_SLOT = `NOT (is_search_all = TRUE AND COALESCE(upstream_status, '') IN (${TERMINAL_STATUSES.map((s) => `'${s}'`).join(', ')}))`;
const CLAIMED = 'id, next_run_at, created_at';

/**
 * The claim: due slot-state checks (polls) and, per tenant under its lock, the waiting checks that
 * may start now, in the order of the tenant's line (QUEUE_ORDER: desk first), background work
 * within maxInFlight - deskSlots. The one place the line is ordered (docs/queue.md).
 */
export function* claiming(
  dialect: Dialect,
  toClaimed: (row: Row) => ClaimedCheck,
  options: ClaimOptions,
): Work<ClaimedCheck[]> {
  const { owner, now, leaseMs, limit } = options;
  const { lockRows } = dialect;
  const candidates = (yield* query(
    `SELECT ${CLAIMED} FROM checks WHERE state IN ${SLOT_STATES_SQL} AND ${DUE}
         ORDER BY next_run_at, created_at, id LIMIT $2${lockRows}`,
    [now, limit],
  )).map((row) => rowToCandidate(row, false));
  const tenants = yield* query(
    `SELECT DISTINCT tenant_id FROM checks WHERE state = 'waiting' AND ${DUE} ORDER BY tenant_id`,
    [now],
  );
  // Tenants in a fixed order, so two claimers taking several tenant locks cannot deadlock.
  for (const tenantId of tenants.map((row) => text(row, 'tenant_id'))) {
    const lock = dialect.lockTenant(tenantId);
    if (lock) yield lock;
    // Counted after the lock: it sees every promotion committed before.
    const busy = yield* query(
      `SELECT queue_class, COUNT(*) AS count FROM checks
         WHERE tenant_id = $1 AND state IN ${SLOT_STATES_SQL} AND ${HOLDS_SLOT} GROUP BY queue_class`,
      [tenantId],
    );
    const running = (queueClass: QueueClass): number =>
      busy
        .filter((row) => text(row, 'queue_class') === queueClass)
        .reduce((n, row) => n + int(row, 'count'), 0);
    const maxInFlight = options.maxInFlight(tenantId);
    const free = Math.min(maxInFlight - running('desk') - running('background'), limit);
    if (free <= 0) continue;
    // Background work never holds the tenant's desk slots (docs/queue.md).
    const deskSlots = options.deskSlots?.(tenantId) ?? deskSlotsOf(maxInFlight);
    let backgroundFree = maxInFlight - deskSlots - running('background');
    // The tenant's line, in its order (QUEUE_ORDER, which the partial index checks_queue_idx
    // holds), so LIMIT stops early (SQLite is told the index: it has no statistics).
    const waiting = yield* query(
      `SELECT ${CLAIMED}, tenant_id, queue_class FROM checks${dialect.indexedBy('checks_queue_idx')}
         WHERE tenant_id = $2 AND state = 'waiting' AND ${DUE} ORDER BY ${QUEUE_ORDER} LIMIT $3${lockRows}`,
      [now, tenantId, free],
    );
    for (const row of waiting) {
      if (text(row, 'queue_class') === 'background') {
        if (backgroundFree <= 0) break;
        backgroundFree -= 1;
      }
      candidates.push(rowToCandidate(row, true));
    }
  }
  const plan = planClaim(candidates, limit);
  if (plan.length === 0) return [];
  const { batch, match, bind } = dialect.claimRows;
  // Without the documents: most steps are polls that use none of them (bench/README.md, figure 3).
  const claim = `UPDATE checks SET lease_owner = $1, lease_until = $2,
         state = CASE WHEN id ${match('$3')} THEN 'starting' ELSE state END
       WHERE id ${match('$4')} RETURNING ${CLAIMED_COLUMNS.join(', ')}`;
  const claimed = new Map<string, ClaimedCheck>();
  for (let start = 0; start < plan.length; start += batch) {
    const rows = plan.slice(start, start + batch);
    const promoted = rows.filter((c) => c.promote).map((c) => c.id);
    const ids = rows.map((c) => c.id);
    for (const row of yield* query(claim, [owner, now + leaseMs, bind(promoted), bind(ids)]))
      claimed.set(text(row, 'id'), toClaimed(row));
  }
  return plan.flatMap((c) => claimed.get(c.id) ?? []);
}

/** The tenant's checks waiting and holding a slot. */
export function* countingQueue(tenantId: string): Work<{ waiting: number; inFlight: number }> {
  const rows = yield* query(
    `SELECT state, COUNT(*) AS count FROM checks
       WHERE tenant_id = $1 AND state IN ('waiting', ${SLOT_STATES_SQL.slice(1, -1)}) AND ${HOLDS_SLOT}
       GROUP BY state`,
    [tenantId],
  );
  let waiting = 0;
  let inFlight = 0;
  for (const row of rows) {
    if (text(row, 'state') === 'waiting') waiting += int(row, 'count');
    else inFlight += int(row, 'count');
  }
  return { waiting, inFlight };
}

/** The tenant's line per class. */
export function* countingQueueByClass(tenantId: string): Work<QueueCounts> {
  const rows = yield* query(
    `SELECT queue_class, state, COUNT(*) AS count FROM checks
       WHERE tenant_id = $1 AND state IN ('waiting', ${SLOT_STATES_SQL.slice(1, -1)}) AND ${HOLDS_SLOT}
       GROUP BY queue_class, state`,
    [tenantId],
  );
  const counts: QueueCounts = { desk: { waiting: 0, running: 0 }, background: { waiting: 0, running: 0 } };
  for (const row of rows) {
    const of = counts[text(row, 'queue_class') === 'background' ? 'background' : 'desk'];
    if (text(row, 'state') === 'waiting') of.waiting += int(row, 'count');
    else of.running += int(row, 'count');
  }
  return counts;
}

/** Waiting checks of all tenants per class. */
export function* countingWaitingByClass(): Work<Record<QueueClass, number>> {
  const rows = yield* query(
    "SELECT queue_class, COUNT(*) AS count FROM checks WHERE state = 'waiting' GROUP BY queue_class",
  );
  const counts: Record<QueueClass, number> = { desk: 0, background: 0 };
  for (const row of rows)
    counts[text(row, 'queue_class') === 'background' ? 'background' : 'desk'] += int(row, 'count');
  return counts;
}

/** How many of the tenant's waiting checks a new check with this place starts after. */
export function* countingAhead(
  dialect: Dialect,
  tenantId: string,
  place: QueuePlace,
  createdAt: number,
): Work<number> {
  // Every desk check is ahead of a background one; within a class, QUEUE_ORDER's keys.
  const stat = place.priority === 'stat' ? 0 : 1;
  const rank = "(CASE WHEN priority = 'stat' THEN 0 ELSE 1 END)";
  const sameClass = `queue_class = $2 AND (${rank} < $3 OR (${rank} = $3 AND (queue_deadline_at < $4
         OR (queue_deadline_at = $4 AND created_at <= $5))))`;
  const ahead =
    place.queueClass === 'background' ? `(queue_class = 'desk' OR (${sameClass}))` : `(${sameClass})`;
  const [row] = yield* query(
    `SELECT COUNT(*) AS count FROM checks${dialect.indexedBy('checks_queue_idx')}
       WHERE tenant_id = $1 AND state = 'waiting' AND ${ahead}`,
    [tenantId, place.queueClass, stat, place.queueDeadlineAt, createdAt],
  );
  return row ? int(row, 'count') : 0;
}
