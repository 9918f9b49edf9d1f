/**
 * GET /fhir/Binary/{id} (the stable adapter URL of a document) when the upstream misbehaves: a task
 * the upstream no longer has is a 404 (not a 502 to retry for ever); a link that is neither https
 * nor the upstream's own origin is never fetched; the download keeps the portal's file name.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamPort } from '../../src/upstream/port.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';

/** How the next document reads see the task: as the upstream says, gone, or pointing elsewhere. */
let mode: 'normal' | 'gone' | 'elsewhere' = 'normal';
let elsewhereUrl = '';
let elsewhereHits = 0;
let h: Harness;
let elsewhere: ReturnType<typeof createServer>;

function misbehaving(inner: UpstreamPort): UpstreamPort {
  return {
    createTask: (creds, body) => inner.createTask(creds, body),
    health: () => inner.health(),
    getResult: async (creds, id) => {
      if (mode === 'gone')
        return { ok: false, error: { kind: 'http', status: 404, body: '{"detail":"Not found"}' } };
      const result = await inner.getResult(creds, id);
      if (mode !== 'elsewhere' || !result.ok) return result;
      const text = JSON.stringify(result.value).replace(/"s3_url":"[^"]+"/g, `"s3_url":"${elsewhereUrl}"`);
      return { ok: true, value: JSON.parse(text) as typeof result.value };
    },
  };
}

beforeAll(async () => {
  elsewhere = createServer((_req, res) => {
    elsewhereHits += 1;
    res.end('internal');
  });
  await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
  elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/latest/meta-data`;
  h = await startHarness({ overrides: { upstream: misbehaving } });
});
afterAll(async () => {
  await h.stop();
  await new Promise((resolve) => elsewhere.close(resolve));
});

async function documentLink(): Promise<string> {
  mode = 'normal';
  const res = await request(h.url)
    .post(SUBMIT)
    .set(h.auth)
    .set('Content-Type', 'application/fhir+json')
    .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
  expect(res.status).toBe(200);
  const link = /\/fhir\/Binary\/[A-Za-z0-9.-]+\.d0/.exec(
    JSON.stringify(res.body as CoverageEligibilityResponse),
  )?.[0];
  expect(link).toBeTruthy();
  return String(link);
}

describe('Binary: documents when the upstream misbehaves', () => {
  it('serves the file under the portal file name, with its extension', async () => {
    const link = await documentLink();
    const file = await request(h.url).get(link).set(h.auth).buffer(true);
    expect(file.status).toBe(200);
    expect(String(file.headers['content-disposition'])).toMatch(/filename="[^"]+\.pdf"/);
    expect(String(file.headers['content-type'])).toMatch(/^application\/pdf/);
  });

  it('a task the upstream no longer has: 404 OperationOutcome, no Retry-After', async () => {
    const link = await documentLink();
    mode = 'gone';
    const res = await request(h.url).get(link).set(h.auth);
    mode = 'normal';
    expect(res.status).toBe(404);
    expect(res.headers['retry-after']).toBeUndefined();
    expectValidFhir(res.body);
    expect((res.body as OperationOutcome).issue[0]?.code).toBe('not-found');
  });

  it('a link that is neither https nor the upstream origin is never fetched', async () => {
    const link = await documentLink();
    mode = 'elsewhere';
    const res = await request(h.url).get(link).set(h.auth);
    mode = 'normal';
    expect(res.status).toBe(502);
    expectValidFhir(res.body);
    expect(elsewhereHits).toBe(0);
    expect(JSON.stringify(res.body)).not.toContain('meta-data');
  });
});
