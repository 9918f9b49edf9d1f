/**
 * Plays the EHR against a running service's CDS Hooks (docs/cds-hooks.md): makes a key pair (or
 * takes one), prints the `cdsClients` entry for the tenants file, then signs a CDS Hooks 2.0 JWT
 * (https://cds-hooks.hl7.org/2.0/#trusting-cds-clients: iss, aud = the service URL, exp 4 minutes
 * ahead, a new jti) and calls a hook with its prefetch inline, printing the cards.
 *
 *   npm run cds-client -- --iss https://ehr.example.org                       (new key; prints the entry)
 *   npm run cds-client -- --iss https://ehr.example.org --key ehr.private.jwk.json \
 *     [--hook patient-view|appointment-book] [--base-url http://localhost:8080] \
 *     [--emirates-id 784-1990-0000001-0] [--payer DAMAN] [--start 2026-12-03T09:30:00+04:00]
 *
 * The private key is written to `<host of iss>.private.jwk.json` (mode 600) and never printed.
 * Every key and JWT step is jose's.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { importJWK, SignJWT } from 'jose';
import { clientPrivateKey, publicJwkOf } from './client-key.js';

const { values } = parseArgs({
  options: {
    iss: { type: 'string' },
    key: { type: 'string' },
    alg: { type: 'string', default: 'ES384' },
    'base-url': { type: 'string', default: 'http://localhost:8080' },
    hook: { type: 'string', default: 'patient-view' },
    'emirates-id': { type: 'string', default: '784-1990-0000001-0' },
    payer: { type: 'string', default: 'DAMAN' },
    start: { type: 'string' },
  },
});

const iss = values.iss;
const hook = values.hook;
const alg = values.alg;
if (
  !iss ||
  (hook !== 'patient-view' && hook !== 'appointment-book') ||
  (alg !== 'ES384' && alg !== 'RS384')
) {
  console.error(
    'usage: npm run cds-client -- --iss <url> [--key FILE] [--alg ES384|RS384] [--hook patient-view|appointment-book] [--base-url URL] [--emirates-id ID] [--payer CODE] [--start ISO]',
  );
  process.exit(2);
}
const baseUrl = (values['base-url'] ?? '').replace(/\/+$/, '');

const file = `${new URL(iss).hostname}.private.jwk.json`;
const key = await clientPrivateKey(values.key, alg, `cds-${Date.now()}`, file);
if (!key) {
  console.error(`${file} exists already: pass it with --key to call with it`);
  process.exit(2);
}
const { privateJwk } = key;
if (key.created) {
  console.error(`private key written to ${file} (keep it in the EHR; never in the tenants file)`);
  console.log('# Add to the tenant in the tenants file, under "cdsClients", and restart the service:');
  console.log(JSON.stringify({ iss, jwks: { keys: [publicJwkOf(privateJwk)] }, fhirServers: [] }, null, 2));
  console.log(`# Then call a hook: npm run cds-client -- --iss ${iss} --key ${file}`);
  process.exit(0);
}

const service = hook === 'appointment-book' ? 'eligibility-appointment-book' : 'eligibility-patient-view';
const serviceUrl = `${baseUrl}/cds-services/${service}`;
const signingAlg = String(privateJwk.alg ?? alg);
const now = Math.floor(Date.now() / 1000);
const jwt = await new SignJWT({})
  .setProtectedHeader({ alg: signingAlg, kid: String(privateJwk.kid), typ: 'JWT' })
  .setIssuer(iss)
  .setAudience(serviceUrl)
  .setIssuedAt(now)
  .setExpirationTime(now + 240)
  .setJti(randomUUID())
  .sign(await importJWK(privateJwk, signingAlg));

const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const payer = values.payer ?? 'DAMAN';
const patient = {
  resourceType: 'Patient',
  id: 'example',
  identifier: [
    {
      type: { coding: [{ system: V2_0203, code: 'NI' }] },
      system: 'http://uae.gov/fhir/identifier/emirates-id',
      value: values['emirates-id'],
    },
  ],
  name: [{ text: 'Sandbox Patient' }],
};
const coverage = {
  resourceType: 'Bundle',
  type: 'searchset',
  entry: [
    {
      resource: {
        resourceType: 'Coverage',
        id: 'example-coverage',
        status: 'active',
        beneficiary: { reference: 'Patient/example' },
        payor: [{ identifier: { type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: payer } }],
      },
    },
  ],
};
const start = values.start ?? new Date(Date.now() + 86_400_000).toISOString();
const body = {
  hook,
  hookInstance: randomUUID(),
  context: {
    userId: 'Practitioner/example',
    patientId: 'example',
    ...(hook === 'appointment-book'
      ? {
          appointments: {
            resourceType: 'Bundle',
            type: 'collection',
            entry: [
              {
                resource: {
                  resourceType: 'Appointment',
                  id: 'example-1',
                  status: 'proposed',
                  start,
                  participant: [{ actor: { reference: 'Patient/example' }, status: 'accepted' }],
                },
              },
            ],
          },
        }
      : {}),
  },
  prefetch: { patient, coverage },
};

console.error(`POST ${serviceUrl}`);
const answer = await fetch(serviceUrl, {
  method: 'POST',
  headers: { Authorization: `Bearer ${jwt}`, 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
});
console.error(`HTTP ${answer.status}`);
console.log(JSON.stringify(await answer.json(), null, 2));
process.exit(answer.ok ? 0 : 1);
