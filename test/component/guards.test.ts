/**
 * Payer guards answer at once even when the tenant has no free slot: a check for a guarded payer
 * must not wait behind other checks only to be refused by the same guard later. With
 * maxInFlight 1 and the slot held by a slow check, a submit for a guarded payer gets its 422 or
 * 503 within the request, and the upstream sees no call for it. The 503's Retry-After counts down
 * to the guard's end.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import type { RequestOptions } from '../support/requests.js';

const SLOW = '784-1990-0000012-7'; // NAVIGATING_WEBSITE for 600 s of sandbox time (12 s here)

const counts = { create: 0, poll: 0 };
let h: Harness;

beforeAll(async () => {
  h = await startHarness({ maxInFlight: 1, overrides: { upstream: countingUpstream(counts) } });
});
afterAll(async () => {
  await h.stop();
});

async function submit(
  options: RequestOptions,
  headers: Record<string, string> = {},
  auth: { Authorization: string } = h.auth,
) {
  const res = await postSubmit(h.url, auth, options, headers);
  expectValidFhir(res.body);
  return res;
}

/** Holds the tenant's only slot with a check that runs for the next 12 s. */
async function holdTheSlot(auth: { Authorization: string } = h.auth): Promise<void> {
  const res = await submit({ emiratesId: SLOW, payer: 'NAS' }, { Prefer: 'respond-async' }, auth);
  expect(res.status).toBe(202);
  const status = new URL(String(res.headers['content-location'])).pathname;
  // Running upstream (not waiting for a slot): the slot is taken.
  for (let i = 0; i < 100; i += 1) {
    const progress = await request(h.url).get(status).set(auth);
    if (String(progress.headers['x-progress']).startsWith('NAVIGATING')) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the slow check never started');
}

describe('payer guards with every slot taken', () => {
  it('invalid_credentials guard: a later check for that payer answers 422 at once, no upstream call', async () => {
    const first = await submit({ emiratesId: '784-1990-0000004-4', payer: 'AXA' });
    expect(first.status).toBe(422);
    await holdTheSlot();

    const before = { ...counts };
    const started = Date.now();
    const guarded = await submit({ emiratesId: '784-1990-0000001-0', payer: 'AXA' });
    expect(guarded.status).toBe(422);
    expect(JSON.stringify(guarded.body)).toMatch(/credential|login/i);
    expect(Date.now() - started).toBeLessThan(2000); // not SUBMIT_WAIT_MS (5 s) then "queued"
    expect(counts.create).toBe(before.create);

    // The stored CER says the same, with the guard's code, and no coverage is claimed.
    const cer = (
      await request(h.url)
        .get(new URL(String(guarded.headers.location)).pathname)
        .set(h.auth)
    ).body as CoverageEligibilityResponse;
    expectValidFhir(cer);
    expect(cer.outcome).toBe('error');
    expect(cer.error?.[0]?.code.coding?.[0]?.code).toBe('credentials-guard');
    expect(cer.insurance ?? []).toEqual([]);

    // A check for another payer still waits for the slot (queued), as before.
    const other = await submit({ emiratesId: '784-1990-0000001-0', payer: 'DAMAN' }, { Prefer: 'wait=0' });
    expect(other.status).toBe(200);
    expect((other.body as CoverageEligibilityResponse).outcome).toBe('queued');
    expect(counts.create).toBe(before.create);
  });

  it('backoff guard: 503 at once, Retry-After counting down to the guard end (15 min), no upstream call', async () => {
    // clinic-b: its own slot and its own guards.
    const first = await submit({ emiratesId: '784-1990-0000007-7', payer: 'METLIFE' }, {}, h.authB);
    expect(first.status).toBe(503);
    expect(Number(first.headers['retry-after'])).toBe(900);
    await holdTheSlot(h.authB);

    const before = { ...counts };
    const started = Date.now();
    const guarded = await submit(
      { emiratesId: '784-1990-0000001-0', payer: 'METLIFE', identifier: 'guarded-visit-1' },
      {},
      h.authB,
    );
    expect(guarded.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(2000);
    const retryAfter = Number(guarded.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
    expect(counts.create).toBe(before.create);

    // The guard ends (here: reset). The same request identifier is the same check, still refused,
    // but no Retry-After invites a retry that would only replay it; a new identifier is a new check.
    await h.server.store.deleteGuard('clinic-b', 'METLIFE');
    const replay = await submit(
      { emiratesId: '784-1990-0000001-0', payer: 'METLIFE', identifier: 'guarded-visit-1' },
      {},
      h.authB,
    );
    expect(replay.status).toBe(503);
    expect(replay.headers['retry-after']).toBeUndefined();
    const fresh = await submit(
      { emiratesId: '784-1990-0000001-0', payer: 'METLIFE', identifier: 'guarded-visit-2' },
      { Prefer: 'wait=0' },
      h.authB,
    );
    expect(fresh.status).toBe(200);
    expect((fresh.body as CoverageEligibilityResponse).outcome).toBe('queued');
  });
});
