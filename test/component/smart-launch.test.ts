/**
 * SMART App Launch of the page (docs/smart-launch.md) against a real, independent authorization
 * server started here on loopback: panva's oidc-provider configured as a SMART EHR, beside a small
 * FHIR server that answers only to the tokens the provider issued (test/support/smart-ehr.ts).
 * clinic-a is a confidential client (private_key_jwt, ES384), clinic-b a public one.
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuditEvent, Bundle } from 'fhir/r4.js';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair } from 'jose';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import { startHarness } from '../support/harness.js';
import type { Harness } from '../support/harness.js';
import { followLaunch } from '../support/launch-flow.js';
import { EHR_EMIRATES_ID, EHR_PAYER, EHR_PRACTITIONER, startFhirServer } from '../support/smart-ehr.js';
import type { SmartEhr } from '../support/smart-ehr.js';
import { submitFinal } from '../support/submit.js';
import { until } from '../support/until.js';

const CLIENT_ID = 'eligibility-page';
const SCOPE_TAIL = 'openid fhirUser patient/Patient.rs patient/Coverage.rs patient/Appointment.rs';

let h: Harness;
let base: string;
let fhirA: Awaited<ReturnType<typeof startFhirServer>>;
let fhirB: Awaited<ReturnType<typeof startFhirServer>>;
let ehrA: SmartEhr;
let ehrB: SmartEhr;
/** An EHR that is registered nowhere: it counts the requests it gets (there must be none). */
let stranger: { url: string; count: () => number; close: () => Promise<void> };

