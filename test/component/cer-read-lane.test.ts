/**
 * The CER read lane (src/http/cer-read-lane.ts) answers the plain `GET
 * /fhir/CoverageEligibilityResponse/{id}` ahead of express. Each request below goes once through
 * the running service (the lane first) and once through the express app alone (supertest on
 * `server.app`, which has no lane), on the same store: the answers must be the same, status,
 * headers and bytes. The lane must have taken the plain cases (its count grows), and handed the
 * others to the app; its log line and AuditEvent are the app's.
 */
import request from 'supertest';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { ClientKey } from '../support/smart.js';
import { accessToken, clientKey, serviceKey } from '../support/smart.js';

let h: Harness;
let path: string;
let etag: string;
let lastModified: string;
let reader: string;
let writer: string;

beforeAll(async () => {
  const [readerKey, writerKey, svc] = await Promise.all([
    clientKey('ES384'),
    clientKey('ES384'),
    serviceKey(),
  ] as const);
  h = await startHarness({
    tokenSigningKeys: [svc.jwk],
    smartClients: {
      a: [
        {
          clientId: 'reader',
          jwks: { keys: [readerKey.publicJwk] },
          scopes: ['system/CoverageEligibilityResponse.rs'],
        },
        {
          clientId: 'writer',
          jwks: { keys: [writerKey.publicJwk] },
          scopes: ['system/CoverageEligibilityRequest.c'],
        },
      ],
    },
  });
  const created = await request(h.url)
    .post('/fhir/CoverageEligibilityRequest/$submit')
    .set(h.auth)
    .set('Prefer', 'wait=10')
    .send(eligibilityRequest({ emiratesId: '784-1990-0000001-1' }));
  expect(created.status).toBe(200);
  path = new URL(String(created.headers.location)).pathname;
  const first = await request(h.server.app).get(path).set(h.auth);
  etag = String(first.headers.etag);
  lastModified = String(first.headers['last-modified']);
  const smart = await request(h.url).get('/fhir/.well-known/smart-configuration');
  const tokenUrl = String((smart.body as { token_endpoint: string }).token_endpoint);
  const token = (clientId: string, key: ClientKey, scope: string) =>
    accessToken(h.url, tokenUrl, clientId, key, scope);
  reader = await token('reader', readerKey, 'system/CoverageEligibilityResponse.rs');
  writer = await token('writer', writerKey, 'system/CoverageEligibilityRequest.c');
});
afterAll(async () => {
  await h.stop();
});

/** Headers that differ between any two answers (the connection's and the clock's). */
const PER_CONNECTION = new Set(['date', 'connection', 'keep-alive']);

function comparable(res: Response, requestIdGiven: boolean) {
  const headers = Object.fromEntries(
    Object.entries(res.headers as Record<string, string>).filter(
      ([name]) => !PER_CONNECTION.has(name) && (requestIdGiven || name !== 'x-request-id'),
    ),
  );
  return { status: res.status, headers, body: res.text };
}

type Case = [name: string, lane: boolean, send: (r: request.Test) => request.Test, target?: () => string];

