/**
 * Search and vread over HTTP, as a FHIR client uses them (https://hl7.org/fhir/R4/search.html,
 * http.html#vread): every test asserts the exact set of ids a search returns, and every Bundle
 * validates. Tenant A holds five checks, tenant B one with the same patient and identifier as
 * A's first, which A must never see.
 */
import type { Bundle, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const CER = '/fhir/CoverageEligibilityResponse';
const REQ = '/fhir/CoverageEligibilityRequest';
const EID = 'http://uae.gov/fhir/identifier/emirates-id';
const VISIT = 'urn:example:ehr:eligibility';
const RUN = `s${Date.now()}`;

interface Stored {
  id: string;
  patient: string;
  identifier: string;
  payer: string;
  outcome: CoverageEligibilityResponse['outcome'];
  lastUpdated: string;
  /** Before and after the check was accepted (its creation time lies between). */
  before: number;
  after: number;
}

let h: Harness;
const a: Stored[] = [];
let b: Stored;

async function submit(auth: Record<string, string>, options: RequestOptions): Promise<Stored> {
  const before = Date.now();
  await new Promise((r) => setTimeout(r, 5));
  const res = await postSubmit(h.url, auth, options, { Prefer: 'wait=20' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const cer = res.body as CoverageEligibilityResponse;
  expect(cer.outcome).not.toBe('queued');
  await new Promise((r) => setTimeout(r, 5));
  return {
    id: cer.id!,
    patient: options.emiratesId!,
    identifier: String(options.identifier),
    payer: options.payer ?? 'DAMAN',
    outcome: cer.outcome,
    lastUpdated: String(cer.meta?.lastUpdated),
    before,
    after: Date.now(),
  };
}

beforeAll(async () => {
  h = await startHarness();
  const specs: RequestOptions[] = [
    { emiratesId: '784-1990-0000001-0', payer: 'DAMAN', identifier: `${RUN}-1` },
    { emiratesId: '784-1990-0000002-8', payer: 'NAS', identifier: `${RUN}-2` },
    { emiratesId: '784-1990-0000009-3', payer: 'DAMAN', identifier: `${RUN}-3` },
    { emiratesId: '784-1990-0000001-0', payer: 'NAS', identifier: `${RUN}-4` },
    { emiratesId: '784-1990-0000003-6', payer: 'AXA', identifier: `${RUN}-5` },
  ];
  for (const spec of specs) a.push(await submit(h.auth, spec));
  b = await submit(h.authB, specs[0]!);
}, 60_000);

afterAll(async () => {
  await h.stop();
});

async function search(path: string, headers: Record<string, string> = {}): Promise<Bundle> {
  const res = await request(h.url).get(path).set(h.auth).set(headers);
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
  expectValidFhir(res.body);
  const bundle = res.body as Bundle;
  expect(bundle.type).toBe('searchset');
  return bundle;
}

/** The ids of the matches of a search, sorted (a set), after checking the total agrees. */
async function ids(path: string, headers: Record<string, string> = {}): Promise<string[]> {
  const bundle = await search(path, headers);
  const found = (bundle.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource!.id!);
  if (bundle.total !== undefined) expect(bundle.total, path).toBe(found.length);
  return found.sort();
}

function idsOf(checks: Stored[]): string[] {
  return checks.map((check) => check.id).sort();
}

function where(test: (check: Stored) => boolean): string[] {
  return idsOf(a.filter(test));
}

async function refused(path: string, parameter: string, headers: Record<string, string> = {}) {
  const res = await request(h.url).get(path).set(h.auth).set(headers);
  expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(400);
  expectValidFhir(res.body);
  const issue = (res.body as OperationOutcome).issue[0]!;
  expect(issue.expression).toEqual([parameter]);
}

describe('CoverageEligibilityResponse search: never wider than asked', () => {
  it('_id, identifier and patient:identifier no longer return every check (the issue)', async () => {
    expect(await ids(`${CER}?_id=${a[2]!.id}`)).toEqual([a[2]!.id]);
    expect(await ids(`${CER}?_id=${a[2]!.id},${a[0]!.id}`)).toEqual(idsOf([a[0]!, a[2]!]));
    expect(await ids(`${CER}?_id=${b.id}`)).toEqual([]); // another tenant's
    // The CER has no identifier of its own: nothing, never everything.
    expect(await ids(`${CER}?identifier=${VISIT}|${a[0]!.identifier}`)).toEqual([]);
    expect(await ids(`${CER}?identifier=${a[0]!.identifier}`)).toEqual([]);
    expect(await ids(`${CER}?patient:identifier=${EID}|784-1990-0000001-0`)).toEqual(
      where((c) => c.patient === '784-1990-0000001-0'),
    );
    const self = (await search(`${CER}?_id=${a[2]!.id}`)).link?.find((l) => l.relation === 'self')?.url;
    expect(self).toContain(`_id=${a[2]!.id}`);
  });

  it('patient: system|value, value, |value, system|, comma = OR, repeat = AND', async () => {
    const p1 = where((c) => c.patient === '784-1990-0000001-0');
    expect(p1).toHaveLength(2);
    expect(await ids(`${CER}?patient=${EID}|784-1990-0000001-0`)).toEqual(p1);
    expect(await ids(`${CER}?patient=784-1990-0000001-0`)).toEqual(p1);
    expect(await ids(`${CER}?patient=|784-1990-0000001-0`)).toEqual([]);
    expect(await ids(`${CER}?patient=urn:other|784-1990-0000001-0`)).toEqual([]);
    expect(await ids(`${CER}?patient=${EID}|`)).toEqual(idsOf(a));
    expect(await ids(`${CER}?patient=784-1990-0000001-0,784-1990-0000002-8`)).toEqual(
      where((c) => ['784-1990-0000001-0', '784-1990-0000002-8'].includes(c.patient)),
    );
    expect(
      await ids(`${CER}?patient=784-1990-0000001-0,784-1990-0000002-8&patient=784-1990-0000002-8`),
    ).toEqual(where((c) => c.patient === '784-1990-0000002-8'));
  });

  it('request and request.identifier', async () => {
    expect(await ids(`${CER}?request=${a[1]!.id}`)).toEqual([a[1]!.id]);
    expect(await ids(`${CER}?request=CoverageEligibilityRequest/${a[1]!.id}`)).toEqual([a[1]!.id]);
    // The base URL the service says it has (its fullUrls): under it an absolute URL is local.
    const self = String((await search(`${CER}?_count=1`)).link?.[0]?.url);
    const base = self.slice(0, self.indexOf('/fhir/'));
    expect(await ids(`${CER}?request=${base}/fhir/CoverageEligibilityRequest/${a[1]!.id}`)).toEqual([
      a[1]!.id,
    ]);
    expect(await ids(`${CER}?request=${b.id}`)).toEqual([]);
    // The same id on another server is not this service's request (search.html#reference).
    const other = `http://other.example/fhir/CoverageEligibilityRequest/${a[1]!.id}`;
    expect(await ids(`${CER}?request=${other}`)).toEqual([]);
    expect(await ids(`${CER}?request=${other},${a[2]!.id}`)).toEqual([a[2]!.id]);
    expect(await ids(`${CER}?request=${h.url}/other/CoverageEligibilityRequest/${a[1]!.id}`)).toEqual([]);
    await refused(`${CER}?request=x/CoverageEligibilityRequest/${a[1]!.id}`, 'request');
    expect(await ids(`${CER}?request.identifier=${VISIT}|${a[3]!.identifier}`)).toEqual([a[3]!.id]);
    expect(await ids(`${CER}?request.identifier=${a[3]!.identifier}`)).toEqual([a[3]!.id]);
    expect(await ids(`${CER}?request.identifier=urn:other|${a[3]!.identifier}`)).toEqual([]);
    expect(await ids(`${CER}?request.identifier=${a[3]!.identifier},${a[4]!.identifier}`)).toEqual(
      idsOf([a[3]!, a[4]!]),
    );
    // Tenant B's check has A's first identifier: A finds only its own.
    expect(await ids(`${CER}?request.identifier=${a[0]!.identifier}`)).toEqual([a[0]!.id]);
  });

  it('request.identifier with a | inside the system matches only its own split', async () => {
    const body = eligibilityRequest({ emiratesId: '784-1990-0000001-0', identifier: `${RUN}-bar` });
    body.identifier = [{ system: 'urn:x|b', value: `${RUN}-bar` }];
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.authB)
      .set('Prefer', 'wait=20')
      .set('Content-Type', 'application/fhir+json')
      .send(body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const id = (res.body as CoverageEligibilityResponse).id!;
    const found = async (query: string) => {
      const got = await request(h.url).get(`${CER}?${query}`).set(h.authB);
      expect(got.status, `${query}: ${JSON.stringify(got.body)}`).toBe(200);
      return ((got.body as Bundle).entry ?? []).map((e) => e.resource!.id);
    };
    const escaped = (s: string) => encodeURIComponent(s);
    // system urn:x|b, value ...-bar: this check.
    expect(await found(`request.identifier=${escaped(`urn:x\\|b|${RUN}-bar`)}`)).toEqual([id]);
    expect(await found(`request.identifier=${escaped('urn:x\\|b|')}`)).toEqual([id]);
    // system urn:x, value b|...-bar, and any value of urn:x: not this check (same stored key).
    expect(await found(`request.identifier=${escaped(`urn:x|b\\|${RUN}-bar`)}`)).toEqual([]);
    expect(await found(`request.identifier=${escaped('urn:x|')}`)).toEqual([]);
  });

  it('insurer (case-insensitive) and outcome (comma = OR)', async () => {
    expect(await ids(`${CER}?insurer=nas`)).toEqual(where((c) => c.payer === 'NAS'));
    expect(await ids(`${CER}?insurer=NAS,axa`)).toEqual(where((c) => c.payer !== 'DAMAN'));
    expect(await ids(`${CER}?outcome=partial`)).toEqual(where((c) => c.outcome === 'partial'));
    expect(where((c) => c.outcome === 'partial')).toEqual([a[2]!.id]);
    expect(await ids(`${CER}?outcome=complete,partial`)).toEqual(
      where((c) => c.outcome === 'complete' || c.outcome === 'partial'),
    );
    expect(await ids(`${CER}?outcome=complete,error`)).toEqual(
      where((c) => c.outcome === 'complete' || c.outcome === 'error'),
    );
  });

  it('_lastUpdated and created: prefixes, precision, repeat = AND', async () => {
    const at = (i: number) => encodeURIComponent(a[i]!.lastUpdated);
    expect(await ids(`${CER}?_lastUpdated=${at(2)}`)).toEqual([a[2]!.id]);
    expect(await ids(`${CER}?_lastUpdated=eq${at(2)}`)).toEqual([a[2]!.id]);
    expect(await ids(`${CER}?_lastUpdated=ne${at(2)}`)).toEqual(where((c) => c !== a[2]));
    expect(await ids(`${CER}?_lastUpdated=ge${at(1)}&_lastUpdated=le${at(3)}`)).toEqual(
      idsOf([a[1]!, a[2]!, a[3]!]),
    );
    expect(await ids(`${CER}?_lastUpdated=gt${at(1)}&_lastUpdated=lt${at(3)}`)).toEqual([a[2]!.id]);
    expect(await ids(`${CER}?_lastUpdated=sa${at(3)}`)).toEqual([a[4]!.id]);
    expect(await ids(`${CER}?_lastUpdated=eb${at(1)}`)).toEqual([a[0]!.id]);
    expect(await ids(`${CER}?_lastUpdated=lt2000-01-01`)).toEqual([]);
    const year = new Date().getUTCFullYear();
    expect(await ids(`${CER}?_lastUpdated=${year}`)).toEqual(idsOf(a));
    // ap: the value's range widened by 10% of its distance from now on each side.
    const today = new Date().toISOString().slice(0, 10);
    expect(await ids(`${CER}?_lastUpdated=ap${today}`)).toEqual(idsOf(a));
    expect(await ids(`${CER}?_lastUpdated=ap2000-01-01`)).toEqual([]);
    const instant = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
    expect(await ids(`${CER}?created=ge${instant(a[2]!.before)}`)).toEqual(idsOf(a.slice(2)));
    expect(await ids(`${CER}?created=ge${instant(a[1]!.before)}&created=lt${instant(a[3]!.before)}`)).toEqual(
      idsOf([a[1]!, a[2]!]),
    );
  });

  it('combinations are ANDed', async () => {
    expect(await ids(`${CER}?patient=784-1990-0000001-0&insurer=NAS`)).toEqual([a[3]!.id]);
    expect(await ids(`${CER}?patient=784-1990-0000001-0&_id=${a[1]!.id}`)).toEqual([]);
    expect(
      await ids(
        `${CER}?insurer=DAMAN&outcome=complete,partial&_lastUpdated=ge${encodeURIComponent(a[1]!.lastUpdated)}`,
      ),
    ).toEqual([a[2]!.id]);
  });
});

describe('CoverageEligibilityResponse search: results and paging', () => {
  it('pages with _count=2 over every match with no gap or duplicate, in the sort asked for', async () => {
    for (const sort of [
      '',
      '&_sort=_lastUpdated',
      '&_sort=-_lastUpdated',
      '&_sort=created',
      '&_sort=-created',
    ]) {
      const seen: string[] = [];
      let next: string | undefined = `${CER}?_count=2${sort}`;
      let pages = 0;
      while (next) {
        const bundle = await search(next);
        expect(bundle.total).toBe(a.length);
        expect((bundle.entry ?? []).length).toBeLessThanOrEqual(2);
        seen.push(...(bundle.entry ?? []).map((e) => e.resource!.id!));
        const link = bundle.link?.find((l) => l.relation === 'next')?.url;
        next = link ? new URL(link).pathname + new URL(link).search : undefined;
        pages += 1;
      }
      expect(pages).toBe(3);
      const ascending = a.map((c) => c.id);
      const expected =
        sort === '&_sort=_lastUpdated' || sort === '&_sort=created' ? ascending : [...ascending].reverse();
      expect(seen, sort).toEqual(expected);
    }
  });

  it('_count is clamped, _count=0 and _summary=count give the total only, _total=none none', async () => {
    const huge = await search(`${CER}?_count=100000000`);
    expect(huge.entry).toHaveLength(a.length);
    expect(huge.link?.find((l) => l.relation === 'self')?.url).toContain('_count=100');
    for (const path of [`${CER}?_summary=count`, `${CER}?_count=0`]) {
      const counted = await search(path);
      expect(counted.total).toBe(a.length);
      expect(counted.entry).toBeUndefined();
    }
    const byPatient = await search(`${CER}?_summary=count&patient=784-1990-0000001-0`);
    expect(byPatient.total).toBe(2);
    const noTotal = await search(`${CER}?_total=none&_count=2`);
    expect(noTotal.total).toBeUndefined();
    expect(noTotal.entry).toHaveLength(2);
    expect(noTotal.link?.some((l) => l.relation === 'next')).toBe(true);
    expect(await ids(`${CER}?_total=accurate&outcome=partial`)).toEqual([a[2]!.id]);
  });

  it('_total=none leaves the total out even where nothing can match', async () => {
    for (const path of [
      `${CER}?identifier=x&_total=none`,
      `${CER}?request=http://other.example/fhir/CoverageEligibilityRequest/x&_total=none`,
    ]) {
      const bundle = await search(path);
      expect(bundle.total, path).toBeUndefined();
      expect(bundle.entry, path).toBeUndefined();
    }
    expect((await search(`${CER}?identifier=x`)).total).toBe(0);
  });

  it("_include=CoverageEligibilityResponse:request adds each match's request", async () => {
    const bundle = await search(
      `${CER}?_include=CoverageEligibilityResponse:request&patient=784-1990-0000001-0`,
    );
    const match = (bundle.entry ?? []).filter((e) => e.search?.mode === 'match');
    const included = (bundle.entry ?? []).filter((e) => e.search?.mode === 'include');
    expect(match.map((e) => e.resource!.id).sort()).toEqual(where((c) => c.patient === '784-1990-0000001-0'));
    expect(included.map((e) => `${e.resource!.resourceType}/${e.resource!.id}`).sort()).toEqual(
      match.map((e) => `CoverageEligibilityRequest/${e.resource!.id}`).sort(),
    );
    expect(bundle.total).toBe(2);
  });
});

describe('subsets: _summary=true, _summary=text, _summary=data, _elements', () => {
  const SUBSETTED = {
    system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue',
    code: 'SUBSETTED',
  };
  const MANDATORY = ['status', 'purpose', 'patient', 'created', 'request', 'outcome', 'insurer'];

  it('return the same matches, reduced, tagged SUBSETTED and valid', async () => {
    const full = await search(`${CER}?_id=${a[0]!.id}`);
    const whole = full.entry![0]!.resource as unknown as Record<string, unknown>;
    expect(whole.insurance).toBeDefined();
    const cases: Array<[string, (keys: string[]) => void]> = [
      [
        '_summary=true',
        (keys) => expect(keys.sort()).toEqual(['resourceType', 'id', 'meta', ...MANDATORY].sort()),
      ],
      [
        '_summary=text',
        (keys) => {
          expect(keys.sort()).toEqual(['resourceType', 'id', 'meta', 'text', ...MANDATORY].sort());
          expect(whole.text).toMatchObject({ status: 'generated' });
        },
      ],
      [
        '_summary=data',
        (keys) =>
          expect(keys.filter((k) => k !== 'text').sort()).toEqual(
            Object.keys(whole)
              .filter((k) => k !== 'text')
              .sort(),
          ),
      ],
      [
        '_elements=disposition,insurance',
        (keys) => {
          expect(keys).toEqual(expect.arrayContaining([...MANDATORY, 'disposition', 'insurance']));
          expect(keys).not.toContain('extension');
        },
      ],
      [
        '_elements=outcome',
        (keys) =>
          expect(keys.filter((k) => !['resourceType', 'id', 'meta', 'contained'].includes(k)).sort()).toEqual(
            [...MANDATORY].sort(),
          ),
      ],
    ];
    for (const [param, check] of cases) {
      expect(await ids(`${CER}?${param}&patient=784-1990-0000001-0`), param).toEqual(
        where((c) => c.patient === '784-1990-0000001-0'),
      );
      const bundle = await search(`${CER}?${param}&_id=${a[0]!.id}`);
      const resource = bundle.entry![0]!.resource!;
      expectValidFhir(resource);
      expect(resource.meta?.tag, param).toEqual(expect.arrayContaining([expect.objectContaining(SUBSETTED)]));
      check(Object.keys(resource));
      expect(bundle.link?.find((l) => l.relation === 'self')?.url, param).toContain(param.split('=')[0]);
    }
  });
});

describe('search handling: lenient by default, strict on request', () => {
  it('an unknown parameter is ignored and left out of self; strict refuses it', async () => {
    const lenient = await search(`${CER}?foo=bar&patient=784-1990-0000002-8`);
    expect((lenient.entry ?? []).map((e) => e.resource!.id)).toEqual([a[1]!.id]);
    const self = String(lenient.link?.find((l) => l.relation === 'self')?.url);
    expect(self).not.toContain('foo');
    expect(self).toContain('patient=784-1990-0000002-8');
    await refused(`${CER}?foo=bar&patient=784-1990-0000002-8`, 'foo', { Prefer: 'handling=strict' });
    expect(await ids(`${CER}?foo=bar`, { Prefer: 'handling=lenient' })).toEqual(idsOf(a));
    // Result parameters not served: ignored when lenient, refused when strict.
    expect(await ids(`${CER}?_revinclude=Task:focus&_id=${a[0]!.id}`)).toEqual([a[0]!.id]);
    await refused(`${CER}?_revinclude=Task:focus`, '_revinclude', { Prefer: 'handling=strict' });
  });

  it('a known parameter with an unknown modifier or a wrong value is always 400 naming it', async () => {
    await refused(`${CER}?patient:exact=784-1990-0000001-0`, 'patient:exact');
    await refused(`${CER}?_id:missing=true`, '_id:missing');
    await refused(`${CER}?request.patient=x`, 'request.patient');
    await refused(`${CER}?outcome=nope`, 'outcome');
    await refused(`${CER}?outcome=complete,nope`, 'outcome');
    await refused(`${CER}?_lastUpdated=yesterday`, '_lastUpdated');
    await refused(`${CER}?_lastUpdated=ge2026-13-01`, '_lastUpdated');
    await refused(`${CER}?created=xx2026-01-01`, 'created');
    await refused(`${CER}?_lastUpdated=2026-01-01T10:00`, '_lastUpdated'); // a time needs a zone
    await refused(`${CER}?_count=-1`, '_count');
    await refused(`${CER}?_count=abc`, '_count');
    await refused(`${CER}?_sort=outcome`, '_sort');
    await refused(`${CER}?_total=some`, '_total');
    await refused(`${CER}?_id=a/b`, '_id');
    await refused(`${CER}?request=Patient/x`, 'request');
    await refused(`${CER}?_count=2&_count=3`, '_count');
    await refused(`${CER}?_elements=nothing`, '_elements');
    await refused(`${CER}?_summary=maybe`, '_summary');
    await refused(`${CER}?_summary=true&_elements=outcome`, '_elements');
  });
  it('more query pairs than a search takes: 400 too-costly, never a wider answer', async () => {
    // Past 1,000 pairs the default query parser dropped the rest: patient= was lost and every
    // check answered, even under strict handling.
    const p2 = `patient=784-1990-0000002-8`;
    for (const headers of [{}, { Prefer: 'handling=strict' }]) {
      const res = await request(h.url)
        .get(`${CER}?${'_id=&'.repeat(1000)}${p2}`)
        .set(h.auth)
        .set(headers);
      expect(res.status).toBe(400);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]!.code).toBe('too-costly');
    }
    // Up to the limit every pair is read.
    expect(await ids(`${CER}?${'_id=&'.repeat(99)}${p2}`)).toEqual([a[1]!.id]);
  });
});

describe('CoverageEligibilityRequest search', () => {
  it('by _id, identifier, patient and created, tenant-scoped', async () => {
    expect(await ids(`${REQ}?_id=${a[1]!.id}`)).toEqual([a[1]!.id]);
    expect(await ids(`${REQ}?identifier=${VISIT}|${a[4]!.identifier}`)).toEqual([a[4]!.id]);
    expect(await ids(`${REQ}?identifier=${a[0]!.identifier}`)).toEqual([a[0]!.id]);
    expect(await ids(`${REQ}?identifier=urn:other|${a[0]!.identifier}`)).toEqual([]);
    expect(await ids(`${REQ}?patient=${EID}|784-1990-0000001-0`)).toEqual(
      where((c) => c.patient === '784-1990-0000001-0'),
    );
    expect(await ids(`${REQ}?created=lt${encodeURIComponent(new Date(a[1]!.after).toISOString())}`)).toEqual(
      idsOf([a[0]!, a[1]!]),
    );
    const bundle = await search(`${REQ}?_id=${a[1]!.id}`);
    expect(bundle.entry?.[0]?.resource?.resourceType).toBe('CoverageEligibilityRequest');
    expect(bundle.entry?.[0]?.fullUrl).toMatch(new RegExp(`/fhir/CoverageEligibilityRequest/${a[1]!.id}$`));
    await refused(`${REQ}?outcome=complete`, 'outcome', { Prefer: 'handling=strict' });
    await refused(`${REQ}?identifier:text=x`, 'identifier:text');
  });
});

describe('vread', () => {
  it('serves the current version, and 404 for a version not kept', async () => {
    const current = await request(h.url).get(`${CER}/${a[0]!.id}`).set(h.auth);
    const version = String((current.body as CoverageEligibilityResponse).meta?.versionId);
    const res = await request(h.url).get(`${CER}/${a[0]!.id}/_history/${version}`).set(h.auth);
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    expect(res.body).toEqual(current.body);
    expect(res.headers.etag).toBe(`W/"${version}"`);
    const old = await request(h.url).get(`${CER}/${a[0]!.id}/_history/1`).set(h.auth);
    expect(old.status).toBe(404);
    expectValidFhir(old.body);
    expect(JSON.stringify(old.body)).toContain('past versions are not kept');
    expect((await request(h.url).get(`${CER}/${a[0]!.id}/_history/${version}`).set(h.authB)).status).toBe(
      404,
    );
  });

  it('the CapabilityStatement declares the search parameters and vread without history', async () => {
    const res = await request(h.url).get('/fhir/metadata');
    expectValidFhir(res.body);
    const resources = (res.body as { rest: Array<{ resource: Array<Record<string, unknown>> }> }).rest[0]!
      .resource;
    const cer = resources.find((r) => r.type === 'CoverageEligibilityResponse')!;
    const names = (cer.searchParam as Array<{ name: string; type: string }>).map(
      (p) => `${p.name}:${p.type}`,
    );
    expect(names.sort()).toEqual(
      [
        '_id:token',
        '_lastUpdated:date',
        'batch:token',
        'created:date',
        'identifier:token',
        'insurer:reference',
        'outcome:token',
        'patient:reference',
        'request:reference',
      ].sort(),
    );
    expect(cer.readHistory).toBe(false);
    expect(JSON.stringify(cer.interaction)).not.toContain('history-instance');
    expect(cer.searchInclude).toEqual(['CoverageEligibilityResponse:request']);
    const req = resources.find((r) => r.type === 'CoverageEligibilityRequest')!;
    expect((req.searchParam as Array<{ name: string }>).map((p) => p.name).sort()).toEqual(
      ['_id', 'batch', 'created', 'identifier', 'patient', 'serviced'].sort(),
    );
  });
});
