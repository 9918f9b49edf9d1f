/**
 * SMART Backend Services (docs/auth.md): the token endpoint's happy paths (RS384 with an inline
 * JWKS, ES384 with a jwksUrl served by a real local HTTP server) and each refusal, the access
 * token as a Bearer (scopes per route, tenant isolation, expired or tampered tokens), and the
 * AuditEvents written for it all, searched per tenant and validated.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { AuditEvent, Bundle, CapabilityStatement, OperationOutcome } from 'fhir/r4.js';
import { SignJWT } from 'jose';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { ClientKey } from '../support/smart.js';
import {
  accessToken,
  assertion,
  clientKey,
  JWT_BEARER,
  postToken,
  serviceKey,
  tokenForm,
} from '../support/smart.js';
import { until } from '../support/until.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FULL =
  'system/CoverageEligibilityRequest.cru system/CoverageEligibilityResponse.rs system/AuditEvent.rs';

let h: Harness;
let jwksServer: Server;
let jwksFetches = 0;
let tokenUrl: string;
let rsKey: ClientKey;
let esKey: ClientKey;
let readerKey: ClientKey;
let bKey: ClientKey;
let svc: Awaited<ReturnType<typeof serviceKey>>;

beforeAll(async () => {
  [rsKey, esKey, readerKey, bKey, svc] = await Promise.all([
    clientKey('RS384'),
    clientKey('ES384'),
    clientKey('ES384'),
    clientKey('ES384'),
    serviceKey(),
  ]);
  // The ES384 client's keys are served over real HTTP, as a client's JWKS URL would be.
  jwksServer = createServer((_req, res) => {
    jwksFetches += 1;
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ keys: [esKey.publicJwk] }));
  });
  await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
  const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks.json`;
  h = await startHarness({
    tokenSigningKeys: [svc.jwk],
    smartClients: {
      a: [
        { clientId: 'engine-rs', jwks: { keys: [rsKey.publicJwk] }, scopes: FULL.split(' ') },
        { clientId: 'engine-es', jwksUrl, scopes: ['system/*.*'] },
        // Nothing listens there: the key set cannot be fetched.
        { clientId: 'engine-down', jwksUrl: 'http://127.0.0.1:9/jwks.json', scopes: ['system/*.read'] },
        {
          clientId: 'reader',
          jwks: { keys: [readerKey.publicJwk] },
          scopes: ['system/CoverageEligibilityResponse.read'],
        },
      ],
      b: [
        {
          clientId: 'engine-b',
          jwks: { keys: [bKey.publicJwk] },
          scopes: ['system/*.read', 'system/*.write'],
        },
      ],
    },
  });
  const config = await request(h.url).get('/fhir/.well-known/smart-configuration');
  tokenUrl = String((config.body as { token_endpoint: string }).token_endpoint);
});

let stopped = false;

afterAll(async () => {
  if (!stopped) await h.stop();
  await new Promise<void>((resolve) => jwksServer.close(() => resolve()));
});

/** Submits a check with a bearer value; returns the answer. */
function submit(bearer: string, emiratesId = '784-1990-0000001-0') {
  return request(h.url)
    .post(SUBMIT)
    .set('Authorization', `Bearer ${bearer}`)
    .set('Prefer', 'wait=20')
    .set('Content-Type', 'application/fhir+json')
    .send(eligibilityRequest({ emiratesId }));
}

function expectOAuthError(res: request.Response, error: string, statuses: number[] = [400, 401]): void {
  expect(statuses, JSON.stringify(res.body)).toContain(res.status);
  expect(res.body).toMatchObject({ error, error_description: expect.any(String) });
  expect(res.headers['cache-control']).toBe('no-store');
}

describe('discovery', () => {
  it('serves smart-configuration without auth, and declares SMART in the CapabilityStatement', async () => {
    const res = await request(h.url).get('/fhir/.well-known/smart-configuration');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      token_endpoint: expect.stringMatching(/\/auth\/token$/),
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['private_key_jwt'],
      token_endpoint_auth_signing_alg_values_supported: ['RS384', 'ES384'],
      capabilities: expect.arrayContaining(['client-confidential-asymmetric']),
    });
    const metadata = await request(h.url).get('/fhir/metadata');
    expectValidFhir(metadata.body);
    const rest = (metadata.body as CapabilityStatement).rest?.[0];
    expect(rest?.security?.service?.[0]?.coding?.[0]?.code).toBe('SMART-on-FHIR');
    // The endpoints are in smart-configuration (SMART 2), not in an oauth-uris extension.
    expect(rest?.security?.extension).toBeUndefined();
    expect(rest?.resource?.some((r) => r.type === 'AuditEvent')).toBe(true);
  });
});

