/**
 * CoverageEligibilityRequest/$validate, the dry run of $submit (docs/batch-and-reuse.md), against
 * the sandbox over real HTTP: good, bad (the same codes and expressions as $submit), guarded,
 * backoff, queued, reusable and unknown-payer situations, each answered 200 with an
 * OperationOutcome, with no upstream call and nothing stored. The OperationDefinitions are
 * published and named by the CapabilityStatement.
 */
import type { Bundle, CapabilityStatement, OperationOutcome, Patient } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const VALIDATE = '/fhir/CoverageEligibilityRequest/$validate';
const SLOW = '784-1990-0000012-7'; // in flight for 12 s at the harness's time scale
const counts = { create: 0, poll: 0 };
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    maxInFlight: 1,
    reuseWindowMinutes: 240,
    overrides: { upstream: countingUpstream(counts) },
  });
});
afterAll(async () => {
  await h.stop();
});

async function storedCount(): Promise<number> {
  const res = await request(h.url).get('/fhir/CoverageEligibilityResponse?_summary=count').set(h.auth);
  return (res.body as Bundle).total ?? -1;
}

/**
 * Runs $validate and checks it made no upstream call and stored nothing. `running`: a check of
 * the test is being polled meanwhile, so only create-task calls are compared.
 */
async function validate(body: unknown, running = false): Promise<OperationOutcome> {
  const before = { ...counts };
  const stored = await storedCount();
  const res = await request(h.url)
    .post(VALIDATE)
    .set(h.auth)
    .set('Content-Type', 'application/fhir+json')
    .send(JSON.stringify(body));
  expect(res.status).toBe(200);
  expectValidFhir(res.body);
  if (running) expect(counts.create).toBe(before.create);
  else expect(counts).toEqual(before);
  expect(await storedCount()).toBe(stored);
  return res.body as OperationOutcome;
}

const texts = (oo: OperationOutcome) => oo.issue.map((i) => `${i.severity}: ${i.details?.text ?? ''}`);

