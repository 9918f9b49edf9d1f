/**
 * The CER read lane (src/http/cer-read-lane.ts) answers the plain `GET
 * /fhir/CoverageEligibilityResponse/{id}` ahead of express. Each request below goes once through
 * the running service (the lane first) and once through the express app alone (`server.app` on a
 * port of its own, which has no lane), on the same store: the answers must be the same, status,
 * header lines (a header sent twice shows twice) and bytes. The lane must have taken the plain
 * cases (its count grows) and handed the others to the app; its log line and AuditEvent are the
 * app's.
 */
import { createServer, get } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness, TENANT_A_KEY, TENANT_B_KEY } from '../support/harness.js';
import { submitFinal } from '../support/submit.js';
import type { ClientKey } from '../support/smart.js';
import { accessToken, clientKey, serviceKey } from '../support/smart.js';

let h: Harness;
let path: string;
let etag: string;
let lastModified: string;
let reader: string;
let writer: string;
/** The express app alone, on its own port (no lane). */
let appServer: Server;
let appUrl: string;

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
  path = await submitFinal(h.url, h.auth, { emiratesId: '784-1990-0000001-0' });
  const first = await request(h.server.app).get(path).set(h.auth);
  etag = String(first.headers.etag);
  lastModified = String(first.headers['last-modified']);
  const smart = await request(h.url).get('/fhir/.well-known/smart-configuration');
  const tokenUrl = String((smart.body as { token_endpoint: string }).token_endpoint);
  const token = (clientId: string, key: ClientKey, scope: string) =>
    accessToken(h.url, tokenUrl, clientId, key, scope);
  reader = await token('reader', readerKey, 'system/CoverageEligibilityResponse.rs');
  writer = await token('writer', writerKey, 'system/CoverageEligibilityRequest.c');
  appServer = createServer(h.server.app);
  await new Promise<void>((resolve) => appServer.listen(0, '127.0.0.1', resolve));
  appUrl = `http://127.0.0.1:${(appServer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => appServer.close(() => resolve()));
  await h.stop();
});

/** Headers that differ between any two answers (the connection's and the clock's). */
const PER_CONNECTION = new Set(['date', 'connection', 'keep-alive']);

interface RawAnswer {
  status: number;
  /** Every header line as sent, name lowercased, sorted: a header sent twice shows twice. */
  headers: string[];
  body: string;
}

/** A GET with node's own client, so the header lines are seen as sent (not merged). */
function rawGet(base: string, target: string, headers: Record<string, string>): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = get(`${base}${target}`, { headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const lines: string[] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          lines.push(`${String(res.rawHeaders[i]).toLowerCase()}: ${String(res.rawHeaders[i + 1])}`);
        }
        resolve({
          status: res.statusCode ?? 0,
          headers: lines.sort(),
          body: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    req.on('error', reject);
  });
}

function comparable(answer: RawAnswer, requestIdGiven: boolean): RawAnswer {
  const headers = answer.headers.filter((line) => {
    const name = line.slice(0, line.indexOf(':'));
    return !PER_CONNECTION.has(name) && (requestIdGiven || name !== 'x-request-id');
  });
  return { ...answer, headers };
}

type Case = [name: string, lane: boolean, headers: () => Record<string, string>, target?: () => string];

const A = () => ({ Authorization: `Bearer ${TENANT_A_KEY}` });
const cases: Case[] = [
  ['a plain read', true, A],
  ['with X-Request-Id', true, () => ({ ...A(), 'X-Request-Id': 'req-4711' })],
  ['with a request id that is not opaque', true, () => ({ ...A(), 'X-Request-Id': 'ali-hassan' })],
  ['Accept: application/fhir+json', true, () => ({ ...A(), Accept: 'application/fhir+json' })],
  ['Accept: application/json', true, () => ({ ...A(), Accept: 'application/json' })],
  ['Accept: */*', true, () => ({ ...A(), Accept: '*/*' })],
  ['If-None-Match of this version', true, () => ({ ...A(), 'If-None-Match': etag })],
  ['If-None-Match, strong', true, () => ({ ...A(), 'If-None-Match': etag.replace(/^W\//, '') })],
  ['If-None-Match of another version', true, () => ({ ...A(), 'If-None-Match': 'W/"999"' })],
  ['If-None-Match: *', true, () => ({ ...A(), 'If-None-Match': '*' })],
  ['If-None-Match, a list without commas', true, () => ({ ...A(), 'If-None-Match': `"0" ${etag}` })],
  [
    'If-None-Match with Cache-Control: no-cache',
    true,
    () => ({ ...A(), 'If-None-Match': etag, 'Cache-Control': 'no-cache' }),
  ],
  ['a SMART token with the read scope', true, () => ({ Authorization: `Bearer ${reader}` })],
  // Handed to the app:
  ['If-Modified-Since', false, () => ({ ...A(), 'If-Modified-Since': lastModified })],
  ['Accept: text/html', false, () => ({ ...A(), Accept: 'text/html' })],
  ['Accept with a quality list', false, () => ({ ...A(), Accept: 'application/fhir+json;q=0.9, */*;q=0.1' })],
  ['_format', false, A, () => `${path}?_format=json`],
  ['a trailing slash', false, A, () => `${path}/`],
  ['another clinic', false, () => ({ Authorization: `Bearer ${TENANT_B_KEY}` })],
  ['an unknown id', false, A, () => '/fhir/CoverageEligibilityResponse/no-such-check'],
  ['no Authorization', false, () => ({})],
  ['an unknown key', false, () => ({ Authorization: 'Bearer not-a-key' })],
  ['a token without the read scope', false, () => ({ Authorization: `Bearer ${writer}` })],
  ['a tampered token', false, () => ({ Authorization: `Bearer ${reader.slice(0, -4)}AAAA` })],
];

describe('the CER read lane', () => {
  it.each(cases)('%s: the same answer as the app (lane: %s)', async (name, byLane, headers, target) => {
    const url = target?.() ?? path;
    const idGiven = name.startsWith('with X-Request-Id');
    const before = h.server.readLane?.answered() ?? 0;
    const lane = await rawGet(h.url, url, headers());
    const taken = (h.server.readLane?.answered() ?? 0) - before;
    const app = await rawGet(appUrl, url, headers());
    expect(taken).toBe(byLane ? 1 : 0);
    expect(comparable(lane, idGiven)).toEqual(comparable(app, idGiven));
  });

  it('hands a read to the app when the store fails, and tells the operator', async () => {
    const store = h.server.store;
    const probe = store.getCerVersion.bind(store);
    let failures = 1;
    store.getCerVersion = (tenantId, id) => {
      if (failures > 0) {
        failures -= 1;
        return Promise.reject(new Error('SQLITE_BUSY: database is locked'));
      }
      return probe(tenantId, id);
    };
    try {
      const before = h.server.readLane?.answered() ?? 0;
      const res = await rawGet(h.url, path, { ...A(), 'X-Request-Id': 'busy-1' });
      expect(res.status).toBe(200);
      expect(h.server.readLane?.answered()).toBe(before);
      const lines = h.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(
        lines.some((l) => l.message === 'the CER read lane handed a read to the app after an error'),
      ).toBe(true);
      expect(lines.filter((l) => l.message === 'request' && l.requestId === 'busy-1')).toHaveLength(1);
    } finally {
      store.getCerVersion = probe;
    }
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
