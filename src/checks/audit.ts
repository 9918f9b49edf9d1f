/**
 * The audit trail's writer: `record()` only queues (nothing on the answer's path waits for the
 * store); the queue is written in batches, one transaction each, a moment later, and a batch the
 * store refused is kept and written again. Records beyond the queue's bound are dropped and
 * counted in the log, so a stalled store cannot exhaust memory.
 */
import type { Logger } from '../log.js';
import type { AuditRecord } from '../fhir/audit-event.js';
import { auditRow } from './store/audit-store.js';
import type { AuditFilters, AuditRow } from './store/audit-store.js';
import type { CheckStore } from './store/check-store.js';
import { FailureStreak } from './store/outage.js';

export interface AuditOptions {
  /** Off: record() does nothing (AUDIT_EVENTS=off, for measurements). */
  enabled: boolean;
  /** How long a record may wait in the queue before it is written. */
  flushMs: number;
  /** Records per write. */
  batchSize: number;
  /** The most records held while the store is slow; more are dropped and counted. */
  maxQueued: number;
  now: () => number;
}

export class AuditTrail {
  private queue: AuditRow[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private dropped = 0;
  private stopped = false;

  constructor(
    private readonly store: Pick<CheckStore, 'insertAuditEvents' | 'searchAuditEvents'>,
    private readonly options: AuditOptions,
    private readonly logger: Logger,
  ) {
    this.failures = new FailureStreak(logger, 'audit write');
  }

  /** Failed writes: one log line when they start failing, one when they work again. */
  private readonly failures: FailureStreak;

  get enabled(): boolean {
    return this.options.enabled;
  }

  /** Queues one record; never throws, never waits. */
  record(record: AuditRecord): void {
    if (!this.options.enabled) return;
    if (this.queue.length >= this.options.maxQueued) {
      this.dropped += 1;
      return;
    }
    this.queue.push(auditRow(record, this.options.now()));
    if (this.queue.length >= this.options.batchSize) this.schedule(0);
    else this.schedule(this.options.flushMs);
  }

  private schedule(delayMs: number): void {
    if (this.timer && delayMs > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, delayMs);
    this.timer.unref();
  }

  /**
   * Writes the records queued when it is called (in batches); resolves when they are stored or,
   * if the store failed, put back at the head of the queue to be written again a flush interval
   * later. Records queued meanwhile wait for their own flush: a flush always ends.
   */
  flush(): Promise<void> {
    const taken = this.queue.splice(0);
    this.writing = this.writing.then(async () => {
      for (let start = 0; start < taken.length; start += this.options.batchSize) {
        const batch = taken.slice(start, start + this.options.batchSize);
        try {
          await this.store.insertAuditEvents(batch);
          this.failures.succeeded();
        } catch (error) {
          const unwritten = taken.slice(start);
          // Logged once per outage (FailureStreak), not once per flush; kept to be written again.
          this.failures.failed(error);
          this.requeue(unwritten);
          break;
        }
      }
      if (this.dropped > 0) {
        this.logger.warn('audit events dropped: the queue was full', { count: this.dropped });
        this.dropped = 0;
      }
    });
    return this.writing;
  }

  /** Puts unwritten records back ahead of newer ones, within the queue's bound (older ones win). */
  private requeue(rows: AuditRow[]): void {
    const merged = [...rows, ...this.queue];
    this.dropped += Math.max(0, merged.length - this.options.maxQueued);
    this.queue = merged.slice(0, this.options.maxQueued);
    if (!this.stopped) this.schedule(this.options.flushMs);
  }

  /**
   * The store's search, once the records queued when it was asked are written: a tenant that
   * searches its trail right after a request finds that request's AuditEvent (on the replica that
   * answered it; another replica writes its own within a flush interval). A next page (`before`)
   * waits for nothing: what was queued since the first page is newer than any of its rows.
   */
  async searchAuditEvents(tenantId: string, filters: AuditFilters, count: number): Promise<AuditRow[]> {
    const read = () => this.store.searchAuditEvents(tenantId, filters, count);
    if (filters.before !== undefined) return read();
    if (filters.ids !== undefined) {
      // A read by id: the store first, the queue only when it is not there yet.
      const found = await read();
      if (found.length > 0 || this.queue.length === 0) return found;
    }
    await (this.queue.length > 0 ? this.flush() : this.writing);
    return read();
  }

  /** Writes what is queued and stops the timer (shutdown): no retry after a failure then. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
    if (this.queue.length > 0) {
      this.logger.error('audit events lost at shutdown: the store did not take them', {
        count: this.queue.length,
      });
    }
  }
}
