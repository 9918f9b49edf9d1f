/**
 * POST /fhir/CoverageEligibilityResponse/{id}/$estimate (issue 28, docs/estimate.md) against the
 * sandbox over real HTTP: the ClaimResponse of a found eligible answer (validated), the clear
 * cases exactly, no share without figures, 422 for answers that are not final found-member
 * answers in force, 404 across tenants, bad input 400/422 with expression and the CER unchanged,
 * the scope, the audit, the published OperationDefinition, and no upstream call.
 */
import type {
  AuditEvent,
  Bundle,
  CapabilityStatement,
  ClaimResponse,
  OperationOutcome,
  Parameters,
} from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import { fixtureUpstream, mappingFixture } from '../support/fixture-upstream.js';
import { accessToken, clientKey, serviceKey, type ClientKey } from '../support/smart.js';
import { eligibilityRequest } from '../support/requests.js';
import { submitFinal } from '../support/submit.js';
import { until } from '../support/until.js';

const SERVICE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';
const EX = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';
const counts = { create: 0, poll: 0 };
let h: Harness;
let readerKey: ClientKey;
let tokenUrl: string;
let eligible: string;
/** Answers of plans shaped like real ones (issue 35): recorded portal answers for these identifiers. */
const DEDUCTIBLE_PLAN = '784-1990-1234567-6';
const MATERNITY_PLAN = '784-1985-7654321-3';
const plans: Record<string, string> = {};

beforeAll(async () => {
  const [key, svc] = await Promise.all([clientKey('ES384'), serviceKey()]);
  readerKey = key;
  h = await startHarness({
    tokenSigningKeys: [svc.jwk],
    smartClients: {
      a: [
        {
          clientId: 'reader',
          jwks: { keys: [readerKey.publicJwk] },
          scopes: ['system/CoverageEligibilityResponse.r', 'system/CoverageEligibilityRequest.c'],
        },
      ],
    },
    overrides: {
      upstream: (inner) =>
        countingUpstream(counts)(
          fixtureUpstream({
            [DEDUCTIBLE_PLAN]: mappingFixture('found-eligible-deductible'),
            [MATERNITY_PLAN]: mappingFixture('found-eligible-maternity'),
          })(inner),
        ),
    },
  });
  const smart = await request(h.url).get('/fhir/.well-known/smart-configuration');
  tokenUrl = String((smart.body as { token_endpoint: string }).token_endpoint);
  [eligible, plans.deductible, plans.maternity] = await Promise.all([
    submitFinal(h.url, h.auth, { emiratesId: '784-1990-0000001-0', payer: 'DAMAN' }),
    submitFinal(h.url, h.auth, { emiratesId: DEDUCTIBLE_PLAN, payer: 'NAS' }),
    submitFinal(h.url, h.auth, { emiratesId: MATERNITY_PLAN, payer: 'NEXTCARE' }),
  ]);
  // The documents of these answers are kept in the background (docs/evidence.md), which may read
  // a fresh link from the upstream: settled first, so the counts below see only $estimate.
  await until(
    async () => {
      const rows = await Promise.all(
        [eligible, plans.deductible, plans.maternity].map((url) =>
          h.server.store.evidence.ofCheck('clinic-a', String(url).split('/').pop() ?? ''),
        ),
      );
      return rows.flat().every((row) => row.state !== 'pending') ? true : undefined;
    },
    20_000,
    'the documents kept',
  );
});
afterAll(async () => {
  await h.stop();
});

type Item = { system?: string; code: string; fee: unknown };

function parameters(items: Item[]): Parameters {
  return {
    resourceType: 'Parameters',
    parameter: items.map((item) => ({
      name: 'item',
      part: [
        { name: 'category', valueCoding: { system: item.system ?? SERVICE, code: item.code } },
        { name: 'fee', ...(item.fee as object) },
      ],
    })),
  };
}

const aed = (value: number) => ({ valueMoney: { value, currency: 'AED' } });

