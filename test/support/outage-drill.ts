/**
 * The store-outage drill of issue 29, shared by the component test (which asserts on it) and
 * `npm run bench:outage` (which counts it): the real service as a child process against the
 * sandbox upstream in this process, checks submitted through $submit as a clinic would, and a
 * store taken away (a private PostgreSQL stopped, a SQLite disk filled) while the drill keeps
 * asking the service everything a client asks ($submit, the CER, the _async status, /ready,
 * /health), recording every answer.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningSandbox } from '../../src/sandbox/index.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { UPSTREAM_KEY } from './harness.js';
import type { ServiceProcess } from './process.js';
import { logSummary, spawnService, tenantAuth, writeTenantsFile } from './process.js';
import { eligibilityRequest } from './requests.js';
import { until } from './until.js';
import { emiratesId } from './emirates-id.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';

export interface DrillOptions {
  databaseUrl: string;
  /** Sandbox time scale: a found-eligible check takes ~3 s at 1. */
  timeScale: number;
  /** Delay of the upstream's create-task answer (the task exists meanwhile). */
  createTaskLatencyMs?: number;
  tenants?: number;
  maxInFlight?: number;
  /** More environment for the service (POLL_INTERVAL_MS, LEASE_MS, ...). */
  env?: Record<string, string>;
  /** Node arguments of the service (e.g. `--import` of a fault-injecting module). */
  nodeArgs?: string[];
}

/** One HTTP answer the drill got, with what it needs to judge it. */
export interface Answer {
  what: 'submit' | 'read' | 'async' | 'ready' | 'health' | 'metrics';
  /** Epoch ms the request was sent and answered. */
  sentAt: number;
  answeredAt: number;
  /** 0: no HTTP answer at all (connection refused or reset). */
  status: number;
  retryAfter: string | null;
  location: string | null;
  contentLocation: string | null;
  body: unknown;
}

/** A check the drill asked for: its request identifier and, once $submit stored it, its id. */
export interface Submission {
  n: number;
  tenant: number;
  identifier: string;
  id: string | null;
  answers: Answer[];
}

export interface Drill {
  url: string;
  databaseUrl: string;
  service: ServiceProcess;
  sandbox: RunningSandbox;
  submissions: Submission[];
  /** Sends check n ($submit, a new Emirates ID); `prefer` as the header (e.g. `wait=30`). */
  submit(n: number, prefer?: string): Promise<Answer>;
  /** Sends again, with the same request identifier, every check $submit did not store. */
  resubmitRefused(prefer?: string): Promise<void>;
  /** GET of a path with the tenant's key, recorded as `what`. */
  get(what: Answer['what'], path: string, tenant?: number): Promise<Answer>;
  /** The final CER of every stored check, once none is queued (or the time is up). */
  settle(timeoutMs: number): Promise<Map<string, { outcome: string; inforce: boolean | null; code: string }>>;
  /** The service's log lines from index `from` on. */
  logFrom(from: number): string[];
  /** Whether the service process still runs. */
  alive(): boolean;
  /** The last lines of the service's output that name an error (what a crash left). */
  crash(): string[];
  close(): Promise<void>;
}