describe('POST /auth/token', () => {
  it('grants a token for an RS384 assertion with an inline JWKS; the token submits a check', async () => {
    const res = await postToken(
      h.url,
      tokenForm(await assertion('engine-rs', rsKey, { aud: tokenUrl }), FULL),
    );
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toMatchObject({ token_type: 'bearer', expires_in: 300, scope: FULL });
    const token = String((res.body as { access_token: string }).access_token);
    const answer = await submit(token);
    expect(answer.status).toBe(200);
    expectValidFhir(answer.body);
  });

  it('grants a token for an ES384 assertion whose keys come from a jwksUrl (fetched once, then cached)', async () => {
    const before = jwksFetches;
    for (let i = 0; i < 2; i += 1) {
      const res = await postToken(
        h.url,
        tokenForm(
          await assertion('engine-es', esKey, { aud: tokenUrl }),
          'system/CoverageEligibilityResponse.rs',
        ),
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ scope: 'system/CoverageEligibilityResponse.rs' });
    }
    expect(jwksFetches - before).toBe(1);
  });

  it('grants what was asked within what the client may have; v1 scopes and * types are understood', async () => {
    const res = await postToken(
      h.url,
      tokenForm(
        await assertion('engine-b', bKey, { aud: tokenUrl }),
        'system/CoverageEligibilityResponse.read system/CoverageEligibilityRequest.c system/Patient.d openid',
      ),
    );
    expect(res.status).toBe(200);
    // .read as asked; .c within .write; Patient.d is within system/*.write too.
    expect(
      String((res.body as { scope: string }).scope)
        .split(' ')
        .sort(),
    ).toEqual(
      [
        'system/CoverageEligibilityRequest.c',
        'system/CoverageEligibilityResponse.read',
        'system/Patient.d',
      ].sort(),
    );
  });

  it('refuses each bad assertion with invalid_client', async () => {
    const other = await clientKey('RS384');
    const now = Math.floor(Date.now() / 1000);
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const claims = { iss: 'engine-rs', sub: 'engine-rs', aud: tokenUrl, exp: now + 120, jti: randomUUID() };
    const cases: Array<[string, string, number[]]> = [
      ['wrong aud', await assertion('engine-rs', rsKey, { aud: 'https://elsewhere.example/token' }), [401]],
      ['exp too far ahead', await assertion('engine-rs', rsKey, { aud: tokenUrl, expIn: 3600 }), [401]],
      ['expired', await assertion('engine-rs', rsKey, { aud: tokenUrl, expIn: -120 }), [401]],
      ['wrong key', await assertion('engine-rs', { ...other, kid: rsKey.kid }, { aud: tokenUrl }), [401]],
      ['unknown client', await assertion('nobody', rsKey, { aud: tokenUrl }), [401]],
      ['iss != sub', await assertion('engine-rs', rsKey, { aud: tokenUrl, sub: 'engine-es' }), [400, 401]],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, [400, 401]],
      [
        'HS256 with the public key as secret',
        await new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256' })
          .sign(new TextEncoder().encode(JSON.stringify(rsKey.publicJwk))),
        [400, 401],
      ],
      ['not a JWT', 'not-a-jwt', [400, 401]],
    ];
    for (const [name, jwt, statuses] of cases) {
      const res = await postToken(h.url, tokenForm(jwt, FULL));
      expect(res.status, name).not.toBe(200);
      expectOAuthError(res, 'invalid_client', statuses);
    }
  });

  it('refuses an assertion whose key set cannot be fetched with invalid_client, not a 500', async () => {
    const res = await postToken(
      h.url,
      tokenForm(await assertion('engine-down', esKey, { aud: tokenUrl }), 'system/*.read'),
    );
    expectOAuthError(res, 'invalid_client', [401]);
  });

  it('refuses a replayed jti', async () => {
    const jwt = await assertion('engine-rs', rsKey, { aud: tokenUrl, jti: `replay-${randomUUID()}` });
    expect((await postToken(h.url, tokenForm(jwt, FULL))).status).toBe(200);
    expectOAuthError(await postToken(h.url, tokenForm(jwt, FULL)), 'invalid_client');
  });

  it('refuses a bad grant type, a disallowed scope and malformed bodies with the RFC 6749 errors', async () => {
    const jwt = () => assertion('engine-rs', rsKey, { aud: tokenUrl });
    expectOAuthError(
      await postToken(h.url, { ...tokenForm(await jwt(), FULL), grant_type: 'authorization_code' }),
      'unsupported_grant_type',
      [400],
    );
    expectOAuthError(
      await postToken(h.url, tokenForm(await jwt(), 'system/Subscription.cruds')),
      'invalid_scope',
      [400],
    );
    expectOAuthError(await postToken(h.url, tokenForm(await jwt(), '')), 'invalid_scope', [400]);
    expectOAuthError(
      await postToken(h.url, { ...tokenForm(await jwt(), FULL), client_assertion_type: 'password' }),
      'invalid_request',
      [400],
    );
    const { client_assertion: _dropped, ...noAssertion } = tokenForm(await jwt(), FULL);
    expectOAuthError(await postToken(h.url, noAssertion), 'invalid_request', [400]);
    expectOAuthError(
      await request(h.url)
        .post('/auth/token')
        .set('Content-Type', 'application/json')
        .send('{"grant_type":"x"}'),
      'invalid_request',
      [400],
    );
    expectOAuthError(
      await request(h.url)
        .post('/auth/token')
        .type('form')
        .send(
          `grant_type=client_credentials&grant_type=client_credentials&client_assertion_type=${JWT_BEARER}`,
        ),
      'invalid_request',
      [400],
    );
    expectOAuthError(
      await request(h.url)
        .post('/auth/token')
        .type('form')
        .send(`grant_type=${'x'.repeat(20_000)}`),
      'invalid_request',
      [400],
    );
  });
});

