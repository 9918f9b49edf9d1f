/**
 * The adapter's FHIR package, as a validator sees it (docs/validation.md, "What CI checks"): the
 * package file is built, loaded by an independent loader (fhir-package-loader, test/support/
 * fhir-package.ts), and every resource the adapter emits, collected from real runs (every sandbox
 * scenario through the running service over HTTP, every mapping fixture through the mapping
 * functions, bad input, $estimate, searches, batch, async, subscription notifications, AuditEvents,
 * the conformance resources), is validated against the profile it names, with the HL7 validator's
 * extension rules (test/support/package-validator.ts): an extension the package does not define,
 * used where its context does not allow it, or with a value type it does not allow, is an error.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type {
  Bundle,
  CapabilityStatement,
  Coverage,
  CoverageEligibilityResponse,
  Extension,
  FhirResource,
  Parameters,
  Resource,
  StructureDefinition,
} from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import { deterministicTgz } from '../../src/fhir/tarball.js';
import {
  PACKAGE_NAME,
  packageFiles,
  packageManifest,
  packageResources,
} from '../../src/mapping/conformance/package.js';
import {
  adapterErrorCer,
  mapEnvelope,
  outcomeRuleFor,
  queuedCer,
  stillCheckingCer,
  submitOutcome,
} from '../../src/mapping/response/index.js';
import { allAdapterErrors } from '../../src/mapping/response/adapter-errors.js';
import { cerContext } from '../support/cer-context.js';
import { topicResource } from '../../src/notifications/bundles.js';
import { PAYERS, SCENARIOS } from '../../src/sandbox/scenarios.js';
import type { Envelope } from '../../src/upstream/contract.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import { loadFhirPackage } from '../support/fhir-package.js';
import {
  narrativeProblem,
  topLevel,
  unadvertisedProfiles,
  unresolvedCanonicals,
} from '../support/package-references.js';
import type { LoadedPackage } from '../support/fhir-package.js';
import { PackageValidator } from '../support/package-validator.js';
import type { PackageIssue } from '../support/package-validator.js';
import { startHarness } from '../support/harness.js';
import type { Harness } from '../support/harness.js';
import { startReceiver } from '../support/receiver.js';
import type { Receiver } from '../support/receiver.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';
import { until } from '../support/until.js';

const FHIR_JSON = 'application/fhir+json';
const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const TOPIC = `${CANONICAL_BASE}/SubscriptionTopic/eligibility-final`;
const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const ext = (id: string) => `${CANONICAL_BASE}/StructureDefinition/${id}`;
/** The sandbox's eligible member. */
const EMIRATES_ID_SYSTEM = 'http://uae.gov/fhir/identifier/emirates-id';
const ELIGIBLE_ID = SCENARIOS.find((s) => s.name === 'eligible')?.example ?? 'no eligible scenario';
/** Scenarios left out of the run: `slow` stays in flight for 12 s at the harness's time scale. */
const SKIPPED = new Set(['slow']);

interface Emitted {
  /** Where it came from: `GET /fhir/...`, `mapping found-eligible.json` ... */
  source: string;
  resource: FhirResource;
}

let pkg: LoadedPackage;
let validator: PackageValidator;
let h: Harness;
let receiver: Receiver;
const emitted: Emitted[] = [];

/** The JSON of each resource kept: a resource read twice the same (a queued CER polled) is validated once. */
const seen = new Set<string>();

/** Events the receiver got: a notification carries up to backport-max-count of them. */
function eventsDelivered(): number {
  return receiver.received.reduce((n, r) => {
    const status = r.body.entry?.[0]?.resource as Parameters | undefined;
    return n + (status?.parameter ?? []).filter((p) => p.name === 'notification-event').length;
  }, 0);
}

function keep(source: string, body: unknown): void {
  const resource = body as FhirResource | undefined;
  if (typeof resource?.resourceType !== 'string') return;
  const json = JSON.stringify(resource);
  if (seen.has(json)) return;
  seen.add(json);
  emitted.push({ source, resource });
}

