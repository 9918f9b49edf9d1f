/**
 * The desk first (docs/queue.md), measured: a clinic's evening backlog of background work and its
 * walk-ins, at the portal's own spread of durations (the sandbox's `durationSeed`, scale 1)
 * compressed in time by BENCH_COMPRESS (default 50: a 45 s portal check takes 0.9 s here; the
 * adapter's own times, such as $submit to create-task, are not compressed). One tenant,
 * maxInFlight 5, SQLite.
 *
 * 1. All slots: the backlog alone (BACKLOG appointment bookings for tomorrow, in batches) with
 *    deskSlots 0, for the rate all five slots give.
 * 2. The clinic's day: the same backlog with deskSlots 1 (the default), and while it drains 20
 *    walk-ins ($submit for now, one every WALKIN_GAP_MS) and 10 of today's appointments booked
 *    behind the backlog, each starting 25 to 50 portal-minutes after it is booked. Measured: a
 *    walk-in's time from its $submit to its create-task answered (goal: p95 < 1 s), each of today's
 *    appointments answered before its start, the backlog's drain rate against the all-slots rate
 *    (bound: (maxInFlight - deskSlots) / maxInFlight = 0.8).
 * 3. CPU per check, this source against a previous one (PREV, e.g. main at 47a62a4), alternating
 *    rounds (so the machine's load drifts over both alike): half $submit, half batch entries, the
 *    sandbox answering at once, after a warm-up (goal: no dearer than 1.15x).
 *
 *   git archive 47a62a4 | tar -x -C /tmp/prev && ln -s "$PWD/node_modules" /tmp/prev/node_modules
 *   PREV=/tmp/prev npm run bench:clinic-day
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/checks/store/open.js';
import type { Check } from '../src/checks/store/check-store.js';
import { startSandbox } from '../src/sandbox/index.js';
import { PAYERS } from '../src/sandbox/scenarios.js';
import { eligibilityRequest } from '../test/support/requests.js';
import { emiratesId } from '../test/support/emirates-id.js';
import {
  cpuSeconds,
  machine,
  quantile,
  record,
  sleep,
  spawnService,
  tenantAuth,
  until,
  writeTenantsFile,
} from './lib.js';
import type { ServiceProcess } from './lib.js';

const UPSTREAM_KEY = 'bench-upstream-key';
const COMPRESS = Number(process.env.BENCH_COMPRESS ?? 50);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 200);
const WALKINS = Number(process.env.BENCH_WALKINS ?? 20);
const WALKIN_GAP_MS = Number(process.env.BENCH_WALKIN_GAP_MS ?? 2000);
const TODAY = Number(process.env.BENCH_TODAY ?? 10);
const MAX_IN_FLIGHT = 5;
const CPU_ROUNDS = Number(process.env.BENCH_CPU_ROUNDS ?? 3);
const CPU_CHECKS = Number(process.env.BENCH_CPU_CHECKS ?? 200);
const CPU_WARMUP = Number(process.env.BENCH_CPU_WARMUP ?? 400);
const PAYER_CODES = Object.keys(PAYERS).slice(0, 5);
const DAY = 86_400_000;
const PORTAL_MINUTE = 60_000 / COMPRESS;

let patients = 0;
const nextPatient = (): string => emiratesId(1991, 2_000_000 + (patients += 1));

function post(service: ServiceProcess, path: string, body: unknown): Promise<Response> {
  return fetch(`${service.url}${path}`, {
    method: 'POST',
    headers: { ...tenantAuth(0), 'Content-Type': 'application/fhir+json', Prefer: 'respond-async' },
    body: JSON.stringify(body),
  });
}

function batchOf(entries: ReturnType<typeof eligibilityRequest>[]) {
  return {
    resourceType: 'Bundle',
    type: 'batch',
    entry: entries.map((resource) => ({
      resource,
      request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
    })),
  };
}

/** Tomorrow's bookings, one batch per 100. */
async function sendBacklog(service: ServiceProcess, count: number): Promise<void> {
  const tomorrow = Date.now() + DAY;
  for (let start = 0; start < count; start += 100) {
    const entries = Array.from({ length: Math.min(100, count - start) }, (_, i) =>
      eligibilityRequest({
        emiratesId: nextPatient(),
        payer: PAYER_CODES[(start + i) % PAYER_CODES.length],
        servicedPeriod: { start: new Date(tomorrow + (start + i) * 60_000).toISOString() },
      }),
    );
    const res = await post(service, '/fhir', batchOf(entries));
    if (res.status !== 202) throw new Error(`batch answered ${res.status}`);
    await res.arrayBuffer();
  }
}

