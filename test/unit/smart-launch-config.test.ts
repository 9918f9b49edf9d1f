/**
 * The tenants file's `smartLaunch` (docs/smart-launch.md): EHR FHIR bases, client id, a
 * confidential client's private keys; what is refused, and no key in the refusal's line.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, hashApiKey, loadConfig } from '../../src/config.js';

const tenant = {
  id: 'clinic-a',
  apiKeys: [`sha256:${hashApiKey('key-a')}`],
  upstream: { apiKey: 'k', clinicId: 'C-001', clientId: 'EHR-1' },
  practiceId: 'P-001',
};
const SECRET_D = 'private-part-of-the-key-never-in-a-log-line';
const key = { kty: 'EC', crv: 'P-384', x: 'x', y: 'y', d: SECRET_D, kid: 'page-1', alg: 'ES384' };

function load(...tenants: unknown[]) {
  const dir = mkdtempSync(join(tmpdir(), 'tenants-'));
  const file = join(dir, 'tenants.json');
  writeFileSync(file, JSON.stringify({ tenants }));
  return loadConfig({ UPSTREAM_BASE_URL: 'https://u.example/v2/api-integration-v3', TENANTS_FILE: file });
}

describe('tenants file smartLaunch', () => {
  it('takes EHR FHIR bases (without a trailing slash), the client id and private keys; absent: none', () => {
    const smartLaunch = {
      fhirBaseUrls: ['https://ehr.example.ae/fhir/r4/', 'http://127.0.0.1:9000/fhir'],
      clientId: 'eligibility-page',
      clientKeys: { keys: [key] },
    };
    expect(load({ ...tenant, smartLaunch }).tenants[0]?.smartLaunch).toEqual({
      ...smartLaunch,
      fhirBaseUrls: ['https://ehr.example.ae/fhir/r4', 'http://127.0.0.1:9000/fhir'],
    });
    const publicClient = { fhirBaseUrls: ['https://ehr.example.ae/fhir'], clientId: 'page' };
    expect(load({ ...tenant, smartLaunch: publicClient }).tenants[0]?.smartLaunch).toEqual(publicClient);
    expect(load(tenant).tenants[0]?.smartLaunch).toBeUndefined();
  });

  it.each([
    ['an http base on another host', { fhirBaseUrls: ['http://ehr.example.ae/fhir'], clientId: 'p' }],
    ['a base with a query', { fhirBaseUrls: ['https://ehr.example.ae/fhir?x=1'], clientId: 'p' }],
    ['a base with credentials', { fhirBaseUrls: ['https://u:p@ehr.example.ae/fhir'], clientId: 'p' }],
    ['no base', { fhirBaseUrls: [], clientId: 'p' }],
    ['no client id', { fhirBaseUrls: ['https://ehr.example.ae/fhir'] }],
    [
      'a public key as clientKeys',
      {
        fhirBaseUrls: ['https://ehr.example.ae/fhir'],
        clientId: 'p',
        clientKeys: { keys: [{ ...key, d: undefined }] },
      },
    ],
    [
      'an algorithm SMART does not name (RS256)',
      {
        fhirBaseUrls: ['https://ehr.example.ae/fhir'],
        clientId: 'p',
        clientKeys: { keys: [{ ...key, alg: 'RS256' }] },
      },
    ],
    [
      'a key without kid',
      {
        fhirBaseUrls: ['https://ehr.example.ae/fhir'],
        clientId: 'p',
        clientKeys: { keys: [{ ...key, kid: undefined }] },
      },
    ],
  ])('refuses %s with one line that names the field, never the key', (_name, smartLaunch) => {
    let error: unknown;
    try {
      load({ ...tenant, smartLaunch });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(String((error as Error).message)).toMatch(/^TENANTS_FILE: tenants\.0\.smartLaunch/);
    expect(String((error as Error).message)).not.toContain(SECRET_D);
  });

  it('refuses one EHR base in two tenants (a launch finds its clinic by iss)', () => {
    const smartLaunch = { fhirBaseUrls: ['https://ehr.example.ae/fhir'], clientId: 'p' };
    expect(() => load({ ...tenant, smartLaunch }, { ...tenant, id: 'clinic-b', smartLaunch })).toThrow(
      /appears twice/,
    );
  });
});