/** GET of an adapter URL (absolute or a path), with tenant A's key; kept when it is a resource. */
async function get(path: string): Promise<request.Response> {
  const res = await request(h.url)
    .get(path.startsWith('http') ? new URL(path).pathname + new URL(path).search : path)
    .set(h.auth);
  keep(`GET ${path} (${res.status})`, res.body);
  return res;
}

async function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<request.Response> {
  const res = await request(h.url)
    .post(path)
    .set(h.auth)
    .set(headers)
    .set('Content-Type', FHIR_JSON)
    .send(typeof body === 'string' ? body : JSON.stringify(body));
  keep(`POST ${path} (${res.status})`, res.body);
  return res;
}

/** Submits a check, keeps its answers while it runs, and its stored request; returns the final CER's path. */
async function runToEnd(options: RequestOptions): Promise<string | undefined> {
  const res = await post(SUBMIT, eligibilityRequest(options), { Prefer: 'wait=30' });
  if (!res.headers.location) return undefined;
  const path = new URL(String(res.headers.location)).pathname;
  await until(
    async () => {
      const read = await get(path);
      return (read.body as CoverageEligibilityResponse).outcome === 'queued' ? undefined : true;
    },
    20_000,
    `the check of ${JSON.stringify(options)} to end`,
  );
  const cer = (await get(path)).body as CoverageEligibilityResponse;
  const requestRef = cer.request?.reference;
  if (requestRef && !requestRef.startsWith('#')) await get(`/fhir/${requestRef}`);
  return path;
}

/**
 * The package file, built from the source as `npm run fhir-package` builds it (the snapshots are
 * generated by that script and kept in mappings/conformance/snapshots.json), so a clean checkout
 * checks what it would publish.
 */
let packageFolder: string | undefined;
async function buildPackage(): Promise<string> {
  packageFolder = mkdtempSync(join(tmpdir(), 'fea-package-'));
  const file = join(packageFolder, `${PACKAGE_NAME}.tgz`);
  writeFileSync(file, await deterministicTgz(packageFiles()));
  return file;
}

/** The mapping tests' context, without a date of service. */
const ctx = (isSearchAll: boolean) => cerContext(isSearchAll, { servicedDate: undefined });

/** Every mapping fixture through the mapping functions: the CER, the still-checking CER, the $submit outcome. */
function mappingCorpus(): Emitted[] {
  const out: Emitted[] = [];
  for (const dir of ['mapping', 'upstream']) {
    const folder = new URL(`../fixtures/${dir}/`, import.meta.url);
    for (const file of readdirSync(folder)
      .filter((f) => f.endsWith('.json'))
      .sort()) {
      const envelope: Envelope = envelopeSchema.parse(
        JSON.parse(readFileSync(new URL(file, folder), 'utf8')),
      );
      const searchAll = envelope.is_search_all === true || Array.isArray(envelope.aggregated_results);
      const cer = mapEnvelope(envelope, ctx(searchAll));
      out.push({ source: `mapping ${dir}/${file}`, resource: cer });
      out.push({
        source: `still checking ${dir}/${file}`,
        resource: stillCheckingCer(ctx(searchAll), envelope),
      });
      out.push({
        source: `$submit outcome ${dir}/${file}`,
        resource: submitOutcome(cer, outcomeRuleFor(envelope)),
      });
    }
  }
  for (const error of allAdapterErrors())
    out.push({ source: `adapter error ${error.code}`, resource: adapterErrorCer(ctx(false), error) });
  out.push({ source: 'queued', resource: queuedCer(ctx(false)) });
  return out;
}

