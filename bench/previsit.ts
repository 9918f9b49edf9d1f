/**
 * Issue 26: a clinic day with pre-visit checks, and the same day without them (the baseline), in
 * one run, on the sandbox over real HTTP with the service in this process (its clock injected).
 *
 * The day: APPOINTMENTS appointments over a morning (08:00-12:00 in Asia/Dubai), each booked
 * between 24 hours and 5 minutes before its start (log-uniform: many bookings close to the day,
 * fewer far ahead), mixed outcomes (eligible, not eligible, multi-card, member not found), each
 * patient checking in at the start with a fresh $submit (same patient, payer and visit type, no
 * serviced[x]). Time-scaled: the service's clock is real time plus an offset; whenever no check is
 * in flight the offset jumps to the next event (a booking, a due re-check, a check-in), so the
 * day's 29 hours run in minutes while every portal session and every check-in runs at real speed
 * (the sandbox at SCALE: a session of 25-70 s at scale 1 takes SCALE times that).
 *
 * Measured per day: the check-in wait (the $submit's HTTP time to its final answer), p50/p95 over
 * the found-member check-ins and over all; the share of found-member check-ins answered by reuse;
 * portal sessions per appointment (create-task calls per patient, before the start and in all).
 *
 *   npm run bench:previsit        (BENCH_APPOINTMENTS=200, BENCH_SCALE=0.01)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../src/log.js';
import { startServer } from '../src/server.js';
import type { RunningServer } from '../src/server.js';
import { startSandbox } from '../src/sandbox/index.js';
import { warmFhirDefinitions } from '../src/fhir/validator.js';
import { testConfig, TENANT_A_KEY, UPSTREAM_KEY } from '../test/support/harness.js';
import { eligibilityRequest } from '../test/support/requests.js';
import { machine, quantile, record, sleep } from './lib.js';
import { emiratesId } from '../test/support/emirates-id.js';

const APPOINTMENTS = Number(process.env.BENCH_APPOINTMENTS ?? 200);
const SCALE = Number(process.env.BENCH_SCALE ?? 0.01);
const MIN = 60_000;
const HOUR = 60 * MIN;
const AUTH = { Authorization: `Bearer ${TENANT_A_KEY}` };

/** Outcomes by the sandbox's serial (docs/sandbox.md): weight, serial, found member. */
const MIX = [
  { weight: 70, serial: '0000001', found: true }, // eligible
  { weight: 10, serial: '0000002', found: true }, // not eligible (a found member)
  { weight: 10, serial: '0000009', found: true }, // multi-card, eligible
  { weight: 10, serial: '0000003', found: false }, // member not found
] as const;