async function startService(
  sandboxUrl: string,
  deskSlots: number | undefined,
  script?: string[],
): Promise<{ service: ServiceProcess; databaseUrl: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-day-'));
  const tenantsFile = writeTenantsFile(dir, 1, UPSTREAM_KEY, MAX_IN_FLIGHT);
  if (deskSlots !== undefined) {
    const tenants = JSON.parse(readFileSync(tenantsFile, 'utf8')) as { tenants: Record<string, unknown>[] };
    tenants.tenants[0]!.deskSlots = deskSlots;
    writeFileSync(tenantsFile, JSON.stringify(tenants));
  }
  const databaseUrl = `sqlite:${join(dir, 'adapter.db')}`;
  const service = await spawnService(
    {
      UPSTREAM_BASE_URL: sandboxUrl,
      TENANTS_FILE: tenantsFile,
      DATABASE_URL: databaseUrl,
      // The portal's 1 s poll cadence and 1 s minimum gap, compressed like its durations.
      POLL_INTERVAL_MS: String(Math.max(20, Math.round(1000 / COMPRESS))),
      MIN_POLL_GAP_MS: String(Math.max(10, Math.round(1000 / COMPRESS))),
      CHECK_TIMEOUT_MS: '600000',
      SUBMIT_RATE_PER_MINUTE: '1000000',
      LOG_LEVEL: 'info',
    },
    script,
  );
  return { service, databaseUrl };
}

async function checksOf(databaseUrl: string): Promise<Check[]> {
  const store = await openStore(databaseUrl);
  try {
    const { checks } = await store.search('t0', {}, { count: 5000, offset: 0, total: false });
    return checks;
  } finally {
    await store.close();
  }
}

/** Upstream task durations (ms, compressed) by task id, from the sandbox. */
function taskDurations(
  sandbox: Awaited<ReturnType<typeof startSandbox>>,
): Map<string, { start: number; end: number }> {
  const tasks = new Map<string, { start: number; end: number }>();
  for (const t of sandbox.control.tasks())
    if (t.endedAt) tasks.set(t.taskId, { start: Date.parse(t.createdAt), end: Date.parse(t.endedAt) });
  return tasks;
}

/** Background checks drained per second of compressed time, and their mean task duration. */
function drain(checks: Check[], tasks: Map<string, { start: number; end: number }>) {
  const bg = checks
    .filter((c) => c.queueClass === 'background' && c.upstreamTaskId)
    .map((c) => tasks.get(c.upstreamTaskId!))
    .filter((t): t is { start: number; end: number } => t !== undefined);
  const first = Math.min(...bg.map((t) => t.start));
  const last = Math.max(...bg.map((t) => t.end));
  const meanTaskMs = bg.reduce((sum, t) => sum + t.end - t.start, 0) / bg.length;
  return {
    drained: bg.length,
    seconds: Number(((last - first) / 1000).toFixed(2)),
    perSecond: Number((bg.length / ((last - first) / 1000)).toFixed(3)),
    meanTaskMs: Math.round(meanTaskMs),
  };
}

