/**
 * The EHR launch against an independent SMART launcher (smart-on-fhir/smart-launcher-v2, run
 * outside this repository and given as SMART_LAUNCHER_URL, e.g. http://127.0.0.1:8470), proxying
 * to the small FHIR server this test starts. It covers the launch, PKCE (the launcher set to
 * require it), the confidential client (private_key_jwt checked by the launcher against the
 * registered JWKS) and the public client, and the standalone launch. The launcher has no
 * `fhirContext`, so no Appointment: that part is covered by smart-launch.test.ts, whose
 * oidc-provider EHR is what CI runs. Without SMART_LAUNCHER_URL this file does not run (skipped,
 * with the reason in the suite's name).
 */
import { exportJWK, generateKeyPair } from 'jose';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness } from '../support/harness.js';
import type { Harness } from '../support/harness.js';
import { followLaunch } from '../support/launch-flow.js';
import { EHR_EMIRATES_ID, EHR_PATIENT_ID, EHR_PAYER, startFhirServer } from '../support/smart-ehr.js';

const LAUNCHER = process.env.SMART_LAUNCHER_URL?.replace(/\/+$/, '');
const CLIENT_ID = 'eligibility-page';

/**
 * The launcher's launch options as its `launch` value (and the `sim` path segment) carries them:
 * base64url of a JSON array in its documented order.
 */
interface LauncherOptions {
  launchType: 'provider-ehr' | 'provider-standalone';
  clientType: 'public' | 'confidential-asymmetric';
  jwks?: string;
  fhirServer: string;
}

const LAUNCH_TYPES = ['provider-ehr', 'patient-portal', 'provider-standalone', 'patient-standalone'];
const CLIENT_TYPES = ['public', 'confidential-symmetric', 'confidential-asymmetric'];
const PKCE_ALWAYS = 2;

function launcherOptions(o: LauncherOptions): string {
  const list = [
    LAUNCH_TYPES.indexOf(o.launchType),
    EHR_PATIENT_ID, // patient: one, so no picker
    'prac-7', // provider: one, so no login screen
    'NONE', // encounter
    1, // skip_login
    1, // skip_auth
    0, // sim_ehr
    '', // scope
    '', // redirect_uris
    '', // client_id
    '', // client_secret
    '', // auth_error
    '', // jwks_url
    o.jwks ?? '',
    CLIENT_TYPES.indexOf(o.clientType),
    PKCE_ALWAYS,
    o.fhirServer,
  ];
  return Buffer.from(JSON.stringify(list)).toString('base64url');
}

describe.skipIf(!LAUNCHER)(
  LAUNCHER
    ? `EHR launch against the SMART launcher at ${LAUNCHER}`
    : 'EHR launch against a SMART launcher: NOT RUN, SMART_LAUNCHER_URL is not set (CI covers the launch with oidc-provider in smart-launch.test.ts)',
  () => {
    let h: Harness;
    let base: string;
    let fhir: Awaited<ReturnType<typeof startFhirServer>>;
    let iss: string;
    let publicJwks: string;
    let otherJwks: string;

    beforeAll(async () => {
      const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
      const other = await generateKeyPair('ES384', { extractable: true });
      const privateJwk = { ...(await exportJWK(privateKey)), kid: 'page-1', alg: 'ES384' };
      const verify = { alg: 'ES384', key_ops: ['verify'] };
      publicJwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'page-1', ...verify }] });
      otherJwks = JSON.stringify({
        keys: [{ ...(await exportJWK(other.publicKey)), kid: 'page-1', ...verify }],
      });
      fhir = await startFhirServer();
      // The launcher's FHIR base for this FHIR server: its `sim` segment names the server.
      const sim = launcherOptions({
        launchType: 'provider-standalone',
        clientType: 'confidential-asymmetric',
        jwks: publicJwks,
        fhirServer: fhir.fhirBase,
      });
      iss = `${LAUNCHER}/v/r4/sim/${sim}/fhir`;
      h = await startHarness({
        smartLaunch: { a: { fhirBaseUrls: [iss], clientId: CLIENT_ID, clientKeys: { keys: [privateJwk] } } },
      });
      base = `http://localhost:${new URL(h.url).port}`;
    }, 30_000);

    afterAll(async () => {
      await h?.stop();
      await fhir?.close();
    });

    const start = (launch?: string) =>
      followLaunch(
        `${base}/app/launch?${new URLSearchParams({ iss, ...(launch ? { launch } : {}) })}`,
        `${base}/app/launch/callback`,
      );

    async function expectOpenedOnPatient(cookie: string | undefined): Promise<void> {
      expect(cookie).toBeDefined();
      const context = await request(h.url).get('/app/api/launch-context').set('Cookie', String(cookie));
      expect(context.status).toBe(200);
      expect(context.body.patient.identifier).toBe(EHR_EMIRATES_ID);
      expect(context.body.payer.code).toBe(EHR_PAYER);
      // The launcher has no fhirContext: no Appointment, no visit (smart-launch.test.ts covers it).
      expect(context.body.visitStart).toBeNull();
      const session = await request(h.url).get('/app/api/session').set('Cookie', String(cookie));
      // The launcher's ID token has fhirUser; the name is read from that Practitioner.
      expect(session.body.name).toBe('Mariam Haddad');
    }

    it('EHR launch, confidential client (private_key_jwt), PKCE required: opens on the patient', async () => {
      const launch = launcherOptions({
        launchType: 'provider-ehr',
        clientType: 'confidential-asymmetric',
        jwks: publicJwks,
        fhirServer: fhir.fhirBase,
      });
      const flow = await start(launch);
      expect(flow.last.location).toBe('/app/');
      await expectOpenedOnPatient(flow.sessionCookie);
      // The reads reached the FHIR server through the launcher's proxy.
      expect(fhir.requests.map((r) => r.url)).toEqual(
        expect.arrayContaining(['/fhir/Patient/pat-1', '/fhir/Coverage?patient=pat-1&status=active']),
      );
    });

    it('a client assertion signed with a key the launcher does not have: no session', async () => {
      const launch = launcherOptions({
        launchType: 'provider-ehr',
        clientType: 'confidential-asymmetric',
        jwks: otherJwks,
        fhirServer: fhir.fhirBase,
      });
      const flow = await start(launch);
      expect(flow.last.status).toBe(401);
      expect(flow.sessionCookie).toBeUndefined();
    });

    it('EHR launch, public client, PKCE required: opens on the patient', async () => {
      const launch = launcherOptions({
        launchType: 'provider-ehr',
        clientType: 'public',
        fhirServer: fhir.fhirBase,
      });
      const flow = await start(launch);
      await expectOpenedOnPatient(flow.sessionCookie);
    });

    it('standalone launch (launch/patient): the launcher picks its one patient', async () => {
      const flow = await start();
      expect(new URL(flow.hops[1]?.url ?? '').searchParams.get('scope')).toMatch(/^launch\/patient /);
      await expectOpenedOnPatient(flow.sessionCookie);
    });
  },
);
