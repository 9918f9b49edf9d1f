/**
 * Search-all (discovery) end to end against the sandbox (issue 5): the CER grows as payers answer,
 * every eligible payer is returned, the payers that answered are recorded, and a search that
 * does not complete in time stays queued with what it has.
 */
import type { CoverageEligibilityResponse, Coverage, Extension } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extensionUrl } from '../../src/mapping/response/index.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ timeScale: 0.02 });
});
afterAll(async () => {
  await h.stop();
});

async function searchAll(emiratesId: string, harness = h, prefer = 'wait=30') {
  const res = await request(harness.url)
    .post(SUBMIT)
    .set(harness.auth)
    .set('Prefer', prefer)
    .set('Content-Type', 'application/fhir+json')
    .send(eligibilityRequest({ emiratesId, discovery: true }));
  expectValidFhir(res.body);
  return res;
}

/** src/mapping/response/cer.ts: the lead of a check past its timeout and still tracked. */
const STILL_CHECKING =
  'Still checking: the payer portal has not answered within the usual time. The check continues, and this response is updated when the answer arrives.';
/** mappings/outcomes.json searchAll.foundStatuses. */
const FOUND = new Set(['found', 'member_found']);

/** The sub-extensions of one complex extension, by url (the value of each). */
function partsOf(extension: Extension): Record<string, unknown> {
  const parts: Record<string, unknown> = {};
  for (const part of extension.extension ?? []) {
    const { url, ...value } = part;
    parts[url] = Object.values(value)[0];
  }
  return parts;
}

/** Every search-all-response extension of a CER, as its parts. */
function responsesOf(cer: CoverageEligibilityResponse): Record<string, unknown>[] {
  return (cer.extension ?? []).filter((e) => e.url === extensionUrl('search-all-response')).map(partsOf);
}

function upstreamOutcomeOf(cer: CoverageEligibilityResponse): Record<string, unknown> | undefined {
  const found = (cer.extension ?? []).find((e) => e.url === extensionUrl('upstream-outcome'));
  return found ? partsOf(found) : undefined;
}

function payersOf(cer: CoverageEligibilityResponse): string[] {
  return (cer.insurance ?? []).map((insurance) => {
    const id = insurance.coverage.reference?.replace('#', '');
    const coverage = cer.contained?.find((r) => r.id === id) as Coverage | undefined;
    return coverage?.payor[0]?.identifier?.value ?? coverage?.payor[0]?.display ?? '?';
  });
}

