/**
 * OpenID Connect sign-in of the page (docs/signin.md): `GET /app/login?tenant=` sends the browser
 * to the tenant's provider (authorization code, PKCE S256, state, nonce), `GET /app/callback`
 * exchanges the code and checks the ID token (signature by the provider's jwks_uri, iss, aud,
 * exp, nonce: operations/auth/id-token.ts, shared with the SMART launch), then makes a session; `POST /app/logout` ends it and sends the browser to the
 * provider's end_session_endpoint when there is one. The protocol is openid-client's (a certified
 * relying party); this module only keeps the state on the server and decides what to answer.
 * https://openid.net/specs/openid-connect-core-1_0.html#CodeFlowAuth
 */
import type { Request, Response, Router } from 'express';
import { importJWK } from 'jose';
import type { JWK } from 'jose';
import * as oidc from 'openid-client';
import type { OidcSettings, Tenant } from '../config.js';
import type { AuditTrail } from '../checks/audit.js';
import type { AuditRecord } from '../fhir/audit-event.js';
import type { Logger } from '../log.js';
import { isStoreUnavailable, STORE_RETRY_AFTER_SECONDS } from '../checks/store/outage.js';
import { exchangeForIdToken, IdTokenRefused } from '../operations/auth/id-token.js';
import type { SessionPerson, Sessions } from './sessions.js';
import { cookieOf, SESSION_COOKIE } from './sessions.js';

export interface OidcDeps {
  tenants: readonly Tenant[];
  sessions: Sessions;
  /** PUBLIC_BASE_URL: the redirect_uri is `<base>/app/callback`. */
  baseUrl: string;
  logger: Logger;
  audit?: AuditTrail;
  /** Counts refused sign-ins that have no tenant (an unknown or replayed state). */
  refused?: (reason: string) => void;
}

/** The scope asked for: the ID token and the person's name. */
const SCOPE = 'openid profile';

/** Whether the issuer is http (allowed only to a loopback address, config.ts). */
const isPlainHttp = (issuer: string) => issuer.startsWith('http:');

/** The client's authentication at the token endpoint: client_secret_basic or private_key_jwt. */
async function clientAuth(settings: OidcSettings): Promise<oidc.ClientAuth> {
  if (settings.clientSecret !== undefined) return oidc.ClientSecretBasic(settings.clientSecret);
  const jwk = settings.clientKeys?.keys[0] as JWK | undefined;
  if (!jwk) throw new Error('oidc: no client key');
  const alg = jwk.alg ?? (jwk.kty === 'EC' ? 'ES256' : 'RS256');
  const key = await importJWK(jwk, alg);
  if (key instanceof Uint8Array) throw new Error('oidc: clientKeys must be asymmetric private keys');
  return oidc.PrivateKeyJwt({ key, ...(jwk.kid ? { kid: jwk.kid } : {}) });
}

/**
 * The provider of each tenant, discovered once (`<issuer>/.well-known/openid-configuration`) and
 * kept; a failed discovery is forgotten, so the next sign-in tries again.
 */
export class Providers {
  private readonly known = new Map<string, Promise<oidc.Configuration>>();

  get(tenant: Tenant & { oidc: OidcSettings }): Promise<oidc.Configuration> {
    let found = this.known.get(tenant.id);
    if (!found) {
      found = this.discover(tenant.oidc);
      this.known.set(tenant.id, found);
      found.catch(() => this.known.delete(tenant.id));
    }
    return found;
  }

  private async discover(settings: OidcSettings): Promise<oidc.Configuration> {
    const config = await oidc.discovery(
      new URL(settings.issuer),
      settings.clientId,
      undefined,
      await clientAuth(settings),
      isPlainHttp(settings.issuer) ? { execute: [oidc.allowInsecureRequests] } : {},
    );
    return config;
  }
}

