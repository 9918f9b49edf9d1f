/**
 * Search-all (discovery) end to end against the sandbox (issue 5): the CER grows as payers answer,
 * every eligible payer is returned, the payers that answered are recorded, and a search that
 * does not complete in time stays queued with what it has.
 */
import type { CoverageEligibilityResponse, Coverage } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

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

function payersOf(cer: CoverageEligibilityResponse): string[] {
  return (cer.insurance ?? []).map((insurance) => {
    const id = insurance.coverage.reference?.replace('#', '');
    const coverage = cer.contained?.find((r) => r.id === id) as Coverage | undefined;
    return coverage?.payor[0]?.identifier?.value ?? coverage?.payor[0]?.display ?? '?';
  });
}

describe('search-all', () => {
  it('two payers eligible: both returned, each with its own Coverage; responders recorded', async () => {
    const res = await searchAll('784-1990-0000031-1');
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
    const res = await searchAll('784-1990-0000032-2');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect((cer.insurance ?? []).some((i) => i.inforce === true)).toBe(false);
    expect(cer.disposition).toMatch(/no matching coverage/i);
    expect(cer.disposition).toMatch(/\d+ payers/);
  });

  it('completed by a single aggregator (rule 3)', async () => {
    const res = await searchAll('784-1990-0000035-5');
    expect(res.status).toBe(200);
    expect((res.body as CoverageEligibilityResponse).outcome).toBe('complete');
  });

  it('first answer found the member: complete with that payer (rule 2)', async () => {
    const res = await searchAll('784-1990-0000034-4');
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(payersOf(cer)).toHaveLength(1);
  });

  it('not complete at SEARCH_ALL_TIMEOUT_MS: stays queued with the payers so far, id kept', async () => {
    const slow = await startHarness({ timeScale: 1, searchAllTimeoutMs: 1000, pollIntervalMs: 100 });
    try {
      const res = await searchAll('784-1990-0000031-1', slow, 'wait=2');
      const cer = res.body as CoverageEligibilityResponse;
      expect(cer.outcome).toBe('queued');
      expect(cer.disposition).toMatch(/still/i);
      const read = await request(slow.url)
        .get(new URL(String(res.headers.location)).pathname)
        .set(slow.auth);
      expect(read.status).toBe(200);
      expectValidFhir(read.body);
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

  it('CANCELLED mid-search: 409 and the CER is an error, not a guess', async () => {
    const slow = await startHarness({ timeScale: 1, pollIntervalMs: 100 });
    try {
      const res = await searchAll('784-1990-0000031-1', slow, 'respond-async');
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
