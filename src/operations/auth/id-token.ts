/**
 * The one place an ID token is checked, for the page's sign-in (http/oidc.ts) and the SMART App
 * Launch (smart-app.ts): the authorization code is exchanged at the token endpoint and the ID
 * token in its answer is verified by openid-client (a certified relying party): its signature
 * against the issuer's `jwks_uri` (an asymmetric algorithm the issuer offers; never `none` or a
 * shared secret), `iss`, `aud` (and `azp` with several audiences), `exp`, `iat`, and `nonce` when
 * one was sent (a token carrying a nonce that was not sent is refused too).
 *
 * openid-client trusts TLS for a token from the token endpoint and leaves the signature unchecked
 * unless asked (enableNonRepudiationChecks); here it is always asked, so no caller can forget.
 * https://openid.net/specs/openid-connect-core-1_0.html#IDTokenValidation
 */
import * as oidc from 'openid-client';

/** What the callback matched the code against. */
export interface CodeChecks {
  /** The PKCE code_verifier kept with the pending sign-in. */
  pkceCodeVerifier: string;
  /** The `state` the pending sign-in was found by. */
  expectedState: string;
  /** The `nonce` sent in the authorization request, when one was (the sign-in; not the launch). */
  expectedNonce?: string;
}

/** The token response with the verified ID token's claims. */
export interface VerifiedTokens {
  tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  claims: oidc.IDToken;
}

/** Why an ID token or code was refused: openid-client's error code only (no token, no claim). */
export class IdTokenRefused extends Error {
  override name = 'IdTokenRefused';
  constructor(
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Exchanges the code of `callbackUrl` and verifies the ID token (above). Throws IdTokenRefused
 * when the exchange fails or the ID token is missing or does not verify; errors reaching the
 * token endpoint or the JWKS are refusals too (no session without a verified token).
 */
export async function exchangeForIdToken(
  config: oidc.Configuration,
  callbackUrl: URL,
  checks: CodeChecks,
): Promise<VerifiedTokens> {
  oidc.enableNonRepudiationChecks(config);
  let tokens: VerifiedTokens['tokens'];
  try {
    tokens = await oidc.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: checks.pkceCodeVerifier,
      expectedState: checks.expectedState,
      ...(checks.expectedNonce !== undefined ? { expectedNonce: checks.expectedNonce } : {}),
      idTokenExpected: true,
    });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    // openid-client's messages name the check that failed, never a token or a claim's value.
    const reason = error instanceof Error ? error.message : 'unknown';
    throw new IdTokenRefused(typeof code === 'string' ? code : undefined, reason);
  }
  const claims = tokens.claims();
  if (!claims) throw new IdTokenRefused(undefined, 'no ID token');
  return { tokens, claims };
}
