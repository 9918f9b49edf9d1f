/**
 * The lease statements the workers' stores share (evidence, appointments, subscriptions): claim
 * the due rows of a table for a round's token, and let go of every lease of a replica.
 */
import { query, type Mode, type SqlDriver } from './driver.js';
import type { Row } from './rows.js';

export interface LeaseClaim {
  table: string;
  /** Which rows are due; its parameters are `dueParams`, $1 on. */
  due: string;
  dueParams: readonly unknown[];
  /** The order rows are picked in: "next_run_at, id". */
  order: string;
  /** What the claimed rows return: "*" or a column list. */
  columns: string;
  /** The round's claim token (`owner:round`). */
  owner: string;
  leaseUntil: number;
  limit: number;
}

/**
 * Claims up to `limit` due rows. Most rounds find nothing due: a read says so without a write (on
 * SQLite a place in the group commit, on PostgreSQL an UPDATE); a row due a moment later is the
 * next round's. Then one statement, so one round trip and atomic on both databases: PostgreSQL
 * locks the due rows it picks (FOR UPDATE SKIP LOCKED, so a second replica's claim skips them);
 * SQLite runs it in the group commit, one writer at a time. The outer condition is checked again
 * on the row as committed: a row another replica claimed just before is left alone. The rows come
 * back in no set order.
 */
export async function claimLeased(driver: SqlDriver, claim: LeaseClaim): Promise<Row[]> {
  const { table, due, dueParams } = claim;
  const [found] = await driver.run(
    'single',
    query(`SELECT 1 AS due FROM ${table} WHERE ${due} LIMIT 1`, dueParams),
  );
  if (!found) return [];
  const n = dueParams.length;
  return driver.run(
    'write',
    query(
      `UPDATE ${table} SET lease_owner = $${n + 1}, lease_until = $${n + 2}
       WHERE id IN (SELECT id FROM ${table} WHERE ${due}
                    ORDER BY ${claim.order} LIMIT $${n + 3}${driver.dialect.lockRows})
         AND ${due}
       RETURNING ${claim.columns}`,
      [...dueParams, claim.owner, claim.leaseUntil, claim.limit],
    ),
  );
}

/** Lets go of every lease of a replica: its own and its rounds' (`owner:round`). */
export async function releaseOwner(
  driver: SqlDriver,
  table: string,
  owner: string,
  mode: Mode,
): Promise<void> {
  await driver.run(
    mode,
    query(
      `UPDATE ${table} SET lease_owner = NULL, lease_until = NULL
       WHERE lease_owner = $1 OR substr(lease_owner, 1, length($1) + 1) = $1 || ':'`,
      [owner],
    ),
  );
}
