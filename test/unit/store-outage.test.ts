/**
 * The store can fail (docs/operations.md, "When the store fails"), piece by piece: which driver
 * errors mean "unavailable", the one 503 answer, the back-off and its one log line, and the
 * create-task answer held through an outage and written when the store is back, on a real SQLite
 * store whose writes are made to fail. The whole service against a PostgreSQL that is stopped and
 * started is test/component/store-outage.test.ts.
 */
import express from 'express';
import request from 'supertest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LifecycleDeps } from '../../src/checks/lifecycle.js';
import { advanceCheck } from '../../src/checks/lifecycle.js';
import { newCheckOf } from '../../src/checks/service.js';
import { Scheduler } from '../../src/checks/scheduler.js';
import { openStore } from '../../src/checks/store/open.js';
import type { Check, CheckStore } from '../../src/checks/store/check-store.js';
import {
  FailureStreak,
  recentWriteFailure,
  StoreHealth,
  StoreHealthDriver,
  StoreUnavailableError,
  WRITE_FAILURE_MEMORY_MS,
} from '../../src/checks/store/outage.js';
import type { SqlDriver } from '../../src/checks/store/driver.js';
import { classifyPostgresError } from '../../src/checks/store/postgres.js';
import { classifySqliteError } from '../../src/checks/store/sqlite.js';
import { errorHandler } from '../../src/http/fhir-json.js';
import { requestId } from '../../src/http/middleware.js';
import { parseSubmit } from '../../src/mapping/request/parse-submit.js';
import type { UpstreamPort } from '../../src/upstream/port.js';
import type { Envelope } from '../../src/upstream/contract.js';
import { captureLogger } from '../support/harness.js';
import { expectValidFhir } from '../support/fhir.js';
import { eligibilityRequest } from '../support/requests.js';
import { LIFECYCLE_TENANT } from '../support/tenants.js';

describe('which driver errors mean the store is unavailable', () => {
  it('PostgreSQL: connection exceptions, shutdown, full disk, a standby, lost sockets; not a constraint', () => {
    const pg = (code: string) => classifyPostgresError(Object.assign(new Error('x'), { code }));
    expect(pg('08006')).toBe('connection');
    expect(pg('08001')).toBe('connection');
    expect(pg('57P01')).toBe('shutdown');
    expect(pg('57P03')).toBe('shutdown');
    expect(pg('53100')).toBe('disk-full');
    expect(pg('53300')).toBe('resources');
    expect(pg('25006')).toBe('read-only');
    expect(pg('ECONNREFUSED')).toBe('connection');
    expect(pg('ECONNRESET')).toBe('connection');
    expect(classifyPostgresError(new Error('Connection terminated unexpectedly'))).toBe('connection');
    expect(classifyPostgresError(new Error('timeout exceeded when trying to connect'))).toBe('connection');
    // localhost resolves to ::1 and 127.0.0.1: both refused.
    const both = new AggregateError([
      Object.assign(new Error('a'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('b'), { code: 'ECONNREFUSED' }),
    ]);
    expect(classifyPostgresError(both)).toBe('connection');
    // Not a store outage: a unique violation, a syntax error, a bug.
    expect(pg('23505')).toBeUndefined();
    expect(pg('42601')).toBeUndefined();
    expect(classifyPostgresError(new TypeError('x is undefined'))).toBeUndefined();
    expect(classifyPostgresError(null)).toBeUndefined();
  });

  it('SQLite: full disk, I/O, read-only, busy; not a constraint', () => {
    const sqlite = (code: string) => classifySqliteError(Object.assign(new Error('x'), { code }));
    expect(sqlite('SQLITE_FULL')).toBe('disk-full');
    expect(sqlite('SQLITE_IOERR_WRITE')).toBe('io');
    expect(sqlite('SQLITE_CANTOPEN')).toBe('io');
    expect(sqlite('SQLITE_READONLY')).toBe('read-only');
    expect(sqlite('SQLITE_BUSY')).toBe('busy');
    expect(sqlite('SQLITE_CONSTRAINT_UNIQUE')).toBeUndefined();
    expect(classifySqliteError(new Error('no code'))).toBeUndefined();
  });

  it('the health driver turns them into StoreUnavailableError and counts them; other errors pass unchanged', async () => {
    let fail: Error | null = null;
    const inner: SqlDriver = {
      dialect: {} as SqlDriver['dialect'],
      run: () => (fail ? Promise.reject(fail) : Promise.resolve('ok' as never)),
      classify: classifySqliteError,
      close: () => Promise.resolve(),
    };
    let now = 1_000;
    const health = new StoreHealth(() => now);
    const driver = new StoreHealthDriver(inner, health);
    const work = (function* () {
      yield { sql: 'SELECT 1', params: [] };
      return 1;
    })();
    await driver.run('write', work);
    expect(health.report().lastWritableAt).toBe(1_000);
    fail = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    now = 2_000;
    const error = await driver.run('write', work).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as StoreUnavailableError).kind).toBe('disk-full');
    expect(health.report().errors['disk-full']).toBe(1);
    expect(health.report().lastWriteFailedAt).toBe(2_000);
    expect(recentWriteFailure(health.report(), 2_000 + WRITE_FAILURE_MEMORY_MS - 1)).toBe(true);
    expect(recentWriteFailure(health.report(), 2_000 + WRITE_FAILURE_MEMORY_MS)).toBe(false);
    // A read that fails counts as an error, not as a failed write; nor does a lost connection
    // (the /ready probe finds that itself).
    now = 3_000;
    await driver.run('single', work).catch(() => undefined);
    fail = Object.assign(new Error('connect ECONNREFUSED'), { code: 'SQLITE_BUSY' });
    await driver.run('write', work).catch(() => undefined);
    expect(health.report().errors.busy).toBe(1);
    expect(health.report().lastWriteFailedAt).toBe(2_000);
    const bug = new Error('UNIQUE constraint failed');
    fail = bug;
    expect(await driver.run('write', work).catch((e: unknown) => e)).toBe(bug);
  });
});

