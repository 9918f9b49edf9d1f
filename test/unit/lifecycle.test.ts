/**
 * Lifecycle rules that are hard to reach through the sandbox, driven step by step on a real
 * SQLite store with a scripted upstream port: unreadable answers, queue time, retries followed by
 * a guard, a search-all whose task ended without a completion rule, abandonment, lost tenants.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tenant } from '../../src/config.js';
import type { LifecycleDeps } from '../../src/checks/lifecycle.js';
import { advanceCheck } from '../../src/checks/lifecycle.js';
import { Slots } from '../../src/checks/slots.js';
import { newCheckOf } from '../../src/checks/service.js';
import { Scheduler } from '../../src/checks/scheduler.js';
import { openStore } from '../../src/checks/store/open.js';
import type { Check, CheckStore } from '../../src/checks/store/check-store.js';
import type { UpstreamFailure, UpstreamPort, UpstreamResult } from '../../src/upstream/port.js';
import { answerForCheck } from '../../src/operations/check-answer.js';
import { createLogger } from '../../src/log.js';
import { parseSubmit } from '../../src/mapping/request/parse-submit.js';
import type { Envelope } from '../../src/upstream/contract.js';
import { expectValidFhir } from '../support/fhir.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';
import { LIFECYCLE_TENANT } from '../support/tenants.js';

const TENANT = LIFECYCLE_TENANT;
const TIMEOUT = 300_000;
/** The poll interval and the slow interval used past the timeout (deps() below). */
const POLL = 5000;
const SLOW_POLL = 30_000;
/** src/mapping/response/cer.ts: what a check past its timeout and still tracked says. */
const STILL_CHECKING =
  'Still checking: the payer portal has not answered within the usual time. The check continues, and this response is updated when the answer arrives.';

type Answer = UpstreamResult<Envelope>;

let store: CheckStore;
let clock: number;
let creates: number;
let polls: Answer[];

function port(): UpstreamPort {
  return {
    createTask: () => {
      creates += 1;
      return Promise.resolve({ ok: true, value: { task_id: `task-${creates}` } });
    },
    getResult: () => Promise.resolve(polls.shift() ?? { ok: false, error: { kind: 'timeout' } }),
    health: () => Promise.resolve({ ok: true, value: {} }),
  };
}

function deps(tenants: Tenant[] = [TENANT]): LifecycleDeps {
  return {
    store,
    upstream: port(),
    tenant: (id) => tenants.find((t) => t.id === id),
    logger: createLogger('error'),
    owner: 'test',
    now: () => clock,
    baseUrl: 'http://localhost',
    pollIntervalMs: POLL,
    timeoutMs: () => TIMEOUT,
    slowPollIntervalMs: SLOW_POLL,
    backoffGuardMs: 900_000,
  };
}

async function newCheck(options: RequestOptions = {}): Promise<Check> {
  const input = await parseSubmit(eligibilityRequest(options), { practiceId: 'P-1', now: new Date(clock) });
  const { check } = await store.insert(
    newCheckOf(input, {
      id: `chk-${Math.random().toString(36).slice(2)}`,
      tenantId: TENANT.id,
      now: clock,
      timeoutMs: TIMEOUT,
      baseUrl: 'http://localhost',
    }),
  );
  return check;
}

/** Claims what is due at the current clock and runs one step of each. */
async function step(d: LifecycleDeps = deps()): Promise<void> {
  const claimed = await store.claimDue({
    owner: `test:${clock}`,
    now: clock,
    leaseMs: 60_000,
    limit: 10,
    maxInFlight: () => 3,
  });
  for (const check of claimed) await advanceCheck(check, d);
}

async function current(check: Check): Promise<Check> {
  const latest = await store.get(TENANT.id, check.id);
  if (!latest) throw new Error('check vanished');
  return latest;
}

