/**
 * The service as an EHR sees it, through a real FHIR client library (fhir-kit-client):
 * capability statement, $submit, read, search and next-page navigation.
 */
import type { Bundle, CapabilityStatement, CoverageEligibilityResponse } from 'fhir/r4.js';
import { Client } from 'fhir-kit-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness, TENANT_A_KEY } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

let h: Harness;
let client: Client;

beforeAll(async () => {
  h = await startHarness();
  client = new Client({ baseUrl: `${h.url}/fhir`, bearerToken: TENANT_A_KEY });
});
afterAll(async () => {
  await h.stop();
});

describe('an EHR using fhir-kit-client', () => {
  it('reads the CapabilityStatement', async () => {
    const capability = (await client.capabilityStatement()) as unknown as CapabilityStatement;
    expectValidFhir(capability);
    expect(capability.fhirVersion).toBe('4.0.1');
  });

  it('runs $submit, reads the CER back, and finds it by search', async () => {
    const cer = (await client.operation({
      name: '$submit',
      resourceType: 'CoverageEligibilityRequest',
      input: eligibilityRequest({ emiratesId: '784-1990-0000001-0' }) as never,
    })) as unknown as CoverageEligibilityResponse;
    expectValidFhir(cer);
    expect(cer.resourceType).toBe('CoverageEligibilityResponse');
    expect(cer.outcome).toBe('complete');
    // The read and the search below compare ids: an id-less CER would make them undefined === undefined.
    expect(cer.id).toEqual(expect.any(String));

    const read = (await client.read({
      resourceType: 'CoverageEligibilityResponse',
      id: cer.id ?? '',
    })) as unknown as CoverageEligibilityResponse;
    expect(read.id).toBe(cer.id);
    expect(read.meta?.versionId).toBe(cer.meta?.versionId);

    const found = (await client.search({
      resourceType: 'CoverageEligibilityResponse',
      searchParams: { request: cer.id ?? '' },
    })) as unknown as Bundle;
    expectValidFhir(found);
    expect(found.entry?.[0]?.resource?.id).toBe(cer.id);
  });

  it('pages through search results with the next link', async () => {
    for (let i = 0; i < 3; i += 1) {
      await client.operation({
        name: '$submit',
        resourceType: 'CoverageEligibilityRequest',
        input: eligibilityRequest({ emiratesId: '784-1990-0000002-8' }) as never,
      });
    }
    const first = (await client.search({
      resourceType: 'CoverageEligibilityResponse',
      searchParams: { _count: 2 },
    })) as unknown as Bundle;
    expect(first.entry).toHaveLength(2);
    const next = (await client.nextPage({ bundle: first as never })) as unknown as Bundle;
    expectValidFhir(next);
    expect(next.entry?.length).toBeGreaterThan(0);
    const ids = new Set([...(first.entry ?? []), ...(next.entry ?? [])].map((e) => e.resource?.id));
    expect(ids.size).toBe((first.entry?.length ?? 0) + (next.entry?.length ?? 0));
  });

  it("gets an OperationOutcome error for another tenant's check", async () => {
    const other = new Client({ baseUrl: `${h.url}/fhir`, bearerToken: 'tenant-b-inbound-key-7c2f0a' });
    const cer = (await client.operation({
      name: '$submit',
      resourceType: 'CoverageEligibilityRequest',
      input: eligibilityRequest({ emiratesId: '784-1990-0000001-0' }) as never,
    })) as unknown as CoverageEligibilityResponse;
    await expect(
      other.read({ resourceType: 'CoverageEligibilityResponse', id: cer.id ?? '' }),
    ).rejects.toMatchObject({
      response: { status: 404 },
    });
  });
});
