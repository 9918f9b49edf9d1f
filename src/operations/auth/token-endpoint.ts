/**
 * POST /auth/token: SMART Backend Services, the client credentials grant with a signed JWT
 * assertion (https://hl7.org/fhir/smart-app-launch/backend-services.html, RFC 7523 section 2.2
 * and 3, https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html). Errors are
 * RFC 6749 section 5.2's (https://www.rfc-editor.org/rfc/rfc6749#section-5.2). Every JWT and JWKS
 * step is jose's.
 */
import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import type { JSONWebKeySet, JWTPayload } from 'jose';
import type { SmartClient, Tenant } from '../../config.js';
import type { AccessTokens } from './access-tokens.js';
import { grantScopes, parseScope, parseScopes } from './scopes.js';

/** RFC 6749 section 5.2 error codes used here. */
export type OAuthErrorCode =
  'invalid_request' | 'invalid_client' | 'invalid_scope' | 'unsupported_grant_type';

/** An RFC 6749 error answer: `{ error, error_description }`, never cached. */
export class OAuthError extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
    this.name = 'OAuthError';
  }
}

export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/**
 * The assertion algorithms accepted: the two SMART asks servers to support
 * (client-confidential-asymmetric.html, "Signature Verification"). Never `none`, never HS*:
 * a shared-secret algorithm would let anyone holding the public key sign.
 */
export const ASSERTION_ALGORITHMS = ['RS384', 'ES384'];
/** SMART: the assertion's `exp` is no more than five minutes in the future. */
const MAX_ASSERTION_LIFETIME_S = 300;
/** Clock skew allowed between the client and this service. */
const CLOCK_TOLERANCE_S = 30;

export type KeySet = ReturnType<typeof createLocalJWKSet> | ReturnType<typeof createRemoteJWKSet>;

/** The registered clients' key sets, each made once: a jwksUrl is fetched with a timeout and cached. */
export class ClientKeys {
  private readonly sets = new Map<string, KeySet>();

  constructor(
    private readonly options: { timeoutMs: number; cacheMaxAgeMs: number } = {
      timeoutMs: 5000,
      cacheMaxAgeMs: 600_000,
    },
  ) {}

  of(client: SmartClient): KeySet {
    return this.forKeys(client.clientId, client);
  }

  /**
   * The key set registered under `id` (a SMART client id, or `cds:<iss>` for a CDS Hooks client):
   * an inline JWKS, or a jwksUrl fetched by jose with its timeout, cache and cool-down.
   */
  forKeys(id: string, source: { jwks?: { keys: Record<string, unknown>[] }; jwksUrl?: string }): KeySet {
    let set = this.sets.get(id);
    if (!set) {
      set = source.jwksUrl
        ? createRemoteJWKSet(new URL(source.jwksUrl), {
            timeoutDuration: this.options.timeoutMs,
            cacheMaxAge: this.options.cacheMaxAgeMs,
            cooldownDuration: 30_000,
          })
        : createLocalJWKSet(source.jwks as JSONWebKeySet);
      this.sets.set(id, set);
    }
    return set;
  }
}

export interface TokenDeps {
  tenants: readonly Tenant[];
  tokens: AccessTokens;
  keys: ClientKeys;
  /** The token endpoint's absolute URL: the assertion's required `aud`. */
  tokenUrl: string;
  /** Remembers an assertion's jti across replicas (the store); false on a replay. */
  rememberJti: (clientKey: string, jti: string, expiresAt: number, now: number) => Promise<boolean>;
  now: () => number;
}

export interface TokenAnswer {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  scope: string;
  /** Who got it (for the audit trail; not sent). */
  tenantId: string;
  clientId: string;
}

/** One form field given once, as RFC 6749 section 3.2 requires ("MUST NOT be included more than once"). */
function field(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new OAuthError('invalid_request', `${name} must be given once`);
  return value;
}

function required(body: Record<string, unknown>, name: string): string {
  const value = field(body, name);
  if (value === undefined || value === '') throw new OAuthError('invalid_request', `${name} is required`);
  return value;
}

function findClient(
  tenants: readonly Tenant[],
  clientId: string,
): { tenant: Tenant; client: SmartClient } | null {
  for (const tenant of tenants) {
    const client = tenant.smartClients?.find((c) => c.clientId === clientId);
    if (client) return { tenant, client };
  }
  return null;
}

