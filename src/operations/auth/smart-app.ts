/**
 * The page as a SMART app of the clinic's EHR (docs/smart-launch.md): the EHR's
 * `.well-known/smart-configuration`, the authorization request (PKCE S256, `state`, `aud`,
 * `launch`), and the code exchange with the ID token checked (id-token.ts, the sign-in's check),
 * through openid-client (the certified relying party); a confidential client authenticates with a private_key_jwt assertion
 * signed here with jose.
 * https://hl7.org/fhir/smart-app-launch/app-launch.html
 * https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html
 */
import { randomUUID } from 'node:crypto';
import { importJWK, SignJWT } from 'jose';
import * as oidc from 'openid-client';
import { z } from 'zod';
import type { SmartLaunch, Tenant } from '../../config.js';
import { isAllowedJwksUrl } from '../../config.js';
import { exchangeForIdToken, IdTokenRefused } from './id-token.js';
import type { VerifiedTokens } from './id-token.js';

/** What the page asks the EHR for, after `launch` (EHR launch) or `launch/patient` (standalone). */
const SCOPES = 'openid fhirUser patient/Patient.rs patient/Coverage.rs patient/Appointment.rs';

/**
 * The scope of a launch: `launch` binds the EHR's context (an EHR launch); `launch/patient` asks the
 * EHR to have a patient picked (a standalone launch).
 * https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html
 */
export function launchScope(ehrLaunch: boolean): string {
  return `${ehrLaunch ? 'launch' : 'launch/patient'} ${SCOPES}`;
}

