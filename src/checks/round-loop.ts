/**
 * The loop of a worker that runs rounds against the store (the scheduler, the notification
 * worker, the pre-visit worker, the evidence worker): a round, at once another when the round took
 * something or a wake came during it, else an idle wait that `wake` cuts short; a round that fails
 * backs off (FailureStreak: 250 ms doubling to 5 s, one log line when the store goes, one when it
 * is back). On stop, after the last round (and the work it left running), the replica's leases
 * are let go of (releaseLeases).
 */
import type { Logger } from '../log.js';
import { FailureStreak, releaseLeases } from './store/outage.js';

export interface RoundLoopOptions {
  logger: Logger;
  /** What a round is, for the log: "scheduler round". */
  what: string;
  /** The wait between rounds when nothing was due. */
  idleMs: number;
  /** One round; resolves to how much it took (more may be due when it took something). */
  round: () => Promise<number>;
  /** Runs after every round, before the next (the scheduler waits there while near capacity). */
  afterRound?: () => Promise<void>;
  /** On stop: waits for the work the rounds left running (the scheduler's steps, the deliveries). */
  settle?: () => Promise<unknown>;
  /** On stop, last: lets go of every lease the replica holds; `what` names the worker in the log. */
  release: { what: string; leases: () => Promise<unknown> };
}

export class RoundLoop {
  private isRunning = false;
  private loop: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private readonly failures: FailureStreak;

  constructor(private readonly options: RoundLoopOptions) {
    this.failures = new FailureStreak(options.logger, options.what);
  }

  get running(): boolean {
    return this.isRunning;
  }

  start(): void {
    if (this.isRunning) return;
    this.isRunning = true;
    this.loop = this.run();
  }

  /** Runs a round now, or right after the one under way. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Ends the loop after the round under way, waits for what it left running, lets go of the leases. */
  async stop(): Promise<void> {
    this.isRunning = false;
    this.wake();
    await this.loop;
    await this.options.settle?.();
    const { what, leases } = this.options.release;
    await releaseLeases(leases, this.options.logger, what);
  }

  private async run(): Promise<void> {
    while (this.isRunning) {
      this.woken = false;
      let idleMs = this.options.idleMs;
      let again = false;
      try {
        again = (await this.options.round()) > 0 || this.woken;
        this.failures.succeeded();
      } catch (error) {
        // Backs off instead of a failing round every idleMs.
        idleMs = this.failures.failed(error);
      }
      await this.options.afterRound?.();
      if (again) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, idleMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = null;
    }
  }
}