/** What went wrong in a jose verification, by kind (its error codes, read once for every caller). */
type JoseFailure =
  | { kind: 'expired' | 'signature' | 'algorithm' | 'keys-unavailable' | 'other' }
  | { kind: 'claim'; claim: string | undefined };

/** The kind of a jose verification error (https://github.com/panva/jose, its `code`s). */
function joseFailure(error: unknown): JoseFailure {
  switch ((error as { code?: unknown }).code) {
    case 'ERR_JWT_EXPIRED':
      return { kind: 'expired' };
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
    case 'ERR_JWKS_NO_MATCHING_KEY':
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return { kind: 'signature' };
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED': {
      const claim = (error as { claim?: unknown }).claim;
      return { kind: 'claim', claim: typeof claim === 'string' ? claim : undefined };
    }
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return { kind: 'algorithm' };
    case 'ERR_JWKS_TIMEOUT':
    case 'ERR_JOSE_GENERIC':
      return { kind: 'keys-unavailable' };
    default:
      return { kind: 'other' };
  }
}

/** Why a client's signed JWT was refused: jose's verdict, or one of the checks made around it. */
export type ClientJwtFailure = JoseFailure | { kind: 'not-a-jwt' | 'jti' | 'lifetime' | 'replay' };

/** A refused client JWT; each caller words it its own way (never naming a key or claim value). */
export class ClientJwtError extends Error {
  constructor(readonly failure: ClientJwtFailure) {
    super(`client JWT refused (${failure.kind})`);
    this.name = 'ClientJwtError';
  }
}

/**
 * The claims of a client's JWT, read unverified only to choose the client and its keys. Throws
 * ClientJwtError when it is no JWS, or when its alg is not one of ASSERTION_ALGORITHMS (never
 * `none` or HS*: a shared-secret algorithm would let anyone holding the public key sign).
 */
export function unverifiedClaims(token: string): JWTPayload {
  let alg: unknown;
  let claims: JWTPayload;
  try {
    alg = decodeProtectedHeader(token).alg;
    claims = decodeJwt(token);
  } catch {
    throw new ClientJwtError({ kind: 'not-a-jwt' });
  }
  if (typeof alg !== 'string' || !ASSERTION_ALGORITHMS.includes(alg))
    throw new ClientJwtError({ kind: 'algorithm' });
  return claims;
}

/** What a client's JWT must carry besides a signature by one of its keys; where its jti is kept. */
export interface ClientJwtExpected {
  issuer: string;
  subject?: string;
  audience: string;
  requiredClaims: string[];
  /** The client's key among the remembered jtis (no other client's key can be the same). */
  replayKey: string;
}

/**
 * Verifies a client's signed JWT (a SMART client assertion, a CDS Client's call) with jose, then
 * what jose leaves to us: a non-empty `jti`, an `exp` at most five minutes ahead, and a `jti`
 * never seen under `replayKey`, remembered in the store until the JWT expires (so a replay to
 * another replica is refused too). Throws ClientJwtError for a refusal; a store error passes.
 */
export async function verifyClientJwt(
  token: string,
  keys: KeySet,
  expected: ClientJwtExpected,
  deps: { now: number; rememberJti: TokenDeps['rememberJti'] },
): Promise<void> {
  const { now } = deps;
  let exp: number;
  let jti: string;
  try {
    const { payload } = await jwtVerify(token, keys, {
      algorithms: ASSERTION_ALGORITHMS,
      issuer: expected.issuer,
      ...(expected.subject === undefined ? {} : { subject: expected.subject }),
      audience: expected.audience,
      requiredClaims: expected.requiredClaims,
      currentDate: new Date(now),
      clockTolerance: CLOCK_TOLERANCE_S,
    });
    exp = payload.exp as number;
    if (typeof payload.jti !== 'string' || payload.jti === '') throw new ClientJwtError({ kind: 'jti' });
    jti = payload.jti;
  } catch (error) {
    if (error instanceof ClientJwtError) throw error;
    throw new ClientJwtError(joseFailure(error));
  }
  if (exp > Math.floor(now / 1000) + MAX_ASSERTION_LIFETIME_S + CLOCK_TOLERANCE_S)
    throw new ClientJwtError({ kind: 'lifetime' });
  const fresh = await deps.rememberJti(expected.replayKey, jti, (exp + CLOCK_TOLERANCE_S) * 1000, now);
  if (!fresh) throw new ClientJwtError({ kind: 'replay' });
}