describe('the answer while the store is unavailable', () => {
  it('is a 503 OperationOutcome (transient) with Retry-After, valid FHIR, logging nothing per request', async () => {
    const { logger, logs } = captureLogger();
    const app = express();
    app.use(requestId);
    app.get('/fhir/x', () => {
      throw new StoreUnavailableError('connection', new Error('connect ECONNREFUSED 127.0.0.1:5432'));
    });
    app.use(errorHandler(logger));
    const res = await request(app).get('/fhir/x');
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    const body = JSON.parse(res.text) as { issue: { code: string; diagnostics?: string }[] };
    expect(body.issue[0]?.code).toBe('transient');
    expectValidFhir(body);
    // Nothing of the cause in the answer.
    expect(res.text).not.toMatch(/5432|ECONNREFUSED/);
    expect(logs.filter((line) => line.includes('"error"'))).toEqual([]);
  });
});

describe('a loop whose rounds fail', () => {
  it('backs off 250 ms doubling to 5 s, and logs one line when the store goes and one when it is back', () => {
    const { logger, logs } = captureLogger();
    let now = 0;
    const streak = new FailureStreak(logger, 'scheduler round', () => now);
    const outage = new StoreUnavailableError(
      'shutdown',
      new Error('terminating connection due to administrator command'),
    );
    const waits = Array.from({ length: 8 }, () => streak.failed(outage));
    expect(waits).toEqual([250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
    now = 21_000;
    streak.succeeded();
    streak.succeeded();
    expect(logs).toHaveLength(2);
    expect(logs[0]).toContain('scheduler round failed: the store is unavailable');
    expect(logs[0]).toContain('"kind":"shutdown"');
    expect(logs[1]).toContain('scheduler round works again');
    expect(logs[1]).toContain('"failedRounds":8');
    expect(logs[1]).toContain('"failingMs":21000');
    // The next outage is told again.
    streak.failed(outage);
    expect(logs).toHaveLength(3);
  });
});

const TENANT = LIFECYCLE_TENANT;
const LEASE = 60_000;

/**
 * The create-task answer during an outage: the task id must reach the store when it is back, and
 * the check end with the upstream's outcome, never `ambiguous-create` (issue 29, finding 2).
 */
describe('create-task answered while the store cannot be written', () => {
  let real: CheckStore;
  let store: CheckStore;
  let down: boolean;
  let clock: number;
  let creates: number;

  /** The real store, whose every call fails as a PostgreSQL restart would while `down`. */
  function failing(target: CheckStore): CheckStore {
    return new Proxy(target, {
      get(object, property, receiver) {
        const value: unknown = Reflect.get(object, property, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) =>
          down
            ? Promise.reject(new StoreUnavailableError('shutdown', new Error('57P01')))
            : (value as (...a: unknown[]) => unknown).apply(object, args);
      },
    });
  }

  function eligible(): Envelope {
    return {
      task_id: 'task-1',
      status: 'PROCESS_COMPLETE',
      eligibility_result: {
        status: 'found',
        data_dump: { status: 'found', data: { is_eligible: true, policy_network: { payer_name: 'Daman' } } },
      },
    };
  }

  /** An upstream whose create-task answers after the store went down (`downFor` ms). */
  function upstream(downFor: number): UpstreamPort {
    return {
      createTask: () => {
        creates += 1;
        down = true;
        setTimeout(() => {
          down = false;
        }, downFor).unref();
        return Promise.resolve({ ok: true, value: { task_id: `task-${creates}` } });
      },
      getResult: () => Promise.resolve({ ok: true, value: eligible() }),
      health: () => Promise.resolve({ ok: true, value: {} }),
    };
  }

  function deps(port: UpstreamPort, extra: Partial<LifecycleDeps> = {}): LifecycleDeps {
    return {
      store,
      upstream: port,
      tenant: (id) => (id === TENANT.id ? TENANT : undefined),
      logger: captureLogger().logger,
      owner: 'replica-a',
      now: () => clock,
      baseUrl: 'http://localhost',
      pollIntervalMs: 5000,
      timeoutMs: () => 300_000,
      slowPollIntervalMs: 30_000,
      backoffGuardMs: 900_000,
      ...extra,
    };
  }

  async function newCheck(): Promise<Check> {
    const input = await parseSubmit(eligibilityRequest(), { practiceId: 'P-1', now: new Date(clock) });
    const { check } = await store.insert(
      newCheckOf(input, {
        id: `chk-${Math.random().toString(36).slice(2)}`,
        tenantId: TENANT.id,
        now: clock,
        timeoutMs: 300_000,
        baseUrl: 'http://localhost',
      }),
    );
    return check;
  }

  async function claim(owner: string) {
    return store.claimDue({ owner, now: clock, leaseMs: LEASE, limit: 10, maxInFlight: () => 3 });
  }

  async function current(check: Check): Promise<Check> {
    const latest = await real.get(TENANT.id, check.id);
    if (!latest) throw new Error('check vanished');
    return latest;
  }

  /**
   * Replica A's step of a new check, its create-task answered as the store goes down for a minute:
   * after 300 ms A holds the task id (in `held`) and keeps trying to write it (`stepA`).
   */
  async function heldByReplicaA() {
    const check = await newCheck();
    const [claimed] = await claim('replica-a:1');
    const held = new Set<string>();
    const stepA = advanceCheck(claimed!, deps(upstream(60_000), { heldTasks: held }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    return { check, held, stepA };
  }

  beforeEach(async () => {
    real = await openStore('sqlite::memory:');
    await real.migrate();
    store = failing(real);
    down = false;
    clock = Date.parse('2026-11-26T08:00:00Z');
    creates = 0;
  });
  afterEach(async () => {
    down = false;
    await real.close();
  });

  it('the task id is held and written when the store is back; the check ends eligible with one task', async () => {
    const check = await newCheck();
    const [claimed] = await claim('replica-a:1');
    // The step ends only once the task id is written (about 1.2 s of outage here).
    await advanceCheck(claimed!, deps(upstream(1200)));
    const after = await current(check);
    expect(after.state).toBe('polling');
    expect(after.upstreamTaskId).toBe('task-1');
    expect(after.outcome).toBe('queued');
    clock += 5000;
    for (const next of await claim('replica-a:2')) await advanceCheck(next, deps(upstream(0)));
    const done = await current(check);
    expect(done.state).toBe('done');
    expect(done.cer.outcome).toBe('complete');
    expect(done.cer.insurance?.[0]?.inforce).toBe(true);
    expect(creates).toBe(1);
  });

  it('the lease ran out and another replica took the check over (answered ambiguous): the held id is adopted back and the check ends eligible', async () => {
    const { check, held: heldByA, stepA } = await heldByReplicaA();
    // Replica B, once its clock is past A's lease, finds the check `creating` and answers it
    // ambiguous (it cannot know the task id A holds). The store is back for B first.
    expect(heldByA.has(check.id)).toBe(true);
    clock += LEASE + 1;
    down = false;
    const [taken] = await claim('replica-b:1');
    expect(taken?.state).toBe('creating');
    await advanceCheck(taken!, deps(upstream(0), { owner: 'replica-b' }));
    expect((await current(check)).cer.error?.[0]?.code.coding?.[0]?.code).toBe('ambiguous-create');
    // A writes its held id: the check is polling its real task again.
    await stepA;
    const after = await current(check);
    expect(after.state).toBe('polling');
    expect(after.upstreamTaskId).toBe('task-1');
    expect(after.outcome).toBe('queued');
    clock += 5000;
    for (const next of await claim('replica-b:2'))
      await advanceCheck(next, deps(upstream(0), { owner: 'replica-b' }));
    const done = await current(check);
    expect(done.cer.outcome).toBe('complete');
    expect(creates).toBe(1);
  });

  it('a step the outage failed drops its lease as soon as the store is back, not a lease later', async () => {
    const check = await newCheck();
    const steady: UpstreamPort = {
      ...upstream(0),
      createTask: () => Promise.resolve({ ok: true, value: { task_id: 't' } }),
    };
    const scheduler = new Scheduler(
      deps(steady),
      { leaseMs: LEASE, batchSize: 10, maxSteps: 10, idleMs: 50, maxInFlight: () => 3 },
      captureLogger().logger,
    );
    // Claimed while the store works; the store goes before the step's next statement.
    expect(await scheduler.tick()).toBe(1);
    down = true;
    await new Promise((resolve) => setTimeout(resolve, 100));
    down = false;
    expect((await current(check)).leaseOwner).not.toBeNull();
    // The next round, at the same clock (the lease has a minute left), takes the check again.
    expect(await scheduler.tick()).toBe(1);
    await scheduler.stop();
  });

  it('a replica stopped while the store is down lets its leases run out: stop() ends, with one warning', async () => {
    const check = await newCheck();
    const { logger, logs } = captureLogger();
    const scheduler = new Scheduler(
      deps(upstream(0)),
      { leaseMs: LEASE, batchSize: 10, maxSteps: 10, idleMs: 50, maxInFlight: () => 3 },
      logger,
    );
    expect(await scheduler.tick()).toBe(1);
    down = true;
    // The rest of the shutdown (the other loops, closing the store) must still run.
    await expect(scheduler.stop()).resolves.toBeUndefined();
    const warnings = logs.filter((line) => line.includes('leases left to run out'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('"level":"warn"');
    expect(warnings[0]).toContain('"kind":"shutdown"');
    down = false;
    // The lease is still held, and runs out as leases do.
    expect((await current(check)).leaseOwner).not.toBeNull();
  });

  it("this replica's own claim of a check whose id it holds leaves it alone (no ambiguous answer)", async () => {
    const { check, held, stepA } = await heldByReplicaA();
    clock += LEASE + 1;
    down = false;
    const [again] = await claim('replica-a:2');
    await advanceCheck(again!, deps(upstream(0), { heldTasks: held }));
    expect((await current(check)).cer.error).toBeUndefined();
    await stepA;
    expect((await current(check)).upstreamTaskId).toBe('task-1');
    expect(creates).toBe(1);
  });
});
