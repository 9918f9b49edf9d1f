/**
 * What a validator and a tester fetch over HTTP (docs/validation.md): GET /fhir/package.tgz and
 * GET /fhir/{type}?url= without authentication, the CapabilityStatement naming the guide and the
 * profiles, and the emitted resources naming their profiles; bad input to the searches is a 4xx
 * OperationOutcome with an expression or an empty Bundle, never a 500.
 */
import type { Bundle, CapabilityStatement, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CANONICAL_BASE, PROFILES } from '../../src/fhir/canonical.js';
import { deterministicTgz } from '../../src/fhir/tarball.js';
import { packageFiles } from '../../src/mapping/conformance/package.js';
import { expectValidFhir } from '../support/fhir.js';
import { startHarness, type Harness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ timeScale: 0.01 });
});
afterAll(async () => {
  await h.stop();
});

/** Supertest's body of a binary answer, as bytes. */
function binary(res: request.Response): Buffer {
  return res.body as Buffer;
}
const asBuffer = (r: request.Request) =>
  r.buffer(true).parse((res, done) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => done(null, Buffer.concat(chunks)));
  });

describe('GET /fhir/package.tgz', () => {
  it('answers the package without authentication, the same bytes npm run fhir-package writes', async () => {
    const res = await asBuffer(request(h.url).get('/fhir/package.tgz').set('Accept', '*/*'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/gzip');
    expect(res.headers.etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(binary(res).equals(await deterministicTgz(packageFiles()))).toBe(true);
  });

  it('answers 304 to If-None-Match with its ETag, whatever Accept says', async () => {
    const first = await asBuffer(request(h.url).get('/fhir/package.tgz'));
    const again = await request(h.url)
      .get('/fhir/package.tgz')
      .set('If-None-Match', String(first.headers.etag))
      .set('Accept', 'application/tar+gzip');
    expect(again.status).toBe(304);
  });
});

describe('GET /fhir/{type}?url= (canonical resolution)', () => {
  it.each([
    ['StructureDefinition', PROFILES.eligibilityResponse],
    ['StructureDefinition', `${CANONICAL_BASE}/StructureDefinition/upstream-outcome`],
    [
      'StructureDefinition',
      'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription',
    ],
    ['CodeSystem', `${CANONICAL_BASE}/CodeSystem/adapter-outcome`],
    ['ValueSet', `${CANONICAL_BASE}/ValueSet/portal-message-type`],
    ['ConceptMap', `${CANONICAL_BASE}/ConceptMap/service-category-to-benefit-category`],
    ['OperationDefinition', `${CANONICAL_BASE}/OperationDefinition/CoverageEligibilityRequest-submit`],
    ['SearchParameter', `${CANONICAL_BASE}/SearchParameter/CoverageEligibilityRequest-serviced`],
    ['ImplementationGuide', `${CANONICAL_BASE}/ImplementationGuide/fhir-eligibility-adapter`],
  ])('finds the %s %s without authentication', async (type, url) => {
    const res = await request(h.url).get(`/fhir/${type}`).query({ url });
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    const bundle = res.body as Bundle;
    expect(bundle).toMatchObject({ type: 'searchset', total: 1 });
    expect(bundle.entry?.[0]?.resource).toMatchObject({ resourceType: type, url });
    const byVersion = await request(h.url)
      .get(`/fhir/${type}`)
      .query({ url: `${url}|0.0.0-none` });
    expect((byVersion.body as Bundle).total).toBe(0);
  });

  it('answers the profile with its snapshot, and with the version given', async () => {
    const res = await request(h.url)
      .get('/fhir/StructureDefinition')
      .query({ url: PROFILES.eligibilityResponse, version: '0.1.0' });
    const sd = (res.body as Bundle).entry?.[0]?.resource as { snapshot?: { element: unknown[] } };
    expect(sd.snapshot?.element.length).toBeGreaterThan(50);
  });

  it.each([
    ['an unknown canonical', { url: `${CANONICAL_BASE}/StructureDefinition/nothing-here` }],
    ['junk', { url: '\u0001<script>%%%' }],
    ['a canonical of another type', { url: `${CANONICAL_BASE}/CodeSystem/adapter-outcome` }],
    ['an unknown parameter', { url: PROFILES.eligibilityResponse, version: 'x', _sort: 'url', foo: 'bar' }],
  ])('answers an empty searchset to %s', async (_name, query) => {
    const res = await request(h.url).get('/fhir/StructureDefinition').query(query);
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    expect((res.body as Bundle).total).toBe(0);
  });

  it.each([
    ['a repeated url', '?url=a&url=b', 'url'],
    ['a very long url', `?url=${'x'.repeat(5000)}`, 'url'],
    [
      'a repeated version',
      `?url=${encodeURIComponent(PROFILES.eligibilityResponse)}&version=1&version=2`,
      'version',
    ],
  ])('answers 400 with an expression to %s', async (_name, query, expression) => {
    const res = await request(h.url).get(`/fhir/StructureDefinition${query}`);
    expect(res.status).toBe(400);
    expectValidFhir(res.body);
    expect((res.body as OperationOutcome).issue[0]?.expression).toEqual([expression]);
  });

  it('ignores a thousand parameters it does not know, and refuses one under Prefer: handling=strict', async () => {
    const many = Array.from({ length: 1000 }, (_, i) => `p${i}=${i}`).join('&');
    const res = await request(h.url).get(`/fhir/CodeSystem?${many}`);
    expect(res.status).toBe(200);
    expect((res.body as Bundle).total).toBeGreaterThan(0);
    const strict = await request(h.url).get('/fhir/CodeSystem?foo=1').set('Prefer', 'handling=strict');
    expect(strict.status).toBe(400);
    expect((strict.body as OperationOutcome).issue[0]?.expression).toEqual(['foo']);
  });
});

describe('profiles where a validator looks for them', () => {
  it('the CapabilityStatement names the guide and the profiles, and keeps its date across starts', async () => {
    const cs = (await request(h.url).get('/fhir/metadata')).body as CapabilityStatement;
    expectValidFhir(cs);
    expect(cs.implementationGuide).toEqual([
      `${CANONICAL_BASE}/ImplementationGuide/fhir-eligibility-adapter`,
    ]);
    const resources = cs.rest?.[0]?.resource ?? [];
    expect(resources.find((r) => r.type === 'CoverageEligibilityResponse')?.supportedProfile).toEqual([
      PROFILES.eligibilityResponse,
    ]);
    expect(resources.find((r) => r.type === 'CoverageEligibilityRequest')?.supportedProfile).toEqual([
      PROFILES.eligibilityRequest,
    ]);
    const other = await startHarness();
    try {
      const again = (await request(other.url).get('/fhir/metadata')).body as CapabilityStatement;
      expect(again.date).toBe(cs.date);
    } finally {
      await other.stop();
    }
  });

  it('a found CER, its contained Coverage and its stored request name their profiles', async () => {
    const submit = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Prefer', 'wait=30')
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
    const cer = submit.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expectValidFhir(cer);
    expect(cer.meta?.profile).toEqual([PROFILES.eligibilityResponse]);
    const coverage = cer.contained?.find((r) => r.resourceType === 'Coverage');
    expect(coverage?.meta?.profile).toEqual([PROFILES.portalCoverage]);
    const stored = await request(h.url)
      .get(`/fhir/${cer.request.reference ?? ''}`)
      .set(h.auth);
    expect(stored.status).toBe(200);
    expectValidFhir(stored.body);
    expect((stored.body as { meta?: { profile?: string[] } }).meta?.profile).toEqual([
      PROFILES.eligibilityRequest,
    ]);
  });
});