/** The roles in a claim: a list of strings, or one string; a dotted name reads a nested claim (Keycloak's `realm_access.roles`). */
export function rolesOf(claims: Record<string, unknown>, claim: string): string[] {
  let value: unknown = claims[claim];
  if (value === undefined && claim.includes('.')) {
    value = claim
      .split('.')
      .reduce<unknown>(
        (at, part) => (at && typeof at === 'object' ? (at as Record<string, unknown>)[part] : undefined),
        claims,
      );
  }
  if (typeof value === 'string') return value.split(/\s+/).filter(Boolean);
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

/** The name shown for a person: `name`, else `preferred_username`, else `sub`. */
function nameOf(claims: Record<string, unknown>): string {
  for (const key of ['name', 'preferred_username', 'email']) {
    const value = claims[key];
    if (typeof value === 'string' && value.trim() !== '') return value.trim().slice(0, 200);
  }
  return String(claims.sub);
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );

/** A small page that says why a sign-in did not happen (no token, code or state in it). */
export function signInProblem(res: Response, status: number, title: string, why: string): void {
  res
    .status(status)
    .set({ 'Cache-Control': 'no-store', 'Content-Type': 'text/html; charset=utf-8' })
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
        '<meta name="viewport" content="width=device-width, initial-scale=1"></head><body><main>' +
        `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(why)}</p>` +
        '<p><a href="/app/">Back to the eligibility page</a></p></main></body></html>',
    );
}

type OidcTenant = Tenant & { oidc: OidcSettings };

