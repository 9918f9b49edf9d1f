/**
 * The appointment store on SQLite and PostgreSQL (appointment-store.ts), on the check store's
 * driver. Booking (appointment + booking check) and starting a re-check (appointment + re-check)
 * are one transaction each, so neither a crash nor a second replica can leave one without the
 * other or start a re-check twice.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import type { CheckInput } from '../../mapping/types.js';
import { APPOINTMENT_STATES } from './appointment-store.js';
import type {
  Appointment,
  AppointmentClaim,
  AppointmentState,
  AppointmentStore,
  NewAppointment,
} from './appointment-store.js';
import type { Check, DateRange, NewCheck } from './check-store.js';
import { int, nullableInt, nullableText, oneOf, text } from './rows.js';
import type { Row } from './rows.js';
import type { Dialect, Mode, SqlDriver, Work } from './driver.js';
import { Params, query, rangeCondition } from './driver.js';
import { claimLeased, releaseOwner } from './sql-leases.js';

/** A due, unleased, scheduled appointment; $1 is now. */
const DUE = `state = 'scheduled' AND due_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)`;

/** How the check store inserts a check inside another piece of work (sql-store.ts). */
export type CheckInserting = (check: NewCheck) => Work<{ check: Check; created: boolean }>;

function rowToAppointment(row: Row, readJson: (value: unknown) => unknown): Appointment {
  return {
    id: text(row, 'id'),
    tenantId: text(row, 'tenant_id'),
    idempotencyKey: nullableText(row, 'idempotency_key'),
    // Written only by book() and cancel() from a typed value.
    input: readJson(row.input) as CheckInput,
    bookingCheckId: text(row, 'booking_check_id'),
    recheckId: nullableText(row, 'recheck_id'),
    startAt: int(row, 'start_at'),
    dueAt: int(row, 'due_at'),
    state: oneOf(row, 'state', APPOINTMENT_STATES),
    leaseOwner: nullableText(row, 'lease_owner'),
    leaseUntil: nullableInt(row, 'lease_until'),
    createdAt: int(row, 'created_at'),
    updatedAt: int(row, 'updated_at'),
  };
}

export class SqlAppointmentStore implements AppointmentStore {
  private readonly dialect: Dialect;
  private readonly toAppointment: (row: Row) => Appointment;

  constructor(
    private readonly driver: SqlDriver,
    private readonly inserting: CheckInserting,
  ) {
    this.dialect = driver.dialect;
    const { readJson } = this.dialect;
    this.toAppointment = (row) => rowToAppointment(row, readJson);
  }

  book(
    appointment: NewAppointment,
    check: NewCheck | null,
  ): Promise<{ appointment: Appointment | null; check?: { check: Check; created: boolean } }> {
    return this.driver.run(this.atomic, this.booking(appointment, check));
  }