beforeAll(async () => {
  pkg = await loadFhirPackage(await buildPackage(), PACKAGE_NAME, String(packageManifest().version));
  validator = new PackageValidator(pkg);
  receiver = await startReceiver();
  h = await startHarness({ subscriptionEndpoints: [`${receiver.url}/hooks/`] });

  // Conformance: the CapabilityStatement and every conformance resource served by id.
  await get('/fhir/metadata');
  for (const r of packageResources()) {
    await get(`/fhir/${r.resourceType}/${r.id}`);
    const url = (r as { url?: string }).url;
    if (url && r.resourceType !== 'CapabilityStatement')
      await get(`/fhir/${r.resourceType}?url=${encodeURIComponent(url)}`);
  }
  await get(`/fhir/Basic/${topicResource().id}`);

  // Subscriptions: one full-resource subscription, so each final answer is also a notification.
  const subscription = await post('/fhir/Subscription', {
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'package check',
    criteria: TOPIC,
    _criteria: {
      extension: [
        {
          url: `${BACKPORT}/backport-filter-criteria`,
          valueString: 'CoverageEligibilityResponse?outcome=complete,error,partial',
        },
      ],
    },
    channel: {
      type: 'rest-hook',
      endpoint: `${receiver.url}/hooks/package`,
      extension: [
        { url: `${BACKPORT}/backport-heartbeat-period`, valueUnsignedInt: 3600 },
        { url: `${BACKPORT}/backport-timeout`, valueUnsignedInt: 30 },
        { url: `${BACKPORT}/backport-max-count`, valuePositiveInt: 5 },
      ],
      payload: FHIR_JSON,
      _payload: { extension: [{ url: `${BACKPORT}/backport-payload-content`, valueCode: 'full-resource' }] },
    },
  });
  expect(subscription.status).toBe(201);
  const subscriptionPath = `/fhir/Subscription/${(subscription.body as Resource).id}`;

  // Every sandbox scenario, each on its own payer (a guard opened by one does not answer another).
  const payers = Object.keys(PAYERS);
  const singles = SCENARIOS.filter((s) => !s.searchAll && !SKIPPED.has(s.name));
  const finals: string[] = [];
  for (const [i, scenario] of singles.entries()) {
    const payer = scenario.payer ?? payers[i % payers.length];
    const options: RequestOptions =
      scenario.idKind === 'card'
        ? { cardNumber: scenario.example, payer }
        : { emiratesId: scenario.example, payer };
    const path = await runToEnd(options);
    if (path) finals.push(path);
  }
  for (const scenario of SCENARIOS.filter((s) => s.searchAll)) {
    const path = await runToEnd({ emiratesId: scenario.example, discovery: true });
    if (path) finals.push(path);
  }

  // $estimate on an eligible answer, good and bad.
  const eligible = finals[0];
  await post(`${eligible}/$estimate`, {
    resourceType: 'Parameters',
    parameter: [
      {
        name: 'item',
        part: [
          {
            name: 'category',
            valueCoding: { system: `${CANONICAL_BASE}/CodeSystem/service-category`, code: 'consultation' },
          },
          { name: 'fee', valueMoney: { value: 200, currency: 'AED' } },
        ],
      },
    ],
  });
  await post(`${eligible}/$estimate`, { resourceType: 'Parameters' });

  // Bad input: each a 4xx OperationOutcome.
  await post(SUBMIT, { ...eligibilityRequest(), status: 'not-a-status' });
  await post(SUBMIT, '{"resourceType":');
  await post(SUBMIT, { resourceType: 'Patient' });
  await post('/fhir/CoverageEligibilityRequest/$validate', eligibilityRequest());
  await post('/fhir/CoverageEligibilityRequest/$validate', {
    ...eligibilityRequest(),
    purpose: ['nonsense'],
  });
  await get('/fhir/CoverageEligibilityResponse/00000000-0000-4000-8000-000000000000');
  await get('/fhir/CoverageEligibilityResponse?patient:bogus=1&_count=nope');
  await get('/fhir/Nothing');
  keep(
    'GET /fhir/CoverageEligibilityResponse without a key',
    (await request(h.url).get('/fhir/CoverageEligibilityResponse')).body,
  );

  // An appointment (a servicedDate of a later day) and its cancellation by JSON Patch.
  const tomorrow = new Date(Date.now() + 36 * 3600_000).toISOString().slice(0, 10);
  const booked = await post(
    SUBMIT,
    eligibilityRequest({ emiratesId: ELIGIBLE_ID, payer: 'MEDNET', servicedDate: tomorrow }),
    {
      Prefer: 'wait=10',
    },
  );
  const bookedRequest = (booked.body as CoverageEligibilityResponse).request?.reference;
  if (bookedRequest) {
    const cancelled = await request(h.url)
      .patch(`/fhir/${bookedRequest}`)
      .set(h.auth)
      .set('Content-Type', 'application/json-patch+json')
      .send(JSON.stringify([{ op: 'replace', path: '/status', value: 'cancelled' }]));
    keep(`PATCH /fhir/${bookedRequest} (${cancelled.status})`, cancelled.body);
  }

  // Searches, vread, batch and its async form, the async status of a check.
  await get('/fhir/CoverageEligibilityResponse?_count=5');
  await get('/fhir/CoverageEligibilityRequest?_count=5&_revinclude=CoverageEligibilityResponse:request');
  await get('/fhir/CoverageEligibilityResponse?_summary=count');
  await get(`${eligible}/_history/1`);
  const entry = (options: RequestOptions) => ({
    resource: eligibilityRequest(options),
    request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
  });
  await post('/fhir', {
    resourceType: 'Bundle',
    type: 'batch',
    entry: [
      entry({ emiratesId: ELIGIBLE_ID, payer: 'DAMAN' }),
      { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
    ],
  });
  const asyncBatch = await post(
    '/fhir',
    {
      resourceType: 'Bundle',
      type: 'batch',
      entry: [entry({ emiratesId: ELIGIBLE_ID, payer: 'THIQA' })],
    },
    { Prefer: 'respond-async' },
  );
  const asyncCheck = await post(SUBMIT, eligibilityRequest({ emiratesId: ELIGIBLE_ID, payer: 'NAS' }), {
    Prefer: 'respond-async',
  });
  for (const res of [asyncBatch, asyncCheck]) {
    const status = res.headers['content-location'];
    if (!status) continue;
    await until(
      async () => ((await get(String(status))).status === 202 ? undefined : true),
      20_000,
      'async status',
    );
  }

  // Subscriptions: the notifications received, the subscription, its status and events.
  await until(() => (eventsDelivered() >= finals.length ? true : undefined), 20_000, 'the notifications');
  for (const r of receiver.received) keep(`notification ${r.path}`, r.body);
  await get(subscriptionPath);
  await get(`${subscriptionPath}/$status`);
  await get(`${subscriptionPath}/$events`);
  await get('/fhir/Subscription');

  // The documents of the eligible answer, once the evidence worker has kept them (docs/evidence.md).
  const eligibleId = String(eligible).split('/').pop() ?? '';
  await until(
    async () => {
      const res = await get(`/fhir/DocumentReference?related=CoverageEligibilityResponse/${eligibleId}`);
      return ((res.body as Bundle).entry?.length ?? 0) > 0 ? true : undefined;
    },
    20_000,
    'the documents kept',
  );
  await get(`/fhir/DocumentReference?patient=${encodeURIComponent(`${EMIRATES_ID_SYSTEM}|${ELIGIBLE_ID}`)}`);

  // People at the page (docs/signin.md, docs/smart-launch.md): a sign-in, a refused one, a page
  // action, a SMART launch naming its fhirUser and a sign-out, recorded as the sign-in routes
  // record them and read back through the audit search below.
  const person = { issuer: 'https://id.clinic-a.example', subject: 'u-1', name: 'Reem Front Desk' };
  const launched = { ...person, subject: 'Practitioner/7', reference: 'Practitioner/7' };
  for (const record of [
    { interaction: 'login', outcome: '0', person },
    { interaction: 'login', outcome: '4', outcomeDesc: 'state unknown or used' },
    { interaction: 'read', action: 'R', outcome: '0', person, operation: 'appointments' },
    { interaction: 'login', outcome: '0', person: launched, operation: 'smart-launch' },
    { interaction: 'logout', outcome: '0', person },
  ] as const)
    h.server.audit.record({
      tenantId: 'clinic-a',
      agentId: 'person' in record ? (record.person?.subject ?? 'unknown') : 'unknown',
      agentKind: 'person',
      action: 'E',
      ...record,
    });
  await h.server.audit.flush();

  // The audit trail of all that.
  const trail = await get('/fhir/AuditEvent?_count=50');
  const first = (trail.body as Bundle).entry?.[0]?.resource;
  if (first?.id) await get(`/fhir/AuditEvent/${first.id}`);

  emitted.push(...mappingCorpus());
}, 120_000);

afterAll(async () => {
  await h?.stop();
  await receiver?.close();
  if (packageFolder) rmSync(packageFolder, { recursive: true, force: true });
});

let baseline: string[] | undefined;
/** The problems of the whole corpus against the package as built (computed once). */
function baselineProblems(): string[] {
  baseline ??= problems(validator, emitted);
  return baseline;
}

/** Every issue of every emitted resource, as `source: path: text`. */
function problems(v: PackageValidator, corpus: Emitted[]): string[] {
  return corpus.flatMap(({ source, resource }) =>
    v.validate(resource).map((i: PackageIssue) => `${source}: ${i.path}: [${i.id}] ${i.text}`),
  );
}

/** Every resource in the corpus, Bundle entries and contained ones included. */
function allResources(corpus: Emitted[]): FhirResource[] {
  const out: FhirResource[] = [];
  const add = (r: FhirResource) => {
    out.push(r);
    for (const c of (r as { contained?: FhirResource[] }).contained ?? []) add(c);
    if (r.resourceType === 'Bundle')
      for (const e of r.entry ?? []) if (e.resource) add(e.resource as FhirResource);
  };
  for (const { resource } of corpus) add(resource);
  return out;
}

describe("the adapter's FHIR package, loaded by fhir-package-loader", () => {
  it('loads: its package.json, and every StructureDefinition with a snapshot', () => {
    expect(pkg.packageJson.name).toBe(PACKAGE_NAME);
    const sds = pkg.resources.filter(
      (r): r is StructureDefinition => r.resourceType === 'StructureDefinition',
    );
    expect(sds.length).toBeGreaterThan(0);
    for (const sd of sds) expect(sd.snapshot?.element.length, sd.url).toBeGreaterThan(0);
  });

  it('every resource the adapter emits, in every scenario and fixture, meets its profile and the extension rules', () => {
    const all = allResources(emitted);
    // The corpus holds every kind the issue names.
    const kinds = new Set(all.map((r) => r.resourceType));
    for (const kind of [
      'CoverageEligibilityResponse',
      'CoverageEligibilityRequest',
      'DocumentReference',
      'OperationOutcome',
      'ClaimResponse',
      'AuditEvent',
      'Bundle',
      'CapabilityStatement',
      'StructureDefinition',
      'Subscription',
      'Parameters',
    ])
      expect(kinds, kind).toContain(kind);
    expect(
      all.some((r) => r.resourceType === 'CoverageEligibilityRequest' && r.status === 'cancelled'),
      'a cancelled appointment',
    ).toBe(true);
    expect(
      all.some(
        (r) =>
          r.resourceType === 'AuditEvent' &&
          r.agent.some((a) => a.who?.identifier?.system === 'https://id.clinic-a.example'),
      ),
      'an AuditEvent naming a person',
    ).toBe(true);
    const bundleTypes = new Set(all.flatMap((r) => (r.resourceType === 'Bundle' ? [r.type] : [])));
    for (const type of ['searchset', 'batch-response', 'history']) expect(bundleTypes, type).toContain(type);
    const outcomes = new Set(
      all.flatMap((r) => (r.resourceType === 'CoverageEligibilityResponse' ? [r.outcome] : [])),
    );
    expect([...outcomes].sort()).toEqual(['complete', 'error', 'partial', 'queued']);
    // Every adapter extension the package defines is used somewhere in the corpus, so none is unchecked.
    // Used means used as an extension (the definitions themselves, read by id, carry the urls too).
    const used = new Set<string>();
    JSON.stringify(all, (key, value: unknown) => {
      if ((key === 'extension' || key === 'modifierExtension') && Array.isArray(value))
        for (const x of value as Extension[]) used.add(x.url);
      return value;
    });
    // (The adapter's own: of the backport guide's, copied in whole, it uses only some.)
    const defined = pkg.resources.filter(
      (r): r is StructureDefinition =>
        r.resourceType === 'StructureDefinition' &&
        r.type === 'Extension' &&
        r.url.startsWith(`${CANONICAL_BASE}/`),
    );
    expect(defined.filter((d) => !used.has(d.url)).map((d) => d.url)).toEqual([]);

    expect(baselineProblems()).toEqual([]);
  });

  it('fails when one extension definition is removed from the package', async () => {
    const removed = ext('portal-message');
    // The package file built again without that definition's file, and loaded the same way.
    const file = join(packageFolder!, 'without-one.tgz');
    const files = packageFiles().filter((f) => f.path !== 'package/StructureDefinition-portal-message.json');
    expect(files.length).toBe(packageFiles().length - 1);
    writeFileSync(file, await deterministicTgz(files));
    const smaller = await loadFhirPackage(file, PACKAGE_NAME, String(packageManifest().version));
    expect(smaller.structureDefinition(removed)).toBeUndefined();
    const withoutOne = new PackageValidator(smaller);
    // What fails only without it: every use of that extension, as the HL7 validator reports it.
    const before = new Set(baselineProblems());
    const users = emitted.filter((e) => JSON.stringify(e.resource).includes(removed));
    expect(users.length).toBeGreaterThan(0);
    const found = problems(withoutOne, users).filter((p) => !before.has(p));
    expect(found.length).toBeGreaterThan(0);
    for (const p of found)
      expect(p).toContain(
        `[Extension_EXT_Unknown_NotHere] The extension ${removed} could not be found so is not allowed here`,
      );
  });

  it('refuses an extension in a place its context does not allow, and a value of a type it does not allow', () => {
    const cer = emitted.find(
      (e) => e.resource.resourceType === 'CoverageEligibilityResponse' && e.resource.extension?.length,
    )?.resource as CoverageEligibilityResponse;
    expect(cer).toBeDefined();
    // The ids of the issues a mutation adds to those of the resource as emitted.
    const before = new Set(validator.validate(cer).map((i) => `${i.id} ${i.path}`));
    const added = (r: FhirResource) =>
      validator
        .validate(r)
        .filter((i) => !before.has(`${i.id} ${i.path}`))
        .map((i) => i.id);
    const own = cer.extension!.find((e) => e.url.startsWith(CANONICAL_BASE)) as Extension;

    // Wrong context: a resource-level extension on an insurance entry.
    const misplaced = structuredClone(cer);
    misplaced.insurance = [{ ...misplaced.insurance?.[0], extension: [own] } as never];
    expect(added(misplaced)).toContain('Extension_EXTP_Context_Wrong');

    // Wrong value type: a simple extension given a boolean, and a part of a complex one given a Period.
    const simple = pkg.resources.find(
      (r): r is StructureDefinition =>
        r.resourceType === 'StructureDefinition' &&
        r.type === 'Extension' &&
        r.snapshot!.element.some(
          (e) =>
            e.path === 'Extension.value[x]' && e.max !== '0' && !e.type?.some((t) => t.code === 'boolean'),
        ),
    )!;
    const wrongType = structuredClone(cer);
    wrongType.extension = [{ url: simple.url, valueBoolean: true }];
    expect(added(wrongType)).toContain('Extension_EXT_Type');
    const complex = structuredClone(cer);
    const withParts = complex.extension!.find((e) => e.extension?.length)!;
    const partUrl = withParts.extension![0]!.url;
    withParts.extension![0] = { url: partUrl, valuePeriod: { start: '2026-01-01' } };
    expect(added(complex)).toContain('Extension_EXT_Type');

    // Unknown anywhere: a part not in the snapshot, and an unknown extension on a contained resource.
    const unknownPart = structuredClone(cer);
    unknownPart
      .extension!.find((e) => e.extension?.length)!
      .extension!.push({ url: 'noSuchPart', valueString: 'x' });
    expect(added(unknownPart)).toContain('Extension_EXT_SubExtension_Invalid');
    const unknownContained = structuredClone(cer);
    const contained = (unknownContained.contained ?? []) as Coverage[];
    expect(contained.length).toBeGreaterThan(0);
    contained[0]!.extension = [{ url: ext('no-such-extension'), valueString: 'x' }];
    expect(validator.validate(unknownContained).map((i) => i.text)).toContain(
      `The extension ${ext('no-such-extension')} could not be found so is not allowed here`,
    );

    // An extension slice of the profile with max 1, twice.
    const profile = pkg.resources.find(
      (r): r is StructureDefinition =>
        r.resourceType === 'StructureDefinition' &&
        r.kind === 'resource' &&
        r.type === 'CoverageEligibilityResponse' &&
        r.derivation === 'constraint',
    );
    expect(profile).toBeDefined();
    const once = profile!.snapshot!.element.find(
      (e) =>
        e.path === 'CoverageEligibilityResponse.extension' &&
        e.max === '1' &&
        cer.extension!.some((x) => x.url === e.type?.[0]?.profile?.[0]),
    );
    expect(once).toBeDefined();
    const twice = structuredClone(cer);
    twice.meta = { profile: [profile!.url] };
    twice.extension!.push(
      structuredClone(cer.extension!.find((x) => x.url === once!.type![0]!.profile![0])!),
    );
    expect(added(twice)).toContain('Validation_VAL_Profile_Maximum');

    // A slice nested in a slice: a notification event without its event number.
    const notification = emitted.find(
      (e) => e.source.startsWith('notification') && JSON.stringify(e.resource).includes('"event-number"'),
    )?.resource as Bundle | undefined;
    expect(notification).toBeDefined();
    const status = structuredClone(notification!.entry![0]!.resource as Parameters);
    const event = status.parameter!.find((p) => p.name === 'notification-event')!;
    event.part = event.part!.filter((p) => p.name !== 'event-number');
    expect(validator.validate(status).map((i) => i.text)).toContainEqual(
      expect.stringContaining("Slice 'Parameters.parameter:notificationEvent.part:eventNumber'"),
    );

    // A profile the package does not have; no profile at all on a kind the package profiles.
    const unknownProfile = structuredClone(cer);
    unknownProfile.meta = { profile: [`${CANONICAL_BASE}/StructureDefinition/no-such-profile`] };
    expect(added(unknownProfile)).toContain('Validation_VAL_Profile_Unknown');
    const noProfile = structuredClone(cer);
    delete noProfile.meta;
    expect(validator.validate(noProfile).map((i) => i.path)).toContain(
      'CoverageEligibilityResponse.meta.profile',
    );
  });

  it('holds every canonical its CapabilityStatement and ConceptMaps name, and fails without one', async () => {
    expect(unresolvedCanonicals(pkg.resources)).toEqual([]);
    // The package built again without the $status definition and the upstream visit-type system.
    const left = [
      'package/OperationDefinition-backport-subscription-status.json',
      'package/CodeSystem-upstream-visit-type.json',
    ];
    const files = packageFiles().filter((f) => !left.includes(f.path));
    expect(files.length).toBe(packageFiles().length - left.length);
    const file = join(packageFolder!, 'without-definitions.tgz');
    writeFileSync(file, await deterministicTgz(files));
    const smaller = await loadFhirPackage(file, PACKAGE_NAME, String(packageManifest().version));
    const found = unresolvedCanonicals(smaller.resources);
    expect(found).toContainEqual(
      expect.stringMatching(
        /^CapabilityStatement\.rest\[0\]\.resource\[\d+\]\.operation\[0\]\.definition: http:\/\/hl7\.org\/fhir\/uv\/subscriptions-backport\/OperationDefinition\/backport-subscription-status$/,
      ),
    );
    expect(found).toContainEqual(
      `ConceptMap/benefit-category-to-visit-type.group[0].target: ${CANONICAL_BASE}/upstream/visit_type`,
    );
  });

  it('names in supportedProfile every profile of what it returns at the top level, and fails without one', () => {
    // What the service answered over HTTP (not the notifications it sent, nor the mapping runs).
    const returned = emitted
      .filter((e) => /^(GET|POST|PATCH) /.test(e.source))
      .flatMap((e) => topLevel(e.resource));
    const metadata = emitted.find(
      (e) => e.source.startsWith('GET /fhir/metadata') && e.resource.resourceType === 'CapabilityStatement',
    )?.resource as CapabilityStatement | undefined;
    const packaged = pkg.resources.find(
      (r) => r.resourceType === 'CapabilityStatement',
    ) as CapabilityStatement;
    expect(metadata).toBeDefined();
    expect(returned.some((r) => r.resourceType === 'ClaimResponse' && r.meta?.profile?.length)).toBe(true);
    for (const cs of [metadata!, packaged]) expect(unadvertisedProfiles(cs, returned)).toEqual([]);
    // Without the ClaimResponse entry, the estimate's profile is unnamed.
    const without = structuredClone(packaged);
    for (const rest of without.rest ?? [])
      rest.resource = rest.resource?.filter((r) => r.type !== 'ClaimResponse');
    expect(unadvertisedProfiles(without, returned)).toEqual([
      `ClaimResponse: ${CANONICAL_BASE}/StructureDefinition/estimate-claim-response`,
    ]);
  });

  it('gives every top-level resource a generated narrative of valid XHTML, and fails without one', () => {
    const top = emitted.flatMap((e) =>
      topLevel(e.resource).map((resource) => ({ source: e.source, resource })),
    );
    const kinds = new Set(top.map((t) => t.resource.resourceType));
    for (const kind of [
      'CoverageEligibilityRequest',
      'OperationOutcome',
      'ClaimResponse',
      'CapabilityStatement',
    ])
      expect(kinds, kind).toContain(kind);
    expect(
      top.flatMap(({ source, resource }) => {
        const problem = narrativeProblem(resource);
        return problem ? [`${source}: ${resource.resourceType}/${resource.id ?? ''}: ${problem}`] : [];
      }),
    ).toEqual([]);
    for (const r of pkg.resources)
      expect(narrativeProblem(r), `${r.resourceType}/${r.id ?? ''}`).toBeUndefined();
    // The check fails on a resource without narrative, and on XHTML FHIR does not allow.
    const outcome = top.find((t) => t.resource.resourceType === 'OperationOutcome')!.resource;
    const { text: _text, ...bare } = outcome as FhirResource & { text?: unknown };
    expect(narrativeProblem(bare)).toBe('dom-6: no narrative');
    const withDiv = (div: string) => ({ ...outcome, text: { status: 'generated', div } }) as FhirResource;
    const ns = '<div xmlns="http://www.w3.org/1999/xhtml">';
    expect(narrativeProblem(withDiv(`${ns}<p>a &nbsp; b</p></div>`))).toBe('XHTML: entity &nbsp;');
    expect(narrativeProblem(withDiv(`${ns}<p>a < b</p></div>`))).toBe('XHTML: a bare < or >');
    expect(narrativeProblem(withDiv(`${ns}<script>x</script></div>`))).toBe('txt-1: <script> is not allowed');
    expect(narrativeProblem(withDiv(`${ns}<p>open</div>`))).toBe('XHTML: </div> closes no open <div>');
    expect(narrativeProblem(withDiv(`${ns}<p></p></div>`))).toBe('txt-2: no text');
  });
});
