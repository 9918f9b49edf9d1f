/**
 * The EHR schedule's store on SQLite and PostgreSQL (ehr-schedule-store.ts), on the check store's
 * driver. A round is given to one replica by one conditional UPDATE of the tenant's row (atomic on
 * both databases); a replica that finds the round not due writes nothing.
 */
import { ROUND_OUTCOMES } from './ehr-schedule-store.js';
import type {
  EhrScheduleStore,
  RoundCounts,
  RoundOutcome,
  ScheduleEntry,
  ScheduleRound,
} from './ehr-schedule-store.js';
import { int, nullableInt, nullableText, oneOf, text } from './rows.js';
import type { Row } from './rows.js';
import type { Dialect, SqlDriver, Work } from './driver.js';
import { one, query } from './driver.js';
import { releaseOwner } from './sql-leases.js';

/** The round is due and no live lease holds it; $1 tenant, $2 now. */
const DUE = 'id = $1 AND next_run_at <= $2 AND (lease_until IS NULL OR lease_until <= $2)';

export class SqlEhrScheduleStore implements EhrScheduleStore {
  private readonly dialect: Dialect;

  constructor(private readonly driver: SqlDriver) {
    this.dialect = driver.dialect;
  }

  async claimRound(tenantId: string, owner: string, now: number, leaseUntil: number): Promise<boolean> {
    const [row] = await this.driver.run(
      'single',
      query('SELECT next_run_at, lease_until FROM ehr_schedule_rounds WHERE id = $1', [tenantId]),
    );
    if (row) {
      const leased = nullableInt(row, 'lease_until');
      if (int(row, 'next_run_at') > now || (leased !== null && leased > now)) return false;
    }
    const work = function* (): Work<boolean> {
      if (!row)
        yield* one(
          'INSERT INTO ehr_schedule_rounds (id, next_run_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING',
          [tenantId, now],
        );
      const taken = yield* one(
        `UPDATE ehr_schedule_rounds SET lease_owner = $3, lease_until = $4 WHERE ${DUE}`,
        [tenantId, now, owner, leaseUntil],
      );
      return taken.changed === 1;
    };
    return this.driver.run('write', work());
  }

  async finishRound(
    tenantId: string,
    owner: string,
    result: { at: number; outcome: RoundOutcome; counts: RoundCounts; problem: string | null },
    nextRunAt: number,
  ): Promise<void> {
    await this.driver.run(
      'write',
      one(
        `UPDATE ehr_schedule_rounds SET lease_owner = NULL, lease_until = NULL, last_at = $3,
           last_outcome = $4, last_counts = ${this.dialect.json('$5')}, last_problem = $6,
           next_run_at = CASE WHEN next_run_at > $3 THEN next_run_at ELSE $7 END
         WHERE id = $1 AND lease_owner = $2`,
        [
          tenantId,
          owner,
          result.at,
          result.outcome,
          JSON.stringify(result.counts),
          result.problem,
          nextRunAt,
        ],
      ),
    );
  }

  async dueNow(tenantId: string, now: number): Promise<void> {
    await this.driver.run(
      'write',
      one(
        `INSERT INTO ehr_schedule_rounds (id, next_run_at) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET next_run_at = CASE
           WHEN ehr_schedule_rounds.next_run_at < excluded.next_run_at THEN ehr_schedule_rounds.next_run_at
           ELSE excluded.next_run_at END`,
        [tenantId, now],
      ),
    );
  }

  async round(tenantId: string): Promise<ScheduleRound | null> {
    const [row] = await this.driver.run(
      'single',
      query('SELECT * FROM ehr_schedule_rounds WHERE id = $1', [tenantId]),
    );
    if (!row) return null;
    const counts = row.last_counts == null ? null : (this.dialect.readJson(row.last_counts) as RoundCounts);
    const outcome = nullableText(row, 'last_outcome');
    return {
      tenantId,
      nextRunAt: int(row, 'next_run_at'),
      lastAt: nullableInt(row, 'last_at'),
      lastOutcome: outcome === null ? null : oneOf(row, 'last_outcome', ROUND_OUTCOMES),
      lastCounts: counts,
      lastProblem: nullableText(row, 'last_problem'),
    };
  }

  async entries(tenantId: string, urls: readonly string[]): Promise<ScheduleEntry[]> {
    const found: ScheduleEntry[] = [];
    // In slices: a statement's parameters are bounded (SQLite's 32,766).
    for (let i = 0; i < urls.length; i += 500) {
      const slice = urls.slice(i, i + 500);
      const placeholders = slice.map((_, n) => `$${n + 2}`).join(', ');
      const rows = await this.driver.run(
        'single',
        query(
          `SELECT * FROM ehr_schedule_entries WHERE tenant_id = $1 AND appointment_url IN (${placeholders})`,
          [tenantId, ...slice],
        ),
      );
      found.push(...rows.map((r) => this.toEntry(r)));
    }
    return found;
  }

  async putEntries(entries: readonly ScheduleEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const json = this.dialect.json('$5');
    const work = function* (): Work<void> {
      for (const e of entries)
        yield* one(
          `INSERT INTO ehr_schedule_entries
             (tenant_id, appointment_url, start_at, status, request_ids, reason, patient_name, updated_at)
           VALUES ($1, $2, $3, $4, ${json}, $6, $7, $8)
           ON CONFLICT (tenant_id, appointment_url) DO UPDATE SET start_at = excluded.start_at,
             status = excluded.status, request_ids = excluded.request_ids, reason = excluded.reason,
             patient_name = excluded.patient_name, updated_at = excluded.updated_at`,
          [
            e.tenantId,
            e.appointmentUrl,
            e.startAt,
            e.status,
            JSON.stringify(e.requestIds),
            e.reason,
            e.patientName,
            e.updatedAt,
          ],
        );
    };
    await this.driver.run('write', work());
  }

  async notChecked(tenantId: string, from: number, before: number): Promise<ScheduleEntry[]> {
    const rows = await this.driver.run(
      'single',
      query(
        `SELECT * FROM ehr_schedule_entries WHERE tenant_id = $1 AND start_at >= $2 AND start_at < $3
           AND reason IS NOT NULL ORDER BY start_at, appointment_url LIMIT 500`,
        [tenantId, from, before],
      ),
    );
    return rows.map((r) => this.toEntry(r));
  }

  releaseAll(owner: string): Promise<void> {
    return releaseOwner(this.driver, 'ehr_schedule_rounds', owner, 'write');
  }

  private toEntry(row: Row): ScheduleEntry {
    return {
      tenantId: text(row, 'tenant_id'),
      appointmentUrl: text(row, 'appointment_url'),
      startAt: int(row, 'start_at'),
      status: text(row, 'status'),
      requestIds: this.dialect.readJson(row.request_ids) as string[],
      reason: nullableText(row, 'reason'),
      patientName: nullableText(row, 'patient_name'),
      updatedAt: int(row, 'updated_at'),
    };
  }
}
