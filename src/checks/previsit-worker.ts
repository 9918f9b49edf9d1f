/**
 * The pre-visit re-check worker (docs/previsit.md): claims appointments whose re-check is due,
 * with a lease, and decides each by the pure rule of previsit.ts: wait (the booking check still
 * runs), skip (an answer reusable at the start exists), or run. Running inserts the re-check as a
 * new check in the same transaction that marks the appointment `rechecked`, so a crash or a second
 * replica never loses it or starts it twice; the scheduler then runs it like any check
 * (maxInFlight, payer guards, backoff, retry, notification).
 */
import { randomUUID } from 'node:crypto';
import type { Tenant } from '../config.js';
import type { Logger } from '../log.js';
import { decideRecheck, type PrevisitEvent } from './previsit.js';
import { reuseWindowMs, type CheckService } from './service.js';
import { isAnswered } from './store/check-store.js';
import type { Appointment, Store } from './store/appointment-store.js';
import { FailureStreak } from './store/outage.js';
import { RoundLoop } from './round-loop.js';

export interface PrevisitWorkerDeps {
  store: Store;
  checks: CheckService;
  tenant: (id: string) => Tenant | undefined;
  logger: Logger;
  /** Replica identity; claims carry `owner:round`. */
  owner: string;
  /**
   * The clock that decides "is it due", shared by every replica (store.appointments.clock(): the
   * database's), or a test's injected clock.
   */
  clock: () => Promise<number>;
  leaseMs: number;
  /** Idle wait between rounds when nothing was due. */
  idleMs: number;
  /** How soon to decide again while the booking check still runs. */
  retryMs: number;
  batchSize: number;
  onEvent?: (event: PrevisitEvent) => void;
}

export class PrevisitWorker {
  private readonly loop: RoundLoop;
  private round = 0;

  /** Decisions that failed for a store reason: one log line for a run of them. */
  private readonly steps: FailureStreak;

  constructor(private readonly deps: PrevisitWorkerDeps) {
    this.steps = new FailureStreak(deps.logger, 'pre-visit re-check step');
    this.loop = new RoundLoop({
      logger: deps.logger,
      what: 'pre-visit round',
      idleMs: deps.idleMs,
      round: () => this.tick(),
      release: { what: 'pre-visit worker', leases: () => deps.store.appointments.releaseAll(deps.owner) },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Runs a round now (a test moved its clock). */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** One round: claims due appointments and decides each. Returns how many were claimed. */
  async tick(): Promise<number> {
    this.round += 1;
    const owner = `${this.deps.owner}:${this.round}`;
    const now = await this.deps.clock();
    const claimed = await this.deps.store.appointments.claimDue({
      owner,
      now,
      leaseMs: this.deps.leaseMs,
      limit: this.deps.batchSize,
    });
    for (const appointment of claimed) {
      // The lease runs out and another round decides it again: nothing is lost.
      await this.steps.step(() => this.decide(appointment, owner, now), 'pre-visit re-check step failed', {
        appointmentId: appointment.id,
      });
    }
    return claimed.length;
  }

  private async decide(appointment: Appointment, owner: string, now: number): Promise<void> {
    const { store, checks } = this.deps;
    const tenant = this.deps.tenant(appointment.tenantId);
    if (!tenant) {
      // A tenant taken out of the tenants file: its appointments wait (it may come back).
      await store.appointments.postpone(appointment.id, owner, now + 3_600_000, now);
      return;
    }
    const booking = await store.get(appointment.tenantId, appointment.bookingCheckId);
    const windowMs = reuseWindowMs(tenant);
    const reusable =
      windowMs > 0
        ? await checks.reusableSince(tenant, appointment.input, appointment.startAt - windowMs)
        : null;
    const decision = decideRecheck({
      now,
      dueAt: appointment.dueAt,
      startAt: appointment.startAt,
      cancelled: appointment.state === 'cancelled',
      running: booking !== null && !isAnswered(booking),
      reusableAnsweredAt: reusable?.updatedAt ?? null,
      reuseWindowMs: windowMs,
      retryMs: this.deps.retryMs,
    });
    const log = { appointmentId: appointment.id, tenantId: appointment.tenantId, action: decision.action };
    switch (decision.action) {
      case 'cancelled':
        return;
      case 'wait':
        await store.appointments.postpone(appointment.id, owner, decision.until, now);
        return;
      case 'skip':
        if (await store.appointments.skip(appointment.id, owner, now)) {
          this.deps.logger.info('pre-visit re-check skipped: an answer is reusable at the start', log);
          this.deps.onEvent?.({ type: 'recheck-skipped', tenantId: tenant.id });
        }
        return;
      case 'run': {
        // A re-check is a new check, never found again by the booking's identifier.
        const input = { ...appointment.input, idempotencyKey: null, requestIdentifierValue: null };
        // Background work with the appointment's start as its deadline (docs/queue.md).
        const source = { kind: 'appointment', startAt: appointment.startAt } as const;
        const prepared = await checks.prepare(tenant, input, randomUUID(), source, appointment.id);
        if (await store.appointments.startRecheck(appointment.id, owner, prepared.check, now)) {
          checks.started(prepared);
          this.deps.logger.info('pre-visit re-check started', { ...log, checkId: prepared.check.id });
          this.deps.onEvent?.({ type: 'recheck-run', tenantId: tenant.id });
        }
        return;
      }
    }
  }
}
