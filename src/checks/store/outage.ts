/**
 * When the database is not there: a restart, a failover, a full disk (docs/operations.md,
 * "When the store fails").
 *
 * - Each driver says which of its errors mean "the store cannot be used now" (classify); the
 *   StoreHealthDriver turns those into one error type, StoreUnavailableError, at the driver
 *   boundary. Every caller above sees that one type: the HTTP error handler answers it with a
 *   503 OperationOutcome (`transient`) and Retry-After, the loops back off.
 * - StoreHealth keeps what an operator and /ready need: errors by kind, when the store last took
 *   a write, when a write last failed.
 * - FailureStreak is the back-off and the logging of a loop that runs rounds against the store
 *   (scheduler, delivery worker, audit writer): one line when the store goes away, with the error
 *   kind, and one when it is back, with how many rounds failed and for how long; never a line per
 *   round.
 * - releaseLeases: what a loop lets go of when the replica stops; with the store away, the leases
 *   run out on their own, so the rest of the shutdown goes on.
 */
import type { Logger } from '../../log.js';
import type { StoreErrorKind, StoreHealthReport } from './check-store.js';
import type { Mode, SqlDriver, Work } from './driver.js';

export const STORE_ERROR_KINDS: readonly StoreErrorKind[] = [
  'connection',
  'shutdown',
  'disk-full',
  'resources',
  'read-only',
  'busy',
  'io',
];

/** Seconds a client is asked to wait (Retry-After) while the store is unavailable. */
export const STORE_RETRY_AFTER_SECONDS = 5;

/** The store cannot be used now; the cause is kept for the operator's log, never for an answer. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';

  constructor(
    readonly kind: StoreErrorKind,
    override readonly cause: unknown,
  ) {
    super(`the store is unavailable (${kind})`);
  }
}

export function isStoreUnavailable(error: unknown): error is StoreUnavailableError {
  return error instanceof StoreUnavailableError;
}

/** How long after a failed write /ready keeps saying "not ready" (a full disk can let a tiny probe through). */
export const WRITE_FAILURE_MEMORY_MS = 10_000;

/**
 * Failures a one-row write probe can pass while a check's write (a 40 KB CER) fails: a full disk
 * (SQLite can reuse its WAL's free frames for a tiny write), an I/O error on some pages. A lost
 * connection is found by the probe itself, so /ready does not remember it.
 */
const SIZE_BOUND_KINDS: ReadonlySet<StoreErrorKind> = new Set(['disk-full', 'io', 'resources']);

export class StoreHealth {
  private readonly errors = Object.fromEntries(STORE_ERROR_KINDS.map((kind) => [kind, 0])) as Record<
    StoreErrorKind,
    number
  >;
  private lastWritableAt: number | null = null;
  private lastWriteFailedAt: number | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  wrote(): void {
    this.lastWritableAt = this.now();
  }

  failed(kind: StoreErrorKind, write: boolean): void {
    this.errors[kind] += 1;
    if (write && SIZE_BOUND_KINDS.has(kind)) this.lastWriteFailedAt = this.now();
  }

  report(): StoreHealthReport {
    return {
      errors: { ...this.errors },
      lastWritableAt: this.lastWritableAt,
      lastWriteFailedAt: this.lastWriteFailedAt,
    };
  }
}

/** A write failed on a full disk or with an I/O error within WRITE_FAILURE_MEMORY_MS (/ready). */
export function recentWriteFailure(report: StoreHealthReport | undefined, now: number): boolean {
  const failedAt = report?.lastWriteFailedAt;
  return failedAt != null && now - failedAt < WRITE_FAILURE_MEMORY_MS;
}

/** Whether a mode writes (a failure of it counts against the store's writability). */
function writes(mode: Mode): boolean {
  return mode === 'write' || mode === 'transaction';
}

/**
 * A driver that reports to StoreHealth and turns the inner driver's "unavailable" errors into
 * StoreUnavailableError. Any other error (a constraint, a bug) passes through unchanged.
 */
export class StoreHealthDriver implements SqlDriver {
  readonly dialect: SqlDriver['dialect'];

  constructor(
    private readonly inner: SqlDriver,
    readonly health: StoreHealth,
  ) {
    this.dialect = inner.dialect;
  }

  async run<T>(mode: Mode, work: Work<T>): Promise<T> {
    try {
      const result = await this.inner.run(mode, work);
      if (writes(mode)) this.health.wrote();
      return result;
    } catch (error) {
      const kind = this.classify(error);
      if (!kind) throw error;
      this.health.failed(kind, writes(mode));
      throw new StoreUnavailableError(kind, error);
    }
  }

  classify(error: unknown): StoreErrorKind | undefined {
    if (isStoreUnavailable(error)) return error.kind;
    return this.inner.classify(error);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The first, and the longest, wait of a loop whose rounds fail for a store reason. */
const ROUND_BACKOFF_MS = { first: 250, max: 5_000 } as const;

/**
 * The back-off and the log lines of a loop whose rounds fail. `failed` returns how long to wait
 * before the next round (doubling from ROUND_BACKOFF_MS.first to .max); only the first failure of
 * a streak is logged, and its end once, with the count and duration.
 */
export class FailureStreak {
  private count = 0;
  private since = 0;

  constructor(
    private readonly logger: Logger,
    /** What failed, for the log: "scheduler round", "delivery round". */
    private readonly what: string,
    private readonly now: () => number = Date.now,
  ) {}

  get failing(): boolean {
    return this.count > 0;
  }

  /** Records a failed round; returns the wait before the next one. */
  failed(error: unknown): number {
    if (this.count === 0) {
      this.since = this.now();
      if (isStoreUnavailable(error)) {
        this.logger.warn(`${this.what} failed: the store is unavailable; backing off until it is back`, {
          kind: error.kind,
          error: error.cause,
        });
      } else {
        this.logger.error(`${this.what} failed; backing off`, { error });
      }
    }
    this.count += 1;
    return Math.min(ROUND_BACKOFF_MS.first * 2 ** Math.min(this.count - 1, 10), ROUND_BACKOFF_MS.max);
  }

  /** Records a round that went through; logs the end of a streak. */
  succeeded(): void {
    if (this.count === 0) return;
    this.logger.warn(`${this.what} works again`, {
      failedRounds: this.count,
      failingMs: this.now() - this.since,
    });
    this.count = 0;
  }

  /**
   * One step of a round (a document, an appointment): a store outage counts in the streak (one log
   * line for a run of them, not one per step), any other error is logged as `message` with
   * `fields`. Never throws: the step's lease runs out and a later round takes it again.
   */
  async step(run: () => Promise<unknown>, message: string, fields: Record<string, unknown>): Promise<void> {
    try {
      await run();
      this.succeeded();
    } catch (error) {
      if (isStoreUnavailable(error)) this.failed(error);
      else this.logger.error(message, { ...fields, error });
    }
  }
}

/** Waits ms (a timer that does not keep the process alive). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}

/**
 * Lets go of a replica's leases when it stops (`release`). With the store unavailable they cannot
 * be released, and need not be: they run out on their own, and another replica takes the work
 * then. A warning, so the rest of the shutdown (the other loops, closing the store) still runs;
 * any other error is a defect and is thrown.
 */
export async function releaseLeases(
  release: () => Promise<unknown>,
  logger: Logger,
  what: string,
): Promise<void> {
  try {
    await release();
  } catch (error) {
    if (!isStoreUnavailable(error)) throw error;
    logger.warn(`${what}: leases left to run out, the store is unavailable`, { kind: error.kind });
  }
}
