/**
 * Closure, as a validator's default rule asks it (an extension it cannot find is an error): every
 * extension the response mapper emits, for every mapping and upstream fixture (every outcome, the
 * search-all stages, the contained Coverages), is defined in the FHIR package with a context that
 * allows the element it sits on and value types that allow what is sent; the profile each resource
 * names in meta.profile has a slice for it there; and every code under the service's own base is
 * in its CodeSystem. A new extension, a new place for one or a new code without a definition fails
 * here (docs/validation.md).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type {
  CodeSystem,
  CodeSystemConcept,
  CoverageEligibilityResponse,
  ElementDefinition,
  Extension,
  Resource,
  StructureDefinition,
} from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { AUDIT_OPERATIONS } from '../../src/fhir/audit-event.js';
import { CANONICAL_BASE, PROFILES } from '../../src/fhir/canonical.js';
import { CDS_SERVICES } from '../../src/operations/cds-hooks/services.js';
import { packageResources } from '../../src/mapping/conformance/package.js';
import {
  adapterErrorCer,
  mapEnvelope,
  queuedCer,
  stillCheckingCer,
} from '../../src/mapping/response/index.js';
import { estimateClaimResponse, estimateItems } from '../../src/mapping/response/estimate.js';
import { envelopeSchema, type Envelope } from '../../src/upstream/contract.js';
import { cerContext } from '../support/cer-context.js';

const ctx = (isSearchAll: boolean) => cerContext(isSearchAll);

/** Every envelope fixture: the hand-made mapping ones and the sandbox's upstream ones. */
function envelopes(): { name: string; envelope: Envelope }[] {
  const dirs = ['mapping', 'upstream'].map((d) => new URL(`../fixtures/${d}/`, import.meta.url));
  const found = dirs
    .filter((dir) => existsSync(dir))
    .flatMap((dir) =>
      readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => ({
          name: f,
          envelope: envelopeSchema.parse(JSON.parse(readFileSync(new URL(f, dir), 'utf8'))),
        })),
    );
  expect(found.length).toBeGreaterThan(20);
  return found;
}

/** Everything the mapper emits for the fixtures: CERs of every outcome and the estimates. */
function emitted(): Resource[] {
  const out: Resource[] = [];
  for (const { envelope } of envelopes()) {
    const searchAll = envelope.is_search_all === true || Array.isArray(envelope.aggregated_results);
    const cer = mapEnvelope(envelope, ctx(searchAll));
    out.push(cer, stillCheckingCer(ctx(searchAll), envelope));
    const items = cer.insurance?.[0]?.item ?? [];
    if (cer.outcome === 'complete' && items.length > 0) {
      const asked = [{ category: items[0]!.category!, fee: 200 }];
      out.push(estimateClaimResponse(cer, estimateItems(items, asked as never), '2026-11-22T10:00:00.000Z'));
    }
  }
  out.push(queuedCer(ctx(false)), adapterErrorCer(ctx(false), { code: 'task-lost', text: 'Lost.' }));
  return out;
}

interface Use {
  /** The element the extension sits on, as a context expression names it. */
  path: string;
  /** The profile of the resource it is in. */
  profile: string | undefined;
  extension: Extension;
}

/** Every extension with the element path it sits on; a contained resource starts a path of its own. */
function uses(resource: Resource): Use[] {
  const found: Use[] = [];
  const walk = (node: unknown, path: string, profile: string | undefined) => {
    if (Array.isArray(node)) {
      for (const n of node) walk(n, path, profile);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
      if (key === 'extension') {
        for (const extension of value as Extension[]) found.push({ path, profile, extension });
      } else if (key === 'contained') {
        for (const r of value as Resource[]) walk(r, r.resourceType, r.meta?.profile?.[0]);
      } else {
        walk(value, `${path}.${key}`, profile);
      }
    }
  };
  walk(resource, resource.resourceType, resource.meta?.profile?.[0]);
  return found;
}

const resources = packageResources();
const definitions = new Map(
  resources
    .filter((r): r is StructureDefinition => r.resourceType === 'StructureDefinition')
    .map((sd) => [sd.url, sd]),
);

/** The value types a snapshot element allows (`value[x]` of an extension or of one of its slices). */
function typesAt(sd: StructureDefinition, id: string): string[] {
  return (sd.snapshot?.element.find((e: ElementDefinition) => e.id === id)?.type ?? []).map((t) => t.code);
}

/** Complex data types an extension of this service may hold; the rest are primitives. */
const COMPLEX = new Set(['Reference', 'Coding', 'CodeableConcept', 'Attachment', 'Identifier', 'Period']);

