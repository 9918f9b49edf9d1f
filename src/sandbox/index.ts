/**
 * The upstream simulator: a local stand-in for the payer-portal eligibility service, driven by the
 * scenario table in scenarios.ts (docs/sandbox.md). Used by `npm start` in sandbox mode, by
 * `npm run sandbox`, and by the component tests.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BASE_PATH, createSandboxApp } from './app.js';
import { LinkSigner } from './links.js';
import type { Faults, SandboxStats, SandboxTaskInfo } from './tasks.js';
import { TaskBook } from './tasks.js';

export { BASE_PATH, BULK_PATHS } from './app.js';
export { SCENARIOS, PAYERS, TIMELINES } from './scenarios.js';
export { SEARCH_ALL_PLANS } from './search-all.js';
export { payerProfile, taskPhaseDurations } from './durations.js';
export type { Faults, SandboxStats, SandboxTaskInfo } from './tasks.js';

/** Accepted x-api-key values when none are given. `sandbox-upstream-key` is the built-in sandbox tenant's key (config.ts). */
export const DEFAULT_SANDBOX_API_KEYS = ['sandbox', 'sandbox-upstream-key'];

export interface SandboxOptions {
  port?: number;
  host?: string;
  /** Multiplies every duration (tests use 0.01 to 0.05). Default 1: a check completes in ~3 s. */
  timeScale?: number;
  /** Accepted x-api-key values; default DEFAULT_SANDBOX_API_KEYS. */
  apiKeys?: string[];
  faults?: Partial<Faults>;
  /** Lifetime of signed links; default 5 minutes times timeScale (at least 1 s). */
  linkTtlMs?: number;
  /**
   * Seed of a realistic spread of task durations per payer (durations.ts, docs/sandbox.md):
   * queue, portal navigation and extraction drawn per task around each payer's profile.
   * Absent: the fixed timelines (a check completes in ~3 s).
   */
  durationSeed?: number;
  /** Pads every screenshot to this many bytes (a real portal screenshot is a few hundred KB). */
  screenshotBytes?: number;
}

/** Lets tests steer and observe the sandbox at runtime. */
export interface SandboxControl {
  /** Changes the injected faults (fields not given are kept). */
  setFaults(faults: Partial<Faults>): void;
  faults(): Faults;
  /** Call counters: create-task calls, tasks created, polls, task-status calls, injected errors. */
  stats(): SandboxStats;
  /** Every task with its scenario name and current status (no patient data). */
  tasks(): SandboxTaskInfo[];
  /** Moves a task still in flight to CANCELLED. False when unknown or already terminal. */
  cancel(taskId: string): boolean;
  /** Changes the lifetime of links signed from now on. */
  setLinkTtlMs(ms: number): void;
  /**
   * Refuses every link to a file whose key ends with one of these (`_eligibility-letter.pdf`: the
   * letter of every task) with 403 `Link expired`, as a portal whose letter links are expired at
   * issue, however often they are signed again; an empty list refuses none.
   */
  refuseLinks(keyEndings: readonly string[]): void;
  /** Forgets one task (get-result answers 404 from now on). False when unknown. */
  forget(taskId: string): boolean;
  /** Forgets all tasks, counters and create counts; faults go back to the start options. */
  reset(): void;
}

export interface RunningSandbox {
  /** Base URL, ending in /v2/api-integration-v3. */
  url: string;
  close(): Promise<void>;
  control: SandboxControl;
}

/** Starts the sandbox. Resolves once it listens. */
export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const timeScale = options.timeScale ?? 1;
  if (!(timeScale > 0)) throw new Error('timeScale must be greater than 0');
  const book = new TaskBook(
    timeScale,
    { pollErrorRate: 0, latencyMs: 0, ...options.faults },
    options.durationSeed,
  );
  let linkTtlMs = options.linkTtlMs ?? Math.max(1000, 300_000 * timeScale);
  let refusedKeys: readonly string[] = [];
  const app = createSandboxApp({
    book,
    links: new LinkSigner(randomBytes(32).toString('hex')),
    apiKeys: new Set(options.apiKeys ?? DEFAULT_SANDBOX_API_KEYS),
    timeScale,
    linkTtlMs: () => linkTtlMs,
    refusedKeys: () => refusedKeys,
    screenshotBytes: () => options.screenshotBytes ?? 0,
    now: Date.now,
  });

  const server = createServer(app);
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const shownHost =
    host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;

  const control: SandboxControl = {
    setFaults: (faults) => {
      book.faults = { ...book.faults, ...faults };
    },
    faults: () => ({ ...book.faults }),
    stats: () => book.stats(),
    tasks: () => book.list(Date.now()),
    cancel: (taskId) => book.cancel(taskId, Date.now()),
    setLinkTtlMs: (ms) => {
      linkTtlMs = ms;
    },
    refuseLinks: (keyEndings) => {
      refusedKeys = [...keyEndings];
    },
    forget: (taskId) => book.forget(taskId),
    reset: () => book.reset(),
  };

  return {
    url: `http://${shownHost}:${port}${BASE_PATH}`,
    control,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
