/**
 * SMART Backend Services from the client's side, for the tests: key pairs, JWKS, signed client
 * assertions and token requests, all with jose (as an integration engine would).
 */
import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { CryptoKey, JWK, JWTPayload } from 'jose';
import request from 'supertest';

export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export interface ClientKey {
  alg: 'RS384' | 'ES384';
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function clientKey(alg: 'RS384' | 'ES384'): Promise<ClientKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `${alg.toLowerCase()}-${randomUUID().slice(0, 8)}`;
  return { alg, kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), alg, kid, use: 'sig' } };
}

/** A private JWK (for ACCESS_TOKEN_KEYS_FILE) and its CryptoKey, to sign tokens as the service would. */
export async function serviceKey(): Promise<{ jwk: Record<string, unknown>; privateKey: CryptoKey }> {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  return { jwk: { ...(await exportJWK(privateKey)), alg: 'ES256', kid: 'svc-1' }, privateKey };
}

export interface AssertionOptions {
  aud: string;
  /** Seconds from now; default 240. */
  expIn?: number;
  jti?: string;
  iss?: string;
  sub?: string;
  /** Extra or replaced claims. */
  claims?: JWTPayload;
}

/** A client assertion (RFC 7523 section 3) signed with the client's key. */
export function assertion(clientId: string, key: ClientKey, options: AssertionOptions): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ ...options.claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
    .setIssuer(options.iss ?? clientId)
    .setSubject(options.sub ?? clientId)
    .setAudience(options.aud)
    .setExpirationTime(now + (options.expIn ?? 240))
    .setIssuedAt(now)
    .setJti(options.jti ?? randomUUID())
    .sign(key.privateKey);
}

/** The token request form. */
export function tokenForm(clientAssertion: string, scope: string): Record<string, string> {
  return {
    grant_type: 'client_credentials',
    client_assertion_type: JWT_BEARER,
    client_assertion: clientAssertion,
    scope,
  };
}

/** POSTs a token request form to a service. */
export function postToken(url: string, form: Record<string, string>): request.Test {
  return request(url).post('/auth/token').type('form').send(form);
}

/** Gets an access token for a client; fails the test when refused. */
export async function accessToken(
  url: string,
  tokenUrl: string,
  clientId: string,
  key: ClientKey,
  scope: string,
): Promise<string> {
  const res = await postToken(url, tokenForm(await assertion(clientId, key, { aud: tokenUrl }), scope));
  if (res.status !== 200) throw new Error(`token refused: ${res.status} ${JSON.stringify(res.body)}`);
  return String((res.body as { access_token: string }).access_token);
}