/** valueString -> string, valuePositiveInt -> positiveInt, valueReference -> Reference. */
function valueTypeOf(extension: Extension): string | undefined {
  const key = Object.keys(extension).find((k) => k.startsWith('value'));
  if (!key) return undefined;
  const type = key.slice('value'.length);
  return COMPLEX.has(type) ? type : type.charAt(0).toLowerCase() + type.slice(1);
}

describe('every extension the mapper emits is defined where it is used', () => {
  const all = emitted().flatMap(uses);

  it('finds the extensions of every kind in the fixtures', () => {
    const urls = new Set(all.map((u) => u.extension.url));
    expect(urls.size).toBeGreaterThanOrEqual(8);
  });

  it('defines each one, with a context that allows where it is, and its value types', () => {
    const problems = new Set<string>();
    for (const { path, extension } of all) {
      const sd = definitions.get(extension.url);
      if (!sd) {
        problems.add(`${extension.url}: not defined in the package`);
        continue;
      }
      const contexts = (sd.context ?? []).map((c) => c.expression);
      if (!contexts.includes(path))
        problems.add(`${extension.url}: context ${contexts.join(', ')} lacks ${path}`);
      const value = valueTypeOf(extension);
      if (value !== undefined && !typesAt(sd, 'Extension.value[x]').includes(value))
        problems.add(`${extension.url}: value${value} is not allowed`);
      for (const part of extension.extension ?? []) {
        const slice = `Extension.extension:${part.url}`;
        const types = typesAt(sd, `${slice}.value[x]`);
        if (types.length === 0) problems.add(`${extension.url}: no part ${part.url}`);
        else if (!types.includes(valueTypeOf(part) ?? ''))
          problems.add(`${extension.url}#${part.url}: value type`);
      }
    }
    expect([...problems].sort()).toEqual([]);
  });

  it('is a slice of extension at that element of the profile the resource names', () => {
    const problems = new Set<string>();
    for (const { path, profile, extension } of all) {
      const sd = profile ? definitions.get(profile) : undefined;
      if (!sd) {
        problems.add(`${path}: no profile of the package in meta.profile`);
        continue;
      }
      const slices = (sd.snapshot?.element ?? []).filter(
        (e) => e.path === `${path}.extension` && e.sliceName && e.type?.[0]?.profile?.includes(extension.url),
      );
      if (slices.length === 0)
        problems.add(`${sd.id ?? ''}: no slice of ${path}.extension for ${extension.url}`);
    }
    expect([...problems].sort()).toEqual([]);
  });

  it('names the profile of its kind on every CER, contained Coverage and estimate', () => {
    for (const resource of emitted()) {
      const expected =
        resource.resourceType === 'CoverageEligibilityResponse'
          ? PROFILES.eligibilityResponse
          : PROFILES.estimateClaimResponse;
      expect(resource.meta?.profile).toEqual([expected]);
      for (const contained of (resource as CoverageEligibilityResponse).contained ?? [])
        if (contained.resourceType === 'Coverage')
          expect(contained.meta?.profile).toEqual([PROFILES.portalCoverage]);
    }
  });

  it('puts every code of a system under the service base in that CodeSystem of the package', () => {
    const systems = new Map(
      resources
        .filter((r): r is CodeSystem => r.resourceType === 'CodeSystem')
        .map((cs) => [cs.url, new Set((cs.concept ?? []).map((c: CodeSystemConcept) => c.code))]),
    );
    const missing = new Set<string>();
    const walk = (node: unknown) => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (typeof node !== 'object' || node === null) return;
      const record = node as Record<string, unknown>;
      if (
        typeof record.system === 'string' &&
        typeof record.code === 'string' &&
        record.system.startsWith(`${CANONICAL_BASE}/CodeSystem/`) &&
        !systems.get(record.system)?.has(record.code)
      )
        missing.add(`${record.system}|${record.code}`);
      Object.values(record).forEach(walk);
    };
    emitted().forEach(walk);
    expect([...missing].sort()).toEqual([]);
  });

  it('has every operation name an AuditEvent may carry in the CodeSystem audit-operation, and no other', () => {
    const system = packageResources().find(
      (r): r is CodeSystem =>
        r.resourceType === 'CodeSystem' &&
        (r as CodeSystem).url === `${CANONICAL_BASE}/CodeSystem/audit-operation`,
    );
    expect((system?.concept ?? []).map((c) => c.code).sort()).toEqual([...AUDIT_OPERATIONS].sort());
    // The CDS Hooks routes name their operation after each service (src/http/cds-routes.ts).
    for (const service of CDS_SERVICES)
      for (const suffix of ['', '/feedback'])
        expect(AUDIT_OPERATIONS as readonly string[]).toContain(`cds:${service.id}${suffix}`);
  });
});
