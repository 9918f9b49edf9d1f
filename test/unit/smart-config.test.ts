/**
 * The SMART parts of the configuration (docs/auth.md): smartClients in the tenants file, where a
 * JWKS may be fetched from, the access-token keys file and its TTL; and the scope rules.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, hashApiKey, isAllowedJwksUrl, loadConfig } from '../../src/config.js';
import { grantScopes, parseScope, permits } from '../../src/operations/auth/scopes.js';

function file(content: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'smart-config-'));
  const path = join(dir, 'file.json');
  writeFileSync(path, JSON.stringify(content));
  return path;
}

const JWK = { kty: 'EC', crv: 'P-384', x: 'x', y: 'y', kid: 'k1' };

function tenantsWith(smartClients: unknown): string {
  return file({
    tenants: [
      {
        id: 'clinic-a',
        apiKeys: [`sha256:${hashApiKey('key-a')}`],
        upstream: { apiKey: 'k', clinicId: 'C-001', clientId: 'EHR-1' },
        practiceId: 'P-001',
        smartClients,
      },
    ],
  });
}

const SIGNING = { kty: 'EC', crv: 'P-256', x: 'x', y: 'y', d: 'd', kid: 's1', alg: 'ES256' };

describe('SMART configuration', () => {
  it('reads smartClients with an inline JWKS or a jwksUrl, and the signing keys file', () => {
    const config = loadConfig({
      TENANTS_FILE: tenantsWith([
        { clientId: 'engine-1', jwks: { keys: [JWK] }, scopes: ['system/CoverageEligibilityRequest.c'] },
        { clientId: 'engine-2', jwksUrl: 'https://keys.example.org/jwks.json', scopes: ['system/*.read'] },
      ]),
      UPSTREAM_BASE_URL: 'https://up.example/v2/api-integration-v3',
      ACCESS_TOKEN_KEYS_FILE: file({ keys: [SIGNING] }),
      ACCESS_TOKEN_TTL_SECONDS: '120',
    });
    expect(config.tenants[0]?.smartClients?.map((c) => c.clientId)).toEqual(['engine-1', 'engine-2']);
    expect(config.accessTokenTtlSeconds).toBe(120);
    expect(config.tokenSigningKeys).toHaveLength(1);
    expect(loadConfig({}).accessTokenTtlSeconds).toBe(300);
    expect(loadConfig({}).auditEvents).toBe(true);
  });

  it('refuses bad clients, a missing keys file outside the sandbox, and a public first key', () => {
    const upstream = { UPSTREAM_BASE_URL: 'https://up.example/v2/api-integration-v3' };
    const keys = { ACCESS_TOKEN_KEYS_FILE: file({ keys: [SIGNING] }) };
    const bad: unknown[] = [
      [{ clientId: 'e', scopes: ['system/*.read'] }],
      [{ clientId: 'e', jwks: { keys: [JWK] }, jwksUrl: 'https://k.example', scopes: ['system/*.read'] }],
      [{ clientId: 'e', jwksUrl: 'http://keys.example.org/jwks.json', scopes: ['system/*.read'] }],
      [{ clientId: 'e', jwks: { keys: [JWK] }, scopes: ['patient/*.read'] }],
      [{ clientId: 'e', jwks: { keys: [JWK] }, scopes: ['system/Coverage.'] }],
      [
        { clientId: 'e', jwks: { keys: [JWK] }, scopes: ['system/*.read'] },
        { clientId: 'e', jwks: { keys: [JWK] }, scopes: ['system/*.read'] },
      ],
    ];
    for (const clients of bad) {
      expect(
        () => loadConfig({ TENANTS_FILE: tenantsWith(clients), ...upstream, ...keys }),
        JSON.stringify(clients),
      ).toThrow(ConfigError);
    }
    const good = tenantsWith([{ clientId: 'e', jwks: { keys: [JWK] }, scopes: ['system/*.read'] }]);
    expect(() => loadConfig({ TENANTS_FILE: good, ...upstream })).toThrow(/ACCESS_TOKEN_KEYS_FILE/);
    const { d: _d, ...publicKey } = SIGNING;
    expect(() =>
      loadConfig({ TENANTS_FILE: good, ...upstream, ACCESS_TOKEN_KEYS_FILE: file({ keys: [publicKey] }) }),
    ).toThrow(/private key/);
    expect(() => loadConfig({ ACCESS_TOKEN_TTL_SECONDS: '5' })).toThrow(/ACCESS_TOKEN_TTL_SECONDS/);
  });

  it('fetches a JWKS only over https, or http to a loopback address', () => {
    for (const url of [
      'https://keys.example.org/jwks',
      'http://127.0.0.1:8081/jwks',
      'http://localhost/jwks',
      'http://[::1]:9/j',
    ])
      expect(isAllowedJwksUrl(url), url).toBe(true);
    for (const url of [
      'http://keys.example.org/jwks',
      'http://10.0.0.1/jwks',
      'file:///etc/passwd',
      'https://u:p@k.example/',
      'nope',
    ])
      expect(isAllowedJwksUrl(url), url).toBe(false);
  });
});

describe('SMART scopes', () => {
  const scope = (text: string) => {
    const parsed = parseScope(text);
    if (!parsed) throw new Error(`not a scope: ${text}`);
    return parsed;
  };

  it('reads v2 letters and v1 read/write/* as permission sets', () => {
    expect([...scope('system/CoverageEligibilityResponse.rs').permissions].sort()).toEqual(['r', 's']);
    expect([...scope('system/*.read').permissions].sort()).toEqual(['r', 's']);
    expect([...scope('system/*.write').permissions].sort()).toEqual(['c', 'd', 'u']);
    expect([...scope('system/Subscription.cruds').permissions]).toHaveLength(5);
    for (const bad of ['system/X.sr', 'user/*.read', 'system/*.', 'system/*.readx', 'openid'])
      expect(parseScope(bad), bad).toBeNull();
  });

  it('grants the common part of what is asked and what is allowed', () => {
    const granted = (asked: string[], allowed: string[]) =>
      grantScopes(asked.map(scope), allowed.map(scope)).map((s) => s.text);
    expect(granted(['system/CoverageEligibilityResponse.rs'], ['system/*.read'])).toEqual([
      'system/CoverageEligibilityResponse.rs',
    ]);
    expect(granted(['system/*.cruds'], ['system/CoverageEligibilityRequest.c'])).toEqual([
      'system/CoverageEligibilityRequest.c',
    ]);
    expect(granted(['system/Subscription.cruds'], ['system/*.read'])).toEqual(['system/Subscription.rs']);
    expect(granted(['system/Subscription.c'], ['system/*.read'])).toEqual([]);
  });

  it('permits a route only with every permission it needs', () => {
    const scopes = [scope('system/CoverageEligibilityResponse.r'), scope('system/*.s')];
    expect(permits(scopes, 'CoverageEligibilityResponse', ['r'])).toBe(true);
    expect(permits(scopes, 'CoverageEligibilityResponse', ['r', 's'])).toBe(true);
    expect(permits(scopes, 'CoverageEligibilityRequest', ['r'])).toBe(false);
    expect(permits(scopes, 'CoverageEligibilityRequest', ['c'])).toBe(false);
  });
});
