/**
 * Where figures 1 and 3's CPU goes, part by part, in this process (no HTTP): the store calls
 * one single-payer check makes (insert, two claims, the writes of the create and poll steps)
 * (one check at a time, and 25 at a time as the service runs them: storeGroupedChecks) and the
 * store's part of an unchanged poll, on SQLite and on PostgreSQL; the validation of a
 * $submit body; the reading and mapping of a found-eligible answer. CPU time from
 * process.cpuUsage (user + sys) of this process only, after a warm-up.
 *
 *   npx tsx bench/components.ts            (BENCH_CHECKS=2000, BENCH_STORES=sqlite,postgres)
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { openStore } from '../src/checks/store/open.js';
import type { Check, CheckStore, NewCheck } from '../src/checks/store/check-store.js';
import { loadFhirDefinitions } from '../src/fhir/validator.js';
import { readSubmitBody } from '../src/mapping/request/submit-body.js';
import { mapEnvelope, queuedCer } from '../src/mapping/response/index.js';
import type { CerContext } from '../src/mapping/types.js';
import { envelopeSchema } from '../src/upstream/contract.js';
import { eligibilityRequest, upstreamTaskRequest } from '../test/support/requests.js';
import { machine, pgSchema, record } from './lib.js';

const CHECKS = Number(process.env.BENCH_CHECKS ?? 2000);
const WARMUP = 200;

const envelopeJson = readFileSync(
  new URL('../test/fixtures/upstream/found-eligible.json', import.meta.url),
  'utf8',
);
const inFlightJson = readFileSync(
  new URL('../test/fixtures/upstream/in-flight-navigating.json', import.meta.url),
  'utf8',
);

/** CPU milliseconds per iteration of `work`, after `WARMUP` iterations. */
async function perIteration(count: number, work: (i: number) => unknown): Promise<number> {
  for (let i = 0; i < WARMUP; i += 1) await work(i);
  const before = process.cpuUsage();
  for (let i = WARMUP; i < WARMUP + count; i += 1) await work(i);
  const used = process.cpuUsage(before);
  return Number(((used.user + used.system) / 1000 / count).toFixed(4));
}

function context(id: string): CerContext {
  const request = { ...eligibilityRequest({ emiratesId: '784-1990-0000001-0' }), id };
  return {
    checkId: id,
    patient: { reference: 'Patient/p1' },
    insurer: { identifier: { system: 'urn:payer', value: 'DAMAN' }, display: 'Daman' },
    request,
    isSearchAll: false,
    baseUrl: 'http://localhost:8080',
    now: new Date().toISOString(),
  };
}

function newCheck(tenantId: string): NewCheck {
  const id = randomUUID();
  const ctx = context(id);
  const upstreamRequest = upstreamTaskRequest('784-1990-0000001-0', Date.now());
  return {
    id,
    tenantId,
    idempotencyKey: `urn:visit|${id}`,
    payerCode: 'DAMAN',
    isSearchAll: false,
    patientKey: 'urn:eid|784-1990-0000001-0',
    request: ctx.request,
    upstreamRequest,
    state: 'waiting',
    upstreamTaskId: null,
    upstreamStatus: null,
    tasksCreated: 0,
    pollFailures: 0,
    nextRunAt: Date.now(),
    deadlineAt: Date.now() + 600_000,
    envelope: null,
    cer: queuedCer(ctx),
    outcome: 'queued',
    answer: null,
    now: Date.now(),
  };
}

