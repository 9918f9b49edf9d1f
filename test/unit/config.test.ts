import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_TIME_ZONE, hashApiKey, loadConfig } from '../../src/config.js';

function tenantsFile(content: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'tenants-'));
  const file = join(dir, 'tenants.json');
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

const tenant = {
  id: 'clinic-a',
  apiKeys: [`sha256:${hashApiKey('key-a')}`],
  upstream: { apiKey: 'env:CLINIC_A_KEY', clinicId: 'C-001', clientId: 'EHR-1' },
  practiceId: 'P-001',
  maxInFlight: 2,
};

describe('loadConfig', () => {
  it('CORS_ORIGINS: off by default, a comma-separated list of exact origins, anything else refused', () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: 'https://ehr.a.example, http://localhost:3000' }).corsOrigins).toEqual([
      'https://ehr.a.example',
      'http://localhost:3000',
    ]);
    for (const bad of [
      '*',
      'https://ehr.a.example/',
      'https://ehr.a.example/app',
      'ehr.a.example',
      'ftp://x.example',
    ])
      expect(() => loadConfig({ CORS_ORIGINS: bad }), bad).toThrow(ConfigError);
  });

  it('SUBSCRIPTION_RETRY_MINUTES and subscriptionEndpoints: defaults, values, refusals', () => {
    expect(loadConfig({}).subscriptionRetryMinutes).toBe(60);
    expect(loadConfig({ SUBSCRIPTION_RETRY_MINUTES: '5' }).subscriptionRetryMinutes).toBe(5);
    for (const bad of ['0', '-1', 'an hour'])
      expect(() => loadConfig({ SUBSCRIPTION_RETRY_MINUTES: bad }), bad).toThrow(ConfigError);
    const env = { CLINIC_A_KEY: 'k', UPSTREAM_BASE_URL: 'https://u.example/v2/api-integration-v3' };
    const without = loadConfig({ ...env, TENANTS_FILE: tenantsFile({ tenants: [tenant] }) });
    expect(without.tenants[0]?.subscriptionEndpoints).toBeUndefined();
    const prefixes = ['https://engine.example/hooks/', 'http://10.0.0.5:8443/fhir/'];
    const withPrefixes = loadConfig({
      ...env,
      TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, subscriptionEndpoints: prefixes }] }),
    });
    expect(withPrefixes.tenants[0]?.subscriptionEndpoints).toEqual(prefixes);
    for (const bad of [
      'engine.example/hooks',
      'ftp://engine.example/',
      'https://user:pw@engine.example/',
      'https://e.example/?a=1',
    ])
      expect(
        () =>
          loadConfig({
            ...env,
            TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, subscriptionEndpoints: [bad] }] }),
          }),
        bad,
      ).toThrow(ConfigError);
  });

  it('ehrSchedule: defaults, the search parameters as pairs; refusals', () => {
    const env = { CLINIC_A_KEY: 'k', UPSTREAM_BASE_URL: 'https://u.example/v2/api-integration-v3' };
    const key = { kty: 'EC', crv: 'P-384', x: 'x', y: 'y', d: 'd', kid: 'k1', alg: 'ES384' };
    const schedule = {
      fhirBaseUrl: 'https://ehr.example.org/fhir/',
      clientId: 'adapter',
      clientKeys: { keys: [key] },
    };
    const load = (value: unknown) =>
      loadConfig({ ...env, TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, ehrSchedule: value }] }) });
    expect(load(schedule).tenants[0]?.ehrSchedule).toEqual({
      fhirBaseUrl: 'https://ehr.example.org/fhir',
      clientId: 'adapter',
      clientKeys: { keys: [key] },
      scope: 'system/Appointment.rs system/Patient.rs system/Coverage.rs',
      everyMinutes: 15,
      daysAhead: 2,
      search: [],
    });
    expect(
      load({ ...schedule, search: 'location=Location/12&actor=Practitioner/7' }).tenants[0]?.ehrSchedule
        ?.search,
    ).toEqual([
      ['location', 'Location/12'],
      ['actor', 'Practitioner/7'],
    ]);
    expect(
      load({ ...schedule, fhirBaseUrl: 'http://127.0.0.1:8081/fhir' }).tenants[0]?.ehrSchedule?.fhirBaseUrl,
    ).toBe('http://127.0.0.1:8081/fhir');
    for (const [name, bad] of [
      ['http to another host', { ...schedule, fhirBaseUrl: 'http://ehr.example.org/fhir' }],
      ['a public key', { ...schedule, clientKeys: { keys: [{ ...key, d: undefined }] } }],
      ['another algorithm', { ...schedule, clientKeys: { keys: [{ ...key, alg: 'HS256' }] } }],
      ['date in search', { ...schedule, search: 'date=ge2020-01-01' }],
      ['_count in search', { ...schedule, search: '_count=5' }],
      ['everyMinutes 0', { ...schedule, everyMinutes: 0 }],
      ['daysAhead 0', { ...schedule, daysAhead: 0 }],
    ] as const)
      expect(() => load(bad), name).toThrow(/ehrSchedule/);
  });

  it('cdsClients: iss, jwks or jwksUrl, fhirServers prefixes; refusals', () => {
    const env = { CLINIC_A_KEY: 'k', UPSTREAM_BASE_URL: 'https://u.example/v2/api-integration-v3' };
    const jwks = { keys: [{ kty: 'EC', crv: 'P-384', x: 'x', y: 'y' }] };
    const client = { iss: 'https://ehr.example.org', jwks, fhirServers: ['https://ehr.example.org/fhir'] };
    const load = (clients: unknown[], others: unknown[] = []) =>
      loadConfig({
        ...env,
        TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, cdsClients: clients }, ...others] }),
      });
    expect(load([client]).tenants[0]?.cdsClients).toEqual([client]);
    expect(load([]).tenants[0]?.cdsClients).toBeUndefined();
    const second = { ...tenant, id: 'clinic-b', cdsClients: [client] };
    for (const [name, clients, others] of [
      ['both jwks and jwksUrl', [{ ...client, jwksUrl: 'https://ehr.example.org/jwks' }], []],
      ['neither', [{ iss: client.iss, fhirServers: [] }], []],
      [
        'a jwksUrl over http to another host',
        [{ iss: client.iss, jwksUrl: 'http://ehr.example.org/j', fhirServers: [] }],
        [],
      ],
      [
        'a fhirServers entry with a query',
        [{ ...client, fhirServers: ['https://ehr.example.org/fhir?x=1'] }],
        [],
      ],
      [
        'a fhirServers entry with credentials',
        [{ ...client, fhirServers: ['https://u:p@ehr.example.org/fhir'] }],
        [],
      ],
      ['one iss in two tenants', [client], [second]],
    ] as [string, unknown[], unknown[]][])
      expect(() => load(clients, others), name).toThrow(ConfigError);
  });

  it('uses the documented defaults and the sandbox tenant when nothing is set', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      publicBaseUrl: null,
      upstreamBaseUrl: null,
      sandbox: true,
      databaseUrl: 'sqlite:data/adapter.db',
      pollIntervalMs: 5000,
      pollStrategy: 'adaptive',
      minPollGapMs: 1000,
      submitWaitMs: 20000,
      checkTimeoutMs: 300000,
      searchAllTimeoutMs: 600000,
      sourceFhirBaseUrl: null,
      logLevel: 'info',
    });
    expect(config.tenants).toHaveLength(1);
    expect(config.tenants[0]).toMatchObject({ id: 'sandbox', apiKeyHashes: [hashApiKey('sandbox')] });
  });

  it('gives the sandbox tenant SANDBOX_SUBSCRIPTION_ENDPOINTS, checked as a tenants file entry', () => {
    expect(loadConfig({}).tenants[0]!.subscriptionEndpoints).toBeUndefined();
    const config = loadConfig({
      SANDBOX_SUBSCRIPTION_ENDPOINTS: 'http://127.0.0.1:9000/hooks/, http://localhost:9000/hooks/',
    });
    expect(config.tenants[0]!.subscriptionEndpoints).toEqual([
      'http://127.0.0.1:9000/hooks/',
      'http://localhost:9000/hooks/',
    ]);
    for (const bad of ['ftp://127.0.0.1/x', 'http://u:p@127.0.0.1/', 'http://127.0.0.1/?q=1', 'not a url'])
      expect(() => loadConfig({ SANDBOX_SUBSCRIPTION_ENDPOINTS: bad }), bad).toThrow(ConfigError);
    expect(() =>
      loadConfig({
        SANDBOX_SUBSCRIPTION_ENDPOINTS: 'http://127.0.0.1:9000/',
        TENANTS_FILE: tenantsFile({ tenants: [tenant] }),
        CLINIC_A_KEY: 'upstream-secret',
      }),
    ).toThrow(/SANDBOX_SUBSCRIPTION_ENDPOINTS/);
  });

  it('reads a tenants file and resolves env: references', () => {
    const config = loadConfig({
      UPSTREAM_BASE_URL: 'https://upstream.example/v2/api-integration-v3/',
      TENANTS_FILE: tenantsFile({ tenants: [tenant] }),
      CLINIC_A_KEY: 'upstream-secret',
    });
    expect(config.sandbox).toBe(false);
    expect(config.upstreamBaseUrl).toBe('https://upstream.example/v2/api-integration-v3');
    expect(config.tenants[0]).toEqual({
      id: 'clinic-a',
      apiKeyHashes: [hashApiKey('key-a')],
      upstream: { apiKey: 'upstream-secret', clinicId: 'C-001', clientId: 'EHR-1' },
      practiceId: 'P-001',
      maxInFlight: 2,
      reuseWindowMinutes: 240,
    });
  });

  it('reuseWindowMinutes: 240 by default, 0 turns reuse off, a negative or fractional value is refused', () => {
    const env = (reuseWindowMinutes: unknown) => ({
      UPSTREAM_BASE_URL: 'https://upstream.example/v2/api-integration-v3',
      TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, reuseWindowMinutes }] }),
      CLINIC_A_KEY: 'upstream-secret',
    });
    expect(loadConfig(env(0)).tenants[0]?.reuseWindowMinutes).toBe(0);
    expect(loadConfig(env(30)).tenants[0]?.reuseWindowMinutes).toBe(30);
    for (const bad of [-1, 1.5, '60'])
      expect(() => loadConfig(env(bad)), String(bad)).toThrow(/reuseWindowMinutes/);
  });

  it('timeZone: absent by default (the page shows Asia/Dubai), an IANA name kept, anything else refused', () => {
    const env = (extra: Record<string, unknown>) => ({
      UPSTREAM_BASE_URL: 'https://upstream.example/v2/api-integration-v3',
      TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, ...extra }] }),
      CLINIC_A_KEY: 'upstream-secret',
    });
    expect(loadConfig(env({})).tenants[0]?.timeZone).toBeUndefined();
    expect(DEFAULT_TIME_ZONE).toBe('Asia/Dubai');
    expect(loadConfig(env({ timeZone: 'Asia/Riyadh' })).tenants[0]?.timeZone).toBe('Asia/Riyadh');
    for (const bad of ['Gulf/Nowhere', '', 4])
      expect(() => loadConfig(env({ timeZone: bad })), String(bad)).toThrow(/timeZone/);
  });

  it('pre-visit settings: PREVISIT_LEAD_MINUTES (120, decimals allowed) and the tenant fields, refused when wrong', () => {
    expect(loadConfig({}).previsitLeadMinutes).toBe(120);
    expect(loadConfig({ PREVISIT_LEAD_MINUTES: '0' }).previsitLeadMinutes).toBe(0);
    expect(loadConfig({ PREVISIT_LEAD_MINUTES: '90.5' }).previsitLeadMinutes).toBe(90.5);
    const env = (fields: Record<string, unknown>) => ({
      UPSTREAM_BASE_URL: 'https://upstream.example/v2/api-integration-v3',
      TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, ...fields }] }),
      CLINIC_A_KEY: 'upstream-secret',
    });
    expect(
      loadConfig(env({ previsitLeadMinutes: 45.5, previsitDayStart: '09:30', timeZone: 'Europe/London' }))
        .tenants[0],
    ).toMatchObject({ previsitLeadMinutes: 45.5, previsitDayStart: '09:30', timeZone: 'Europe/London' });
    for (const [fields, named] of [
      [{ previsitLeadMinutes: -5 }, /previsitLeadMinutes/],
      [{ previsitLeadMinutes: '60' }, /previsitLeadMinutes/],
      [{ previsitDayStart: '8am' }, /previsitDayStart/],
      [{ timeZone: 'Mars/Olympus' }, /timeZone/],
    ] as const)
      expect(() => loadConfig(env(fields)), JSON.stringify(fields)).toThrow(named);
  });

  it.each([
    [{ PORT: 'eighty' }, /^PORT: /],
    [{ PORT: '70000' }, /^PORT: /],
    [{ POLL_INTERVAL_MS: '-5' }, /^POLL_INTERVAL_MS: /],
    [{ POLL_STRATEGY: 'eager' }, /^POLL_STRATEGY: /],
    [{ MIN_POLL_GAP_MS: '-1' }, /^MIN_POLL_GAP_MS: /],
    [{ DATABASE_URL: 'mysql://x' }, /^DATABASE_URL: /],
    [{ UPSTREAM_BASE_URL: 'https://upstream.example/v1' }, /^UPSTREAM_BASE_URL: /],
    [{ UPSTREAM_BASE_URL: 'https://upstream.example/v2/api-integration-v3' }, /^TENANTS_FILE: required/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: /],
    [{ PUBLIC_BASE_URL: 'not a url' }, /^PUBLIC_BASE_URL: /],
    [{ PREVISIT_LEAD_MINUTES: '-1' }, /^PREVISIT_LEAD_MINUTES: /],
    [{ PREVISIT_LEAD_MINUTES: 'two hours' }, /^PREVISIT_LEAD_MINUTES: /],
    [{ PREVISIT_LEAD_MINUTES: '1e3' }, /^PREVISIT_LEAD_MINUTES: /],
  ])('stops with one line naming the variable for %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('oidc: issuer https or loopback http, a secret or private keys (one of them), roles claim defaulted', () => {
    const env = {
      CLINIC_A_KEY: 'k',
      PAGE_SECRET: 's3cret',
      UPSTREAM_BASE_URL: 'https://u.example/v2/api-integration-v3',
    };
    const load = (oidc: unknown) =>
      loadConfig({ ...env, TENANTS_FILE: tenantsFile({ tenants: [{ ...tenant, oidc }] }) }).tenants[0]?.oidc;
    expect(
      load({
        issuer: 'https://login.example.org/realms/clinic/',
        clientId: 'page',
        clientSecret: 'env:PAGE_SECRET',
      }),
    ).toEqual({
      issuer: 'https://login.example.org/realms/clinic',
      clientId: 'page',
      clientSecret: 's3cret',
      rolesClaim: 'roles',
      operatorRoles: [],
    });
    const key = { kty: 'EC', crv: 'P-256', x: 'x', y: 'y', d: 'd' };
    expect(
      load({
        issuer: 'http://127.0.0.1:9000',
        clientId: 'page',
        clientKeys: { keys: [key] },
        operatorRoles: ['ops'],
      }),
    ).toMatchObject({ clientKeys: { keys: [key] }, operatorRoles: ['ops'] });
    for (const bad of [
      { issuer: 'http://login.example.org', clientId: 'page', clientSecret: 'x' },
      { issuer: 'https://login.example.org', clientId: 'page' },
      {
        issuer: 'https://login.example.org',
        clientId: 'page',
        clientSecret: 'x',
        clientKeys: { keys: [key] },
      },
      { issuer: 'https://login.example.org', clientId: 'page', clientKeys: { keys: [{ kty: 'EC' }] } },
    ])
      expect(() => load(bad), JSON.stringify(bad)).toThrow(/oidc/);
  });

  it('SESSION_IDLE_MINUTES and SESSION_MAX_HOURS: 15 and 12 by default, positive numbers only', () => {
    expect(loadConfig({})).toMatchObject({ sessionIdleMinutes: 15, sessionMaxHours: 12 });
    expect(loadConfig({ SESSION_IDLE_MINUTES: '0.5', SESSION_MAX_HOURS: '8' })).toMatchObject({
      sessionIdleMinutes: 0.5,
      sessionMaxHours: 8,
    });
    for (const bad of ['0', '-1', 'soon']) {
      expect(() => loadConfig({ SESSION_IDLE_MINUTES: bad }), bad).toThrow(/SESSION_IDLE_MINUTES/);
      expect(() => loadConfig({ SESSION_MAX_HOURS: bad }), bad).toThrow(/SESSION_MAX_HOURS/);
    }
  });

  it('resolves env: in every string value of a tenant, not only the key', () => {
    const indirect = {
      ...tenant,
      upstream: { apiKey: 'env:CLINIC_A_KEY', clinicId: 'env:CLINIC_A_ID', clientId: 'env:EHR_ID' },
      practiceId: 'env:PRACTICE_A',
    };
    const config = loadConfig({
      UPSTREAM_BASE_URL: 'https://upstream.example/v2/api-integration-v3',
      TENANTS_FILE: tenantsFile({ tenants: [indirect] }),
      CLINIC_A_KEY: 'upstream-secret',
      CLINIC_A_ID: 'C-777',
      EHR_ID: 'EHR-9',
      PRACTICE_A: 'P-42',
    });
    expect(config.tenants[0]?.upstream).toEqual({
      apiKey: 'upstream-secret',
      clinicId: 'C-777',
      clientId: 'EHR-9',
    });
    expect(config.tenants[0]?.practiceId).toBe('P-42');
    expect(() =>
      loadConfig({
        TENANTS_FILE: tenantsFile({ tenants: [indirect] }),
        CLINIC_A_KEY: 'x',
        EHR_ID: 'y',
        PRACTICE_A: 'z',
      }),
    ).toThrow(/TENANTS_FILE: .*CLINIC_A_ID is not set/);
  });

  it('names a missing env: secret of the tenants file', () => {
    const env = { TENANTS_FILE: tenantsFile({ tenants: [tenant] }) };
    expect(() => loadConfig(env)).toThrow(/TENANTS_FILE: .*CLINIC_A_KEY is not set/);
  });

  it('refuses a tenants file that is not JSON, a bad key hash, or a duplicate tenant', () => {
    expect(() => loadConfig({ TENANTS_FILE: tenantsFile('{ nope') })).toThrow(/TENANTS_FILE: cannot read/);
    const badKey = { tenants: [{ ...tenant, apiKeys: ['plain-key'] }] };
    expect(() => loadConfig({ TENANTS_FILE: tenantsFile(badKey), CLINIC_A_KEY: 'x' })).toThrow(/apiKeys/);
    const twice = { tenants: [tenant, tenant] };
    expect(() => loadConfig({ TENANTS_FILE: tenantsFile(twice), CLINIC_A_KEY: 'x' })).toThrow(
      /appears twice/,
    );
  });
});