/** Waits until the tenant has `expected` checks, all done (counted from the index, cheap), then reads them. */
async function allDone(
  databaseUrl: string,
  expected: number,
  timeoutMs: number,
  read = true,
): Promise<Check[]> {
  const store = await openStore(databaseUrl);
  try {
    await until(
      async () => {
        await sleep(400);
        const rows = await store.countByState();
        const total = rows.reduce((n, r) => n + r.count, 0);
        const done = rows.filter((r) => r.state === 'done').reduce((n, r) => n + r.count, 0);
        return total >= expected && done === total ? true : undefined;
      },
      timeoutMs,
      'every check done',
    );
  } finally {
    await store.close();
  }
  return read ? checksOf(databaseUrl) : [];
}

async function allSlots() {
  const sandbox = await startSandbox({
    port: 0,
    timeScale: 1 / COMPRESS,
    durationSeed: 1,
    apiKeys: [UPSTREAM_KEY],
  });
  const { service, databaseUrl } = await startService(sandbox.url, 0);
  try {
    await sendBacklog(service, BACKLOG);
    const checks = await allDone(databaseUrl, BACKLOG, 600_000);
    return drain(checks, taskDurations(sandbox));
  } finally {
    await service.stop();
    await sandbox.close();
  }
}

async function clinicDay() {
  const sandbox = await startSandbox({
    port: 0,
    timeScale: 1 / COMPRESS,
    durationSeed: 1,
    apiKeys: [UPSTREAM_KEY],
  });
  const { service, databaseUrl } = await startService(sandbox.url, undefined);
  try {
    await sendBacklog(service, BACKLOG);
    const walkIns: { id: string; sentAt: number; acceptedMs: number }[] = [];
    const today: { id: string; startAt: number }[] = [];
    for (let i = 0; i < WALKINS; i += 1) {
      await sleep(WALKIN_GAP_MS);
      const sentAt = Date.now();
      const res = await post(
        service,
        '/fhir/CoverageEligibilityRequest/$submit',
        eligibilityRequest({ emiratesId: nextPatient(), payer: PAYER_CODES[i % PAYER_CODES.length] }),
      );
      const acceptedMs = Date.now() - sentAt;
      await res.arrayBuffer();
      walkIns.push({ id: res.headers.get('content-location')?.split('/').pop() ?? '', sentAt, acceptedMs });
      if (i % 2 === 0 && today.length < TODAY) {
        // One of today's appointments, booked behind the backlog: it starts in 25 to 50 portal-minutes.
        const startAt = Date.now() + (25 + ((today.length * 5) % 26)) * PORTAL_MINUTE;
        const booked = await post(
          service,
          '/fhir/CoverageEligibilityRequest/$submit',
          eligibilityRequest({
            emiratesId: nextPatient(),
            servicedPeriod: { start: new Date(startAt).toISOString() },
          }),
        );
        await booked.arrayBuffer();
        today.push({ id: booked.headers.get('content-location')?.split('/').pop() ?? '', startAt });
      }
    }
    const checks = await allDone(databaseUrl, BACKLOG + WALKINS + today.length, 600_000);
    const byId = new Map(checks.map((c) => [c.id, c]));
    const deskMs = walkIns
      .map((w) => (byId.get(w.id)?.taskStartedAt ?? Number.NaN) - w.sentAt)
      .sort((a, b) => a - b);
    const todayAnswers = today.map((t) => {
      const check = byId.get(t.id)!;
      return { class: check.queueClass, answeredBeforeStartMs: t.startAt - check.updatedAt };
    });
    const backlogLeft = checks.filter(
      (c) => c.queueClass === 'background' && (c.taskStartedAt ?? Infinity) > walkIns.at(-1)!.sentAt,
    ).length;
    return {
      walkIns: {
        count: deskMs.length,
        submitToCreateTaskMs: {
          p50: Math.round(quantile(deskMs, 0.5)),
          p95: Math.round(quantile(deskMs, 0.95)),
          max: Math.round(deskMs.at(-1) ?? 0),
        },
        acceptedMsP50: Math.round(
          quantile(
            walkIns.map((w) => w.acceptedMs).sort((a, b) => a - b),
            0.5,
          ),
        ),
        classes: [...new Set(walkIns.map((w) => byId.get(w.id)?.queueClass))],
      },
      today: {
        count: todayAnswers.length,
        answeredBeforeStart: todayAnswers.filter((t) => t.answeredBeforeStartMs > 0).length,
        minMarginPortalMinutes: Number(
          (Math.min(...todayAnswers.map((t) => t.answeredBeforeStartMs)) / PORTAL_MINUTE).toFixed(1),
        ),
        classes: [...new Set(todayAnswers.map((t) => t.class))],
      },
      backlogStillWaitingAfterLastWalkIn: backlogLeft,
      drain: drain(checks, taskDurations(sandbox)),
    };
  } finally {
    await service.stop();
    await sandbox.close();
  }
}

