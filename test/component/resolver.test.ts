/**
 * Literal references resolved through fhir-kit-client against a tiny local FHIR server
 * (express on port 0), and the 422s a front desk sees when that fails.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import type { CoverageEligibilityRequest, CoverageEligibilityResponse, Resource } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationOutcomeError } from '../../src/fhir/outcomes.js';
import { parseSubmit } from '../../src/mapping/request/parse-submit.js';
import {
  createFhirKitResolver,
  ReferenceResolutionError,
  type ReferenceResolver,
} from '../../src/mapping/request/resolver.js';
import { expectValidFhir } from '../support/fhir.js';
import { startHarness, type Harness } from '../support/harness.js';

const V2 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

const resources: Record<string, Resource> = {
  'Patient/p1': {
    resourceType: 'Patient',
    id: 'p1',
    meta: { versionId: '4', lastUpdated: '2026-11-01T10:00:00Z' },
    identifier: [{ type: { coding: [{ system: V2, code: 'NI' }] }, value: '784-1985-7654321-3' }],
    name: [{ given: ['Khalid'], family: 'Serverpatient' }],
    birthDate: '1985-02-03',
    telecom: [{ system: 'phone', value: '+971502223344' }],
  } as Resource,
  'Organization/o1': {
    resourceType: 'Organization',
    id: 'o1',
    identifier: [{ type: { coding: [{ system: V2, code: 'NIIP' }] }, value: 'NEXTCARE' }],
    name: 'NextCare',
  } as Resource,
  'Practitioner/d1': {
    resourceType: 'Practitioner',
    id: 'd1',
    identifier: [{ type: { coding: [{ system: V2, code: 'MD' }] }, value: 'DOH-GP-4455' }],
    name: [{ given: ['Layla'], family: 'Mansour' }],
  } as Resource,
};

let server: Server;
let baseUrl: string;
const seen: string[] = [];

beforeAll(async () => {
  const app = express();
  app.get('/fhir/:type/:id', (req, res) => {
    seen.push(`${req.params.type}/${req.params.id} accept=${req.get('accept') ?? ''}`);
    if (req.params.id === 'slow') {
      setTimeout(() => res.status(200).type('application/fhir+json').send('{}'), 1500);
      return;
    }
    if (req.params.id === 'broken') {
      res.status(500).type('application/fhir+json').send({ resourceType: 'OperationOutcome', issue: [] });
      return;
    }
    const found = ['Patient', 'Organization', 'Practitioner'].includes(req.params.type)
      ? resources[`${req.params.type}/${req.params.id}`]
      : undefined;
    if (found) res.status(200).type('application/fhir+json').send(JSON.stringify(found));
    else
      res
        .status(404)
        .type('application/fhir+json')
        .send(
          JSON.stringify({
            resourceType: 'OperationOutcome',
            issue: [
              { severity: 'error', code: 'not-found', diagnostics: `${req.params.type}/${req.params.id}` },
            ],
          }),
        );
  });
  server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/fhir`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function literalRequest(overrides: Partial<CoverageEligibilityRequest> = {}): CoverageEligibilityRequest {
  return {
    resourceType: 'CoverageEligibilityRequest',
    identifier: [{ system: 'urn:example:ehr:eligibility', value: 'visit-lit-1' }],
    status: 'active',
    purpose: ['benefits'],
    created: '2026-11-22',
    patient: { reference: 'Patient/p1' },
    insurer: { reference: 'Organization/o1' },
    provider: { reference: 'Practitioner/d1' },
    ...overrides,
  };
}

async function reason(resolver: ReferenceResolver, reference: string): Promise<string> {
  try {
    await resolver.resolve(reference);
  } catch (error) {
    expect(error).toBeInstanceOf(ReferenceResolutionError);
    return (error as ReferenceResolutionError).reason;
  }
  throw new Error('expected the resolver to fail');
}

describe('createFhirKitResolver', () => {
  it('reads a relative Type/id reference as application/fhir+json', async () => {
    const resource = await createFhirKitResolver(baseUrl).resolve('Patient/p1');
    expect(resource).toMatchObject({ resourceType: 'Patient', id: 'p1' });
    expect(seen).toContain('Patient/p1 accept=application/fhir+json');
  });

  it('reads an absolute reference under the base URL (with or without a trailing slash)', async () => {
    const resource = await createFhirKitResolver(`${baseUrl}/`).resolve(`${baseUrl}/Organization/o1`);
    expect(resource).toMatchObject({ resourceType: 'Organization', id: 'o1' });
  });

  it.each([
    ['a missing resource (404)', 'Patient/nope', 'not-found'],
    ['a type the server does not serve (404)', 'Location/l1', 'not-found'],
    ['a server error (500)', 'Patient/broken', 'server-error'],
    ['an absolute URL on another host', 'https://elsewhere.example/fhir/Patient/p1', 'not-allowed'],
    ['something that is not Type/id', 'Patient?identifier=x', 'not-allowed'],
  ])('fails with a typed reason for %s', async (_name, reference, expected) => {
    expect(await reason(createFhirKitResolver(baseUrl), reference)).toBe(expected);
  });

  it('fails with reason timeout when the server is slower than timeoutMs', async () => {
    expect(await reason(createFhirKitResolver(baseUrl, { timeoutMs: 200 }), 'Patient/slow')).toBe('timeout');
  });

  it('fails with reason unreachable when nothing listens', async () => {
    expect(await reason(createFhirKitResolver('http://127.0.0.1:9/fhir'), 'Patient/p1')).toBe('unreachable');
  });
});

describe('parseSubmit with literal references and SOURCE_FHIR_BASE_URL', () => {
  const options = () => ({
    practiceId: 'P-001',
    now: new Date('2026-11-22T08:30:00Z'),
    resolver: createFhirKitResolver(baseUrl, { timeoutMs: 1000 }),
  });

  it('builds the upstream request from the resources on the EHR server', async () => {
    const input = await parseSubmit(literalRequest(), options());
    expect(input.upstream).toMatchObject({
      emirates_id: '784-1985-7654321-3',
      id_type: 'EMIRATESID',
      name: 'Khalid Serverpatient',
      phone: '+971502223344',
      dob: '1985-02-03',
      tpa_name: 'NEXTCARE',
      payerName: 'NextCare',
      doctorName: 'Layla Mansour',
      doctorId: 'DOH-GP-4455',
    });
    expect(input.patient).toEqual({
      reference: 'Patient/p1',
      identifier: { type: { coding: [{ system: V2, code: 'NI' }] }, value: '784-1985-7654321-3' },
    });
    expect(input.request.patient).toEqual({ reference: 'Patient/p1' });
    expectValidFhir(input.request);
  });

  it.each([
    [
      'a patient the server does not have',
      { patient: { reference: 'Patient/gone' } },
      'CoverageEligibilityRequest.patient',
      'not-found',
      /not found/,
    ],
    [
      'a payer the server fails on',
      { insurer: { reference: 'Organization/broken' } },
      'CoverageEligibilityRequest.insurer',
      'processing',
      /could not return/,
    ],
    [
      'a doctor on another host',
      { provider: { reference: 'https://other.example/fhir/Practitioner/d1' } },
      'CoverageEligibilityRequest.provider',
      'value',
      /outside/,
    ],
  ])('answers 422 for %s, without a stack', async (_name, overrides, expression, code, text) => {
    const error = await parseSubmit(literalRequest(overrides), options()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OperationOutcomeError);
    const { status, outcome } = error as OperationOutcomeError;
    expect(status).toBe(422);
    expect(outcome.issue[0]).toMatchObject({ code, expression: [expression] });
    expect(outcome.issue[0]?.details?.text).toMatch(text);
    expect(JSON.stringify(outcome)).not.toMatch(/node_modules|\.js:\d+|at async/);
  });
});

describe('SOURCE_FHIR_BASE_URL wired into the running service', () => {
  let h: Harness | undefined;

  afterAll(async () => {
    await h?.stop();
  });

  it('answers $submit over HTTP with a valid CER when the patient is a literal reference on the EHR server', async () => {
    h = await startHarness({ sourceFhirBaseUrl: baseUrl });
    const before = seen.length;
    const res = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$submit')
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(
        literalRequest({ identifier: [{ system: 'urn:example:ehr:eligibility', value: 'visit-lit-http' }] }),
      );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const cer = res.body as CoverageEligibilityResponse;
    expectValidFhir(cer);
    expect(cer.resourceType).toBe('CoverageEligibilityResponse');
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance?.[0]?.inforce).toBe(true);
    // The literal reference is kept, and the server was asked for each referenced resource.
    expect(cer.patient.reference).toBe('Patient/p1');
    const fetched = seen.slice(before).map((line) => line.split(' ')[0]);
    expect(fetched).toEqual(expect.arrayContaining(['Patient/p1', 'Organization/o1', 'Practitioner/d1']));
    // The upstream task was created for the payer of the Organization on the EHR server.
    expect(h.sandbox.control.tasks().map((t) => t.scenario)).toEqual(['default-eligible']);
    expect(cer.insurer.identifier?.value).toBe('NEXTCARE');
  });
});