/** A SMART launch that cannot go on; `status` is what the page answers (400 or 502). */
export class LaunchError extends Error {
  override name = 'LaunchError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The EHR FHIR base `iss` names, and its tenant: only an exact registered base (else null). */
export function tenantOfIss(
  tenants: readonly Tenant[],
  iss: string,
): { tenant: Tenant; smart: SmartLaunch; iss: string } | null {
  const base = iss.replace(/\/+$/, '');
  for (const tenant of tenants) {
    const smart = tenant.smartLaunch;
    if (smart?.fhirBaseUrls.includes(base)) return { tenant, smart, iss: base };
  }
  return null;
}

/** An endpoint the EHR names: https, or http to a loopback address, like its FHIR base. */
const endpoint = z.string().refine(isAllowedJwksUrl, 'must be https (or http to a loopback address)');

/**
 * The part of `.well-known/smart-configuration` the page uses. `issuer` and `jwks_uri` are
 * required of a server offering `sso-openid-connect`, which the page needs (the person is the ID
 * token's fhirUser). https://hl7.org/fhir/smart-app-launch/conformance.html#metadata
 */
const smartConfigurationSchema = z.object({
  issuer: z.string().min(1),
  jwks_uri: endpoint,
  authorization_endpoint: endpoint,
  token_endpoint: endpoint,
  code_challenge_methods_supported: z.array(z.string()).optional(),
  token_endpoint_auth_signing_alg_values_supported: z.array(z.string()).optional(),
  id_token_signing_alg_values_supported: z.array(z.string()).optional(),
});

export type SmartConfiguration = z.infer<typeof smartConfigurationSchema>;

const FETCH_TIMEOUT_MS = 10_000;

/** Reads `<iss>/.well-known/smart-configuration` (iss already checked against the tenants file). */
export async function smartConfiguration(iss: string): Promise<SmartConfiguration> {
  let body: unknown;
  try {
    const response = await fetch(`${iss}/.well-known/smart-configuration`, {
      headers: { Accept: 'application/json' },
      redirect: 'error',
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (!response.ok) throw new Error(`status ${response.status}`);
    body = await response.json();
  } catch {
    throw new LaunchError(502, "The EHR's SMART configuration could not be read.");
  }
  const parsed = smartConfigurationSchema.safeParse(body);
  if (!parsed.success) {
    const field = parsed.error.issues[0]?.path.join('.') ?? 'document';
    throw new LaunchError(502, `The EHR's SMART configuration is not usable (${field}).`);
  }
  // PKCE with S256 is required of SMART 2.x servers; one that lists its methods must list it.
  const methods = parsed.data.code_challenge_methods_supported;
  if (methods && !methods.includes('S256')) {
    throw new LaunchError(502, 'The EHR does not offer PKCE with S256, which the page requires.');
  }
  return parsed.data;
}

/**
 * private_key_jwt as the SMART asymmetric profile asks: `iss` = `sub` = the client id, `aud` the
 * token endpoint, a fresh `jti`, `exp` at most five minutes ahead, the key's `kid` in the header.
 * https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html#authenticating-to-the-token-endpoint
 */
async function privateKeyJwt(smart: SmartLaunch, tokenEndpoint: string): Promise<oidc.ClientAuth> {
  const jwk = smart.clientKeys?.keys[0] as
    (Record<string, unknown> & { kid: string; alg: string }) | undefined;
  if (!jwk) return oidc.None();
  const key = await importJWK(jwk, jwk.alg);
  // openid-client types ClientAuth as returning void, but hands it to oauth4webapi, which awaits it
  // (its own PrivateKeyJwt is async too).
  // eslint-disable-next-line @typescript-eslint/no-misused-promises
  return async (_as, client, body) => {
    const assertion = await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: jwk.alg, kid: jwk.kid, typ: 'JWT' })
      .setIssuer(client.client_id)
      .setSubject(client.client_id)
      .setAudience(tokenEndpoint)
      .setIssuedAt()
      .setExpirationTime('4m')
      .sign(key);
    body.set('client_id', client.client_id);
    body.set('client_assertion_type', 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
    body.set('client_assertion', assertion);
  };
}

/** openid-client's view of the EHR's authorization server, for one client. */
async function clientOf(smart: SmartLaunch, config: SmartConfiguration): Promise<oidc.Configuration> {
  const metadata: oidc.ServerMetadata = {
    issuer: config.issuer,
    authorization_endpoint: config.authorization_endpoint,
    token_endpoint: config.token_endpoint,
    jwks_uri: config.jwks_uri,
    ...(config.id_token_signing_alg_values_supported
      ? { id_token_signing_alg_values_supported: config.id_token_signing_alg_values_supported }
      : {}),
  };
  const client = new oidc.Configuration(
    metadata,
    smart.clientId,
    {},
    await privateKeyJwt(smart, config.token_endpoint),
  );
  // http is only ever a loopback address here (smartConfigurationSchema, the tenants file).
  if ([config.token_endpoint, config.jwks_uri].some((url) => url.startsWith('http:')))
    oidc.allowInsecureRequests(client);
  return client;
}

/** What the page keeps between the redirect to the EHR and its callback (a pending launch). */
export interface PendingLaunch {
  iss: string;
  codeVerifier: string;
}

/** A new PKCE code_verifier (kept in the pending launch, never sent to the browser). */
export const newCodeVerifier = (): string => oidc.randomPKCECodeVerifier();

/**
 * The EHR's authorization URL for a launch. `state` and `codeVerifier` are the caller's (they name
 * and complete the pending launch in the store).
 */
export async function authorizationRequest(input: {
  smart: SmartLaunch;
  iss: string;
  launch: string | undefined;
  state: string;
  codeVerifier: string;
  redirectUri: string;
}): Promise<URL> {
  const config = await smartConfiguration(input.iss);
  const client = await clientOf(input.smart, config);
  return oidc.buildAuthorizationUrl(client, {
    response_type: 'code',
    redirect_uri: input.redirectUri,
    scope: launchScope(input.launch !== undefined),
    state: input.state,
    aud: input.iss,
    ...(input.launch !== undefined ? { launch: input.launch } : {}),
    code_challenge: await oidc.calculatePKCECodeChallenge(input.codeVerifier),
    code_challenge_method: 'S256',
  });
}

/** A reference in the token response's `fhirContext` (SMART 2.x). */
const fhirContextSchema = z
  .array(z.object({ reference: z.string().optional(), type: z.string().optional() }).passthrough())
  .optional()
  .catch(undefined);

/** What the callback learns from the EHR: its token (server-side only), the person and context. */
export interface LaunchGrant {
  accessToken: string;
  /** Seconds, when the EHR said. */
  expiresIn: number | undefined;
  /** The ID token's fhirUser (else sub) and the issuer: who acts. */
  person: { issuer: string; sub: string; fhirUser: string | undefined; name: string | undefined };
  patient: string | undefined;
  /** The Appointment the EHR put in context (`Appointment/<id>`), when it did. */
  appointment: string | undefined;
}

/**
 * The code exchanged at the token endpoint (with the code_verifier, and the client assertion when
 * confidential) and the ID token verified as the sign-in's is (id-token.ts): its signature against
 * the EHR's jwks_uri, iss, aud, exp and iat. No nonce is sent in a launch, so a token carrying one
 * is refused. `state` is already matched by the caller (the pending launch was found by it).
 */
export async function exchangeCode(input: {
  smart: SmartLaunch;
  pending: PendingLaunch;
  callbackUrl: URL;
  state: string;
}): Promise<LaunchGrant> {
  const config = await smartConfiguration(input.pending.iss);
  const client = await clientOf(input.smart, config);
  let verified: VerifiedTokens;
  try {
    verified = await exchangeForIdToken(client, input.callbackUrl, {
      pkceCodeVerifier: input.pending.codeVerifier,
      expectedState: input.state,
    });
  } catch (error) {
    if (!(error instanceof IdTokenRefused)) throw error;
    // The library's message names what failed (never a token or code).
    throw new LaunchError(401, `The EHR's sign-in could not be completed: ${error.message}`);
  }
  const { tokens, claims } = verified;
  const fhirUser = typeof claims.fhirUser === 'string' ? claims.fhirUser : undefined;
  const name = typeof claims.name === 'string' ? claims.name : undefined;
  const context = fhirContextSchema.parse(tokens.fhirContext);
  const appointment = context
    ?.map((c) => c.reference)
    .find(
      (reference): reference is string =>
        typeof reference === 'string' && /(^|\/)Appointment\/[A-Za-z0-9\-.]{1,64}$/.test(reference),
    );
  return {
    accessToken: tokens.access_token,
    expiresIn: tokens.expires_in,
    person: { issuer: claims.iss, sub: claims.sub, fhirUser, name },
    patient: typeof tokens.patient === 'string' ? tokens.patient : undefined,
    appointment: appointment?.replace(/^.*(Appointment\/[A-Za-z0-9\-.]{1,64})$/, '$1'),
  };
}