describe('search-all', () => {
  it('two payers eligible: both returned, each with its own Coverage; responders recorded', async () => {
    const res = await searchAll('784-1990-0000031-7');
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(payersOf(cer).sort()).toEqual(['DAMAN', 'THIQA']);
    expect(cer.insurance?.every((i) => i.inforce === true)).toBe(true);
    // The record of which payers answered: every responder code appears in the CER.
    const text = JSON.stringify(cer);
    for (const payer of ['NAS', 'MEDNET', 'NEXTCARE']) expect(text).toContain(payer);
  });

  it('one payer eligible', async () => {
    const res = await searchAll('784-1990-0000033-3');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(payersOf(cer)).toEqual(['NEXTCARE']);
  });

  it('none eligible: complete, nothing in force, and says how many payers answered', async () => {
    const res = await searchAll('784-1990-0000032-5');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect((cer.insurance ?? []).some((i) => i.inforce === true)).toBe(false);
    expect(cer.disposition).toMatch(/no matching coverage/i);
    expect(cer.disposition).toMatch(/\d+ payers/);
  });

  it('completed by a single aggregator (rule 3)', async () => {
    const res = await searchAll('784-1990-0000035-8');
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    // The one payer that answered, and what it said (search-all-aggregator: NEXTCARE, member_not_found).
    expect(responsesOf(cer)).toEqual([
      { payer: 'NEXTCARE', payerName: 'NEXTCARE', status: 'member_not_found', eligible: false },
    ]);
    expect(upstreamOutcomeOf(cer)).toMatchObject({
      taskStatus: 'PROCESS_COMPLETE',
      searchAllStatus: 'SEARCH_ALL_COMPLETE',
      payersResponded: 1,
    });
    // Nobody found the member: no insurance at all, so none in force, and no Coverage.
    expect(cer.insurance).toBeUndefined();
    expect(cer.contained).toBeUndefined();
    expect(cer.disposition).toContain('No matching coverage found in the payers that responded (1 payer).');
  });

  it('first answer found the member: complete with that payer (rule 2)', async () => {
    const res = await searchAll('784-1990-0000034-1');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(payersOf(cer)).toHaveLength(1);
  });

  it('not complete at SEARCH_ALL_TIMEOUT_MS: stays queued with the payers so far, id kept', async () => {
    const slow = await startHarness({ timeScale: 1, searchAllTimeoutMs: 1000, pollIntervalMs: 100 });
    try {
      const res = await searchAll('784-1990-0000031-7', slow, 'wait=2');
      const cer = res.body as CoverageEligibilityResponse;
      expect(cer.outcome).toBe('queued');
      // The timed-out text leads, not the normal search-all in-progress text, then the count so far.
      const answered = responsesOf(cer);
      const found = answered.filter((a) => FOUND.has(String(a.status)));
      expect(answered.length).toBeGreaterThan(0);
      expect(found.length).toBeGreaterThan(0); // DAMAN answers at 0.8 s, before the 1 s timeout
      const plural = (n: number) => `${n} payer${n === 1 ? '' : 's'}`;
      expect(
        cer.disposition?.startsWith(
          `${STILL_CHECKING} ${plural(answered.length)} answered so far; ${found.length} found the member.`,
        ),
      ).toBe(true);
      expect(cer.disposition).not.toContain('Searching all payers');
      expect(upstreamOutcomeOf(cer)).toMatchObject({
        searchAllStatus: 'SEARCH_ALL_PROCESSING',
        payersResponded: answered.length,
      });
      // The payers found so far are in the answer, each with its Coverage.
      expect(cer.insurance).toHaveLength(found.length);
      expect(payersOf(cer)).toEqual(found.map((a) => a.payer));
      expect(cer.insurance?.every((i) => i.inforce === true)).toBe(true);
      const read = await request(slow.url)
        .get(new URL(String(res.headers.location)).pathname)
        .set(slow.auth);
      expect(read.status).toBe(200);
      expectValidFhir(read.body);
      const stored = read.body as CoverageEligibilityResponse;
      expect(stored.outcome).toBe('queued');
      expect(stored.disposition?.startsWith(STILL_CHECKING)).toBe(true);
    } finally {
      await slow.stop();
    }
  });

  it('FAILED mid-search: 502 and the CER is an error, never a guessed inforce', async () => {
    const res = await searchAll('784-1990-0000036-6');
    expect(res.status).toBe(502);
    const read = await request(h.url)
      .get(new URL(String(res.headers.location)).pathname)
      .set(h.auth);
    expectValidFhir(read.body);
    const cer = read.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('error');
    expect((cer.insurance ?? []).some((i) => i.inforce !== undefined)).toBe(false);
  });

  it('holds its tenant slot until its task is terminal, then is polled to completion without it', async () => {
    // maxInFlight 1, real time: the task ends at 1 s, the search completes at the 17th answer (3 s).
    const slow = await startHarness({ timeScale: 1, pollIntervalMs: 50, maxInFlight: 1 });
    try {
      const res = await searchAll('784-1990-0000037-4', slow, 'respond-async');
      expect(res.status).toBe(202);
      const status = new URL(String(res.headers['content-location'])).pathname;
      const searchId = status.split('/').pop() ?? '';
      const next = await request(slow.url)
        .post(SUBMIT)
        .set(slow.auth)
        .set('Prefer', 'respond-async')
        .set('Content-Type', 'application/fhir+json')
        .send(eligibilityRequest({ emiratesId: '784-1990-5550037-7' }));
      const nextStatus = new URL(String(next.headers['content-location'])).pathname;
      // While the task runs, the single-payer check waits for the slot.
      const early = await slow.server.store.get('clinic-a', nextStatus.split('/').pop() ?? '');
      expect(early?.state).toBe('waiting');
      // The task terminal, the search not complete: the slot is free, the other check runs.
      await until(async () => {
        const search = await slow.server.store.get('clinic-a', searchId);
        return search?.upstreamStatus === 'PROCESS_COMPLETE' ? true : undefined;
      }, 10_000);
      const started = await until(async () => {
        const other = await slow.server.store.get('clinic-a', nextStatus.split('/').pop() ?? '');
        return other && other.state !== 'waiting' ? other : undefined;
      }, 10_000);
      expect(started.state).not.toBe('waiting');
      const search = await slow.server.store.get('clinic-a', searchId);
      expect(search?.state).toBe('polling');
      expect(search?.cer.outcome).toBe('queued');
      // Polled on to SEARCH_ALL_COMPLETE.
      const answer = await until(async () => {
        const r = await request(slow.url).get(status).set(slow.auth);
        return r.status === 200 ? r : undefined;
      }, 10_000);
      expectValidFhir(answer.body);
      const done = await slow.server.store.get('clinic-a', searchId);
      expect(upstreamOutcomeOf(done!.cer)).toMatchObject({ searchAllStatus: 'SEARCH_ALL_COMPLETE' });
    } finally {
      await slow.stop();
    }
  });

  it('CANCELLED mid-search: 409 and the CER is an error, not a guess', async () => {
    const slow = await startHarness({ timeScale: 1, pollIntervalMs: 100 });
    try {
      const res = await searchAll('784-1990-0000031-7', slow, 'respond-async');
      expect(res.status).toBe(202);
      const status = new URL(String(res.headers['content-location'])).pathname;
      await new Promise((r) => setTimeout(r, 300));
      for (const task of slow.sandbox.control.tasks()) slow.sandbox.control.cancel(task.taskId);
      let answer = await request(slow.url).get(status).set(slow.auth);
      for (let i = 0; i < 100 && answer.status === 202; i += 1) {
        await new Promise((r) => setTimeout(r, 100));
        answer = await request(slow.url).get(status).set(slow.auth);
      }
      expect(answer.status).toBe(200);
      expectValidFhir(answer.body);
      const entry = (answer.body as { entry: { response: { status: string } }[] }).entry[0];
      expect(entry?.response.status).toMatch(/^409/);
    } finally {
      await slow.stop();
    }
  });
});
