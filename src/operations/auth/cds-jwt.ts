/**
 * The JWT a CDS Client sends with every call (CDS Hooks 2.0, "Trusting CDS Clients":
 * https://cds-hooks.hl7.org/2.0/#trusting-cds-clients): `Authorization: Bearer <JWT>` signed by
 * the EHR's private key, `iss` the EHR, `aud` the CDS Service endpoint called, `exp`, `iat`, `jti`
 * (replay protection), an optional `tenant`. This service accepts it only when `iss` is a
 * registered cdsClient of one tenant, it is signed RS384 or ES384 by one of that client's keys,
 * `aud` is exactly the called service's URL under PUBLIC_BASE_URL, `exp` is at most five minutes
 * ahead, and its `jti` was never seen from that `iss` (remembered in the store, so every replica
 * refuses a replay). The checks are the SMART client assertion's (token-endpoint.ts,
 * verifyClientJwt: every JWT and JWKS step is jose's); only the words of a refusal are this file's.
 */
import type { CdsClient, Tenant } from '../../config.js';
import { looksLikeJwt } from './access-tokens.js';
import type { ClientJwtFailure, ClientKeys, TokenDeps } from './token-endpoint.js';
import { ASSERTION_ALGORITHMS, ClientJwtError, unverifiedClaims, verifyClientJwt } from './token-endpoint.js';

/** Why a CDS call was refused: counted for the operator, never with the token. */
export type CdsRefusal =
  | 'missing'
  | 'not-a-jwt'
  | 'algorithm'
  | 'unknown-issuer'
  | 'signature'
  | 'audience'
  | 'expired'
  | 'lifetime'
  | 'claims'
  | 'replay'
  | 'keys-unavailable';

/** A refused CDS call: 401, no card, no check. `message` names no key or claim value. */
export class CdsAuthError extends Error {
  constructor(
    readonly reason: CdsRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'CdsAuthError';
  }
}

/** Who called: the tenant and its registered CDS client. */
export interface CdsCaller {
  tenant: Tenant;
  client: CdsClient;
}

export interface CdsJwtDeps {
  tenants: readonly Tenant[];
  keys: ClientKeys;
  /** Remembers a jti until it expires, across replicas (the store); false on a replay. */
  rememberJti: TokenDeps['rememberJti'];
  now: () => number;
}

/** The registered cdsClient with this iss, and its tenant (an iss belongs to one tenant: config.ts). */
function findCdsClient(tenants: readonly Tenant[], iss: string): CdsCaller | null {
  for (const tenant of tenants) {
    const client = tenant.cdsClients?.find((c) => c.iss === iss);
    if (client) return { tenant, client };
  }
  return null;
}

/** A refused JWT in this service's words, naming no key or claim value. */
function refusalOf(failure: ClientJwtFailure): CdsAuthError {
  switch (failure.kind) {
    case 'not-a-jwt':
      return new CdsAuthError('not-a-jwt', 'The bearer value is not a signed JWT');
    case 'expired':
      return new CdsAuthError('expired', 'The JWT has expired');
    case 'signature':
      return new CdsAuthError('signature', 'The JWT is not signed by a key registered for its issuer');
    case 'claim':
      return failure.claim === 'aud'
        ? new CdsAuthError('audience', "The JWT's aud is not this service's URL")
        : new CdsAuthError('claims', `The JWT's ${failure.claim ?? ''} claim is missing or not valid`);
    case 'jti':
      return new CdsAuthError('claims', "The JWT's jti claim is missing or not valid");
    case 'algorithm':
      return new CdsAuthError(
        'algorithm',
        `The JWT must be signed with ${ASSERTION_ALGORITHMS.join(' or ')}`,
      );
    case 'keys-unavailable':
      return new CdsAuthError('keys-unavailable', "The issuer's key set could not be fetched");
    case 'other':
      return new CdsAuthError('claims', 'The JWT could not be verified');
    case 'lifetime':
      return new CdsAuthError('lifetime', 'The JWT expires more than five minutes ahead');
    case 'replay':
      return new CdsAuthError('replay', 'The JWT was already used (jti)');
  }
}

/**
 * Verifies the Authorization header of a call to the service at `serviceUrl`; resolves to the
 * caller, or rejects with CdsAuthError for every refusal.
 */
export async function verifyCdsJwt(
  authorization: string | undefined,
  serviceUrl: string,
  deps: CdsJwtDeps,
): Promise<CdsCaller> {
  const token = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
  if (!token) throw new CdsAuthError('missing', 'Send Authorization: Bearer <JWT signed by the CDS Client>');
  if (!looksLikeJwt(token)) throw refusalOf({ kind: 'not-a-jwt' });
  try {
    const { iss } = unverifiedClaims(token);
    const caller = typeof iss === 'string' ? findCdsClient(deps.tenants, iss) : null;
    if (!caller) throw new CdsAuthError('unknown-issuer', 'The JWT issuer is not a registered CDS client');
    // "jti ... used to protect against replay attacks": kept until the JWT expires. The key cannot
    // meet a SMART client's (`<tenant>/<client id>`: a tenant id has no colon).
    const replayKey = `cds:${caller.client.iss}`;
    await verifyClientJwt(
      token,
      deps.keys.forKeys(replayKey, caller.client),
      { issuer: caller.client.iss, audience: serviceUrl, requiredClaims: ['exp', 'iat', 'jti'], replayKey },
      { now: deps.now(), rememberJti: deps.rememberJti },
    );
    return caller;
  } catch (error) {
    throw error instanceof ClientJwtError ? refusalOf(error.failure) : error;
  }
}
