/**
 * A real OpenID provider on loopback for the sign-in tests: panva's oidc-provider 8.x (an
 * OpenID-certified provider), with one confidential client for the page, two people (a front
 * desk and an operator, their roles in the `roles` claim of the ID token), its development login
 * form, no consent prompt, and RP-initiated logout.
 *
 * To test the relying party's checks, a koa middleware in front of the provider's token endpoint
 * can change the ID token it answers with (the provider's own hook, no proxy):
 * - `bad-nonce`: re-signed with the provider's key, so the signature is good but `nonce` differs;
 * - `tampered`: one claim changed after signing, so the signature no longer matches.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { JWK } from 'jose';
import Provider from 'oidc-provider';
import type { OidcSettings } from '../../src/config.js';

export const PAGE_CLIENT_ID = 'eligibility-page';
export const PAGE_CLIENT_SECRET = 'page-client-secret-for-tests-51c7e2a9';
export const OPERATOR_ROLE = 'eligibility-operator';
/** A second client of the page that authenticates with private_key_jwt (a tenant's `clientKeys`). */
export const PAGE_KEY_CLIENT_ID = 'eligibility-page-keys';

/** The people the provider knows: login name -> name and roles. */
export const PEOPLE: Record<string, { name: string; roles: string[] }> = {
  desk: { name: 'Mariam Desk', roles: ['front-desk'] },
  boss: { name: 'Omar Operator', roles: ['front-desk', OPERATOR_ROLE] },
};

export type TokenMode = 'normal' | 'bad-nonce' | 'tampered';

export interface TestProvider {
  issuer: string;
  /** The tenant's `oidc` settings for this provider (client_secret_basic). */
  settings: OidcSettings;
  /** The same with `clientKeys` (private_key_jwt, ES256). */
  keySettings: OidcSettings;
  /** Registers the page's client for an adapter at `adapterBase` (its redirect URIs) and starts answering. */
  register(adapterBase: string): void;
  /** How the token endpoint's next answers are changed (see above). */
  mode: TokenMode;
  /** Every ID token and access token the provider issued (the log test looks for them). */
  issued: string[];
  close(): Promise<void>;
}

interface KoaContext {
  path: string;
  method: string;
  status: number;
  body: unknown;
}

/** Starts the provider on 127.0.0.1 (any port); it answers once register() names the adapter. */
export async function startOidcProvider(): Promise<TestProvider> {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server = createServer((req, res) => {
    if (handler) handler(req, res);
    else res.writeHead(503).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const clientPair = await generateKeyPair('ES256', { extractable: true });
  const clientPrivate: JWK = { ...(await exportJWK(clientPair.privateKey)), kid: 'page-key-1', alg: 'ES256' };
  const clientPublic: JWK = { ...(await exportJWK(clientPair.publicKey)), kid: 'page-key-1', alg: 'ES256' };
  const signingJwk: JWK = {
    ...(await exportJWK(privateKey)),
    kid: 'provider-key-1',
    alg: 'RS256',
    use: 'sig',
  };

  const provider: TestProvider = {
    issuer,
    settings: {
      issuer,
      clientId: PAGE_CLIENT_ID,
      clientSecret: PAGE_CLIENT_SECRET,
      rolesClaim: 'roles',
      operatorRoles: [OPERATOR_ROLE],
    },
    keySettings: {
      issuer,
      clientId: PAGE_KEY_CLIENT_ID,
      clientKeys: { keys: [clientPrivate] },
      rolesClaim: 'roles',
      operatorRoles: [OPERATOR_ROLE],
    },
    mode: 'normal',
    issued: [],
    register(adapterBase) {
      const oidc = new Provider(issuer, {
        clients: [
          {
            client_id: PAGE_CLIENT_ID,
            client_secret: PAGE_CLIENT_SECRET,
            redirect_uris: [`${adapterBase}/app/callback`],
            post_logout_redirect_uris: [`${adapterBase}/app/`],
            response_types: ['code'],
            grant_types: ['authorization_code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
          {
            client_id: PAGE_KEY_CLIENT_ID,
            redirect_uris: [`${adapterBase}/app/callback`],
            post_logout_redirect_uris: [`${adapterBase}/app/`],
            response_types: ['code'],
            grant_types: ['authorization_code'],
            token_endpoint_auth_method: 'private_key_jwt',
            token_endpoint_auth_signing_alg: 'ES256',
            jwks: { keys: [clientPublic] },
          },
        ],
        jwks: { keys: [signingJwk] },
        cookies: { keys: ['provider-cookie-key-for-tests'] },
        claims: { openid: ['sub'], profile: ['name', 'roles'] },
        // The profile claims (name, roles) in the ID token itself, as Keycloak and Entra ID put them.
        conformIdTokenClaims: false,
        pkce: { required: () => true },
        features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
        findAccount: (_ctx, id) => {
          const person = PEOPLE[id];
          if (!person) return undefined;
          return {
            accountId: id,
            claims: () => ({ sub: id, name: person.name, roles: person.roles }),
          };
        },
        // No consent prompt: the page is the clinic's own application.
        loadExistingGrant: async (ctx) => {
          const clientId = ctx.oidc.client!.clientId;
          const grantId = ctx.oidc.result?.consent?.grantId ?? ctx.oidc.session!.grantIdFor(clientId);
          if (grantId) return ctx.oidc.provider.Grant.find(grantId);
          const grant = new ctx.oidc.provider.Grant({ clientId, accountId: ctx.oidc.session!.accountId });
          grant.addOIDCScope('openid profile');
          grant.addOIDCClaims(['name', 'roles']);
          await grant.save();
          ctx.oidc.session!.grantIdFor(clientId, grant.jti);
          return grant;
        },
      });
      oidc.use(async (ctx: KoaContext, next: () => Promise<void>) => {
        await next();
        if (ctx.path !== '/token' || ctx.method !== 'POST' || ctx.status !== 200) return;
        const body = ctx.body as { id_token?: string; access_token?: string };
        if (body.access_token) provider.issued.push(body.access_token);
        if (!body.id_token) return;
        provider.issued.push(body.id_token);
        if (provider.mode === 'bad-nonce') {
          const header = decodeProtectedHeader(body.id_token);
          body.id_token = await new SignJWT({ ...decodeJwt(body.id_token), nonce: 'not-the-nonce-sent' })
            .setProtectedHeader({ alg: String(header.alg), kid: String(header.kid) })
            .sign(privateKey);
        } else if (provider.mode === 'tampered') {
          const [head, , signature] = body.id_token.split('.');
          const claims = { ...decodeJwt(body.id_token), name: 'Someone Else', roles: [OPERATOR_ROLE] };
          const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
          body.id_token = `${head}.${payload}.${signature}`;
        }
      });
      const app = oidc.callback();
      handler = (req, res) => {
        void app(req, res);
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return provider;
}