function post(path: string, body: unknown, auth = h.auth): request.Test {
  const req = request(h.url).post(`${path}/$estimate`).set(auth).set('Content-Type', 'application/fhir+json');
  return typeof body === 'string' ? req.send(body) : req.send(body as object);
}

const adjudicated = (claim: ClaimResponse, index: number, code: string) =>
  claim.item?.[index]?.adjudication.find((a) => a.category.coding?.[0]?.code === code)?.amount?.value;
const totalOf = (claim: ClaimResponse, code: string) =>
  claim.total?.find((t) => t.category.coding?.[0]?.code === code)?.amount.value;

describe('$estimate', () => {
  it('answers a valid ClaimResponse with the clear cases exactly, a note per assumption, never calling the upstream', async () => {
    const before = { ...counts };
    const res = await post(
      eligible,
      parameters([
        { code: 'consultation', fee: aed(400) }, // 20% at most AED 50 per visit
        { code: 'consultation', fee: aed(120.5) }, // 20% of 120.50 = 24.10
        { code: 'lab', fee: aed(333.33) }, // 10%, no maximum given = 33.33
        { code: 'physiotherapy', fee: aed(300) }, // AED 25 per visit
        { code: 'physiotherapy', fee: aed(10) }, // min(25, 10)
        { system: EX, code: '35', fee: aed(180) }, // dental: not covered, the whole fee
      ]),
    );
    expect(res.status).toBe(200);
    const claim = res.body as ClaimResponse;
    expectValidFhir(claim);
    expect(claim).toMatchObject({
      resourceType: 'ClaimResponse',
      use: 'predetermination',
      status: 'active',
      outcome: 'complete',
      type: { coding: [{ code: 'professional' }] },
    });
    expect(claim.request).toBeUndefined();
    expect(claim.disposition).toMatch(/^An estimate from the payer portal's answer of \d{4}-\d{2}-\d{2} /);
    const copays = [0, 1, 2, 3, 4, 5].map((i) => adjudicated(claim, i, 'copay'));
    expect(copays).toEqual([50, 24.1, 33.33, 25, 10, 180]);
    expect([0, 1, 2, 3, 4, 5].map((i) => adjudicated(claim, i, 'benefit'))).toEqual([
      350, 96.4, 300, 275, 0, 0,
    ]);
    expect(totalOf(claim, 'submitted')).toBe(1343.83);
    expect(totalOf(claim, 'copay')).toBe(322.43);
    expect(totalOf(claim, 'benefit')).toBe(1021.4);
    const notes = (claim.processNote ?? []).map((n) => n.text);
    // The sentence each share comes from is the item's first note (the page shows it).
    const first = claim.item?.[0]?.noteNumber?.[0];
    expect(notes[(first ?? 0) - 1]).toBe(
      'Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit; yearly cap on copays: AED 500 per year',
    );
    expect(notes.join('\n')).toMatch(/yearly cap \(AED 500 per year\) is not applied/);
    expect(notes.join('\n')).toMatch(/Laboratory \(Outpatient\): the portal gives no maximum/);
    expect(counts).toEqual(before);
  });

  it('gives no share for a category the answer has no figures for, and totals over the others', async () => {
    const res = await post(
      eligible,
      parameters([
        { code: 'emergency', fee: aed(200) },
        { code: 'lab', fee: aed(100) },
      ]),
    );
    expect(res.status).toBe(200);
    const claim = res.body as ClaimResponse;
    expectValidFhir(claim);
    expect(claim.item?.[0]?.adjudication.map((a) => a.category.coding?.[0]?.code)).toEqual(['submitted']);
    expect(adjudicated(claim, 1, 'copay')).toBe(10);
    expect(claim.total?.map((t) => [t.category.coding?.[0]?.code, t.amount.value])).toEqual([
      ['submitted', 300],
      ['copay', 10],
      ['benefit', 90],
    ]);
    expect((claim.processNote ?? []).map((n) => n.text).join('\n')).toContain(
      'not counted: item 1 (Emergency, AED 200)',
    );
  });

  it.each<
    [string, 'deductible' | 'maternity', Item[], (number | undefined)[], Record<string, number | undefined>]
  >([
    [
      'a per-visit deductible from the form, and 20% up to AED 500 plus AED 20',
      'deductible',
      [
        { code: 'lab', fee: aed(90) },
        { code: 'consultation', fee: aed(400) },
        { system: EX, code: '5', fee: aed(10) },
      ],
      [25, 100, 10],
      { submitted: 500, copay: 135, benefit: 365 },
    ],
    [
      'maternity from its benefit; an item without figures left out of the totals',
      'maternity',
      [
        { system: EX, code: '69', fee: aed(8000) },
        { code: 'consultation', fee: aed(300) },
        { code: 'emergency', fee: aed(100) },
      ],
      [500, 40, undefined],
      { submitted: 8400, copay: 540, benefit: 7760 },
    ],
  ])('plans shaped like real ones: %s', async (_name, plan, items, copays, totals) => {
    const res = await post(plans[plan]!, parameters(items));
    expect(res.status).toBe(200);
    const claim = res.body as ClaimResponse;
    expectValidFhir(claim);
    expect(items.map((_item, i) => adjudicated(claim, i, 'copay'))).toEqual(copays);
    expect({
      submitted: totalOf(claim, 'submitted'),
      copay: totalOf(claim, 'copay'),
      benefit: totalOf(claim, 'benefit'),
    }).toEqual(totals);
    const notes = (claim.processNote ?? []).map((n) => n.text).join('\n');
    if (copays.includes(undefined))
      expect(notes).toMatch(/totals count only the items with an estimated share/);
    else expect(notes).not.toMatch(/not counted/);
  });

  it.each([
    ['not eligible', '784-1990-0000002-8', /not in force/],
    ['member not found', '784-1990-0000003-6', /no determination/],
  ])('answers 422 for a %s answer', async (_name, emiratesId, why) => {
    const created = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Prefer', 'wait=10')
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId, payer: 'DAMAN' }));
    const path = new URL(String(created.headers.location)).pathname;
    await until(async () =>
      (await request(h.url).get(path).set(h.auth)).body.outcome !== 'queued' ? true : undefined,
    );
    const res = await post(path, parameters([{ code: 'consultation', fee: aed(100) }]));
    expect(res.status).toBe(422);
    expectValidFhir(res.body);
    expect((res.body as OperationOutcome).issue[0]?.details?.text).toMatch(why);
    expect((res.body as OperationOutcome).issue[0]?.expression).toEqual(['CoverageEligibilityResponse']);
  });

  it("answers 404 for another tenant's CER and for an unknown id", async () => {
    const body = parameters([{ code: 'consultation', fee: aed(100) }]);
    expect((await post(eligible, body, h.authB)).status).toBe(404);
    expect((await post('/fhir/CoverageEligibilityResponse/unknown-id', body)).status).toBe(404);
  });

  it.each<[string, unknown, number, string]>([
    ['no item', { resourceType: 'Parameters' }, 400, 'Parameters.parameter'],
    ['not Parameters', { resourceType: 'Basic', code: { text: 'x' } }, 400, 'resourceType'],
    [
      'a fee that is not Money',
      parameters([{ code: 'lab', fee: { valueString: '100' } }]),
      400,
      'Parameters.parameter[0].part[1].value',
    ],
    [
      'a negative fee',
      parameters([{ code: 'lab', fee: aed(-5) }]),
      422,
      'Parameters.parameter[0].part[1].valueMoney.value',
    ],
    [
      'a fee in another currency',
      parameters([{ code: 'lab', fee: { valueMoney: { value: 100, currency: 'USD' } } }]),
      422,
      'Parameters.parameter[0].part[1].valueMoney.currency',
    ],
    [
      'a fee with more than 2 decimals',
      parameters([{ code: 'lab', fee: aed(10.005) }]),
      422,
      'Parameters.parameter[0].part[1].valueMoney.value',
    ],
    [
      'an unknown category system',
      parameters([{ system: 'urn:other', code: 'lab', fee: aed(100) }]),
      422,
      'Parameters.parameter[0].part[0].valueCoding.system',
    ],
    [
      'an unknown category code',
      parameters([{ code: 'no-such', fee: aed(100) }]),
      422,
      'Parameters.parameter[0].part[0].valueCoding.code',
    ],
    [
      'an item without a fee',
      {
        resourceType: 'Parameters',
        parameter: [
          { name: 'item', part: [{ name: 'category', valueCoding: { system: SERVICE, code: 'lab' } }] },
        ],
      },
      400,
      'Parameters.parameter[0].part',
    ],
  ])('refuses %s with %d and its expression, the CER unchanged', async (_name, body, status, expression) => {
    const before = await request(h.url).get(eligible).set(h.auth);
    const res = await post(eligible, body);
    expect(res.status).toBe(status);
    expectValidFhir(res.body);
    const issues = (res.body as OperationOutcome).issue;
    expect(issues.flatMap((i) => i.expression ?? [])).toContain(expression);
    const after = await request(h.url).get(eligible).set(h.auth);
    expect(after.body).toEqual(before.body);
  });

  it('refuses a body that is not JSON with 400', async () => {
    const res = await post(eligible, '{"resourceType": "Parameters",');
    expect(res.status).toBe(400);
    expectValidFhir(res.body);
  });

  it('needs the scope system/CoverageEligibilityResponse.rs, and is audited', async () => {
    const token = await accessToken(
      h.url,
      tokenUrl,
      'reader',
      readerKey,
      'system/CoverageEligibilityResponse.r',
    );
    const body = parameters([{ code: 'lab', fee: aed(100) }]);
    const refused = await post(eligible, body, { Authorization: `Bearer ${token}` });
    expect(refused.status).toBe(403);
    expectValidFhir(refused.body);
    expect((await post(eligible, body)).status).toBe(200);
    const id = eligible.split('/').pop() ?? '';
    const find = async (query: string, pick: (e: AuditEvent) => boolean) => {
      const res = await request(h.url).get(`/fhir/AuditEvent?${query}&_count=100`).set(h.auth);
      return ((res.body as Bundle).entry ?? [])
        .map((e) => e.resource as AuditEvent)
        .find((e) => e.subtype?.some((s) => s.code === '$estimate') && pick(e));
    };
    const refusal = await until(() => find('agent=reader', (e) => e.outcome !== '0'));
    const done = await until(() =>
      find(`entity=CoverageEligibilityResponse/${id}`, (e) => e.outcome === '0'),
    );
    expectValidFhir(refusal);
    expectValidFhir(done);
    expect(refusal.outcomeDesc).toContain('system/CoverageEligibilityResponse.rs');
  });

  it('is published as an OperationDefinition and declared in the CapabilityStatement', async () => {
    const cs = (await request(h.url).get('/fhir/metadata')).body as CapabilityStatement;
    expectValidFhir(cs);
    const op = cs.rest?.[0]?.resource
      ?.find((r) => r.type === 'CoverageEligibilityResponse')
      ?.operation?.find((o) => o.name === 'estimate');
    expect(op?.definition).toBe(
      'http://fhir-eligibility-adapter.org/fhir/OperationDefinition/CoverageEligibilityResponse-estimate',
    );
    const def = await request(h.url).get('/fhir/OperationDefinition/CoverageEligibilityResponse-estimate');
    expect(def.status).toBe(200);
    expectValidFhir(def.body);
    expect(def.body).toMatchObject({
      code: 'estimate',
      instance: true,
      resource: ['CoverageEligibilityResponse'],
    });
  });
});