describe('$validate', () => {
  it('a good request: one information issue', async () => {
    const oo = await validate(eligibilityRequest({ emiratesId: '784-1987-5550001-8' }));
    expect(oo.issue).toHaveLength(1);
    expect(oo.issue[0]).toMatchObject({ severity: 'information', code: 'informational' });
  });

  it('bad requests: the errors $submit gives, with the same codes and expressions', async () => {
    const noPatientId = eligibilityRequest({ emiratesId: '784-1987-5550002-6' });
    const patient = noPatientId.contained?.find((r) => r.resourceType === 'Patient') as Patient;
    delete patient.identifier;
    const bodies: unknown[] = [
      noPatientId,
      { resourceType: 'CoverageEligibilityRequest', status: 'nonsense' },
      { resourceType: 'Patient' },
    ];
    for (const body of bodies) {
      const submitted = await request(h.url)
        .post(SUBMIT)
        .set(h.auth)
        .set('Content-Type', 'application/fhir+json')
        .send(JSON.stringify(body));
      expect([400, 422]).toContain(submitted.status);
      const oo = await validate(body);
      const shape = (o: OperationOutcome) => o.issue.map((i) => [i.severity, i.code, i.expression]);
      expect(shape(oo)).toEqual(shape(submitted.body as OperationOutcome));
      expect(oo.issue.some((i) => i.severity === 'error')).toBe(true);
    }
  });

  it('an unknown payer code is passed through: information', async () => {
    const oo = await validate(eligibilityRequest({ emiratesId: '784-1987-5550003-4', payer: 'NEWPAYER' }));
    expect(texts(oo).join('\n')).toMatch(/information: The payer code NEWPAYER is not in/);
  });

  it('a payer locked by the credentials guard, and a payer backing off until a time: warnings', async () => {
    const { store } = h.server;
    const now = Date.now();
    await store.putGuard({
      tenantId: 'clinic-a',
      payerCode: 'AXA',
      kind: 'credentials',
      until: null,
      reason: 'test',
      openedAt: now,
    });
    const until = now + 600_000;
    await store.putGuard({
      tenantId: 'clinic-a',
      payerCode: 'NAS',
      kind: 'backoff',
      until,
      reason: 'test',
      openedAt: now,
    });
    try {
      const locked = await validate(eligibilityRequest({ emiratesId: '784-1987-5550004-2', payer: 'AXA' }));
      expect(locked.issue[0]).toMatchObject({
        severity: 'warning',
        expression: ['CoverageEligibilityRequest.insurer'],
      });
      expect(texts(locked)[0]).toMatch(/credentials/);
      const backoff = await validate(eligibilityRequest({ emiratesId: '784-1987-5550004-2', payer: 'NAS' }));
      expect(backoff.issue[0]?.severity).toBe('warning');
      expect(texts(backoff)[0]).toContain(new Date(until).toISOString());
    } finally {
      await store.deleteGuard('clinic-a', 'AXA');
      await store.deleteGuard('clinic-a', 'NAS');
    }
  });

  it('checks ahead in the queue: information with a rough wait; a reusable answer: information', async () => {
    // maxInFlight 1: the slow check takes the slot, the next one waits for it.
    const send = (options: RequestOptions) =>
      request(h.url)
        .post(SUBMIT)
        .set(h.auth)
        .set('Prefer', 'respond-async')
        .set('Content-Type', 'application/fhir+json')
        .send(eligibilityRequest(options));
    expect((await send({ emiratesId: SLOW })).status).toBe(202);
    expect((await send({ emiratesId: '784-1987-5550005-9' })).status).toBe(202);
    await until(async () =>
      (await h.server.store.countQueue('clinic-a')).inFlight === 1 ? true : undefined,
    );
    const queued = await validate(eligibilityRequest({ emiratesId: '784-1987-5550006-7' }), true);
    expect(texts(queued).join('\n')).toMatch(
      /information: 1 checks are waiting ahead of this one and 1 running .* roughly 6 minutes/,
    );

    // A finished found-member answer of another tenant's slot-free clinic: clinic-b.
    const done = await request(h.url)
      .post(SUBMIT)
      .set(h.authB)
      .set('Prefer', 'wait=10')
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1987-5550007-5' }));
    expect(done.status).toBe(200);
    const res = await request(h.url)
      .post(VALIDATE)
      .set(h.authB)
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1987-5550007-5' }));
    expectValidFhir(res.body);
    const reusable = res.body as OperationOutcome;
    expect(reusable.issue).toHaveLength(1);
    expect(texts(reusable)[0]).toContain(String(done.headers.location).split('/fhir/')[1]);
    // Not for clinic-a, whose answers these are not.
    const other = await validate(eligibilityRequest({ emiratesId: '784-1987-5550007-5' }), true);
    expect(texts(other).join('\n')).not.toMatch(/recent answer/);
  });

  it('the OperationDefinitions are published and named by the CapabilityStatement', async () => {
    const cs = (await request(h.url).get('/fhir/metadata')).body as CapabilityStatement;
    expectValidFhir(cs);
    const ops = cs.rest?.[0]?.resource?.find((r) => r.type === 'CoverageEligibilityRequest')?.operation ?? [];
    expect(ops.map((o) => o.name)).toEqual(['submit', 'validate']);
    expect(cs.rest?.[0]?.interaction?.map((i) => i.code)).toEqual(['batch']);
    for (const op of ops) {
      const id = op.definition.split('/').pop() ?? '';
      const def = await request(h.url).get(`/fhir/OperationDefinition/${id}`);
      expect(def.status).toBe(200);
      expectValidFhir(def.body);
      expect(def.body.url).toBe(op.definition);
      const profile = await request(h.url).get(
        `/fhir/StructureDefinition/${String(def.body.inputProfile).split('/').pop()}`,
      );
      expect(profile.status).toBe(200);
      expectValidFhir(profile.body);
    }
  });
});
