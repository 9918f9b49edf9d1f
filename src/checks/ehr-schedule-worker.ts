/**
 * The worker that reads each clinic's schedule from its EHR (docs/ehr-schedule.md), on RoundLoop
 * like the pre-visit and evidence workers: every `everyMinutes` per tenant, one replica per round
 * (the tenant's round row, taken with a lease: ehr-schedule-store.ts). An EHR that is down or
 * answers garbage fails that round only: it is tried again next round, logged without patient
 * data, counted, and never touches /ready or the checks.
 */
import type { EhrSchedule, Tenant } from '../config.js';
import { EhrClient } from '../ehr/client.js';
import { EhrError, type EhrHttp } from '../ehr/http.js';
import type { Logger } from '../log.js';
import { readSchedule, type ScheduleEvent } from './ehr-schedule-round.js';
import type { PrevisitEvent } from './previsit.js';
import { RoundLoop } from './round-loop.js';
import type { CheckService } from './service.js';
import type { Store } from './store/appointment-store.js';
import type { RoundCounts, RoundOutcome, ScheduleRound } from './store/ehr-schedule-store.js';
import { isStoreUnavailable } from './store/outage.js';

export interface EhrScheduleWorkerDeps {
  store: Store;
  checks: CheckService;
  tenants: readonly Tenant[];
  http: EhrHttp;
  logger: Logger;
  owner: string;
  now: () => number;
  /** The clock that decides "is a round due", shared by the replicas (the database's), or a test's. */
  clock: () => Promise<number>;
  /** How long a round may hold its lease. */
  leaseMs: number;
  /** Idle wait between looks at the rounds. */
  idleMs: number;
  onRound?: (tenantId: string, outcome: RoundOutcome) => void;
  onEvent?: (tenantId: string, event: ScheduleEvent) => void;
  onPrevisit?: (event: PrevisitEvent) => void;
}

/** How an error of a round is told: its outcome and words without patient data or address. */
function outcomeOf(error: unknown): { outcome: RoundOutcome; problem: string } {
  if (error instanceof EhrError) {
    const outcome: RoundOutcome =
      error.reason === 'not-fhir' || error.reason === 'too-large' || error.reason === 'not-allowed'
        ? 'ehr-garbage'
        : error.reason === 'status' && (error.status === 401 || error.status === 403)
          ? 'ehr-refused'
          : 'ehr-unavailable';
    return { outcome, problem: error.message };
  }
  return { outcome: 'failed', problem: 'The round failed in the adapter' };
}

export class EhrScheduleWorker {
  private readonly loop: RoundLoop;
  private readonly clients = new Map<string, { client: EhrClient; requests: number }>();
  private readonly scheduled: { tenant: Tenant; settings: EhrSchedule }[];

  constructor(private readonly deps: EhrScheduleWorkerDeps) {
    this.scheduled = deps.tenants.flatMap((tenant) =>
      tenant.ehrSchedule ? [{ tenant, settings: tenant.ehrSchedule }] : [],
    );
    this.loop = new RoundLoop({
      logger: deps.logger,
      what: 'EHR schedule round',
      idleMs: deps.idleMs,
      round: () => this.tick(),
      release: { what: 'EHR schedule worker', leases: () => deps.store.ehrSchedule.releaseAll(deps.owner) },
    });
  }

  /** Whether any tenant reads its schedule (no worker runs otherwise). */
  get enabled(): boolean {
    return this.scheduled.length > 0;
  }

  start(): void {
    if (this.enabled) this.loop.start();
  }

  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** "Read the schedule now": the tenant's next round is due at once, and this replica looks. */
  async readNow(tenantId: string): Promise<void> {
    await this.deps.store.ehrSchedule.dueNow(tenantId, await this.deps.clock());
    this.wake();
  }

  /** The tenant's last round, for the operator view. */
  lastRound(tenantId: string): Promise<ScheduleRound | null> {
    return this.deps.store.ehrSchedule.round(tenantId);
  }

  /** Looks at every tenant's round; runs those due that this replica takes. Returns how many ran. */
  async tick(): Promise<number> {
    let ran = 0;
    for (const { tenant, settings } of this.scheduled) {
      const now = await this.deps.clock();
      const taken = await this.deps.store.ehrSchedule.claimRound(
        tenant.id,
        this.deps.owner,
        now,
        now + this.deps.leaseMs,
      );
      if (!taken) continue;
      ran += 1;
      await this.round(tenant, settings, now);
    }
    return ran;
  }

  /** The tenant's EHR client (its token kept across rounds), and how many requests it has made. */
  private clientOf(tenant: Tenant, settings: EhrSchedule): { client: EhrClient; requests: number } {
    const held = this.clients.get(tenant.id);
    if (held) return held;
    const created: { client?: EhrClient; requests: number } = { requests: 0 };
    created.client = new EhrClient(settings, this.deps.http, {
      now: this.deps.now,
      onRequest: () => {
        created.requests += 1;
      },
    });
    const ready = created as { client: EhrClient; requests: number };
    this.clients.set(tenant.id, ready);
    return ready;
  }

  private async round(tenant: Tenant, settings: EhrSchedule, startedAt: number): Promise<void> {
    const held = this.clientOf(tenant, settings);
    const requestsBefore = held.requests;
    const started = Date.now();
    let counts: Omit<RoundCounts, 'requests'> = { read: 0, booked: 0, moved: 0, cancelled: 0, notChecked: 0 };
    let outcome: RoundOutcome = 'ok';
    let problem: string | null = null;
    try {
      counts = await readSchedule({
        tenant,
        settings,
        client: held.client,
        checks: this.deps.checks,
        store: this.deps.store,
        logger: this.deps.logger,
        now: this.deps.now(),
        onEvent: (event) => this.deps.onEvent?.(tenant.id, event),
        ...(this.deps.onPrevisit ? { onPrevisit: this.deps.onPrevisit } : {}),
      });
    } catch (error) {
      // The store gone: the lease runs out and a round later tries again (RoundLoop backs off).
      if (isStoreUnavailable(error)) throw error;
      ({ outcome, problem } = outcomeOf(error));
      if (outcome === 'failed')
        this.deps.logger.error('EHR schedule round failed', {
          tenantId: tenant.id,
          error: error instanceof Error ? error.name : 'unknown',
        });
    }
    const full: RoundCounts = { ...counts, requests: held.requests - requestsBefore };
    this.deps.onRound?.(tenant.id, outcome);
    this.deps.logger.info('EHR schedule read', {
      tenantId: tenant.id,
      outcome,
      ...(problem ? { problem } : {}),
      ...full,
      ms: Date.now() - started,
    });
    const next = startedAt + Math.round(settings.everyMinutes * 60_000);
    await this.deps.store.ehrSchedule.finishRound(
      tenant.id,
      this.deps.owner,
      { at: startedAt, outcome, counts: full, problem },
      next,
    );
  }
}
