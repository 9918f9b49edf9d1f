/**
 * Access tokens (src/operations/auth/access-tokens.ts): what a token grants is cut, when it is
 * verified, to what its client is registered for at that moment. A registration narrowed (or a
 * client removed) while its tokens are still unexpired takes effect on the next request.
 */
import { exportJWK, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import type { Tenant } from '../../src/config.js';
import { AccessTokens } from '../../src/operations/auth/access-tokens.js';

const NOW = Date.parse('2026-11-24T05:00:00Z');
const FULL = 'system/CoverageEligibilityRequest.c system/CoverageEligibilityResponse.rs';

function tenantWith(scopes: string[] | null): Tenant {
  const smartClients = scopes === null ? [] : [{ clientId: 'engine', jwks: { keys: [] }, scopes }];
  return { id: 'clinic-a', smartClients } as unknown as Tenant;
}

async function service(keys: Record<string, unknown>[], tenant: Tenant): Promise<AccessTokens> {
  const made = await AccessTokens.create({
    keys,
    issuer: 'http://adapter.test',
    audience: 'http://adapter.test/fhir',
    ttlSeconds: 300,
    tenants: [tenant],
  });
  return made.tokens;
}

describe('AccessTokens.verify', () => {
  it('grants the token its scopes while the registration stands, less once it is narrowed', async () => {
    const { privateKey } = await generateKeyPair('ES384', { extractable: true });
    const keys = [{ ...(await exportJWK(privateKey)), alg: 'ES384', kid: 'k1' }];
    const before = await service(keys, tenantWith(FULL.split(' ')));
    const token = await before.sign('clinic-a', 'engine', FULL, NOW);

    const now = await before.verify(token, NOW + 1000);
    expect(now?.scopes.map((s) => s.text).sort()).toEqual(FULL.split(' ').sort());

    // The same signing key, the client registered for reading CERs only (a restart with a new
    // tenants file): the token, issued for more, may now only read.
    const narrowed = await service(keys, tenantWith(['system/CoverageEligibilityResponse.r']));
    const cut = await narrowed.verify(token, NOW + 1000);
    expect(cut?.scopes.map((s) => s.text)).toEqual(['system/CoverageEligibilityResponse.r']);

    // Nothing in common, or the client gone: the token is refused.
    const other = await service(keys, tenantWith(['system/Subscription.cruds']));
    expect(await other.verify(token, NOW + 1000)).toBeNull();
    const removed = await service(keys, tenantWith(null));
    expect(await removed.verify(token, NOW + 1000)).toBeNull();
    // And expiry still holds.
    expect(await before.verify(token, NOW + 301_000)).toBeNull();
  });

  it('narrows v1 and wildcard scopes the same way', async () => {
    const { privateKey } = await generateKeyPair('ES384', { extractable: true });
    const keys = [{ ...(await exportJWK(privateKey)), alg: 'ES384', kid: 'k2' }];
    const wide = await service(keys, tenantWith(['system/*.read']));
    const token = await wide.sign('clinic-a', 'engine', 'system/*.read', NOW);
    // Registered now for CER read and search only: the wildcard token keeps just that.
    const narrowed = await service(keys, tenantWith(['system/CoverageEligibilityResponse.rs']));
    expect((await narrowed.verify(token, NOW))?.scopes.map((s) => s.text)).toEqual([
      'system/CoverageEligibilityResponse.rs',
    ]);
    // A token for one type, the registration widened to a wildcard: the token stays as it was.
    const one = await narrowed.sign('clinic-a', 'engine', 'system/CoverageEligibilityResponse.rs', NOW);
    expect((await wide.verify(one, NOW))?.scopes.map((s) => s.text)).toEqual([
      'system/CoverageEligibilityResponse.rs',
    ]);
  });
});
