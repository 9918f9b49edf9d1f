/**
 * The durations seen per payer (adaptive polling, docs/polling.md), read from the store and kept
 * here for a short while: a payer's history moves slowly, and polls are many.
 */
import type { CheckStore } from './store/check-store.js';
import type { PayerDurations, TaskDurations } from './poll-schedule.js';

/** How long a payer's history read from the store is used before it is read again. */
const FRESH_MS = 30_000;

export class PayerDurationBook {
  private readonly cache = new Map<string, { readAt: number; durations: PayerDurations | null }>();

  constructor(
    private readonly store: Pick<CheckStore, 'getPayerDurations' | 'recordPayerDurations'>,
    private readonly freshMs = FRESH_MS,
  ) {}

  /** The payer's history (other replicas' tasks included, at most freshMs old). */
  async get(payerCode: string, now: number): Promise<PayerDurations | null> {
    const key = payerCode.trim().toUpperCase();
    const cached = this.cache.get(key);
    if (cached && now - cached.readAt < this.freshMs) return cached.durations;
    const durations = await this.store.getPayerDurations(key);
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(key, { readAt: now, durations });
    return durations;
  }

  /** Adds an ended task's durations to its payer's history. */
  async record(payerCode: string, durations: TaskDurations, now: number): Promise<void> {
    if (durations.preExtractMs === null && durations.extractMs === null) return;
    await this.store.recordPayerDurations(payerCode, durations, now);
    this.cache.delete(payerCode.trim().toUpperCase());
  }
}