/**
 * Steps the clock a minute at a time (past any backoff) until the check is done or `max` steps
 * have run; `answer` is what each poll of the step gets. Returns the check and the steps taken.
 */
async function minutesUntilDone(
  check: Check,
  max: number,
  options: { answer?: () => Answer; deps?: LifecycleDeps } = {},
): Promise<{ done: Check; steps: number }> {
  let steps = 0;
  for (; steps < max && (await current(check)).state !== 'done'; steps += 1) {
    if (options.answer) polls = [options.answer()];
    clock += 60_000;
    await step(options.deps);
  }
  return { done: await current(check), steps };
}

function envelope(fields: Partial<Envelope>): Envelope {
  return { task_id: 'task-1', status: 'NAVIGATING_WEBSITE', ...fields };
}

function eligible(): Envelope {
  return envelope({
    status: 'PROCESS_COMPLETE',
    eligibility_result: {
      status: 'found',
      data_dump: { status: 'found', data: { is_eligible: true, policy_network: { payer_name: 'Daman' } } },
    },
  });
}

beforeEach(async () => {
  store = await openStore('sqlite::memory:');
  await store.migrate();
  clock = Date.parse('2026-11-23T08:00:00Z');
  creates = 0;
  polls = [];
});
afterEach(async () => {
  await store.close();
});

