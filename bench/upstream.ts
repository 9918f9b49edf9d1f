/**
 * The benchmarks' upstream: the sandbox simulator (its express app and task book, as
 * startSandbox builds them) behind a thin recording layer in this process, on its own port.
 *
 * What the layer adds, for the benchmarks only (nothing in src/ changes):
 * - several task books with different time scales, picked by the X-Clinic-ID header
 *   (`clinic-t<i>` -> book i mod n), so one run has a spread of task durations;
 * - a record of every poll (GET /eligibility-result/{task}): arrival and answer time per task,
 *   so the bench sees polls closer together than the poll interval, overlapping polls of one
 *   task, and the lateness of each poll as the upstream sees it;
 * - faults the sandbox has no switch for: `down` (503 to every call, /health included) and
 *   `stallRate` (that fraction of polls is never answered, so the client's timeout fires);
 * - a sampler of in-flight tasks per clinic (control.tasks() of every book), for the maximum
 *   in flight per tenant as the upstream saw it;
 * - create-task bodies per Emirates ID, so a second task for one check is seen as a duplicate.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { BASE_PATH, createSandboxApp } from '../src/sandbox/app.js';
import { LinkSigner } from '../src/sandbox/links.js';
import type { SandboxStats } from '../src/sandbox/tasks.js';
import { TaskBook } from '../src/sandbox/tasks.js';
import { isTerminalStatus } from '../src/upstream/contract.js';

export interface BenchUpstreamOptions {
  /** One task book per entry; tenant i uses book i mod n. The standard timeline is ~3 s at 1. */
  timeScales: number[];
  apiKey: string;
  /** The service's POLL_INTERVAL_MS: polls of one task closer than this count as violations. */
  pollIntervalMs: number;
  /** Sample in-flight tasks per clinic this often (ms); 0 = never. */
  sampleInFlightMs?: number;
  /** Keep every lateness value (ms) for exact percentiles (default true). */
  keepLateness?: boolean;
}

interface TaskPolls {
  count: number;
  lastArrival: number;
  lastFinish: number;
  open: number;
}

export interface PollReport {
  polls: number;
  tasksPolled: number;
  /** Pairs of polls of one task less than pollIntervalMs apart (arrival to arrival). */
  gapsUnderInterval: number;
  /** A poll of a task arriving while another poll of the same task was still unanswered. */
  overlappingPolls: number;
  minGapMs: number | null;
  /** Next arrival minus (previous answer + interval), or minus (create + interval) for the first. */
  latenessMs: { count: number; p50: number; p90: number; p99: number; max: number } | null;
  stalled: number;
  answered503ByDownMode: number;
  /** create-task calls as this process handled them: arrival to the last byte written. */
  createTaskMs: { count: number; p50: number; p99: number; max: number };
  /** Event-loop delay of the bench process (upstream and load generator), ms. */
  benchEventLoopDelayMs: { p50: number; p99: number; max: number };
}

export interface BenchUpstream {
  url: string;
  books: TaskBook[];
  stats(): SandboxStats;
  polls(): PollReport;
  /**
   * Polls against the poll intervals each task lived through: for every polled task, the
   * intervals from its creation to its last poll (floor of the span / interval, at least 1);
   * polls / intervals is 1 when every task was polled once per interval.
   */
  pollsPerInterval(): { tasks: number; polls: number; intervals: number; ratio: number };
  /** Tasks created per Emirates ID with more than one task: duplicates (ids, counts). */
  duplicateTasks(): { emiratesIds: number; extraTasks: number };
  tasksCreated(): number;
  /** Max tasks in flight at once per clinic, over all samples so far. */
  maxInFlightPerClinic(): { max: number; clinic: string | null; samples: number };
  /** Tasks in flight now, all clinics. */
  inFlightNow(): number;
  setFaults(faults: { pollErrorRate?: number; latencyMs?: number }): void;
  setDown(down: boolean): void;
  setStall(rate: number, holdMs: number): void;
  close(): Promise<void>;
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] ?? 0;
}