describe('the access token as a Bearer', () => {
  it('enforces scopes per route: 403 with an OperationOutcome, recorded in the audit trail', async () => {
    const reader = await accessToken(
      h.url,
      tokenUrl,
      'reader',
      readerKey,
      'system/CoverageEligibilityResponse.read',
    );
    const full = await accessToken(h.url, tokenUrl, 'engine-rs', rsKey, FULL);
    const created = await submit(full, '784-1990-0000002-8');
    expect(created.status).toBe(200);
    const path = new URL(String(created.headers.location)).pathname;

    const refused = await submit(reader);
    expect(refused.status).toBe(403);
    expectValidFhir(refused.body);
    expect((refused.body as OperationOutcome).issue[0]?.code).toBe('forbidden');
    const allowed: Array<[string, number]> = [
      [path, 200],
      ['/fhir/CoverageEligibilityResponse?_count=1', 200],
      [path.replace('CoverageEligibilityResponse', 'CoverageEligibilityRequest'), 403],
      ['/fhir/CoverageEligibilityRequest', 403],
      ['/fhir/AuditEvent', 403],
    ];
    for (const [url, status] of allowed) {
      const res = await request(h.url).get(url).set('Authorization', `Bearer ${reader}`);
      expect(res.status, url).toBe(status);
      expectValidFhir(res.body);
    }
    // An API key keeps every scope.
    expect((await request(h.url).get('/fhir/AuditEvent').set(h.auth)).status).toBe(200);
    // Cancelling a request (docs/previsit.md) needs system/CoverageEligibilityRequest.u.
    const requestPath = path.replace('CoverageEligibilityResponse', 'CoverageEligibilityRequest');
    const cancel = (token: string) =>
      request(h.url)
        .patch(requestPath)
        .set('Authorization', `Bearer ${token}`)
        .set('Content-Type', 'application/json-patch+json')
        .send(JSON.stringify([{ op: 'replace', path: '/status', value: 'cancelled' }]));
    const creator = await accessToken(
      h.url,
      tokenUrl,
      'engine-rs',
      rsKey,
      'system/CoverageEligibilityRequest.cr',
    );
    expect((await cancel(creator)).status).toBe(403);
    const updater = await accessToken(
      h.url,
      tokenUrl,
      'engine-rs',
      rsKey,
      'system/CoverageEligibilityRequest.u',
    );
    expect((await cancel(updater)).status).toBe(200);

    const search = await until(async () => {
      const res = await request(h.url)
        .get('/fhir/AuditEvent?agent=reader')
        .set('Authorization', `Bearer ${full}`);
      const events = ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      return events.filter((e) => e.outcome === '4').length >= 4 ? events : undefined;
    });
    // The self link says what was applied; an unknown parameter is ignored and left out of it.
    const listed = await request(h.url)
      .get('/fhir/AuditEvent?agent=reader&color=blue')
      .set('Authorization', `Bearer ${full}`);
    const self = (listed.body as Bundle).link?.find((l) => l.relation === 'self')?.url ?? '';
    expect(self).toMatch(/\/fhir\/AuditEvent\?agent=reader$/);
    const submitRefusal = search.find((e) => e.subtype?.some((s) => s.code === '$submit'));
    expect(submitRefusal).toMatchObject({ outcome: '4', action: 'E' });
    expect(submitRefusal?.outcomeDesc).toContain('system/CoverageEligibilityRequest.c');
  });

  it("answers 404 for another tenant's check, as with an API key", async () => {
    const tokenB = await accessToken(h.url, tokenUrl, 'engine-b', bKey, 'system/*.read');
    const created = await submit(h.auth.Authorization.slice('Bearer '.length));
    const path = new URL(String(created.headers.location)).pathname;
    const res = await request(h.url).get(path).set('Authorization', `Bearer ${tokenB}`);
    expect(res.status).toBe(404);
    expectValidFhir(res.body);
    // Recorded in tenant B's trail as a refused read, without the id it asked for.
    const refused = await until(async () => {
      const trail = await request(h.url).get('/fhir/AuditEvent?agent=engine-b&action=R').set(h.authB);
      const events = ((trail.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      return events.find((e) => e.outcome === '4');
    });
    expectValidFhir(refused);
    expect(refused.entity).toBeUndefined();
    expect(JSON.stringify(refused)).not.toContain(path.split('/').pop());
  });

  it('refuses an expired or tampered token with 401 and WWW-Authenticate', async () => {
    const token = await accessToken(h.url, tokenUrl, 'engine-rs', rsKey, FULL);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const widened = Buffer.from(JSON.stringify({ ...claims, tenant: 'clinic-b' })).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    // Signed with the service's own key, but expired.
    const expired = await new SignJWT({ ...claims, exp: now - 10, iat: now - 400 })
      .setProtectedHeader({ alg: 'ES256', kid: 'svc-1', typ: 'at+jwt' })
      .sign(svc.privateKey);
    const flipped = signature.startsWith('A') ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
    for (const bad of [expired, `${header}.${widened}.${signature}`, `${header}.${payload}.${flipped}`]) {
      const res = await request(h.url)
        .get('/fhir/CoverageEligibilityResponse')
        .set('Authorization', `Bearer ${bad}`);
      expect(res.status).toBe(401);
      expect(String(res.headers['www-authenticate'])).toContain('error="invalid_token"');
      expectValidFhir(res.body);
    }
    // The untouched token still works.
    const ok = await request(h.url)
      .get('/fhir/CoverageEligibilityResponse')
      .set('Authorization', `Bearer ${token}`);
    expect(ok.status).toBe(200);
  });
});

describe('AuditEvent', () => {
  it('records $submit, read and search, searchable and readable by the tenant only, each one valid', async () => {
    const token = await accessToken(h.url, tokenUrl, 'engine-rs', rsKey, FULL);
    const bearer = { Authorization: `Bearer ${token}` };
    const created = await submit(token, '784-1990-0000001-0');
    const path = new URL(String(created.headers.location)).pathname;
    const entity = path.replace('/fhir/', '');
    await request(h.url).get(path).set(bearer);
    await request(h.url).get('/fhir/CoverageEligibilityResponse?_count=1').set(bearer);

    const byEntity = await until(async () => {
      const res = await request(h.url).get(`/fhir/AuditEvent?entity=${entity}`).set(bearer);
      expect(res.status).toBe(200);
      const events = ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      return events.length >= 2 ? { bundle: res.body as Bundle, events } : undefined;
    });
    expectValidFhir(byEntity.bundle);
    for (const event of byEntity.events) {
      expectValidFhir(event);
      expect(event.entity?.[0]?.what?.reference).toBe(entity);
      expect(event.agent[0]?.who?.identifier?.value).toBe('engine-rs');
      expect(event.agent[1]?.who?.identifier?.value).toBe('clinic-a');
      expect(event.outcome).toBe('0');
    }
    expect(byEntity.events.map((e) => e.action).sort()).toEqual(['E', 'R']);
    // Nothing of the patient: only references and codes.
    expect(JSON.stringify(byEntity.events)).not.toContain('784-1990');

    const reads = await request(h.url)
      .get(`/fhir/AuditEvent?entity=${entity}&action=R&agent=engine-rs`)
      .set(bearer);
    expect((reads.body as Bundle).entry).toHaveLength(1);
    const today = new Date().toISOString().slice(0, 10);
    const dated = await request(h.url).get(`/fhir/AuditEvent?entity=${entity}&date=ge${today}`).set(bearer);
    expect((dated.body as Bundle).entry?.length).toBe(2);
    const none = await request(h.url).get(`/fhir/AuditEvent?entity=${entity}&date=lt2020-01-01`).set(bearer);
    expect((none.body as Bundle).entry ?? []).toHaveLength(0);
    const search = await until(async () => {
      const res = await request(h.url).get('/fhir/AuditEvent?action=E&agent=engine-rs').set(bearer);
      const events = ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
      return events.find((e) => e.subtype?.some((s) => s.code === 'search-type'));
    });
    expectValidFhir(search);

    const id = String(byEntity.events[0]?.id);
    const read = await request(h.url).get(`/fhir/AuditEvent/${id}`).set(bearer);
    expect(read.status).toBe(200);
    expectValidFhir(read.body);
    // Another tenant sees none of it.
    const other = await request(h.url).get(`/fhir/AuditEvent/${id}`).set(h.authB);
    expect(other.status).toBe(404);
    const otherSearch = await request(h.url).get(`/fhir/AuditEvent?entity=${entity}`).set(h.authB);
    expect((otherSearch.body as Bundle).entry ?? []).toHaveLength(0);

    for (const bad of [
      'action=X',
      'date=yesterday',
      'entity=%3Cscript%3E',
      '_count=many',
      'agent=a&agent=b',
      // A modifier is refused, never ignored (that would answer wider than asked).
      'entity:missing=true',
      // Each repeat of date is one more condition, each comma one more alternative: bounded.
      Array.from({ length: 5 }, () => 'date=ge2020').join('&'),
      `agent=${Array.from({ length: 101 }, (_, i) => `a${i}`).join(',')}`,
      '_cursor=0',
      '_cursor=../../etc',
    ]) {
      const res = await request(h.url).get(`/fhir/AuditEvent?${bad}`).set(bearer);
      expect(res.status, bad).toBe(400);
      expectValidFhir(res.body);
      expect((res.body as OperationOutcome).issue[0]?.expression?.length, bad).toBeGreaterThan(0);
    }
  });

  it('pages the trail by next links: every event once, newest first, none lost to new ones', async () => {
    const token = await accessToken(h.url, tokenUrl, 'engine-rs', rsKey, FULL);
    const bearer = { Authorization: `Bearer ${token}` };
    const created = await submit(token, '784-1990-0000002-8');
    const path = new URL(String(created.headers.location)).pathname;
    const entity = path.replace('/fhir/', '');
    for (let i = 0; i < 6; i += 1) await request(h.url).get(path).set(bearer);
    // The search writes the queued events first: all seven are there at once.
    const all = await request(h.url).get(`/fhir/AuditEvent?entity=${entity}&_count=100`).set(bearer);
    const expected = ((all.body as Bundle).entry ?? []).map((e) => String(e.resource?.id));
    expect(expected).toHaveLength(7);

    const seen: string[] = [];
    let next: string | undefined = `/fhir/AuditEvent?entity=${entity}&_count=3`;
    let pages = 0;
    while (next) {
      const res = await request(h.url).get(next).set(bearer);
      expect(res.status).toBe(200);
      const bundle = res.body as Bundle;
      expectValidFhir(bundle);
      seen.push(...(bundle.entry ?? []).map((e) => String(e.resource?.id)));
      pages += 1;
      // A read between pages is a newer event: it must not shift the pages still to come.
      if (pages === 1) await request(h.url).get(path).set(bearer);
      const link = bundle.link?.find((l) => l.relation === 'next')?.url;
      next = link === undefined ? undefined : new URL(link).pathname + new URL(link).search;
      if (next) expect(next).toContain(`entity=${encodeURIComponent(entity)}`);
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(expected);
  });

  it('counts refused authentication in the log, without the credential', async () => {
    const secret = `${'Zq9'.repeat(8)}.${'Xy7'.repeat(8)}.${'Wv5'.repeat(8)}`;
    for (const header of [`Bearer ${secret}`, 'Bearer not-a-key-0000', 'Basic abc']) {
      const res = await request(h.url).get('/fhir/CoverageEligibilityResponse').set('Authorization', header);
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toBeTruthy();
    }
    stopped = true;
    await h.stop();
    const line = h.logs.find((l) => l.includes('authentication refused'));
    expect(line).toBeDefined();
    // The count by reason, each a number the operator can read (never a redacted value).
    const counted = JSON.parse(String(line)) as { count: number; byReason: Record<string, unknown> };
    expect(counted.count).toBeGreaterThanOrEqual(3);
    for (const reason of ['bad-access-token', 'unknown-key', 'missing']) {
      expect(counted.byReason[reason], reason).toEqual(expect.any(Number));
    }
    const text = h.logs.join('\n');
    // The whole header value: `abc"` alone also ends a random request id (a UUID) in a log line.
    for (const value of [secret, 'not-a-key-0000', 'Basic abc']) expect(text).not.toContain(value);
  });
});