describe('lifecycle', () => {
  it('an answer that cannot be read three times in a row ends as unreadable-result (502), never a guess', async () => {
    const check = await newCheck();
    await step(); // waiting -> starting (claim), create-task
    polls = [1, 2, 3].map(() => ({ ok: false, error: { kind: 'invalid-body' } }));
    // A minute a step: past each backoff (at most 30 s), well inside the timeout.
    const { done } = await minutesUntilDone(check, 6);
    expect(done.state).toBe('done');
    expect(JSON.stringify(done.cer.error)).toContain('unreadable-result');
    expectValidFhir(done.cer);
    expect(answerForCheck(done, 'http://localhost').status).toBe(502);
    expect(creates).toBe(1);
  });

  it('time waiting for a tenant slot does not count: a late start still sends the check', async () => {
    const check = await newCheck();
    clock += TIMEOUT + 1; // waited the whole timeout in the queue
    await step();
    expect(creates).toBe(1);
    const started = await current(check);
    expect(started.state).toBe('polling');
    expect(started.deadlineAt).toBe(clock + TIMEOUT); // the timeout runs from the first task
  });

  it("a retry that meets a guard answers with the guard (503), not the first task's failure", async () => {
    const check = await newCheck({ payer: 'AXA' });
    await step();
    polls = [
      {
        ok: true,
        value: envelope({
          status: 'PROCESS_COMPLETE',
          eligibility_result: { status: 'failed', error_type: 'PortalError', message: 'portal did not load' },
        }),
      },
    ];
    clock += 5000;
    await step(); // failed -> retry once: back to starting
    expect((await current(check)).state).toBe('starting');
    await store.putGuard({
      tenantId: TENANT.id,
      payerCode: 'AXA',
      kind: 'backoff',
      until: clock + 900_000,
      reason: 'test',
      openedAt: clock,
    });
    await step();
    const done = await current(check);
    expect(done.state).toBe('done');
    expect(answerForCheck(done, 'http://localhost').status).toBe(503);
    expect(creates).toBe(1);
  });

  it("the retry's queued CER drops the first task's envelope, messages and documents", async () => {
    const check = await newCheck();
    await step();
    polls = [
      {
        ok: true,
        value: envelope({
          status: 'PROCESS_COMPLETE',
          eligibility_result: {
            status: 'failed',
            error_type: 'PortalError',
            message: 'portal did not load',
            data_dump: { status: 'failed', data: { warning_messages: [{ message: 'first task only' }] } },
          },
        }),
      },
    ];
    clock += 5000;
    await step(); // failed -> retry once
    const retrying = await current(check);
    expect(retrying.state).toBe('starting');
    expect(retrying.envelope).toBeNull();
    expect(retrying.upstreamStatus).toBeNull();
    expect(retrying.outcome).toBe('queued');
    expect(JSON.stringify(retrying.cer)).not.toMatch(/portal did not load|first task only|PortalError/);
    expectValidFhir(retrying.cer);
    polls = [{ ok: true, value: eligible() }];
    await step(); // second task
    clock += 5000;
    await step();
    const done = await current(check);
    expect(done.outcome).toBe('complete');
    expect(creates).toBe(2);
    expect(JSON.stringify(done.cer)).not.toMatch(/portal did not load|first task only/);
  });

  it("the retry's create-task refused until long after the timeout ends the check; it does not hold the slot", async () => {
    let refuse = false;
    const d = deps();
    d.upstream = {
      ...d.upstream,
      createTask: () => {
        creates += 1;
        return Promise.resolve(
          refuse
            ? { ok: false, error: { kind: 'network', code: 'ECONNREFUSED', sentRequest: false } }
            : { ok: true, value: { task_id: `task-${creates}` } },
        );
      },
    };
    const check = await newCheck();
    await step(d);
    polls = [
      {
        ok: true,
        value: envelope({
          status: 'PROCESS_COMPLETE',
          eligibility_result: { status: 'error', error_type: 'Unexpected', message: 'boom' },
        }),
      },
    ];
    refuse = true;
    clock += 5000;
    await step(d); // error -> retry once; its create-task is refused from now on
    const { done } = await minutesUntilDone(check, 100, { deps: d });
    expect(done.state).toBe('done');
    expect(JSON.stringify(done.cer.error)).toContain('upstream-unreachable');
    expect(clock - check.createdAt).toBeLessThanOrEqual(TIMEOUT + 2 * 60_000);
    expectValidFhir(done.cer);
    expect(done.tasksCreated).toBe(1);
  });

  it('polls failing for ever (a rotated key answered 401) end the check once it is abandoned, freeing the slot', async () => {
    const check = await newCheck();
    await step();
    const { done, steps } = await minutesUntilDone(check, 200, {
      answer: () => ({
        ok: false,
        error: { kind: 'http', status: 401, body: '{"detail":"Invalid API key"}' },
      }),
    });
    expect(done.state).toBe('done');
    expect(JSON.stringify(done.cer.error)).toContain('abandoned');
    expect(answerForCheck(done, 'http://localhost').status).toBe(504);
    expectValidFhir(done.cer);
    // Six timeouts (30 minutes here), not for ever; and never a second task.
    expect(steps).toBeGreaterThanOrEqual(25);
    expect(steps).toBeLessThanOrEqual(31);
    expect(creates).toBe(1);
  });

  it('a payer answering invalid_credentials or backoff inside a search-all is guarded like after a single check', async () => {
    const check = await newCheck({ discovery: true });
    await step();
    polls = [
      {
        ok: true,
        value: envelope({
          status: 'PROCESS_COMPLETE',
          is_search_all: true,
          search_all_status: 'SEARCH_ALL_COMPLETE',
          aggregated_results: [
            { status: 'found', tpa_name: 'DAMAN', data: { is_eligible: true } },
            {
              status: 'invalid_credentials',
              tpa_name: 'adnic',
              error_type: 'LoginFailed',
              message: 'bad password',
            },
            { status: 'backoff', tpa_name: 'NAS' },
            { status: 'member_not_found', tpa_name: 'AXA', data: { is_eligible: false } },
          ],
          total_tpas_checked: 4,
        }),
      },
    ];
    clock += 5000;
    await step();
    expect((await current(check)).state).toBe('done');
    expect(await store.getGuard(TENANT.id, 'ADNIC')).toMatchObject({ kind: 'credentials', until: null });
    expect(await store.getGuard(TENANT.id, 'NAS')).toMatchObject({ kind: 'backoff', until: clock + 900_000 });
    expect(await store.getGuard(TENANT.id, 'DAMAN')).toBeNull();
    expect(await store.getGuard(TENANT.id, 'AXA')).toBeNull();
    // The next single-payer check with that payer, whatever the case of its code, never logs in.
    const next = await newCheck({ payer: 'Adnic' });
    await step();
    const refused = await current(next);
    expect(refused.state).toBe('done');
    expect(answerForCheck(refused, 'http://localhost').status).toBe(422);
    expect(creates).toBe(1);
  });

  it('a search-all whose task ended without a completion rule finishes at its timeout with what answered', async () => {
    const check = await newCheck({ discovery: true });
    await step();
    const ended = envelope({
      status: 'PROCESS_COMPLETE',
      is_search_all: true,
      search_all_status: 'SEARCH_ALL_PROCESSING',
      aggregated_results: [
        { status: 'found', tpa_name: 'DAMAN', data: { is_eligible: true } },
        { status: 'member_not_found', tpa_name: 'NAS', data: { is_eligible: false } },
      ],
      total_tpas_checked: 2,
    });
    polls = [{ ok: true, value: ended }];
    clock += 5000;
    await step();
    expect((await current(check)).state).toBe('polling'); // before the timeout: more may answer
    polls = [{ ok: true, value: ended }];
    clock += TIMEOUT + 30_000;
    await step();
    const done = await current(check);
    expect(done.state).toBe('done');
    const cer: CoverageEligibilityResponse = done.cer;
    expectValidFhir(cer);
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance?.filter((i) => i.inforce === true)).toHaveLength(1);
    // Said plainly, and the upstream's own status is shown as it was sent, not as complete.
    expect(cer.disposition).toMatch(
      /^The search had not completed when its task ended and the timeout passed/,
    );
    const outcomeExt = cer.extension?.find((e) => e.url.endsWith('upstream-outcome'));
    const searchAllStatus = outcomeExt?.extension?.find((p) => p.url === 'searchAllStatus')?.valueString;
    expect(searchAllStatus).toBe('SEARCH_ALL_PROCESSING');
  });

  it('a task still in flight long after its timeout is abandoned (504) and frees the slot', async () => {
    const check = await newCheck();
    await step();
    const { done } = await minutesUntilDone(check, 40, {
      answer: () => ({ ok: true, value: envelope({ status: 'NAVIGATING_WEBSITE' }) }),
    });
    expect(done.state).toBe('done');
    expect(JSON.stringify(done.cer.error)).toContain('abandoned');
    expect(answerForCheck(done, 'http://localhost').status).toBe(504);
    expect(clock - done.createdAt).toBeGreaterThanOrEqual(6 * TIMEOUT);
  });

  it('a check of a tenant no longer configured waits a minute between tries, no tight loop', async () => {
    const check = await newCheck();
    await step(deps([]));
    const later = await current(check);
    expect(later.nextRunAt).toBe(clock + 60_000);
    expect(creates).toBe(0);
    await step(deps([])); // nothing due yet
    expect((await current(check)).updatedAt).toBe(later.updatedAt);
  });

  it('failed polls back off 5, 10, 20 s, then at most 30 s; a good poll resets it; no second task', async () => {
    const check = await newCheck();
    await step(); // create-task at the start clock
    const gaps: number[] = [];
    polls = Array.from({ length: 6 }, () => ({ ok: false, error: { kind: 'http', status: 503, body: '' } }));
    let last = clock;
    for (let i = 0; i < 6; i += 1) {
      const due = (await current(check)).nextRunAt;
      gaps.push(due - last);
      clock = due;
      last = due;
      await step();
    }
    const afterFailures = await current(check);
    gaps.push(afterFailures.nextRunAt - last);
    expect(gaps).toEqual([5000, 5000, 10_000, 20_000, 30_000, 30_000, 30_000]);
    expect(afterFailures.pollFailures).toBe(6);
    polls = [{ ok: true, value: envelope({ status: 'NAVIGATING_WEBSITE' }) }];
    clock = afterFailures.nextRunAt;
    await step();
    const recovered = await current(check);
    expect(recovered.pollFailures).toBe(0);
    expect(recovered.nextRunAt - clock).toBe(5000);
    expect(creates).toBe(1);
  });

  it('a normal check: one task, polled to the end, eligible', async () => {
    const check = await newCheck();
    await step();
    polls = [
      { ok: true, value: envelope({ status: 'NAVIGATING_WEBSITE' }) },
      { ok: true, value: eligible() },
    ];
    clock += 5000;
    await step();
    clock += 5000;
    await step();
    const done = await current(check);
    expect(done.cer.outcome).toBe('complete');
    expect(done.cer.insurance?.[0]?.inforce).toBe(true);
    expect(creates).toBe(1);
  });

  it('a poll with the same answer as the last writes only the next poll and reads no document; a changed answer writes it and its CER', async () => {
    const patches: string[][] = [];
    let documentReads = 0;
    const recording = new Proxy(store, {
      get(target, property, receiver) {
        if (property === 'documents') {
          return (...args: Parameters<CheckStore['documents']>) => {
            documentReads += 1;
            return target.documents(...args);
          };
        }
        if (property === 'update') {
          return (...args: Parameters<CheckStore['update']>) => {
            patches.push(Object.keys(args[2]).sort());
            return target.update(...args);
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const d = { ...deps(), store: recording };
    const check = await newCheck();
    await step(d);
    const navigating = envelope({ status: 'NAVIGATING_WEBSITE', updated_at: '2026-11-23T08:00:01' });
    polls = [
      { ok: true, value: navigating },
      { ok: true, value: structuredClone(navigating) },
      { ok: true, value: envelope({ status: 'EXTRACTING_DATA', updated_at: '2026-11-23T08:00:20' }) },
      { ok: true, value: eligible() },
    ];
    const seen: Check[] = [];
    for (let i = 0; i < 4; i += 1) {
      clock += POLL;
      patches.length = 0;
      documentReads = 0;
      await step(d);
      seen.push(await current(check));
      if (i === 1) expect(patches).toEqual([['nextRunAt']]);
      else expect(patches[0]).toContain('envelope');
      // The claim reads no documents; only a step that maps an answer reads them, once.
      expect(documentReads).toBe(i === 1 ? 0 : 1);
    }
    const [first, same, extracting, done] = seen as [Check, Check, Check, Check];
    // The unchanged poll kept the CER (and its version) mapped from the same envelope.
    expect(same.version).toBe(first.version);
    expect(same.cer).toEqual(first.cer);
    expect(same.upstreamStatus).toBe('NAVIGATING_WEBSITE');
    expect(same.nextRunAt).toBe(clock - 2 * POLL + POLL);
    expect(extracting.upstreamStatus).toBe('EXTRACTING_DATA');
    expect(done.cer.outcome).toBe('complete');
    expect(creates).toBe(1);
  });

  it('an unchanged answer after failed polls resets the backoff; past the timeout it still says so', async () => {
    const check = await newCheck();
    await step();
    const navigating = envelope({ status: 'NAVIGATING_WEBSITE' });
    polls = [
      { ok: true, value: navigating },
      { ok: false, error: { kind: 'timeout' } },
    ];
    clock += POLL;
    await step();
    clock += POLL;
    await step();
    expect((await current(check)).pollFailures).toBe(1);
    polls = [{ ok: true, value: structuredClone(navigating) }];
    clock = (await current(check)).nextRunAt;
    await step();
    const reset = await current(check);
    expect(reset.pollFailures).toBe(0);
    expect(reset.nextRunAt).toBe(clock + POLL);
    // Past the timeout the same answer is not "nothing changed": the CER says the check is still running.
    polls = [{ ok: true, value: structuredClone(navigating) }];
    clock = reset.deadlineAt + 1;
    await step();
    const late = await current(check);
    expect(late.cer.disposition).toBe(STILL_CHECKING);
    expect(late.nextRunAt).toBe(clock + SLOW_POLL);
  });

  it('the scheduler claims only what it can work on: never more steps under way than maxSteps', async () => {
    for (let i = 0; i < 5; i += 1) await newCheck();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let started = 0;
    const d = deps();
    d.upstream = {
      ...d.upstream,
      createTask: async () => {
        started += 1;
        await gate;
        return { ok: true, value: { task_id: `task-${started}` } };
      },
    };
    const scheduler = new Scheduler(
      d,
      { leaseMs: 60_000, batchSize: 200, maxSteps: 2, idleMs: 10, maxInFlight: () => 10 },
      createLogger('error'),
    );
    expect(await scheduler.tick()).toBe(2);
    await new Promise((r) => setTimeout(r, 20));
    expect(await scheduler.tick()).toBe(0); // at capacity: nothing more is claimed (no lease runs out unworked)
    expect(started).toBe(2);
    const leased = (await store.search(TENANT.id, {}, { count: 10, offset: 0 })).checks.filter(
      (c) => c.leaseOwner,
    );
    expect(leased).toHaveLength(2);
    release();
    await scheduler.stop();
  });

  it('create-task answered 503 was not processed: retried later, then one task; a 500 is ambiguous', async () => {
    const answers: number[] = [503, 0];
    const d = deps();
    d.upstream = {
      ...d.upstream,
      createTask: () => {
        creates += 1;
        const status = answers.shift() ?? 0;
        return Promise.resolve(
          status
            ? { ok: false, error: { kind: 'http', status } }
            : { ok: true, value: { task_id: 'task-ok' } },
        );
      },
    };
    const check = await newCheck();
    await step(d);
    expect((await current(check)).state).toBe('starting');
    clock += 60_000;
    await step(d);
    expect((await current(check)).state).toBe('polling');
    expect(creates).toBe(2);

    answers.push(500);
    const other = await newCheck();
    await step(d);
    const ended = await current(other);
    // Answered at once (502), but the slot is held for one timeout: the task may exist upstream.
    expect(ended.state).toBe('creating');
    expect(ended.outcome).toBe('error');
    expect(JSON.stringify(ended.cer.error)).toContain('ambiguous-create');
    expect(answerForCheck(ended, 'http://localhost').status).toBe(502);
    expectValidFhir(ended.cer);
    clock += TIMEOUT + 1;
    await step(d);
    expect((await current(other)).state).toBe('done');
    expect(creates).toBe(3);
  });

  it('only checks whose create-task can go out at once are written creating', async () => {
    const a = await newCheck();
    const b = await newCheck();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const d = { ...deps(), createSlots: new Slots(1) };
    d.upstream = {
      ...d.upstream,
      createTask: async () => {
        creates += 1;
        await gate;
        return { ok: true, value: { task_id: `task-${creates}` } };
      },
    };
    const claimed = await store.claimDue({
      owner: 'test:1',
      now: clock,
      leaseMs: 60_000,
      limit: 10,
      maxInFlight: () => 3,
    });
    const steps = claimed.map((c) => advanceCheck(c, d));
    await new Promise((r) => setTimeout(r, 20));
    const states = [(await current(a)).state, (await current(b)).state].sort();
    expect(states).toEqual(['creating', 'starting']); // the second waits for the slot, not written creating
    release();
    await Promise.all(steps);
    expect([(await current(a)).state, (await current(b)).state]).toEqual(['polling', 'polling']);
  });

  it('a search-all whose timeout passes while a poll is out: slow interval next, still-checking text, payers so far kept', async () => {
    const check = await newCheck({ discovery: true });
    await step();
    const started = await current(check);
    expect(started.deadlineAt).toBe(clock + TIMEOUT);
    const processing = envelope({
      status: 'NAVIGATING_WEBSITE',
      is_search_all: true,
      search_all_status: 'SEARCH_ALL_PROCESSING',
      aggregated_results: [
        { status: 'member_not_found', tpa_name: 'NAS', data: { is_eligible: false } },
        {
          status: 'found',
          tpa_name: 'DAMAN',
          data: { is_eligible: true, policy_network: { payer_name: 'Daman' } },
        },
        { status: 'tpa_not_configured', tpa_name: 'GIG', data: { is_eligible: null } },
      ],
      total_tpas_checked: 3,
    });
    let calls = 0;
    const plain = (): Promise<Answer> => {
      calls += 1;
      return Promise.resolve({ ok: true, value: processing });
    };
    const d = deps();
    d.upstream = { ...d.upstream, getResult: plain };

    // Before the timeout: the normal interval and the normal in-progress text.
    clock += POLL;
    await step(d);
    const early = await current(check);
    expect(early.nextRunAt).toBe(clock + POLL);
    expect(early.cer.disposition).toMatch(/^Searching all payers/);
    expect(early.cer.disposition).not.toContain(STILL_CHECKING);

    // The poll goes out before the deadline; its answer arrives after it.
    clock = started.deadlineAt - 1000;
    d.upstream.getResult = () => {
      clock = started.deadlineAt + 500;
      return plain();
    };
    await step(d);
    expect(calls).toBe(2);
    const late = await current(check);
    expect(late.state).toBe('polling');
    expect(late.nextRunAt).toBe(clock + SLOW_POLL);
    const cer: CoverageEligibilityResponse = late.cer;
    expectValidFhir(cer);
    expect(cer.outcome).toBe('queued');
    expect(cer.disposition).toBe(
      `${STILL_CHECKING} 3 payers answered so far; 1 found the member. The member is eligible at Daman.`,
    );
    expect(cer.insurance).toHaveLength(1);
    expect(cer.insurance?.[0]?.inforce).toBe(true);
    const answer = answerForCheck(late, 'http://localhost');
    expect(answer.status).toBe(200);
    expectValidFhir(answer.body);

    // Nothing is polled at the normal interval any more; the slow one polls, and stays slow.
    d.upstream.getResult = plain;
    clock += POLL;
    await step(d);
    expect(calls).toBe(2);
    clock = late.nextRunAt;
    await step(d);
    expect(calls).toBe(3);
    expect((await current(check)).nextRunAt).toBe(clock + SLOW_POLL);
    expect(creates).toBe(1);
  });

  it('a single-payer check past its timeout says it is still checking and is polled at the slow interval', async () => {
    const check = await newCheck();
    await step();
    const started = await current(check);
    polls = [{ ok: true, value: envelope({ status: 'NAVIGATING_WEBSITE' }) }];
    clock += POLL;
    await step();
    const early = await current(check);
    expect(early.nextRunAt).toBe(clock + POLL);
    expect(early.cer.disposition).toBe('Eligibility check in progress at the payer portal.');

    // A poll that fails at the deadline already answers with the still-checking text.
    polls = [{ ok: false, error: { kind: 'http', status: 503, body: '' } }];
    clock = started.deadlineAt;
    await step();
    const failed = await current(check);
    expect(failed.cer.outcome).toBe('queued');
    expect(failed.cer.disposition).toBe(STILL_CHECKING);
    expectValidFhir(failed.cer);

    polls = [{ ok: true, value: envelope({ status: 'EXTRACTING_DATA' }) }];
    clock = failed.nextRunAt;
    await step();
    const late = await current(check);
    expect(late.state).toBe('polling');
    expect(late.nextRunAt).toBe(clock + SLOW_POLL);
    expect(late.cer.outcome).toBe('queued');
    expect(late.cer.disposition).toBe(STILL_CHECKING);
    expectValidFhir(late.cer);
    const answer = answerForCheck(late, 'http://localhost');
    expect(answer.status).toBe(200);
    expectValidFhir(answer.body);

    // The answer still arrives at the slow poll and replaces the text.
    polls = [{ ok: true, value: eligible() }];
    clock += POLL;
    await step();
    expect(polls).toHaveLength(1); // not due before the slow interval
    clock = late.nextRunAt;
    await step();
    const done = await current(check);
    expect(done.state).toBe('done');
    expect(done.cer.outcome).toBe('complete');
    expect(done.cer.disposition).not.toContain('Still checking');
    expectValidFhir(done.cer);
    expect(creates).toBe(1);
  });

  it('create-task refused before anything was sent: back to starting (queued), re-sent later, one task', async () => {
    const failures: UpstreamFailure[] = [{ kind: 'network', code: 'ECONNREFUSED', sentRequest: false }];
    const d = deps();
    d.upstream = {
      ...d.upstream,
      createTask: () => {
        creates += 1;
        const error = failures.shift();
        return Promise.resolve(error ? { ok: false, error } : { ok: true, value: { task_id: 'task-ok' } });
      },
    };
    const check = await newCheck();
    await step(d);
    const refused = await current(check);
    expect(creates).toBe(1);
    expect(refused.state).toBe('starting');
    expect(refused.outcome).toBe('queued');
    expect(refused.tasksCreated).toBe(0);
    expect(refused.pollFailures).toBe(1);
    expect(refused.nextRunAt).toBe(clock + POLL);
    expect(refused.cer.error).toBeUndefined();
    expectValidFhir(refused.cer);
    const answer = answerForCheck(refused, 'http://localhost');
    expect(answer.status).toBe(200);
    expectValidFhir(answer.body);

    await step(d); // not due yet
    expect(creates).toBe(1);
    clock = refused.nextRunAt;
    await step(d);
    const started = await current(check);
    expect(creates).toBe(2);
    expect(started.state).toBe('polling');
    expect(started.upstreamTaskId).toBe('task-ok');
    expect(started.tasksCreated).toBe(1);
    expect(started.outcome).toBe('queued');
  });

  it.each<[string, UpstreamFailure]>([
    ['a timeout', { kind: 'timeout', phase: 'headers' }],
    [
      'a connection reset after the request was sent',
      { kind: 'network', code: 'ECONNRESET', sentRequest: true },
    ],
  ])('create-task ending in %s is ambiguous-create at once and is never re-sent', async (_name, failure) => {
    const d = deps();
    d.upstream = {
      ...d.upstream,
      createTask: () => {
        creates += 1;
        return Promise.resolve({ ok: false, error: failure });
      },
    };
    const check = await newCheck();
    await step(d);
    const ended = await current(check);
    expect(creates).toBe(1);
    expect(ended.state).toBe('creating'); // holds the slot: a task may exist upstream
    expect(ended.outcome).toBe('error');
    expect(ended.tasksCreated).toBe(0);
    expect(ended.cer.error?.[0]?.code.coding?.[0]?.code).toBe('ambiguous-create');
    expectValidFhir(ended.cer);
    const answer = answerForCheck(ended, 'http://localhost');
    expect(answer.status).toBe(502);
    expectValidFhir(answer.body);
    expect(JSON.stringify(answer.body)).toContain('ambiguous-create');

    const t0 = clock;
    for (const later of [POLL, 60_000, TIMEOUT - 1, TIMEOUT + 1, 2 * TIMEOUT, 10 * TIMEOUT]) {
      clock = t0 + later;
      await step(d);
    }
    const done = await current(check);
    expect(done.state).toBe('done');
    expect(done.cer.error?.[0]?.code.coding?.[0]?.code).toBe('ambiguous-create');
    expect(creates).toBe(1);
  });
});