async function startCounter(): Promise<typeof stranger> {
  let count = 0;
  const server = createServer((_req, res) => {
    count += 1;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/fhir`,
    count: () => count,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
  const privateJwk = { ...(await exportJWK(privateKey)), kid: 'page-1', alg: 'ES384' };
  const publicJwk = { ...(await exportJWK(publicKey)), kid: 'page-1', alg: 'ES384' };
  [fhirA, fhirB, stranger] = await Promise.all([startFhirServer(), startFhirServer(), startCounter()]);
  h = await startHarness({
    smartLaunch: {
      a: { fhirBaseUrls: [fhirA.fhirBase], clientId: CLIENT_ID, clientKeys: { keys: [privateJwk] } },
      b: { fhirBaseUrls: [fhirB.fhirBase], clientId: CLIENT_ID },
    },
  });
  base = `http://localhost:${new URL(h.url).port}`;
  const redirectUri = `${base}/app/launch/callback`;
  ehrA = await fhirA.attach({ clientId: CLIENT_ID, redirectUri, clientJwks: { keys: [publicJwk] } });
  ehrB = await fhirB.attach({ clientId: CLIENT_ID, redirectUri });
}, 30_000);

afterAll(async () => {
  await h?.stop();
  await Promise.all([fhirA?.close(), fhirB?.close(), stranger?.close()]);
});

function launchUrl(iss: string, launch?: string): string {
  const query = new URLSearchParams({ iss, ...(launch ? { launch } : {}) });
  return `${base}/app/launch?${query}`;
}

/** Every place a token could leak to the browser or the operator: answers, URLs, cookies, logs. */
function expectNoToken(ehr: SmartEhr, texts: string[]): void {
  expect(ehr.issued.length).toBeGreaterThan(0);
  const all = [...texts, ...h.logs].join('\n');
  for (const token of ehr.issued) expect(all).not.toContain(token);
}

async function launchContext(cookie: string) {
  return request(h.url).get('/app/api/launch-context').set('Cookie', cookie);
}

describe('EHR launch (confidential client, private_key_jwt)', () => {
  it('redirects to the EHR with PKCE S256, aud = iss, launch and the SMART scopes', async () => {
    const launch = ehrA.newLaunch();
    const res = await request(h.url).get(
      `/app/launch?${new URLSearchParams({ iss: fhirA.fhirBase, launch })}`,
    );
    expect(res.status).toBe(302);
    const location = new URL(String(res.headers.location));
    expect(`${location.origin}${location.pathname}`).toBe(`${ehrA.issuer}/auth`);
    const q = location.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe(CLIENT_ID);
    expect(q.get('redirect_uri')).toBe(`${base}/app/launch/callback`);
    expect(q.get('scope')).toBe(`launch ${SCOPE_TAIL}`);
    expect(q.get('aud')).toBe(fhirA.fhirBase);
    expect(q.get('launch')).toBe(launch);
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')?.length).toBeGreaterThanOrEqual(22);
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('opens a session on the EHR patient, with the form filled from the EHR and no token in the browser', async () => {
    const flow = await followLaunch(
      launchUrl(fhirA.fhirBase, ehrA.newLaunch()),
      `${base}/app/launch/callback`,
    );
    expect(flow.last.status).toBe(302);
    expect(flow.last.location).toBe('/app/');
    expect(flow.sessionCookie).toMatch(/^eligibility_session=[A-Za-z0-9_-]{43}$/);
    const cookie = String(flow.sessionCookie);

    // PKCE: the verifier sent at the token endpoint is the one the challenge was made of.
    const authorization = ehrA.authorizations.at(-1);
    const token = ehrA.tokenRequests.at(-1);
    const verifier = String(token?.get('code_verifier'));
    expect(createHash('sha256').update(verifier).digest('base64url')).toBe(
      authorization?.get('code_challenge'),
    );

    // private_key_jwt as SMART asks: iss = sub = client id, aud the token endpoint, jti, exp <= 5 min.
    expect(token?.get('client_assertion_type')).toBe(
      'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    );
    const assertion = String(token?.get('client_assertion'));
    expect(decodeProtectedHeader(assertion)).toMatchObject({ alg: 'ES384', kid: 'page-1' });
    const claims = decodeJwt(assertion);
    expect(claims).toMatchObject({ iss: CLIENT_ID, sub: CLIENT_ID, aud: `${ehrA.issuer}/token` });
    expect(claims.jti).toBeTruthy();
    expect(Number(claims.exp) - Number(claims.iat)).toBeLessThanOrEqual(300);

    // The EHR's reads, each with the EHR's token (the FHIR server answers no one else).
    const reads = fhirA.requests.filter((r) => !r.url.includes('.well-known')).slice(-4);
    expect(reads.map((r) => r.url).sort()).toEqual([
      '/fhir/Appointment/appt-1',
      '/fhir/Coverage?patient=pat-1&status=active',
      '/fhir/Patient/pat-1',
      // The person's name: their fhirUser resource, which the fhirUser scope lets the page read.
      `/fhir/${EHR_PRACTITIONER}`,
    ]);
    expect(reads.every((r) => r.status === 200 && r.authorization?.startsWith('Bearer '))).toBe(true);

    const context = await launchContext(cookie);
    expect(context.status).toBe(200);
    expect(context.body).toMatchObject({
      patient: { identifier: EHR_EMIRATES_ID, kind: 'emirates-id', name: 'Aisha Al Mansoori' },
      payer: { code: EHR_PAYER },
    });
    expect(context.body.visitStart).toMatch(/T10:30:00\+04:00$/);
    const session = await request(h.url).get('/app/api/session').set('Cookie', cookie);
    expect(session.status).toBe(200);
    expect(session.body.name).toBe('Mariam Haddad');

    expectNoToken(ehrA, [
      ...flow.hops.flatMap((hop) => [hop.url, hop.location ?? '', hop.body, ...hop.setCookies]),
      JSON.stringify(context.body),
      JSON.stringify(session.body),
    ]);
  });

  it('records the Login and each page call under the EHR user (fhirUser as who.reference)', async () => {
    const flow = await followLaunch(
      launchUrl(fhirA.fhirBase, ehrA.newLaunch()),
      `${base}/app/launch/callback`,
    );
    expect((await launchContext(String(flow.sessionCookie))).status).toBe(200);
    const events = await until(async () => {
      const res = await request(h.url).get('/fhir/AuditEvent?_count=100').set(h.auth);
      const found = ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      const login = found.find((e) => e.subtype?.some((c) => c.code === '110122'));
      const read = found.find((e) => e.subtype?.some((c) => c.code === 'launch-context'));
      return login && read ? { login, read } : undefined;
    });
    for (const event of [events.login, events.read]) {
      expectValidFhir(event);
      const who = event.agent.find((a) => a.requestor)?.who;
      expect(who?.reference).toBe(EHR_PRACTITIONER);
      expect(who?.identifier).toEqual({ system: ehrA.issuer, value: 'prac-7' });
    }
    expect(events.login.type.code).toBe('110114');
    expect(events.login.outcome).toBe('0');
  });

  it('shows the latest answer for that patient and payer, with when it was checked', async () => {
    const path = await submitFinal(h.url, h.auth, { emiratesId: EHR_EMIRATES_ID, payer: EHR_PAYER });
    const flow = await followLaunch(
      launchUrl(fhirA.fhirBase, ehrA.newLaunch()),
      `${base}/app/launch/callback`,
    );
    const context = await launchContext(String(flow.sessionCookie));
    expect(context.body.latest.answer).toBe(path);
    expect(Date.parse(context.body.latest.checkedAt)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('keeps the EHR token in the session row only, and drops it with the session at logout', async () => {
    const flow = await followLaunch(
      launchUrl(fhirA.fhirBase, ehrA.newLaunch()),
      `${base}/app/launch/callback`,
    );
    const cookie = String(flow.sessionCookie);
    const idHash = createHash('sha256').update(cookie.slice('eligibility_session='.length)).digest('hex');
    const row = await h.server.store.sessions.getSession(idHash);
    const kept = (row?.data.smart as { accessToken?: string } | undefined)?.accessToken;
    expect(kept).toBeDefined();
    expect(ehrA.issued).toContain(kept);
    const csrf = (await request(h.url).get('/app/api/session').set('Cookie', cookie)).body
      .csrfToken as string;
    const out = await request(h.url).post('/app/logout').set('Cookie', cookie).set('X-CSRF-Token', csrf);
    expect(out.status).toBeLessThan(400);
    expect(await h.server.store.sessions.getSession(idHash)).toBeNull();
    expect((await launchContext(cookie)).status).toBe(401);
  });

  it('refuses a replayed callback (state is single use): no second session', async () => {
    const flow = await followLaunch(
      launchUrl(fhirA.fhirBase, ehrA.newLaunch()),
      `${base}/app/launch/callback`,
    );
    expect(flow.sessionCookie).toBeDefined();
    const callback = flow.hops.at(-1)?.url ?? '';
    const replay = await request(h.url).get(new URL(callback).pathname + new URL(callback).search);
    expect(replay.status).toBe(400);
    expect(replay.headers['set-cookie']).toBeUndefined();
    expect(replay.text).toContain('already used');
  });

  it.each([
    ['with its signature spoiled', 'signature' as const],
    ['signed by a key the EHR does not publish', 'other-key' as const],
  ])(
    'refuses an ID token %s: 401, no session, no read of the EHR, a refused Login event',
    async (_what, tamper) => {
      const readsBefore = fhirA.requests.filter((r) => !r.url.includes('.well-known')).length;
      ehrA.idTokenTamper = tamper;
      let flow;
      try {
        flow = await followLaunch(launchUrl(fhirA.fhirBase, ehrA.newLaunch()), `${base}/app/launch/callback`);
      } finally {
        ehrA.idTokenTamper = 'none';
      }
      // The EHR did answer the code (the token response came back, with a spoiled ID token).
      expect(ehrA.tokenRequests.length).toBeGreaterThan(0);
      expect(flow.last.url.startsWith(`${base}/app/launch/callback`)).toBe(true);
      expect(flow.last.status).toBe(401);
      expect(flow.last.location).toBeNull();
      expect(flow.sessionCookie).toBeUndefined();
      expect(flow.last.setCookies.some((c) => c.startsWith('eligibility_session='))).toBe(false);
      expect(flow.last.body).toContain('could not be completed');
      // Nothing was read with the EHR's access token of a refused launch.
      expect(fhirA.requests.filter((r) => !r.url.includes('.well-known')).length).toBe(readsBefore);
      expectNoToken(
        ehrA,
        flow.hops.flatMap((hop) => [hop.url, hop.location ?? '', hop.body]),
      );
      const refused = await until(async () => {
        const res = await request(h.url).get('/fhir/AuditEvent?_count=100').set(h.auth);
        const found = ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
        const events = found.filter((e) => e.subtype?.some((c) => c.code === '110122') && e.outcome === '4');
        return events.length > 0 ? events : undefined;
      });
      for (const event of refused) {
        expectValidFhir(event);
        expect(event.agent.find((a) => a.requestor)?.who?.reference).toBeUndefined();
      }
    },
  );

  it('refuses an iss that is not registered: 400, no redirect, no request to it', async () => {
    for (const iss of [
      stranger.url,
      `${fhirA.fhirBase}/../evil`,
      `${fhirA.fhirBase}x`,
      'javascript:alert(1)',
    ]) {
      const res = await request(h.url).get(`/app/launch?${new URLSearchParams({ iss, launch: 'x1' })}`);
      expect(res.status).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.text).not.toContain(iss);
    }
    expect(stranger.count()).toBe(0);
  });

  it('without iss, and two EHRs registered, asks for it (no guess, no redirect)', async () => {
    const res = await request(h.url).get('/app/launch');
    expect(res.status).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.text).toContain('?iss=');
  });

  it('a launch without a session cookie has no launch context', async () => {
    const res = await request(h.url).get('/app/api/launch-context');
    expect(res.status).toBe(401);
  });
});

describe('standalone launch (public client)', () => {
  it('asks for launch/patient instead of launch, sends no launch, and opens on the patient the EHR picked', async () => {
    const flow = await followLaunch(
      `${base}/app/launch?iss=${encodeURIComponent(fhirB.fhirBase)}`,
      `${base}/app/launch/callback`,
    );
    const authorization = ehrB.authorizations.at(-1);
    expect(authorization?.get('scope')).toBe(`launch/patient ${SCOPE_TAIL}`);
    expect(authorization?.has('launch')).toBe(false);
    expect(authorization?.get('aud')).toBe(fhirB.fhirBase);
    // A public client: PKCE only, no client assertion.
    const token = ehrB.tokenRequests.at(-1);
    expect(token?.has('code_verifier')).toBe(true);
    expect(token?.has('client_assertion')).toBe(false);
    const context = await launchContext(String(flow.sessionCookie));
    expect(context.status).toBe(200);
    expect(context.body.patient.identifier).toBe(EHR_EMIRATES_ID);
    // No Appointment in a standalone launch's context.
    expect(context.body.visitStart).toBeNull();
    expectNoToken(ehrB, [
      ...flow.hops.flatMap((hop) => [hop.url, hop.location ?? '', hop.body]),
      context.text,
    ]);
  });
});
