/**
 * The service's own access tokens (SMART Backend Services): short-lived JWTs signed with a key
 * from configuration, carrying the tenant, the client and the granted scopes. Every JWT step is
 * jose's (https://github.com/panva/jose): no hand-written crypto.
 *
 * Rotation (docs/auth.md): the keys file lists private JWKs; the first signs, every one verifies.
 * To rotate, put the new key first and keep the old one until ACCESS_TOKEN_TTL_SECONDS have
 * passed on every replica, then remove it.
 */
import { randomUUID } from 'node:crypto';
import { createLocalJWKSet, exportJWK, generateKeyPair, importJWK, jwtVerify, SignJWT } from 'jose';
import type { CryptoKey, JSONWebKeySet, JWK, JWTPayload } from 'jose';
import type { Tenant } from '../../config.js';
import { grantScopes, parseScope, parseScopes, type Scope } from './scopes.js';

/** Who a verified access token speaks for. */
export interface TokenPrincipal {
  tenant: Tenant;
  clientId: string;
  scopes: Scope[];
}

/** The claims this service puts in an access token besides the registered ones. */
interface AccessClaims extends JWTPayload {
  tenant?: unknown;
  scope?: unknown;
  client_id?: unknown;
}

const TOKEN_TYPE = 'at+jwt';

export class AccessTokens {
  private readonly verifyKeys: ReturnType<typeof createLocalJWKSet>;
  private readonly algorithms: string[];
  /** Each registered client's allowed scopes, parsed once: tenant id, newline, client id. */
  private readonly allowed = new Map<string, Scope[]>();

  private constructor(
    private readonly signing: { key: CryptoKey | Uint8Array; alg: string; kid: string },
    publicKeys: JSONWebKeySet,
    private readonly issuer: string,
    private readonly audience: string,
    private readonly ttlSeconds: number,
    private readonly tenants: ReadonlyMap<string, Tenant>,
  ) {
    this.verifyKeys = createLocalJWKSet(publicKeys);
    for (const tenant of tenants.values()) {
      for (const client of tenant.smartClients ?? []) {
        this.allowed.set(
          `${tenant.id}\n${client.clientId}`,
          client.scopes.flatMap((text) => parseScope(text) ?? []),
        );
      }
    }
    this.algorithms = [...new Set(publicKeys.keys.map((k) => String(k.alg)))];
  }

  /**
   * Imports the configured private JWKs (the first signs), or makes an ephemeral ES256 key when
   * none is configured (sandbox mode: tokens die with the process).
   */
  static async create(options: {
    keys: readonly Record<string, unknown>[];
    issuer: string;
    audience: string;
    ttlSeconds: number;
    tenants: readonly Tenant[];
  }): Promise<{ tokens: AccessTokens; ephemeral: boolean }> {
    let jwks = options.keys as JWK[];
    const ephemeral = jwks.length === 0;
    if (ephemeral) {
      const { privateKey } = await generateKeyPair('ES256', { extractable: true });
      jwks = [{ ...(await exportJWK(privateKey)), alg: 'ES256', kid: `ephemeral-${randomUUID()}` }];
    }
    const first = jwks[0] as JWK & { alg: string; kid: string };
    const key = await importJWK(first, first.alg);
    // Public halves only: the private members are dropped before the verifying key set is made.
    const publicKeys = jwks.map(
      ({ d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, oth: _oth, ...pub }) => pub,
    );
    const tokens = new AccessTokens(
      { key, alg: first.alg, kid: first.kid },
      { keys: publicKeys },
      options.issuer,
      options.audience,
      options.ttlSeconds,
      new Map(options.tenants.map((t) => [t.id, t])),
    );
    return { tokens, ephemeral };
  }

  get expiresIn(): number {
    return this.ttlSeconds;
  }

  /** Signs an access token for a client of a tenant with the granted scopes. */
  sign(tenantId: string, clientId: string, scope: string, nowMs: number): Promise<string> {
    const iat = Math.floor(nowMs / 1000);
    return new SignJWT({ tenant: tenantId, client_id: clientId, scope })
      .setProtectedHeader({ alg: this.signing.alg, kid: this.signing.kid, typ: TOKEN_TYPE })
      .setIssuer(this.issuer)
      .setAudience(this.audience)
      .setSubject(clientId)
      .setIssuedAt(iat)
      .setExpirationTime(iat + this.ttlSeconds)
      .setJti(randomUUID())
      .sign(this.signing.key);
  }

  /**
   * Verifies an access token: signature by one of the configured keys, issuer, audience, type and
   * expiry; the tenant and the client must still be in the tenants file (removing a client revokes
   * its tokens) and the scopes are cut to what the client is registered for now. Null for anything
   * else.
   */
  async verify(token: string, nowMs: number): Promise<TokenPrincipal | null> {
    let payload: AccessClaims;
    try {
      ({ payload } = await jwtVerify<AccessClaims>(token, this.verifyKeys, {
        issuer: this.issuer,
        audience: this.audience,
        algorithms: this.algorithms,
        typ: TOKEN_TYPE,
        currentDate: new Date(nowMs),
        requiredClaims: ['exp', 'sub'],
      }));
    } catch {
      return null;
    }
    if (typeof payload.tenant !== 'string' || typeof payload.scope !== 'string') return null;
    const tenant = this.tenants.get(payload.tenant);
    const clientId = payload.sub ?? '';
    const allowed = this.allowed.get(`${payload.tenant}\n${clientId}`);
    if (!tenant || !allowed) return null;
    // The token's scopes, within what the client is registered for now: a registration narrowed
    // since the token was issued (a restart with the new tenants file) narrows it at once.
    const scopes = grantScopes(parseScopes(payload.scope).scopes, allowed);
    if (scopes.length === 0) return null;
    return { tenant, clientId, scopes };
  }
}

/** Whether a bearer value has the shape of a JWS compact serialization (three base64url parts). */
export function looksLikeJwt(value: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value);
}
