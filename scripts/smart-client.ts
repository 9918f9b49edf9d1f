/**
 * Registers an integration engine for SMART Backend Services (docs/auth.md): makes a key pair,
 * prints the public JWKS to put in the tenants file (`smartClients`), and a ready token request
 * (curl) with a freshly signed client assertion (valid 4 minutes, a new jti each run).
 *
 *   npm run smart-client -- --client-id engine-1 [--base-url http://localhost:8080] [--alg ES384|RS384]
 *   npm run smart-client -- --client-id engine-1 --key engine-1.private.jwk.json   (a new assertion, same key)
 *
 * The private key is written to `<client-id>.private.jwk.json` (mode 600) and never printed: it
 * belongs in the engine's key store. Every key and JWT step is jose's.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { importJWK, SignJWT } from 'jose';
import { clientPrivateKey, publicJwkOf } from './client-key.js';

const { values } = parseArgs({
  options: {
    'client-id': { type: 'string' },
    'base-url': { type: 'string', default: 'http://localhost:8080' },
    alg: { type: 'string', default: 'ES384' },
    key: { type: 'string' },
    scope: {
      type: 'string',
      default: 'system/CoverageEligibilityRequest.c system/CoverageEligibilityResponse.rs',
    },
  },
});

const clientId = values['client-id'];
if (!clientId || !/^[A-Za-z0-9._:-]{1,128}$/.test(clientId)) {
  console.error(
    'usage: npm run smart-client -- --client-id <id> [--base-url URL] [--alg ES384|RS384] [--key FILE]',
  );
  process.exit(2);
}
const alg = values.alg;
if (alg !== 'ES384' && alg !== 'RS384') {
  console.error('--alg must be ES384 or RS384');
  process.exit(2);
}
const baseUrl = (values['base-url'] ?? '').replace(/\/+$/, '');

const file = `${clientId}.private.jwk.json`;
const key = await clientPrivateKey(values.key, alg, `${clientId}-${Date.now()}`, file);
if (!key) {
  console.error(`${file} exists already: pass it with --key to sign a new assertion with it`);
  process.exit(2);
}
const { privateJwk } = key;
if (key.created)
  console.error(`private key written to ${file} (keep it in the engine; never in the tenants file)`);
const publicJwk = publicJwkOf(privateJwk);

const tokenUrl = `${baseUrl}/auth/token`;
const now = Math.floor(Date.now() / 1000);
const signingAlg = String(privateJwk.alg ?? alg);
const assertion = await new SignJWT({})
  .setProtectedHeader({ alg: signingAlg, kid: String(privateJwk.kid), typ: 'JWT' })
  .setIssuer(clientId)
  .setSubject(clientId)
  .setAudience(tokenUrl)
  .setIssuedAt(now)
  .setExpirationTime(now + 240)
  .setJti(randomUUID())
  .sign(await importJWK(privateJwk, signingAlg));

const entry = { clientId, jwks: { keys: [publicJwk] }, scopes: (values.scope ?? '').split(' ') };
console.log('# 1. Add to the tenant in the tenants file, under "smartClients":');
console.log(JSON.stringify(entry, null, 2));
console.log(
  '\n# 2. Restart the service; then ask for a token (this assertion is valid for 4 minutes, once):',
);
console.log(
  [
    `curl -s -X POST ${tokenUrl}`,
    `  -H 'Content-Type: application/x-www-form-urlencoded'`,
    `  --data-urlencode 'grant_type=client_credentials'`,
    `  --data-urlencode 'client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer'`,
    `  --data-urlencode 'client_assertion=${assertion}'`,
    `  --data-urlencode 'scope=${values.scope ?? ''}'`,
  ].join(' \\\n'),
);
console.log('\n# 3. Send the access_token as Authorization: Bearer <access_token> to /fhir.');