/** A deterministic generator (mulberry32), so both days see the same appointments. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Appointment {
  patient: string;
  found: boolean;
  start: number;
  bookedAt: number;
}

function clinicDay(firstStart: number): Appointment[] {
  const next = random(26);
  return Array.from({ length: APPOINTMENTS }, (_, i) => {
    let pick = next() * 100;
    const mix = MIX.find((m) => (pick -= m.weight) < 0) ?? MIX[0];
    const start = firstStart + Math.round((i * 4 * HOUR) / APPOINTMENTS);
    const ahead = 5 * MIN * Math.exp(next() * Math.log((24 * HOUR) / (5 * MIN)));
    // A distinct patient per appointment: the year is free in the sandbox's identifiers.
    const patient = emiratesId(1800 + i, mix.serial);
    return { patient, found: mix.found, start, bookedAt: start - Math.round(ahead) };
  });
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/fhir/CoverageEligibilityRequest/$submit`, {
    method: 'POST',
    headers: { ...AUTH, 'Content-Type': 'application/fhir+json', ...headers },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res;
}

async function runDay(previsit: boolean) {
  const sandbox = await startSandbox({
    port: 0,
    timeScale: SCALE,
    apiKeys: [UPSTREAM_KEY],
    durationSeed: 26,
  });
  /** When each patient's portal sessions were created (the service's clock). */
  const sessions = new Map<string, number[]>();
  let offset = 0;
  const now = () => Date.now() + offset;
  const dir = mkdtempSync(join(tmpdir(), 'fea-bench-previsit-'));
  const config = testConfig(sandbox.url, {
    databaseUrl: `sqlite:${join(dir, 'adapter.db')}`,
    reuseWindowMinutes: 240,
    pollIntervalMs: 100,
    submitWaitMs: 60_000,
    // The clock jumps hours while nothing is in flight; a check is never "still checking" for it.
    checkTimeoutMs: 48 * HOUR,
    maxInFlight: 10,
  });
  const server: RunningServer = await startServer({ ...config, logLevel: 'error' }, createLogger('error'), {
    now,
    upstream: (inner) => ({
      createTask: (creds, body) => {
        sessions.set(body.emirates_id, [...(sessions.get(body.emirates_id) ?? []), now()]);
        return inner.createTask(creds, body);
      },
      getResult: (creds, id) => inner.getResult(creds, id),
      health: () => inner.health(),
    }),
  });
  await warmFhirDefinitions();
  const firstStart = Date.UTC(2030, 0, 15, 4, 0); // 08:00 in Dubai, far from today
  const day = clinicDay(firstStart);
  offset = Math.min(...day.map((a) => a.bookedAt)) - HOUR - Date.now();
  type Event = { at: number; kind: 'book' | 'check-in'; appointment: Appointment };
  const events: Event[] = [
    ...(previsit ? day.map((a): Event => ({ at: a.bookedAt, kind: 'book', appointment: a })) : []),
    ...day.map((a): Event => ({ at: a.start, kind: 'check-in', appointment: a })),
  ].sort((a, b) => a.at - b.at || (a.kind === 'book' ? -1 : 1));
  const checkIns: Array<{ ms: number; reused: boolean; found: boolean; start: number }> = [];
  const started = performance.now();
  for (const event of events) {
    await advanceTo(server, event.at, now, (ms) => (offset += ms));
    const a = event.appointment;
    if (event.kind === 'book') {
      const res = await post(
        server.url,
        eligibilityRequest({
          emiratesId: a.patient,
          servicedPeriod: { start: new Date(a.start).toISOString() },
        }),
        { Prefer: 'respond-async' },
      );
      if (res.status !== 202) throw new Error(`booking answered ${res.status}`);
      continue;
    }
    const t0 = performance.now();
    const res = await post(server.url, eligibilityRequest({ emiratesId: a.patient }), { Prefer: 'wait=60' });
    checkIns.push({
      ms: performance.now() - t0,
      reused: res.headers.has('age'),
      found: a.found,
      start: a.start,
    });
  }
  const wallSeconds = (performance.now() - started) / 1000;
  await server.stop();
  await sandbox.close();
  const found = checkIns.filter((c) => c.found);
  const waits = (list: typeof checkIns) => list.map((c) => c.ms).sort((x, y) => x - y);
  const perAppointment = day.map((a) => {
    const times = sessions.get(a.patient) ?? [];
    return { found: a.found, before: times.filter((t) => t < a.start).length, total: times.length };
  });
  const stat = (values: number[]) => ({
    max: Math.max(...values),
    mean: Number((values.reduce((s, v) => s + v, 0) / values.length).toFixed(3)),
  });
  return {
    previsit,
    appointments: day.length,
    foundMemberCheckIns: found.length,
    checkInWaitMs: {
      foundMember: {
        p50: Math.round(quantile(waits(found), 0.5)),
        p95: Math.round(quantile(waits(found), 0.95)),
      },
      all: {
        p50: Math.round(quantile(waits(checkIns), 0.5)),
        p95: Math.round(quantile(waits(checkIns), 0.95)),
      },
    },
    foundMemberAnsweredByReuse: Number(
      (found.filter((c) => c.reused).length / Math.max(1, found.length)).toFixed(4),
    ),
    portalSessionsPerAppointment: {
      beforeStart: stat(perAppointment.map((s) => s.before)),
      beforeStartFoundMember: stat(perAppointment.filter((s) => s.found).map((s) => s.before)),
      includingCheckIn: stat(perAppointment.map((s) => s.total)),
    },
    wallSeconds: Number(wallSeconds.toFixed(1)),
  };
}

/**
 * Moves the service's clock to `at`: at real speed while a check is in flight (so every portal
 * session and every answer takes its real time), by jumps to the next due re-check or to `at`
 * while none is.
 */
async function advanceTo(
  server: RunningServer,
  at: number,
  now: () => number,
  jump: (ms: number) => void,
): Promise<void> {
  for (;;) {
    if (now() >= at) return;
    const queue = await server.store.countQueue('clinic-a');
    if (queue.waiting + queue.inFlight > 0) {
      await sleep(10);
      continue;
    }
    const pending = await server.store.appointments.search('clinic-a', [{ from: now() }], 1000);
    const nextDue = Math.min(
      ...pending.filter((a) => a.state === 'scheduled').map((a) => Math.max(a.dueAt, now())),
      at,
    );
    if (nextDue > now()) jump(nextDue - now());
    // The re-check worker decides what is due now (a booking check that was still running is
    // decided again a second later: that second passes at real speed).
    await server.previsit.tick();
    if (nextDue < at) await sleep(5);
  }
}

async function main() {
  const withChecks = await runDay(true);
  const baseline = await runDay(false);
  await record('previsit', {
    machine: machine(),
    appointments: APPOINTMENTS,
    sandboxTimeScale: SCALE,
    note: 'check-in waits are real HTTP times; a portal session runs at the sandbox time scale, so the baseline wait is the portal duration times sandboxTimeScale',
    previsit: withChecks,
    baseline,
  });
}

await main();