/** The store calls of one check as the lifecycle makes them, the answer coming on the first poll. */
async function storeLifecycle(store: CheckStore, tenantId: string): Promise<void> {
  const { check } = await store.insert(newCheck(tenantId));
  // A claim reads the row without its documents; the start step and the poll that maps the
  // answer read them, as the lifecycle does.
  const claim = async (round: string): Promise<Check> => {
    const [claimed] = await store.claimDue({
      owner: round,
      now: Date.now() + 1,
      leaseMs: 60_000,
      limit: 1,
      maxInFlight: () => 100,
    });
    if (!claimed || claimed.id !== check.id) throw new Error('claimed another check');
    const documents = await store.documents(claimed.id);
    if (!documents) throw new Error('documents gone');
    return { ...claimed, ...documents };
  };
  const first = await claim(`bench:${check.id}:1`);
  const creating = await store.update(
    first.id,
    `bench:${check.id}:1`,
    { state: 'creating' },
    Date.now(),
    first,
  );
  if (!creating) throw new Error('lost');
  const ctx = context(check.id);
  await store.update(
    check.id,
    `bench:${check.id}:1`,
    {
      state: 'polling',
      upstreamTaskId: 'task-1',
      upstreamStatus: 'IN_QUEUE',
      tasksCreated: 1,
      pollFailures: 0,
      nextRunAt: Date.now(),
      cer: queuedCer({ ...ctx, now: new Date(0).toISOString() }),
    },
    Date.now(),
    creating,
    { release: true },
  );
  const second = await claim(`bench:${check.id}:2`);
  const envelope = envelopeSchema.parse(JSON.parse(envelopeJson));
  const cer = mapEnvelope(envelope, ctx);
  await store.update(
    check.id,
    `bench:${check.id}:2`,
    { state: 'done', envelope, upstreamStatus: envelope.status, cer, outcome: cer.outcome },
    Date.now(),
    second,
    { release: true },
  );
}

/**
 * The store calls of checks run as the service runs them: 25 at a time, so their writes share
 * the group commits of SQLite and each round claims them together (storeLifecycle runs one check
 * at a time, every write its own commit). The answer is mapped once, outside the measurement.
 */
async function storeGroupedChecks(store: CheckStore, count: number): Promise<number> {
  const group = 25;
  const envelope = envelopeSchema.parse(JSON.parse(envelopeJson));
  const cer = mapEnvelope(envelope, context(randomUUID()));
  let clock = Date.now();
  let round = 0;
  const claimAll = async (): Promise<{ owner: string; checks: Check[] }> => {
    round += 1;
    const owner = `bench-group:${round}`;
    const claimed = await store.claimDue({
      owner,
      now: clock,
      leaseMs: 60_000,
      limit: group,
      maxInFlight: () => 1000,
    });
    if (claimed.length !== group) throw new Error(`claimed ${claimed.length} of ${group}`);
    // The steps read the documents, as the start step and the poll that maps the answer do.
    const checks = await Promise.all(
      claimed.map(async (check) => ({ ...check, ...(await store.documents(check.id))! })),
    );
    return { owner, checks };
  };
  const oneGroup = async (): Promise<void> => {
    await Promise.all(
      Array.from({ length: group }, (_, i) =>
        store.insert({ ...newCheck(`tenant-${i % 10}`), nextRunAt: 0 }),
      ),
    );
    clock += 10;
    const started = await claimAll();
    await Promise.all(
      started.checks.map(async (check) => {
        const creating = await store.update(check.id, started.owner, { state: 'creating' }, clock, check);
        if (!creating) throw new Error('lost');
        const patch = {
          state: 'polling',
          upstreamTaskId: 'task-1',
          upstreamStatus: 'IN_QUEUE',
          tasksCreated: 1,
        } as const;
        await store.update(check.id, started.owner, { ...patch, nextRunAt: clock + 5 }, clock, creating, {
          release: true,
        });
      }),
    );
    clock += 10;
    const polled = await claimAll();
    await Promise.all(
      polled.checks.map((check) =>
        store.update(
          check.id,
          polled.owner,
          {
            state: 'done',
            envelope,
            upstreamStatus: envelope.status,
            cer,
            outcome: cer.outcome,
            answer: { status: 200 },
          },
          clock,
          check,
          { release: true, final: true },
        ),
      ),
    );
  };
  for (let i = 0; i < 8; i += 1) await oneGroup(); // warm-up
  const before = process.cpuUsage();
  let done = 0;
  for (; done < count; done += group) await oneGroup();
  const used = process.cpuUsage(before);
  return Number(((used.user + used.system) / 1000 / done).toFixed(4));
}