export async function startBenchUpstream(options: BenchUpstreamOptions): Promise<BenchUpstream> {
  const links = new LinkSigner(randomBytes(32).toString('hex'));
  const books = options.timeScales.map((scale) => new TaskBook(scale, { pollErrorRate: 0, latencyMs: 0 }));
  const apps = books.map((book, i) =>
    createSandboxApp({
      book,
      links,
      apiKeys: new Set([options.apiKey]),
      timeScale: options.timeScales[i] ?? 1,
      linkTtlMs: () => Math.max(1000, 300_000 * (options.timeScales[i] ?? 1)),
      now: Date.now,
    }),
  );
  const interval = options.pollIntervalMs;
  const keepLateness = options.keepLateness ?? true;
  const perTask = new Map<string, TaskPolls>();
  const lateness: number[] = [];
  let lateCount = 0;
  let lateMax = 0;
  let polls = 0;
  let gapsUnder = 0;
  let overlapping = 0;
  let minGap = Number.POSITIVE_INFINITY;
  let stalled = 0;
  let downAnswers = 0;
  let down = false;
  let stallRate = 0;
  let stallHoldMs = 20_000;
  let stallCredit = 0;
  const held = new Set<ServerResponse>();
  const createMs: number[] = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();

  const bookIndex = (req: IncomingMessage): number => {
    const clinic = String(req.headers['x-clinic-id'] ?? '');
    const n = Number(/(\d+)$/.exec(clinic)?.[1] ?? 0);
    return n % books.length;
  };

  const createdAtOf = (book: TaskBook, clinic: string, taskId: string): number | undefined =>
    book.get(clinic, taskId)?.createdAtMs;

  const onPoll = (req: IncomingMessage, res: ServerResponse, taskId: string, book: TaskBook): void => {
    const arrival = Date.now();
    polls += 1;
    let entry = perTask.get(taskId);
    const clinic = String(req.headers['x-clinic-id'] ?? '');
    const sinceAnswer = entry ? entry.lastFinish : createdAtOf(book, clinic, taskId);
    if (sinceAnswer !== undefined) {
      const late = Math.max(0, arrival - (sinceAnswer + interval));
      lateCount += 1;
      lateMax = Math.max(lateMax, late);
      if (keepLateness) lateness.push(late);
    }
    if (entry) {
      const gap = arrival - entry.lastArrival;
      minGap = Math.min(minGap, gap);
      if (gap < interval) gapsUnder += 1;
      if (entry.open > 0) overlapping += 1;
    } else {
      entry = { count: 0, lastArrival: arrival, lastFinish: arrival, open: 0 };
      perTask.set(taskId, entry);
    }
    const e = entry;
    e.count += 1;
    e.lastArrival = arrival;
    e.open += 1;
    let closed = false;
    const done = () => {
      if (closed) return;
      closed = true;
      e.open -= 1;
      e.lastFinish = Date.now();
    };
    res.once('finish', done);
    res.once('close', done);
  };

  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (down && url.startsWith(BASE_PATH)) {
      downAnswers += 1;
      res
        .writeHead(503, { 'content-type': 'application/json' })
        .end('{"detail":"Service Unavailable (bench)"}');
      return;
    }
    const index = url.startsWith('/sandbox-files/') ? 0 : bookIndex(req);
    const book = books[index] ?? books[0];
    const app = apps[index] ?? apps[0];
    if (!book || !app) throw new Error('no sandbox book');
    if (req.method === 'POST' && url.endsWith('/create-task')) {
      const arrival = Date.now();
      res.once('finish', () => createMs.push(Date.now() - arrival));
    }
    const poll = req.method === 'GET' ? /\/eligibility-result\/([^/?]+)/.exec(url) : null;
    if (poll?.[1]) {
      onPoll(req, res, decodeURIComponent(poll[1]), book);
      if (stallRate > 0) {
        stallCredit += stallRate;
        if (stallCredit >= 1 - 1e-9) {
          stallCredit -= 1;
          stalled += 1;
          held.add(res);
          const timer = setTimeout(() => {
            held.delete(res);
            if (!res.writableEnded && !res.destroyed) res.writeHead(504).end();
          }, stallHoldMs);
          res.once('close', () => {
            clearTimeout(timer);
            held.delete(res);
          });
          return;
        }
      }
    }
    app(req, res);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  const maxPerClinic = new Map<string, number>();
  let samples = 0;
  const sample = () => {
    const now = Date.now();
    const counts = new Map<string, number>();
    for (const book of books) {
      for (const task of book.list(now)) {
        if (!isTerminalStatus(task.status)) counts.set(task.clinicId, (counts.get(task.clinicId) ?? 0) + 1);
      }
    }
    for (const [clinic, count] of counts) {
      if (count > (maxPerClinic.get(clinic) ?? 0)) maxPerClinic.set(clinic, count);
    }
    samples += 1;
    return counts;
  };
  const sampler =
    options.sampleInFlightMs && options.sampleInFlightMs > 0
      ? setInterval(sample, options.sampleInFlightMs)
      : null;

  const allTasks = () => books.flatMap((book) => book.list(Date.now()));

  return {
    url: `http://127.0.0.1:${port}${BASE_PATH}`,
    books,
    stats() {
      const sum: SandboxStats = {
        createTask: 0,
        tasksCreated: 0,
        polls: 0,
        taskStatus: 0,
        injectedErrors: 0,
      };
      for (const book of books) {
        const s = book.stats();
        for (const key of Object.keys(sum) as (keyof SandboxStats)[]) sum[key] += s[key];
      }
      return sum;
    },
    polls() {
      const sorted = keepLateness ? [...lateness].sort((a, b) => a - b) : [];
      return {
        polls,
        tasksPolled: perTask.size,
        gapsUnderInterval: gapsUnder,
        overlappingPolls: overlapping,
        minGapMs: Number.isFinite(minGap) ? minGap : null,
        latenessMs:
          lateCount === 0
            ? null
            : {
                count: lateCount,
                p50: percentile(sorted, 0.5),
                p90: percentile(sorted, 0.9),
                p99: percentile(sorted, 0.99),
                max: lateMax,
              },
        stalled,
        answered503ByDownMode: downAnswers,
        createTaskMs: (() => {
          const c = [...createMs].sort((a, b) => a - b);
          return { count: c.length, p50: percentile(c, 0.5), p99: percentile(c, 0.99), max: c.at(-1) ?? 0 };
        })(),
        benchEventLoopDelayMs: {
          p50: Number((loopDelay.percentile(50) / 1e6).toFixed(1)),
          p99: Number((loopDelay.percentile(99) / 1e6).toFixed(1)),
          max: Number((loopDelay.max / 1e6).toFixed(1)),
        },
      };
    },
    pollsPerInterval() {
      let tasks = 0;
      let count = 0;
      let intervals = 0;
      const byId = new Map<string, number>();
      for (const book of books) {
        for (const info of book.list(Date.now())) byId.set(info.taskId, Date.parse(info.createdAt));
      }
      for (const [taskId, entry] of perTask) {
        const created = byId.get(taskId);
        if (created === undefined) continue;
        tasks += 1;
        count += entry.count;
        intervals += Math.max(1, Math.floor((entry.lastArrival - created) / interval));
      }
      return {
        tasks,
        polls: count,
        intervals,
        ratio: intervals ? Number((count / intervals).toFixed(4)) : 0,
      };
    },
    duplicateTasks() {
      const perId = new Map<string, number>();
      for (const book of books) {
        for (const info of book.list(Date.now())) {
          const task = book.get(info.clinicId, info.taskId);
          const id = `${info.clinicId}|${task?.request.emirates_id ?? '?'}`;
          perId.set(id, (perId.get(id) ?? 0) + 1);
        }
      }
      let ids = 0;
      let extra = 0;
      for (const n of perId.values()) {
        if (n > 1) {
          ids += 1;
          extra += n - 1;
        }
      }
      return { emiratesIds: ids, extraTasks: extra };
    },
    tasksCreated: () => allTasks().length,
    maxInFlightPerClinic() {
      let max = 0;
      let clinic: string | null = null;
      for (const [c, n] of maxPerClinic) {
        if (n > max) {
          max = n;
          clinic = c;
        }
      }
      return { max, clinic, samples };
    },
    inFlightNow() {
      let n = 0;
      for (const count of sample().values()) n += count;
      return n;
    },
    setFaults(faults) {
      for (const book of books) book.faults = { ...book.faults, ...faults };
    },
    setDown(value) {
      down = value;
    },
    setStall(rate, holdMs) {
      stallRate = rate;
      stallHoldMs = holdMs;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        if (sampler) clearInterval(sampler);
        loopDelay.disable();
        for (const res of held) res.destroy();
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