/** Starts the sandbox upstream and the service for a drill. */
export async function startDrill(options: DrillOptions): Promise<Drill> {
  const tenants = options.tenants ?? 2;
  const sandbox = await startSandbox({
    port: 0,
    timeScale: options.timeScale,
    apiKeys: [UPSTREAM_KEY],
    faults: { createTaskLatencyMs: options.createTaskLatencyMs ?? 0 },
  });
  const dir = mkdtempSync(join(tmpdir(), 'fea-outage-drill-'));
  let service: ServiceProcess;
  try {
    service = await spawnService(
      {
        UPSTREAM_BASE_URL: sandbox.url,
        TENANTS_FILE: writeTenantsFile(dir, tenants, UPSTREAM_KEY, options.maxInFlight ?? 10),
        DATABASE_URL: options.databaseUrl,
        POLL_STRATEGY: 'fixed',
        POLL_INTERVAL_MS: '300',
        SUBMIT_WAIT_MS: '0',
        SUBMIT_RATE_PER_MINUTE: '1000000',
        // A step the store failed under holds its lease until it runs out (then the check is
        // claimed again): 20 s, not the default minute, so a drill's checks end in its time.
        LEASE_MS: '20000',
        ...options.env,
      },
      ['src/main.ts'],
      options.nodeArgs ?? [],
    );
  } catch (error) {
    await sandbox.close();
    throw error;
  }
  const url = service.url;
  // As a load balancer would: no traffic before /ready (the FHIR definitions load after listening).
  for (let started = Date.now(); ; await sleep(100)) {
    const ready = await fetch(`${url}/ready`).catch(() => null);
    await ready?.arrayBuffer();
    if (ready?.status === 200) break;
    if (Date.now() - started > 60_000) {
      await Promise.all([service.stop(), sandbox.close()]);
      throw new Error(`the service was not ready within 60 s:\n${service.output.join('\n')}`);
    }
  }
  const alive = () => service.child.exitCode === null && service.child.signalCode === null;
  const submissions: Submission[] = [];
  const run = Date.now().toString(36);

  const call = async (
    what: Answer['what'],
    path: string,
    init: { method?: string; headers?: Record<string, string>; body?: string } = {},
  ): Promise<Answer> => {
    const sentAt = Date.now();
    try {
      const res = await fetch(`${url}${path}`, { ...init, signal: AbortSignal.timeout(60_000) });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text) as unknown;
      } catch {
        // not JSON: kept as text
      }
      return {
        what,
        sentAt,
        answeredAt: Date.now(),
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        location: res.headers.get('location'),
        contentLocation: res.headers.get('content-location'),
        body,
      };
    } catch (error) {
      return {
        what,
        sentAt,
        answeredAt: Date.now(),
        status: 0,
        retryAfter: null,
        location: null,
        contentLocation: null,
        body: describeError(error),
      };
    }
  };

  const send = async (s: Submission, prefer?: string): Promise<Answer> => {
    const answer = await call('submit', SUBMIT, {
      method: 'POST',
      headers: {
        ...tenantAuth(s.tenant),
        'Content-Type': 'application/fhir+json',
        ...(prefer ? { Prefer: prefer } : {}),
      },
      body: JSON.stringify(
        eligibilityRequest({ emiratesId: drillEmiratesId(s.n), identifier: s.identifier }),
      ),
    });
    s.answers.push(answer);
    const where = answer.location ?? answer.contentLocation;
    if ((answer.status === 200 || answer.status === 202) && where) s.id ??= where.split('/').pop() ?? null;
    return answer;
  };

  return {
    url,
    databaseUrl: options.databaseUrl,
    service,
    sandbox,
    submissions,
    submit(n, prefer) {
      const s: Submission = {
        n,
        tenant: n % tenants,
        identifier: `outage-${run}-${n}`,
        id: null,
        answers: [],
      };
      submissions.push(s);
      return send(s, prefer);
    },
    async resubmitRefused(prefer) {
      for (const s of submissions.filter((x) => x.id === null)) await send(s, prefer);
    },
    get: (what, path, tenant = 0) => call(what, path, { headers: tenantAuth(tenant) }),
    async settle(timeoutMs) {
      const started = Date.now();
      const final = new Map<string, { outcome: string; inforce: boolean | null; code: string }>();
      for (;;) {
        for (const s of submissions) {
          if (!s.id || final.has(s.id)) continue;
          const res = await call('read', `/fhir/CoverageEligibilityResponse/${s.id}`, {
            headers: tenantAuth(s.tenant),
          });
          const cer = res.body as {
            outcome?: string;
            insurance?: { inforce?: boolean }[];
            error?: { code?: { coding?: { code?: string }[] } }[];
          };
          if (res.status !== 200 || cer.outcome === 'queued') continue;
          final.set(s.id, {
            outcome: String(cer.outcome),
            inforce: cer.insurance?.[0]?.inforce ?? null,
            code: cer.error?.[0]?.code?.coding?.[0]?.code ?? '',
          });
        }
        const stored = submissions.filter((s) => s.id).length;
        if (final.size >= stored || !alive() || Date.now() - started > timeoutMs) return final;
        await sleep(250);
      }
    },
    logFrom: (from) => service.output.slice(from),
    alive,
    crash: () =>
      alive()
        ? []
        : service.output
            .filter((line) => /error/i.test(line) && !line.startsWith('{'))
            .slice(-8)
            .map((line) => line.slice(0, 300)),
    async close() {
      await service.stop().catch(() => undefined);
      await sandbox.close().catch(() => undefined);
    },
  };
}

