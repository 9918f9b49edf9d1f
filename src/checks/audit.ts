/**
 * The audit trail's writer: `record()` only queues (nothing on the answer's path waits for the
 * store); the queue is written in batches, one transaction each, a moment later. Records beyond
 * the queue's bound are dropped and counted in the log, so a stalled store cannot exhaust memory.
 */
import type { Logger } from '../log.js';
import type { AuditRecord } from '../fhir/audit-event.js';
import { auditRow } from './store/audit-store.js';
import type { AuditFilters, AuditRow } from './store/audit-store.js';
import type { CheckStore } from './store/check-store.js';

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

  constructor(
    private readonly store: Pick<CheckStore, 'insertAuditEvents' | 'searchAuditEvents'>,
    private readonly options: AuditOptions,
    private readonly logger: Logger,
  ) {}

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

  /** Writes everything queued so far (in batches); resolves when it is stored. */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.options.batchSize);
        try {
          await this.store.insertAuditEvents(batch);
        } catch (error) {
          this.logger.error('audit events could not be written', { count: batch.length, error });
        }
      }
      if (this.dropped > 0) {
        this.logger.warn('audit events dropped: the queue was full', { count: this.dropped });
        this.dropped = 0;
      }
    });
    return this.writing;
  }

  /**
   * The store's search, once everything queued so far is written: a tenant that searches its
   * trail right after a request finds that request's AuditEvent (on the replica that answered it),
   * however long the queue would otherwise have waited.
   */
  async searchAuditEvents(tenantId: string, filters: AuditFilters, count: number): Promise<AuditRow[]> {
    if (this.queue.length > 0) await this.flush();
    else await this.writing;
    return this.store.searchAuditEvents(tenantId, filters, count);
  }

  /** Writes what is queued and stops the timer (shutdown). */
  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }
}