const auth = (r: request.Test) => r.set(h.auth);
const cases: Case[] = [
  ['a plain read', true, auth],
  ['with X-Request-Id', true, (r) => auth(r).set('X-Request-Id', 'req-4711')],
  ['with a request id that is not opaque', true, (r) => auth(r).set('X-Request-Id', 'ali-hassan')],
  ['Accept: application/fhir+json', true, (r) => auth(r).set('Accept', 'application/fhir+json')],
  ['Accept: application/json', true, (r) => auth(r).set('Accept', 'application/json')],
  ['Accept: */*', true, (r) => auth(r).set('Accept', '*/*')],
  ['If-None-Match of this version', true, (r) => auth(r).set('If-None-Match', etag)],
  ['If-None-Match, strong', true, (r) => auth(r).set('If-None-Match', etag.replace(/^W\//, ''))],
  ['If-None-Match of another version', true, (r) => auth(r).set('If-None-Match', 'W/"999"')],
  ['If-None-Match: *', true, (r) => auth(r).set('If-None-Match', '*')],
  ['If-None-Match, a list without commas', true, (r) => auth(r).set('If-None-Match', `"0" ${etag}`)],
  [
    'If-None-Match with Cache-Control: no-cache',
    true,
    (r) => auth(r).set('If-None-Match', etag).set('Cache-Control', 'no-cache'),
  ],
  ['a SMART token with the read scope', true, (r) => r.set('Authorization', `Bearer ${reader}`)],
  // Handed to the app:
  ['If-Modified-Since', false, (r) => auth(r).set('If-Modified-Since', lastModified)],
  ['Accept: text/html', false, (r) => auth(r).set('Accept', 'text/html')],
  [
    'Accept with a quality list',
    false,
    (r) => auth(r).set('Accept', 'application/fhir+json;q=0.9, */*;q=0.1'),
  ],
  ['_format', false, auth, () => `${path}?_format=json`],
  ['a trailing slash', false, auth, () => `${path}/`],
  ['another clinic', false, (r) => r.set(h.authB)],
  ['an unknown id', false, auth, () => '/fhir/CoverageEligibilityResponse/no-such-check'],
  ['no Authorization', false, (r) => r],
  ['an unknown key', false, (r) => r.set('Authorization', 'Bearer not-a-key')],
  ['a token without the read scope', false, (r) => r.set('Authorization', `Bearer ${writer}`)],
  ['a tampered token', false, (r) => r.set('Authorization', `Bearer ${reader.slice(0, -4)}AAAA`)],
];

describe('the CER read lane', () => {
  it.each(cases)('%s: the same answer as the app (lane: %s)', async (_name, byLane, send, target) => {
    const url = target?.() ?? path;
    const idGiven = _name.startsWith('with X-Request-Id');
    const before = h.server.readLane?.answered() ?? 0;
    const lane = await send(request(h.url).get(url));
    const taken = (h.server.readLane?.answered() ?? 0) - before;
    const app = await send(request(h.server.app).get(url));
    expect(taken).toBe(byLane ? 1 : 0);
    expect(comparable(lane, idGiven)).toEqual(comparable(app, idGiven));
  });

  it('HEAD goes to the app', async () => {
    const before = h.server.readLane?.answered() ?? 0;
    const res = await request(h.url).head(path).set(h.auth);
    expect(res.status).toBe(200);
    expect(h.server.readLane?.answered()).toBe(before);
  });

  it('logs the line the app logs and records the AuditEvent the app records', async () => {
    await request(h.url).get(path).set(h.auth).set('X-Request-Id', 'lane-1');
    await request(h.server.app).get(path).set(h.auth).set('X-Request-Id', 'app-1');
    const line = (id: string) => {
      const found = h.logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.message === 'request' && l.requestId === id);
      const { durationMs, timestamp, requestId, ...rest } = found ?? {};
      expect(typeof durationMs).toBe('number');
      expect(typeof timestamp).toBe('string');
      expect(requestId).toBe(id);
      return rest;
    };
    expect(line('lane-1')).toEqual(line('app-1'));
    expect(line('lane-1')).toMatchObject({ route: '/fhir/CoverageEligibilityResponse/:id', status: 200 });

    const trail = await request(h.url)
      .get(`/fhir/AuditEvent?entity=${path.slice('/fhir/'.length)}&action=R&_count=2`)
      .set(h.auth);
    const events = (trail.body as { entry?: { resource: Record<string, unknown> }[] }).entry ?? [];
    expect(events).toHaveLength(2);
    const [a, b] = events.map(({ resource }) => {
      const { id: _id, recorded: _recorded, meta: _meta, text: _text, ...rest } = resource;
      return rest;
    });
    expect(a).toEqual(b);
  });

  it('counts the read in the request metrics under the route', async () => {
    const metrics = await request(h.url).get('/metrics');
    expect(metrics.text).toMatch(
      /http_request_duration_seconds_count\{[^}]*route="\/fhir\/CoverageEligibilityResponse\/:id"[^}]*status="200"[^}]*\} \d+/,
    );
  });
});