/**
 * The store's part of a poll with the same answer as the last (most polls of figure 3): 3,000
 * polling checks, claimed 200 at a time as the scheduler does, each step reading its envelope and
 * writing its next poll time and dropping its lease, all of a round's writes together.
 */
async function storeUnchangedPolls(store: CheckStore): Promise<number> {
  const count = 3000;
  const inFlight = envelopeSchema.parse(JSON.parse(inFlightJson));
  let clock = 1_000_000;
  for (let i = 0; i < count; i += 1) {
    const check = newCheck(`tenant-${i % 30}`);
    const ctx = context(check.id);
    await store.insert({
      ...check,
      state: 'polling',
      upstreamTaskId: `task-${i}`,
      upstreamStatus: inFlight.status,
      tasksCreated: 1,
      nextRunAt: clock,
      envelope: inFlight,
      cer: mapEnvelope(inFlight, ctx),
      now: clock,
    });
  }
  let round = 0;
  const cycle = async (): Promise<number> => {
    clock += 5000;
    let polled = 0;
    for (;;) {
      round += 1;
      const owner = `bench:${round}`;
      const claimed = await store.claimDue({
        owner,
        now: clock,
        leaseMs: 60_000,
        limit: 200,
        maxInFlight: () => 1000,
      });
      if (claimed.length === 0) return polled;
      await Promise.all(
        claimed.map(async (check) => {
          if (!isDeepStrictEqual(check.envelope, inFlight)) throw new Error('the envelope changed');
          await store.update(check.id, owner, { nextRunAt: clock + 5000 }, clock, check, { release: true });
        }),
      );
      polled += claimed.length;
    }
  };
  await cycle(); // warm-up
  const before = process.cpuUsage();
  let polled = 0;
  for (let i = 0; i < 3; i += 1) polled += await cycle();
  const used = process.cpuUsage(before);
  return Number(((used.user + used.system) / 1000 / polled).toFixed(4));
}

const results: Record<string, unknown> = {};

loadFhirDefinitions();
const body = JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
results.submitParseAndValidateMs = await perIteration(CHECKS, () => readSubmitBody(JSON.parse(body)));
results.envelopeParseMs = await perIteration(CHECKS, () => envelopeSchema.parse(JSON.parse(envelopeJson)));
results.inFlightEnvelopeParseMs = await perIteration(CHECKS, () =>
  envelopeSchema.parse(JSON.parse(inFlightJson)),
);
const parsed = envelopeSchema.parse(JSON.parse(envelopeJson));
const ctx = context(randomUUID());
results.mapFoundEligibleMs = await perIteration(CHECKS, () => mapEnvelope(parsed, ctx));
const mapped = mapEnvelope(parsed, ctx);
results.cerBytes = JSON.stringify(mapped).length;
results.envelopeBytes = envelopeJson.length;
results.stringifyCerMs = await perIteration(CHECKS, () => JSON.stringify(mapped));

for (const kind of (process.env.BENCH_STORES ?? 'sqlite,postgres').split(',')) {
  const pgStore = kind === 'postgres' ? await pgSchema('bench_components') : null;
  const url = pgStore?.url ?? `sqlite:${join(mkdtempSync(join(tmpdir(), 'fea-bench-comp-')), 'adapter.db')}`;
  const store = await openStore(url);
  await store.migrate();
  try {
    let n = 0;
    results[`storeLifecycle_${kind}_Ms`] = await perIteration(CHECKS, () =>
      storeLifecycle(store, `tenant-${(n += 1) % 10}`),
    );
    results[`storeGroupedChecks_${kind}_Ms`] = await storeGroupedChecks(store, CHECKS);
    results[`storeUnchangedPoll_${kind}_Ms`] = await storeUnchangedPolls(store);
  } finally {
    await store.close();
    await pgStore?.drop();
  }
}

await record('components', {
  machine: machine(),
  checks: CHECKS,
  note: 'CPU of this process per iteration (user + sys); for PostgreSQL the server process is not included',
  ...results,
});