  async get(tenantId: string, id: string): Promise<Appointment | null> {
    const [row] = await this.rows('SELECT * FROM appointments WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      id,
    ]);
    return row ? this.toAppointment(row) : null;
  }

  async findByKey(tenantId: string, idempotencyKey: string): Promise<Appointment | null> {
    const [row] = await this.rows(
      'SELECT * FROM appointments WHERE tenant_id = $1 AND idempotency_key = $2',
      [tenantId, idempotencyKey],
    );
    return row ? this.toAppointment(row) : null;
  }

  async claimDue({ owner, now, leaseMs, limit }: AppointmentClaim): Promise<Appointment[]> {
    if (limit <= 0) return [];
    const rows = await claimLeased(this.driver, {
      table: 'appointments',
      due: DUE,
      dueParams: [now],
      order: 'due_at, id',
      columns: '*',
      owner,
      leaseUntil: now + leaseMs,
      limit,
    });
    return rows.map(this.toAppointment).sort((a, b) => a.dueAt - b.dueAt || a.id.localeCompare(b.id));
  }

  async postpone(id: string, owner: string, dueAt: number, now: number): Promise<boolean> {
    return this.settle(id, owner, "due_at = $4, state = 'scheduled'", [dueAt], now);
  }

  async skip(id: string, owner: string, now: number): Promise<boolean> {
    return this.settle(id, owner, "state = 'skipped'", [], now);
  }

  startRecheck(id: string, owner: string, check: NewCheck, now: number): Promise<boolean> {
    const inserting = this.inserting;
    const work = function* (): Work<boolean> {
      const claimed = yield {
        sql: `UPDATE appointments SET state = 'rechecked', recheck_id = $3, lease_owner = NULL,
                lease_until = NULL, updated_at = $4
              WHERE id = $1 AND lease_owner = $2 AND state = 'scheduled'`,
        params: [id, owner, check.id, now],
      };
      if (claimed.changed !== 1) return false;
      const { created } = yield* inserting(check);
      if (!created) throw new Error(`re-check ${check.id} of appointment ${id} was not inserted`);
      return true;
    };
    return this.driver.run(this.atomic, work());
  }

  async cancel(
    tenantId: string,
    id: string,
    request: CoverageEligibilityRequest,
    now: number,
  ): Promise<{ appointment: Appointment | null; previous: AppointmentState | null } | null> {
    const { json } = this.dialect;
    const toAppointment = this.toAppointment;
    const lock = this.kind === 'postgres' ? ' FOR UPDATE' : '';
    const work = function* (): Work<{
      appointment: Appointment | null;
      previous: AppointmentState | null;
    } | null> {
      // PostgreSQL: the row's lock, so a claim's startRecheck either committed before (its state is
      // then `rechecked`) or sees `cancelled` and writes nothing.
      const [before] = yield* query(`SELECT * FROM appointments WHERE tenant_id = $1 AND id = $2${lock}`, [
        tenantId,
        id,
      ]);
      const previous = before ? toAppointment(before) : null;
      let appointment: Appointment | null = null;
      if (previous) {
        const input: CheckInput = { ...previous.input, request };
        // A re-check written but still waiting for a tenant slot has not started: it goes (no
        // answer was ever given for it); one a claim already took runs to its end.
        const recheck = previous.recheckId;
        const dropped =
          recheck === null
            ? 0
            : (yield {
                sql: `DELETE FROM checks WHERE tenant_id = $1 AND id = $2 AND state = 'waiting'
                        AND (lease_until IS NULL OR lease_until <= $3)`,
                params: [tenantId, recheck, now],
              }).changed;
        const [row] = yield* query(
          `UPDATE appointments SET state = 'cancelled', input = ${json('$3')}, lease_owner = NULL,
             lease_until = NULL, updated_at = $4${dropped > 0 ? ', recheck_id = NULL' : ''}
           WHERE tenant_id = $1 AND id = $2 RETURNING *`,
          [tenantId, id, JSON.stringify(input), now],
        );
        appointment = row ? toAppointment(row) : null;
      }
      // The check of the same id holds the same request (a re-check's row refers to it, not this).
      const check = yield {
        sql: `UPDATE checks SET request = ${json('$3')} WHERE tenant_id = $1 AND id = $2`,
        params: [tenantId, id, JSON.stringify(request)],
      };
      if (!previous && check.changed === 0) return null;
      return { appointment, previous: previous?.state ?? null };
    };
    return this.driver.run(this.atomic, work());
  }

  async move(
    tenantId: string,
    id: string,
    to: { startAt: number; dueAt: number; request: CoverageEligibilityRequest },
    now: number,
  ): Promise<Appointment | null> {
    const { json } = this.dialect;
    const toAppointment = this.toAppointment;
    const lock = this.kind === 'postgres' ? ' FOR UPDATE' : '';
    const work = function* (): Work<Appointment | null> {
      const [before] = yield* query(`SELECT * FROM appointments WHERE tenant_id = $1 AND id = $2${lock}`, [
        tenantId,
        id,
      ]);
      if (!before) return null;
      const previous = toAppointment(before);
      if (previous.state === 'cancelled') return previous;
      const input: CheckInput = { ...previous.input, request: to.request };
      // A lease on it is let go of: the round that holds it decides on the old time otherwise.
      const [row] = yield* query(
        `UPDATE appointments SET start_at = $3, due_at = $4, input = ${json('$5')}, state = 'scheduled',
           lease_owner = NULL, lease_until = NULL, updated_at = $6
         WHERE tenant_id = $1 AND id = $2 RETURNING *`,
        [tenantId, id, to.startAt, to.dueAt, JSON.stringify(input), now],
      );
      yield {
        sql: `UPDATE checks SET request = ${json('$3')} WHERE tenant_id = $1 AND id = $2`,
        params: [tenantId, id, JSON.stringify(to.request)],
      };
      return row ? toAppointment(row) : null;
    };
    return this.driver.run(this.atomic, work());
  }

  async search(tenantId: string, starts: DateRange[], count: number): Promise<Appointment[]> {
    const params = new Params();
    const where = [`tenant_id = ${params.add(tenantId)}`];
    for (const range of starts) where.push(rangeCondition(params, 'start_at', range));
    const rows = await this.rows(
      `SELECT * FROM appointments WHERE ${where.join(' AND ')} ORDER BY start_at, id LIMIT ${params.add(Math.max(0, count))}`,
      params.values,
    );
    return rows.map(this.toAppointment);
  }

  async clock(): Promise<number> {
    if (this.kind === 'sqlite') return Date.now();
    const [row] = await this.rows(
      'SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT) AS now',
    );
    if (!row) throw new Error('the database gave no time');
    return int(row, 'now');
  }

  async releaseAll(owner: string): Promise<void> {
    await releaseOwner(this.driver, 'appointments', owner, 'write');
  }

  // ---- the work of each call --------------------------------------------------------------

  private get kind(): 'sqlite' | 'postgres' {
    return this.dialect.types.kind;
  }

  /** How a write of several statements runs: with its row locks on PostgreSQL, one write on SQLite. */
  private get atomic(): Mode {
    return this.kind === 'postgres' ? 'transaction' : 'write';
  }

  private *booking(
    appointment: NewAppointment,
    check: NewCheck | null,
  ): Work<{ appointment: Appointment | null; check?: { check: Check; created: boolean } }> {
    let stored: { check: Check; created: boolean } | undefined;
    if (check) {
      stored = yield* this.inserting(check);
      if (!stored.created) {
        // The identifier was already used: that check, and the appointment it booked (if any).
        const [existing] = yield* query('SELECT * FROM appointments WHERE booking_check_id = $1', [
          stored.check.id,
        ]);
        return { appointment: existing ? this.toAppointment(existing) : null, check: stored };
      }
    }
    const a = appointment;
    const [inserted] = yield* query(
      `INSERT INTO appointments (id, tenant_id, idempotency_key, input, booking_check_id, recheck_id,
         start_at, due_at, state, created_at, updated_at)
       VALUES ($1, $2, $3, ${this.dialect.json('$4')}, $5, NULL, $6, $7, 'scheduled', $8, $8)
       ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING *`,
      [
        a.id,
        a.tenantId,
        a.idempotencyKey,
        JSON.stringify(a.input),
        a.bookingCheckId,
        a.startAt,
        a.dueAt,
        a.now,
      ],
    );
    if (inserted) return { appointment: this.toAppointment(inserted), ...(stored ? { check: stored } : {}) };
    const [existing] = yield* query(
      'SELECT * FROM appointments WHERE tenant_id = $1 AND idempotency_key = $2',
      [a.tenantId, a.idempotencyKey],
    );
    return {
      appointment: existing ? this.toAppointment(existing) : null,
      ...(stored ? { check: stored } : {}),
    };
  }

  private settle(
    id: string,
    owner: string,
    sets: string,
    extra: readonly unknown[],
    now: number,
  ): Promise<boolean> {
    return this.driver.run(
      'write',
      (function* (): Work<boolean> {
        const result = yield {
          sql: `UPDATE appointments SET ${sets}, lease_owner = NULL, lease_until = NULL, updated_at = $3
                WHERE id = $1 AND lease_owner = $2 AND state = 'scheduled'`,
          params: [id, owner, now, ...extra],
        };
        return result.changed === 1;
      })(),
    );
  }

  private rows(
    sql: string,
    params: readonly unknown[] = [],
    mode: 'single' | 'write' = 'single',
  ): Promise<Row[]> {
    return this.driver.run(mode, query(sql, params));
  }
}
