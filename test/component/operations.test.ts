/**
 * What an operator relies on: /health, /ready, /metrics (with and without a token), the admin
 * command for guards and stuck checks, and the OpenAPI document matching the routes.
 */
import { readFileSync } from 'node:fs';
import type { Express } from 'express';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdmin } from '../../src/admin.js';
import { createLogger } from '../../src/log.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { expectValidFhir } from '../support/fhir.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.stop();
});

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
  match?: (path: string) => boolean;
}

/** Every (method, path) the express app registers, with mounted routers resolved. */
function registeredRoutes(app: Express): string[] {
  const out: string[] = [];
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const method of Object.keys(layer.route.methods))
          out.push(`${method.toUpperCase()} ${prefix}${layer.route.path}`);
      } else if (layer.handle?.stack) {
        const mount = ['/fhir'].find((p) => layer.match?.(`${p}/probe`)) ?? '';
        walk(layer.handle.stack, mount);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return out;
}

/** OpenAPI paths and methods, with {id} written as express :id. */
function documentedRoutes(): string[] {
  const yaml = readFileSync(new URL('../../openapi/openapi.yaml', import.meta.url), 'utf8');
  const out: string[] = [];
  let path: string | null = null;
  for (const line of yaml.split('\n')) {
    const p = /^ {2}(\/\S*):\s*$/.exec(line);
    if (p?.[1]) {
      path = p[1].replace(/\{(\w+)\}/g, ':$1');
      continue;
    }
    if (/^\S/.test(line)) path = null;
    const m = /^ {4}(get|post|put|delete|patch):/.exec(line);
    if (path && m?.[1]) out.push(`${m[1].toUpperCase()} ${path}`);
  }
  return out;
}

describe('operations', () => {
  it('/health answers at once; /ready reports store and upstream', async () => {
    expect((await request(h.url).get('/health')).status).toBe(200);
    const ready = await request(h.url).get('/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({
      ready: true,
      checks: { store: { ok: true }, upstream: { ok: true } },
    });
  });

  it('/metrics exposes checks, upstream calls, poll lateness, guards and HTTP durations', async () => {
    await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-1' }));
    const res = await request(h.url).get('/metrics');
    expect(res.status).toBe(200);
    for (const name of [
      'checks',
      'upstream_request_duration_seconds',
      'poll_lateness_seconds',
      'payer_guards_open',
      'http_request_duration_seconds',
    ]) {
      expect(res.text).toMatch(new RegExp(`^# HELP \\w*${name}`, 'm'));
    }
    expect(res.text).toContain('tenant="clinic-a"');
  });

  it('every registered route is in openapi/openapi.yaml, and every documented path answers', async () => {
    const registered = registeredRoutes(h.server.app);
    const documented = documentedRoutes();
    expect(registered.length).toBeGreaterThan(8);
    for (const route of registered) expect(documented, route).toContain(route);
    for (const route of documented) {
      const [method = 'GET', path = '/'] = route.split(' ');
      const url = path.replace(/:\w+/g, 'probe-id').replace('$submit', '$submit');
      const res = await request(h.url)[method.toLowerCase() as 'get'](url).set(h.auth);
      // Answers by the route itself (any status), never the unknown-route 404.
      const text = JSON.stringify(res.body ?? {});
      expect(text.includes('No route') || text.includes('Unknown route'), route).toBe(false);
    }
  });

  it('serves the conformance resources without a key, and they are valid FHIR', async () => {
    for (const path of [
      '/fhir/ConceptMap/service-category-to-benefit-category',
      '/fhir/CodeSystem/adapter-outcome',
      '/fhir/StructureDefinition/portal-document',
    ]) {
      const res = await request(h.url).get(path);
      expect(res.status, path).toBe(200);
      expectValidFhir(res.body);
    }
    expect((await request(h.url).get('/fhir/ConceptMap/nope')).status).toBe(404);
  });

  it('admin: lists and resets a payer guard with an audit log line', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000004-4', payer: 'ORIENT' }));
    expect(res.status).toBe(422);
    const lines: string[] = [];
    const audit: string[] = [];
    const { PassThrough } = await import('node:stream');
    const stream = new PassThrough();
    stream.on('data', (c: Buffer) => audit.push(c.toString('utf8')));
    const io = { out: (l: string) => lines.push(l), logger: createLogger('info', stream), now: Date.now };
    expect(await runAdmin(h.server.store, ['guards'], io)).toBe(0);
    expect(lines.join('\n')).toMatch(/clinic-a\tORIENT\tcredentials/);
    expect(await runAdmin(h.server.store, ['reset-guard', 'clinic-a', 'ORIENT'], io)).toBe(0);
    expect(audit.join('')).toContain('audit');
    const again = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-1', payer: 'ORIENT' }));
    expect(again.status).toBe(200);
    expect(await runAdmin(h.server.store, ['stuck'], io)).toBe(0);
  });

  it('/ready is 503 when the upstream is down', async () => {
    await h.sandbox.close();
    const ready = await request(h.url).get('/ready');
    expect(ready.status).toBe(503);
  });
});