/** CPU seconds a service spends on `count` checks: half $submit, half batch entries (50 a batch). */
async function cpuFor(
  service: ServiceProcess,
  databaseUrl: string,
  count: number,
  before: number,
): Promise<number> {
  const start = cpuSeconds(service.child.pid!);
  const half = Math.floor(count / 2);
  const submits = Array.from({ length: half }, () =>
    post(
      service,
      '/fhir/CoverageEligibilityRequest/$submit',
      eligibilityRequest({ emiratesId: nextPatient() }),
    ).then((r) => r.arrayBuffer()),
  );
  for (let at = 0; at < count - half; at += 50) {
    const entries = Array.from({ length: Math.min(50, count - half - at) }, () =>
      eligibilityRequest({ emiratesId: nextPatient() }),
    );
    await (await post(service, '/fhir', batchOf(entries))).arrayBuffer();
  }
  await Promise.all(submits);
  await allDone(databaseUrl, before + count, 300_000, false);
  return (cpuSeconds(service.child.pid!) - start) / count;
}

async function cpuPaired(prevRoot: string) {
  const sandbox = await startSandbox({ port: 0, timeScale: 0.0001, apiKeys: [UPSTREAM_KEY] });
  const sides = {
    previous: await startService(sandbox.url, undefined, [join(prevRoot, 'src/main.ts')]),
    current: await startService(sandbox.url, undefined),
  };
  const done = { previous: 0, current: 0 };
  const ms: Record<'previous' | 'current', number[]> = { previous: [], current: [] };
  try {
    for (const name of ['previous', 'current'] as const) {
      await cpuFor(sides[name].service, sides[name].databaseUrl, CPU_WARMUP, done[name]);
      done[name] += CPU_WARMUP;
    }
    for (let round = 0; round < CPU_ROUNDS; round += 1) {
      const order = round % 2 === 0 ? (['previous', 'current'] as const) : (['current', 'previous'] as const);
      for (const name of order) {
        const perCheck = await cpuFor(sides[name].service, sides[name].databaseUrl, CPU_CHECKS, done[name]);
        done[name] += CPU_CHECKS;
        ms[name].push(Number((perCheck * 1000).toFixed(3)));
      }
    }
  } finally {
    await sides.previous.service.stop();
    await sides.current.service.stop();
    await sandbox.close();
  }
  const ratios = ms.current.map((v, i) => Number((v / ms.previous[i]!).toFixed(3)));
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  return {
    previousSource: prevRoot,
    rounds: CPU_ROUNDS,
    checksPerRound: CPU_CHECKS,
    warmup: CPU_WARMUP,
    cpuMsPerCheck: ms,
    ratios,
    medianRatio: median(ratios),
  };
}

const all = await allSlots();
const day = await clinicDay();
const bound = (MAX_IN_FLIGHT - 1) / MAX_IN_FLIGHT;
const prev = process.env.PREV;
await record('clinic-day', {
  machine: machine(),
  compress: COMPRESS,
  backlog: BACKLOG,
  maxInFlight: MAX_IN_FLIGHT,
  allSlots: all,
  clinicDay: day,
  drainRatio: Number((day.drain.perSecond / all.perSecond).toFixed(3)),
  drainBound: bound,
  ...(prev ? { cpu: await cpuPaired(prev) } : {}),
});