/** A refused client assertion as RFC 6749 words it, naming no key or claim value. */
function assertionRefusal(failure: ClientJwtFailure): OAuthError {
  const refused = (description: string) => new OAuthError('invalid_client', description, 401);
  switch (failure.kind) {
    case 'not-a-jwt':
      return new OAuthError('invalid_client', 'client_assertion is not a signed JWT');
    case 'algorithm':
      return new OAuthError(
        'invalid_client',
        `the client assertion must be signed with ${ASSERTION_ALGORITHMS.join(' or ')}`,
      );
    case 'jti':
      return new OAuthError('invalid_client', 'jti is required');
    case 'expired':
      return refused('the client assertion has expired');
    case 'signature':
      return refused('the client assertion is not signed by a key registered for the client');
    case 'claim':
      return refused(`the client assertion's ${failure.claim ?? 'claims'} claim is not valid`);
    case 'keys-unavailable':
      return refused("the client's key set could not be fetched");
    case 'other':
      return refused('the client assertion could not be verified');
    case 'lifetime':
      return refused('the client assertion expires more than five minutes ahead');
    case 'replay':
      return refused('the client assertion was already used (jti)');
  }
}

/** The registered client that signed the assertion, verified; OAuthError for every refusal. */
async function assertingClient(
  assertion: string,
  deps: TokenDeps,
  now: number,
): Promise<{ tenant: Tenant; client: SmartClient }> {
  try {
    const { iss: issuer, sub: subject } = unverifiedClaims(assertion);
    if (typeof issuer !== 'string' || issuer !== subject) {
      throw new OAuthError('invalid_client', 'the client assertion needs iss and sub, both the client id');
    }
    const found = findClient(deps.tenants, issuer);
    // 401 for an unknown client (RFC 6749 section 5.2: "client authentication failed").
    if (!found) throw new OAuthError('invalid_client', 'unknown client', 401);
    // backend-services.html: the jti is not reused while the assertion is valid.
    await verifyClientJwt(
      assertion,
      deps.keys.of(found.client),
      {
        issuer: found.client.clientId,
        subject: found.client.clientId,
        audience: deps.tokenUrl,
        requiredClaims: ['exp', 'jti'],
        replayKey: `${found.tenant.id}/${found.client.clientId}`,
      },
      { now, rememberJti: deps.rememberJti },
    );
    return found;
  } catch (error) {
    throw error instanceof ClientJwtError ? assertionRefusal(error.failure) : error;
  }
}

/** Runs the client credentials grant; throws OAuthError for every refusal. */
export async function issueToken(body: Record<string, unknown>, deps: TokenDeps): Promise<TokenAnswer> {
  const grantType = required(body, 'grant_type');
  if (grantType !== 'client_credentials') {
    throw new OAuthError('unsupported_grant_type', 'only grant_type=client_credentials is supported');
  }
  const assertionType = required(body, 'client_assertion_type');
  if (assertionType !== JWT_BEARER) {
    throw new OAuthError('invalid_request', `client_assertion_type must be ${JWT_BEARER}`);
  }
  const assertion = required(body, 'client_assertion');
  const scopeText = field(body, 'scope') ?? '';

  const now = deps.now();
  const found = await assertingClient(assertion, deps, now);

  const asked = parseScopes(scopeText);
  if (asked.scopes.length === 0) {
    throw new OAuthError(
      'invalid_scope',
      'scope must name at least one system/ scope the client is registered for',
    );
  }
  const allowed = found.client.scopes.flatMap((s) => parseScope(s) ?? []);
  const granted = grantScopes(asked.scopes, allowed);
  if (granted.length === 0)
    throw new OAuthError('invalid_scope', 'none of the scopes asked is allowed for this client');
  const scope = granted.map((s) => s.text).join(' ');
  return {
    access_token: await deps.tokens.sign(found.tenant.id, found.client.clientId, scope, now),
    token_type: 'bearer',
    expires_in: deps.tokens.expiresIn,
    scope,
    tenantId: found.tenant.id,
    clientId: found.client.clientId,
  };
}