/** Waits (at most 10 s) until the upstream holds `count` tasks: as many create-task calls went out. */
export async function untilTasks(drill: Drill, count: number): Promise<void> {
  await until(
    () => (drill.sandbox.control.tasks().length === count ? true : undefined),
    10_000,
    `${count} tasks`,
  );
}

/** A store that the drill can take away and give back. */
export interface OutageStore {
  /** Takes the store away (stops the server, fills the disk). */
  down(): Promise<void>;
  /** Gives it back. */
  up(): Promise<void>;
}

export interface OutagePlan {
  name: string;
  store: OutageStore;
  downMs: number;
  /** A new check submitted this often during the outage (0: none). */
  submitEveryMs?: number;
  /** Next n for a new check (the caller's counter). */
  nextN?: () => number;
  /** `Prefer` of the checks submitted during the outage. */
  prefer?: string;
  /** Probes of reads, _async, /ready and /health this often (ms). */
  probeEveryMs?: number;
}

export interface OutageReport {
  name: string;
  downAt: number;
  upAt: number;
  /** Time from `up()` to the first /ready 200. */
  readyAfterUpMs: number | null;
  /**
   * From /metrics: store_errors_total (all kinds) before the outage and after it, and the highest
   * store_seconds_since_writable seen while the store was away.
   */
  metrics: { storeErrorsBefore: number; storeErrorsAfter: number; maxSecondsSinceWritable: number };
  /** Every answer the drill got between down() and up(), probes and checks submitted meanwhile. */
  answers: Answer[];
  /** The service's warn and error lines from down() to 3 s after /ready answered 200 again. */
  logLines: { error: number; warn: number; byMessage: Record<string, number> };
  /** Whether the service process is still running at the end. */
  alive: boolean;
  /** When it is not: the last lines of its output that name an error. */
  crash: string[];
}

/**
 * One outage: takes the store away for `downMs` while probing the service, gives it back, waits
 * for /ready 200 (at most 30 s) and 3 s more, and reports what was seen.
 */
export async function outage(drill: Drill, plan: OutagePlan): Promise<OutageReport> {
  const logStart = drill.service.output.length;
  const storeErrorsBefore = storeErrors(await drill.get('metrics', '/metrics'));
  const answers: Answer[] = [];
  const pending: Promise<void>[] = [];
  const record = (p: Promise<Answer>) => pending.push(p.then((a) => void answers.push(a)));
  const stored = () => drill.submissions.filter((s) => s.id !== null);
  await plan.store.down();
  const downAt = Date.now();
  let nextSubmit = downAt;
  let nextProbe = downAt;
  while (Date.now() - downAt < plan.downMs) {
    const now = Date.now();
    if (plan.submitEveryMs && plan.nextN && now >= nextSubmit) {
      nextSubmit += plan.submitEveryMs;
      record(drill.submit(plan.nextN(), plan.prefer));
    }
    if (now >= nextProbe) {
      nextProbe += plan.probeEveryMs ?? 500;
      const some = stored();
      const check = some[Math.floor(Math.random() * some.length)];
      if (check?.id) {
        record(drill.get('read', `/fhir/CoverageEligibilityResponse/${check.id}`, check.tenant));
        record(drill.get('async', `/fhir/_async/${check.id}`, check.tenant));
      }
      record(drill.get('ready', '/ready'));
      record(drill.get('health', '/health'));
      record(drill.get('metrics', '/metrics'));
    }
    await sleep(50);
  }
  // What was asked during the outage is answered during it or soon after: all of it counts.
  await Promise.all(pending);
  await plan.store.up();
  const upAt = Date.now();
  let readyAfterUpMs: number | null = null;
  while (drill.alive() && Date.now() - upAt < 30_000) {
    if ((await drill.get('ready', '/ready')).status === 200) {
      readyAfterUpMs = Date.now() - upAt;
      break;
    }
    await sleep(100);
  }
  if (drill.alive()) await sleep(3000);
  return {
    name: plan.name,
    downAt,
    upAt,
    readyAfterUpMs,
    metrics: {
      storeErrorsBefore,
      storeErrorsAfter: storeErrors(await drill.get('metrics', '/metrics')),
      maxSecondsSinceWritable: Math.max(
        0,
        ...answers
          .filter((a) => a.what === 'metrics')
          .map((a) => metricValue(a, 'store_seconds_since_writable')),
      ),
    },
    answers,
    logLines: countLogLines(drill.logFrom(logStart)),
    alive: drill.alive(),
    crash: drill.crash(),
  };
}

