/**
 * The typo guard at every entry point (docs/request-mapping.md, "The Emirates ID's check digit"),
 * against the sandbox over real HTTP: a mistyped Emirates ID or a placeholder is refused before any
 * upstream call ($submit and batch entries 422 with the identifier's expression, $validate an
 * error issue, a CDS hook a warning card), and a tenant with "emiratesIdCheckDigit": "warn" lets a
 * mistyped one through with a warning in every answer of the check. clinic-a refuses (the
 * default), clinic-b warns.
 */
import type { Bundle, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import { countingUpstream, startHarness, type Harness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const VALIDATE = '/fhir/CoverageEligibilityRequest/$validate';
/** 784-1987-4521001-7 with two neighbouring digits swapped. */
const SWAPPED = '784-1987-4521010-7';
const PLACEHOLDERS = ['000-0000-0000000-0', '111-1111-1111111-1', '222-2222-2222222-2', '999-9999-9999999-9'];
const IDENTIFIER = 'CoverageEligibilityRequest.contained[0].identifier[0]';
// Only create-task is compared: a check of an earlier test may still be polled meanwhile.
const counts = { create: 0, poll: 0 };
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    emiratesIdCheckDigit: { b: 'warn' },
    overrides: { upstream: countingUpstream(counts) },
  });
});
afterAll(async () => {
  await h.stop();
});

function post(path: string, body: unknown, auth = h.auth, headers: Record<string, string> = {}) {
  return request(h.url)
    .post(path)
    .set(auth)
    .set(headers)
    .set('Content-Type', 'application/fhir+json')
    .send(JSON.stringify(body));
}

function expectRefusal(outcome: OperationOutcome, text: RegExp): void {
  expectValidFhir(outcome);
  expect(outcome.issue[0]).toMatchObject({ severity: 'error', code: 'value', expression: [IDENTIFIER] });
  expect(outcome.issue[0]?.details?.text).toMatch(text);
}

describe('a mistyped Emirates ID (the default rule: refuse)', () => {
  it('$submit: 422 with the identifier expression and what to do; no upstream call, nothing stored', async () => {
    const before = { ...counts };
    const res = await post(SUBMIT, eligibilityRequest({ emiratesId: SWAPPED }));
    expect(res.status).toBe(422);
    expectRefusal(res.body as OperationOutcome, /Re-type it from the patient's Emirates ID card/);
    expect(JSON.stringify(res.body)).not.toContain('4521010');
    const stored = await request(h.url).get('/fhir/CoverageEligibilityResponse?_summary=count').set(h.auth);
    expect((stored.body as Bundle).total).toBe(0);
    expect(counts.create).toBe(before.create);
  });

  it.each(PLACEHOLDERS)(
    '$submit: the placeholder %s is refused, even for a tenant that warns',
    async (id) => {
      const before = { ...counts };
      for (const auth of [h.auth, h.authB]) {
        const res = await post(SUBMIT, eligibilityRequest({ emiratesId: id }), auth);
        expect(res.status).toBe(422);
        expectRefusal(res.body as OperationOutcome, /placeholder.*insurance card number/);
      }
      expect(counts.create).toBe(before.create);
    },
  );

  it('a batch: the mistyped entry alone is refused with 422, the good one goes ahead', async () => {
    const before = counts.create;
    const res = await post('/fhir', {
      resourceType: 'Bundle',
      type: 'batch',
      entry: [
        {
          resource: eligibilityRequest({ emiratesId: SWAPPED }),
          request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
        },
        {
          resource: eligibilityRequest({ emiratesId: '784-1987-4521001-7' }),
          request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
        },
      ],
    });
    expect(res.status).toBe(200);
    const bundle = res.body as Bundle;
    expectValidFhir(bundle);
    expect(bundle.entry?.[0]?.response?.status).toMatch(/^422/);
    expectRefusal(bundle.entry?.[0]?.response?.outcome as OperationOutcome, /Re-type it/);
    expect(bundle.entry?.[1]?.response?.status).toMatch(/^200/);
    expect(counts.create).toBe(before + 1);
  });

  it('$validate says the same as an error issue, and calls nothing', async () => {
    const before = { ...counts };
    const res = await post(VALIDATE, eligibilityRequest({ emiratesId: SWAPPED }));
    expect(res.status).toBe(200);
    expectRefusal(res.body as OperationOutcome, /Re-type it/);
    expect(counts.create).toBe(before.create);
  });

  it('never compares the year digits with the birth date', async () => {
    // eligibilityRequest's patient is born in 1988; this ID's year digits say 2001.
    const res = await post(VALIDATE, eligibilityRequest({ emiratesId: '784-2001-1234567-1' }));
    expect((res.body as OperationOutcome).issue.map((i) => i.severity)).not.toContain('error');
  });
});

describe('a tenant with "emiratesIdCheckDigit": "warn"', () => {
  it('$validate: a warning issue with the expression, no error', async () => {
    const res = await post(VALIDATE, eligibilityRequest({ emiratesId: SWAPPED }), h.authB);
    const outcome = res.body as OperationOutcome;
    expectValidFhir(outcome);
    expect(outcome.issue).toContainEqual(
      expect.objectContaining({ severity: 'warning', code: 'value', expression: [IDENTIFIER] }),
    );
    expect(outcome.issue.map((i) => i.severity)).not.toContain('error');
  });

  it('$submit goes ahead; the CER says so in its disposition, the batch and async entries carry a warning issue', async () => {
    const before = counts.create;
    const res = await post(SUBMIT, eligibilityRequest({ emiratesId: SWAPPED }), h.authB, {
      Prefer: 'wait=20',
    });
    expect(res.status).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expectValidFhir(cer);
    expect(cer.outcome).toBe('complete');
    expect(cer.disposition).toMatch(/check digit of the other 14: one digit may be mistyped/);
    expect(counts.create).toBe(before + 1);

    const batch = await post(
      '/fhir',
      {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            resource: eligibilityRequest({ emiratesId: SWAPPED }),
            request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
          },
        ],
      },
      h.authB,
    );
    const entry = (batch.body as Bundle).entry?.[0];
    expectValidFhir(batch.body);
    expect(entry?.response?.outcome).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'warning', expression: ['CoverageEligibilityResponse.patient.identifier'] }],
    });

    const async = await post(SUBMIT, eligibilityRequest({ emiratesId: SWAPPED }), h.authB, {
      Prefer: 'respond-async',
    });
    expect(async.status).toBe(202);
    const status = async.headers['content-location']!;
    const done = await until(async () => {
      const res = await request(status).get('').set(h.authB);
      return res.status === 200 ? (res.body as Bundle) : undefined;
    }, 20_000);
    expectValidFhir(done);
    expect(done.entry?.[0]?.response?.outcome).toMatchObject({ issue: [{ severity: 'warning' }] });
  });
});