/** The sign-in routes on the /app router. */
export function oidcRoutes(deps: OidcDeps): (router: Router) => void {
  const providers = new Providers();
  const byId = new Map(deps.tenants.map((t) => [t.id, t]));
  const redirectUri = `${deps.baseUrl}/app/callback`;
  const oidcTenant = (id: unknown): OidcTenant | undefined => {
    const tenant = typeof id === 'string' ? byId.get(id) : undefined;
    return tenant?.oidc ? (tenant as OidcTenant) : undefined;
  };

  const record = (
    tenant: Tenant,
    fields: Partial<AuditRecord> & Pick<AuditRecord, 'interaction' | 'outcome'>,
  ) =>
    deps.audit?.record({
      tenantId: tenant.id,
      agentId: fields.person?.subject ?? 'unknown',
      agentKind: 'person',
      action: 'E',
      ...fields,
    });

  /** A store outage: the page says so, with Retry-After. */
  const storeUnavailable = (res: Response) => {
    res.set('Retry-After', String(STORE_RETRY_AFTER_SECONDS));
    signInProblem(
      res,
      503,
      'Sign-in is unavailable',
      'The service cannot reach its store. Try again shortly.',
    );
  };

  /** The provider could not be reached or a store outage: the page says so, the log says which tenant. */
  const unavailable = (res: Response, tenant: Tenant, error: unknown) => {
    if (isStoreUnavailable(error)) {
      storeUnavailable(res);
      return;
    }
    deps.logger.warn('sign-in provider unavailable', {
      tenant: tenant.id,
      reason: error instanceof Error ? error.name : 'unknown',
    });
    signInProblem(res, 502, 'Sign-in is unavailable', "The clinic's sign-in service could not be reached.");
  };

  const login = async (req: Request, res: Response) => {
    const tenant = oidcTenant(req.query.tenant);
    if (!tenant) {
      signInProblem(
        res,
        400,
        'No clinic sign-in',
        'This clinic does not sign people in with a clinic account.',
      );
      return;
    }
    try {
      const config = await providers.get(tenant);
      const verifier = oidc.randomPKCECodeVerifier();
      const nonce = oidc.randomNonce();
      const state = await deps.sessions.startLogin(tenant.id, 'oidc', { verifier, nonce });
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: redirectUri,
        scope: SCOPE,
        state,
        nonce,
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      });
      res.set('Cache-Control', 'no-store').redirect(302, url.href);
    } catch (error) {
      unavailable(res, tenant, error);
    }
  };

  const callback = async (req: Request, res: Response) => {
    const state = typeof req.query.state === 'string' ? req.query.state : '';
    let pending;
    try {
      pending = state ? await deps.sessions.takeLogin(state, 'oidc') : null;
    } catch (error) {
      if (!isStoreUnavailable(error)) throw error;
      storeUnavailable(res);
      return;
    }
    const tenant = pending ? oidcTenant(pending.tenantId) : undefined;
    if (!pending || !tenant) {
      deps.refused?.('sign-in-state');
      signInProblem(
        res,
        400,
        'Sign-in not accepted',
        'This sign-in was not started here, was already used, or took too long. Start again from the page.',
      );
      return;
    }
    const refuse = (status: number, why: string, note: string) => {
      record(tenant, { interaction: 'login', outcome: '4', outcomeDesc: note });
      deps.logger.warn('sign-in refused', { tenant: tenant.id, reason: note });
      signInProblem(res, status, 'Sign-in not accepted', why);
    };
    if (typeof req.query.error === 'string') {
      const code = /^[A-Za-z0-9_.-]{1,64}$/.test(req.query.error) ? req.query.error : 'error';
      refuse(401, `The clinic's sign-in service did not sign you in (${code}).`, `provider error ${code}`);
      return;
    }
    let config: oidc.Configuration;
    try {
      config = await providers.get(tenant);
    } catch (error) {
      unavailable(res, tenant, error);
      return;
    }
    let claims: Record<string, unknown>;
    try {
      const query = req.originalUrl.slice(req.originalUrl.indexOf('?'));
      // The ID token's signature (jwks_uri), iss, aud, exp and nonce: the one check the SMART
      // launch uses too (operations/auth/id-token.ts).
      ({ claims } = await exchangeForIdToken(config, new URL(`${redirectUri}${query}`), {
        pkceCodeVerifier: String(pending.data.verifier),
        expectedNonce: String(pending.data.nonce),
        expectedState: state,
      }));
    } catch (error) {
      if (!(error instanceof IdTokenRefused)) throw error;
      // Only the kind of failure: an error's message may quote what the provider sent.
      refuse(
        401,
        "The answer of the clinic's sign-in service could not be verified, so you are not signed in.",
        `ID token or code exchange refused${error.code ? ` (${error.code})` : ''}`,
      );
      return;
    }
    const person: SessionPerson = {
      issuer: String(claims.iss),
      subject: String(claims.sub),
      name: nameOf(claims),
    };
    const roles = rolesOf(claims, tenant.oidc.rolesClaim);
    try {
      await deps.sessions.create(res, { tenantId: tenant.id, person, roles });
    } catch (error) {
      unavailable(res, tenant, error);
      return;
    }
    record(tenant, {
      interaction: 'login',
      outcome: '0',
      agentId: person.subject,
      person: auditPerson(person),
    });
    res.set('Cache-Control', 'no-store').redirect(302, '/app/');
  };

  const logout = async (req: Request, res: Response) => {
    const session = cookieOf(req, SESSION_COOKIE) ? await deps.sessions.read(req) : null;
    // SameSite=Lax keeps the cookie off another site's POST; a page call that sends its CSRF token
    // must send the right one.
    if (session) {
      const given = req.header('x-csrf-token');
      if (given !== undefined && given !== session.csrfToken) {
        signInProblem(
          res,
          403,
          'Not signed out',
          'The request did not come from the page. Sign out from the page.',
        );
        return;
      }
    }
    await deps.sessions.end(req, res);
    const tenant = session ? byId.get(session.tenantId) : undefined;
    let target = `${deps.baseUrl}/app/`;
    if (session && tenant) {
      record(tenant, {
        interaction: 'logout',
        outcome: '0',
        agentId: session.person.subject,
        person: auditPerson(session.person),
      });
      const provider = tenant.oidc
        ? await providers.get(tenant as OidcTenant).catch(() => undefined)
        : undefined;
      if (provider?.serverMetadata().end_session_endpoint) {
        // RP-initiated logout with client_id, not id_token_hint: no token in a URL.
        // https://openid.net/specs/openid-connect-rpinitiated-1_0.html#RPLogout
        target = oidc.buildEndSessionUrl(provider, {
          client_id: tenant.oidc?.clientId ?? '',
          post_logout_redirect_uri: `${deps.baseUrl}/app/`,
        }).href;
      }
    }
    res.set('Cache-Control', 'no-store');
    if (req.accepts(['html', 'json']) === 'json') res.status(200).json({ redirect: target });
    else res.redirect(303, target);
  };

  return (router) => {
    // What the page offers a clinic (no data of it): its clinic account sign-in, or the API key.
    router.get('/sign-in-options', (req, res) => {
      res
        .set('Cache-Control', 'no-store')
        .json({ clinicAccount: oidcTenant(req.query.tenant) !== undefined });
    });
    router.get('/login', (req, res, next) => {
      login(req, res).catch(next);
    });
    router.get('/callback', (req, res, next) => {
      callback(req, res).catch(next);
    });
    router.post('/logout', (req, res, next) => {
      logout(req, res).catch(next);
    });
  };
}

function auditPerson(person: SessionPerson): NonNullable<AuditRecord['person']> {
  return {
    issuer: person.issuer,
    subject: person.subject,
    name: person.name,
    ...(person.fhirUser ? { reference: person.fhirUser } : {}),
  };
}