/** The sum of a metric's samples in a /metrics answer (0 when absent). */
function metricValue(answer: Answer, name: string): number {
  let total = 0;
  for (const line of String(answer.body).split('\n')) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`))
      total += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return total;
}

function storeErrors(answer: Answer): number {
  return metricValue(answer, 'store_errors_total');
}

/** Warn and error lines of a service log, counted by level and message. */
function countLogLines(lines: readonly string[]): OutageReport['logLines'] {
  const byMessage = logSummary(lines);
  const out: OutageReport['logLines'] = { error: 0, warn: 0, byMessage };
  for (const [key, count] of Object.entries(byMessage))
    out[key.startsWith('error:') ? 'error' : 'warn'] += count;
  return out;
}

/**
 * Whether an answer given while the store was away keeps the contract (issue 29): a 503 with
 * Retry-After and an OperationOutcome, or a stored check's CER (200, or 202/200 of _async), or
 * /health 200. Returns what is wrong, or null.
 */
function outageAnswerProblem(answer: Answer): string | null {
  const body = answer.body as {
    resourceType?: string;
    issue?: { code?: string; details?: { text?: string } }[];
  };
  const type = typeof body === 'object' && body !== null ? body.resourceType : undefined;
  if (answer.what === 'health') return answer.status === 200 ? null : `/health answered ${answer.status}`;
  if (answer.what === 'ready') return answer.status === 503 ? null : `/ready answered ${answer.status}`;
  // Prometheus keeps scraping through an outage: the store's own gauges say what is going on.
  if (answer.what === 'metrics') return answer.status === 200 ? null : `/metrics answered ${answer.status}`;
  if (answer.status === 0) return `no answer (${String(answer.body)})`;
  // The _async status answers 202 with X-Progress and no body while the check runs (README).
  if (answer.what === 'async' && answer.status === 202) return null;
  if (type === undefined) return `${answer.status} not FHIR JSON: ${String(answer.body).slice(0, 100)}`;
  if (answer.status === 503) return answer.retryAfter ? null : '503 without Retry-After';
  if (answer.what === 'submit' && answer.status === 200)
    return answer.location && type === 'CoverageEligibilityResponse'
      ? null
      : '200 without a CER and Location';
  if (answer.what === 'submit' && answer.status === 202)
    return answer.contentLocation ? null : '202 without Content-Location';
  if (answer.what === 'read' && answer.status === 200) return null;
  if (answer.what === 'async' && answer.status === 200) return null;
  // The request id in an error's text is left out, so that like answers count as one problem.
  const text = (body.issue?.[0]?.details?.text ?? '').replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<id>');
  return `${answer.status} ${type} ${body.issue?.[0]?.code ?? ''}: ${text.slice(0, 120)}`;
}

/**
 * The answers of one outage that break the contract (outageAnswerProblem), counted by what was
 * asked and what is wrong. A disk just filled may still take a small write (SQLite reuses its
 * WAL's space): /ready is judged from the first refused write on (`readyDownFrom`), when given.
 */
export function answerProblems(answers: readonly Answer[], readyDownFrom?: number): Record<string, number> {
  const problems: Record<string, number> = {};
  for (const answer of answers) {
    if (answer.what === 'ready' && readyDownFrom !== undefined && answer.sentAt < readyDownFrom) continue;
    const problem = outageAnswerProblem(answer);
    if (problem !== null) {
      const key = `${answer.what}: ${problem}`;
      problems[key] = (problems[key] ?? 0) + 1;
    }
  }
  return problems;
}

/** An Emirates ID per check, of the sandbox's default found-eligible scenario. */
export function drillEmiratesId(n: number): string {
  return emiratesId(1990, 2_000_000 + n);
}

/** A private PostgreSQL as an outage store: stopped with `pg_ctl stop -m <mode>`, started again. */
export function stoppedServer(
  server: { stop(mode: 'fast' | 'immediate'): Promise<void>; start(): Promise<void> },
  mode: 'fast' | 'immediate',
): OutageStore {
  return { down: () => server.stop(mode), up: () => server.start() };
}

/** A fetch failure as text: its cause (ECONNREFUSED, a reset) when it has one. */
function describeError(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof Error) return cause.message;
  return error instanceof Error ? error.message : String(error);
}

/** Numbers from `from` on, one a call (the n of the next check). */
export function counter(from: number): () => number {
  let n = from;
  return () => n++;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
