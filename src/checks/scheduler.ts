/**
 * The scheduler: claims due checks with leases and advances each one step.
 * Several replicas may run it against one PostgreSQL store; leases keep them apart.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '../log.js';
import { advanceCheck } from './lifecycle.js';
import type { LifecycleDeps } from './lifecycle.js';
import { FailureStreak, isStoreUnavailable } from './store/outage.js';
import { RoundLoop } from './round-loop.js';

export interface SchedulerOptions {
  /** How long a claim holds a check; longer than any upstream call. */
  leaseMs: number;
  /** Checks claimed per round. */
  batchSize: number;
  /**
   * Steps under way at once in this replica. A claim is a lease: claiming more than can be worked
   * on soon lets leases run out while steps wait for an upstream connection, and a create-task
   * answered after its lease is an orphaned real check. So only free capacity is claimed.
   */
  maxSteps: number;
  /** Idle wait between rounds when nothing was due. */
  idleMs: number;
  maxInFlight: (tenantId: string) => number;
  /** The tenant's slots kept for desk work (docs/queue.md); absent: deskSlotsOf's default. */
  deskSlots?: (tenantId: string) => number;
}

export class Scheduler {
  /** Emits `changed` with a check id after each step, so waiting $submit calls wake at once. */
  readonly events = new EventEmitter();
  private readonly loop: RoundLoop;
  private readonly active = new Set<Promise<void>>();
  private round = 0;
  /** Checks whose step failed for a store reason, with the claim token whose lease is still set. */
  private readonly stranded = new Map<string, string>();

  private readonly deps: LifecycleDeps;
  /** Steps that failed for a store reason: one log line for a run of them, not one per check. */
  private readonly steps: FailureStreak;

  constructor(
    deps: LifecycleDeps,
    private readonly options: SchedulerOptions,
    private readonly logger: Logger,
  ) {
    this.events.setMaxListeners(0);
    this.deps = { ...deps, heldTasks: deps.heldTasks ?? new Set(), stopping: () => !this.loop.running };
    this.steps = new FailureStreak(logger, 'check step');
    this.loop = new RoundLoop({
      logger,
      what: 'scheduler round',
      idleMs: options.idleMs,
      round: () => this.tick(),
      afterRound: () => this.nearCapacity(),
      settle: () => Promise.allSettled([...this.active]),
      release: { what: 'scheduler', leases: () => this.deps.store.releaseAll(this.deps.owner) },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** Runs a round now instead of at the end of the idle wait (a new check was accepted). */
  wake(): void {
    this.loop.wake();
  }

  /**
   * Drops the leases of steps that failed because the store was unavailable. Their checks would
   * otherwise wait for the lease to run out (LEASE_MS, a minute) after the store is back; a lease
   * that was claimed again since is left alone (release matches the claim token).
   */
  private async releaseStranded(): Promise<void> {
    for (const [id, token] of this.stranded) {
      await this.deps.store.release(id, token);
      this.stranded.delete(id);
    }
  }

  /** Stops claiming, waits for the steps under way, and drops every lease this replica holds. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** One round: claim due checks and advance them all. Returns how many were claimed. */
  async tick(): Promise<number> {
    await this.releaseStranded();
    const capacity = Math.min(this.options.batchSize, this.options.maxSteps - this.active.size);
    if (capacity <= 0) return 0;
    // A claim token unique to this round (`owner:round`): a step that outlives its lease cannot
    // write over the step of a later claim of the same check, even on this replica.
    this.round += 1;
    const claimed = await this.deps.store.claimDue({
      owner: `${this.deps.owner}:${this.round}`,
      now: this.deps.now(),
      leaseMs: this.options.leaseMs,
      limit: capacity,
      maxInFlight: this.options.maxInFlight,
      ...(this.options.deskSlots ? { deskSlots: this.options.deskSlots } : {}),
    });
    const now = this.deps.now();
    for (const check of claimed) {
      // PHI-free: the check id, its state and how late its step is (LOG_LEVEL=debug).
      if (this.logger.isDebugEnabled())
        this.logger.debug('check claimed', {
          checkId: check.id,
          tenantId: check.tenantId,
          state: check.state,
          lateMs: Math.max(0, now - check.nextRunAt),
        });
      const step = advanceCheck(check, this.deps)
        .then(
          () => this.steps.succeeded(),
          (error: unknown) => {
            // The check is claimed again when its lease runs out; a store outage is logged once.
            if (isStoreUnavailable(error)) {
              this.steps.failed(error);
              // Its lease could not be dropped: dropped when the store is back (releaseStranded).
              this.stranded.set(check.id, check.leaseOwner ?? this.deps.owner);
            } else this.logger.error('check step failed', { checkId: check.id, error });
          },
        )
        .finally(() => {
          this.active.delete(step);
          this.events.emit('changed', check.id);
        });
      this.active.add(step);
    }
    return claimed.length;
  }

  /**
   * Near capacity: waits for steps to end, so each round claims a batch (a round costs the same
   * whether it claims one check or fifty). A round that claimed something is followed by another
   * at once; this wait paces it.
   */
  private async nearCapacity(): Promise<void> {
    const minBatch = Math.max(1, Math.floor(this.options.maxSteps / 4));
    while (this.loop.running && this.active.size > this.options.maxSteps - minBatch) {
      await Promise.race([...this.active, sleep(this.options.idleMs)]);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
