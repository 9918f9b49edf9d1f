/**
 * The FHIR NPM package of this service (https://confluence.hl7.org/display/FHIR/NPM+Package+Specification):
 * every conformance resource it serves or refers to, each StructureDefinition with the snapshot
 * `npm run fhir-package` generated from R4 core (mappings/conformance/snapshots.json), the
 * CapabilityStatement /fhir/metadata serves (for the canonical base) and an ImplementationGuide
 * naming them all. The files are built once, in a fixed order with fixed bytes: the same source
 * gives the same package (docs/validation.md).
 */
import { createHash } from 'node:crypto';
import type {
  CapabilityStatement,
  ElementDefinition,
  ImplementationGuide,
  Narrative,
  Resource,
  StructureDefinition,
} from 'fhir/r4.js';
import { z } from 'zod';
import { CANONICAL_BASE } from '../../fhir/canonical.js';
import { escapeXml, generatedNarrative } from '../../fhir/xhtml.js';
import { loadMappingTable } from '../mapping-table.js';
import {
  CAPABILITY_STATEMENT_ID,
  IMPLEMENTATION_GUIDE_URL,
  capabilityStatement,
  type CapabilityFeatures,
} from './capability-statement.js';
import { common, conformanceResources } from './resources.js';

export const PACKAGE_NAME = 'fhir-eligibility-adapter.r4';
export const IMPLEMENTATION_GUIDE_ID = 'fhir-eligibility-adapter';
const TITLE = 'fhir-eligibility-adapter: eligibility checks at UAE payer portals';
const DESCRIPTION =
  'Profiles, extensions, code systems and operations of fhir-eligibility-adapter, the FHIR R4 service that answers CoverageEligibilityRequest/$submit from UAE payer portals.';

const snapshotsSchema = z.object({
  description: z.string(),
  generator: z.string(),
  snapshots: z.record(
    z.string(),
    z.object({ source: z.string(), element: z.array(z.record(z.string(), z.unknown())) }),
  ),
});

/** The generated snapshots, by canonical URL; empty before the first `npm run fhir-package`. */
function generatedSnapshots(): z.infer<typeof snapshotsSchema>['snapshots'] {
  snapshotsTable ??= loadMappingTable('conformance/snapshots.json', snapshotsSchema);
  return snapshotsTable.snapshots;
}
let snapshotsTable: z.infer<typeof snapshotsSchema> | undefined;

/**
 * The digest of a StructureDefinition as the source defines it (no snapshot): a snapshot generated
 * from another source is stale (test/unit/fhir-package.test.ts).
 */
export function sourceDigest(sd: StructureDefinition): string {
  const { snapshot: _snapshot, ...source } = sd;
  return createHash('sha256').update(JSON.stringify(source)).digest('hex');
}

/** The StructureDefinitions whose generated snapshot is missing or was made from another source. */
export function staleSnapshots(): string[] {
  const snapshots = generatedSnapshots();
  return structureDefinitions()
    .filter((sd) => snapshots[sd.url]?.source !== sourceDigest(sd))
    .map((sd) => sd.url);
}

/** The StructureDefinitions of the package, as the source defines them (differential only). */
export function structureDefinitions(): StructureDefinition[] {
  return conformanceResources().filter(
    (r): r is StructureDefinition => r.resourceType === 'StructureDefinition',
  );
}

/** A StructureDefinition with its generated snapshot, placed before the differential as R4 orders them. */
function withSnapshot(sd: StructureDefinition): StructureDefinition {
  const generated = generatedSnapshots()[sd.url];
  if (!generated) return sd;
  const { differential, ...rest } = sd;
  return {
    ...rest,
    snapshot: { element: generated.element as unknown as ElementDefinition[] },
    ...(differential ? { differential } : {}),
  };
}

/**
 * The CapabilityStatement as /fhir/metadata serves it with every feature on, for the canonical
 * base (a deployment's own statement names its own URLs; docs/validation.md).
 */
export function packageCapabilityStatement(conformanceTypes: readonly string[]): CapabilityStatement {
  const features: CapabilityFeatures = {
    checks: true,
    conformance: conformanceTypes,
    documents: true,
    subscriptions: true,
    smartTokenUrl: `${packageBaseUrl()}/auth/token`,
    auditEvents: true,
  };
  return capabilityStatement(features, packageBaseUrl(), common.version, common.date);
}

/** The server base the package's CapabilityStatement names: the canonical base without /fhir. */
function packageBaseUrl(): string {
  return CANONICAL_BASE.replace(/\/fhir$/, '');
}

/** The types read by id and searched by url under /fhir (the CapabilityStatement lists them). */
export function servedConformanceTypes(): string[] {
  const types = new Set(conformanceResources().map((r) => r.resourceType));
  types.add('ImplementationGuide');
  return [...types].sort();
}

function implementationGuide(resources: Resource[]): ImplementationGuide {
  return {
    resourceType: 'ImplementationGuide',
    id: IMPLEMENTATION_GUIDE_ID,
    url: IMPLEMENTATION_GUIDE_URL,
    version: common.version,
    name: 'FhirEligibilityAdapter',
    title: TITLE,
    status: common.status,
    date: common.date,
    publisher: common.publisher,
    description: DESCRIPTION,
    packageId: PACKAGE_NAME,
    license: 'not-open-source',
    fhirVersion: ['4.0.1'],
    definition: {
      resource: resources.map((r) => ({
        reference: { reference: `${r.resourceType}/${r.id ?? ''}` },
        name: nameOf(r),
        exampleBoolean: false,
      })),
    },
  };
}

function nameOf(resource: Resource): string {
  const named = resource as { title?: string; name?: string };
  return named.title ?? named.name ?? `${resource.resourceType}/${resource.id ?? ''}`;
}

let resources: Resource[] | undefined;

/**
 * A conformance resource with its narrative (dom-6), unless it has one: what it is, its canonical
 * URL and version, and its description. Added here, not in the source, so that a snapshot's
 * source digest does not change with it.
 */
function withNarrative<T extends Resource>(resource: T): T {
  const r = resource as T & { text?: Narrative; url?: string; version?: string; description?: string };
  if (r.text) return resource;
  const { resourceType, id, ...rest } = r;
  const what = `${resourceType} ${r.url ?? id ?? ''}${r.version ? ` (version ${r.version})` : ''}`;
  const text = generatedNarrative(
    `<p><b>${escapeXml(nameOf(resource))}</b>: ${escapeXml(what)}</p>${
      r.description ? `<p>${escapeXml(r.description)}</p>` : ''
    }`,
  );
  return { resourceType, id, text, ...rest } as unknown as T;
}

/**
 * Every resource of the package, the ImplementationGuide last: the conformance resources (each
 * StructureDefinition with its snapshot) and the CapabilityStatement. Built once.
 */
export function packageResources(): Resource[] {
  if (resources) return resources;
  const defined = conformanceResources().map((r) =>
    r.resourceType === 'StructureDefinition' ? withSnapshot(r as StructureDefinition) : r,
  );
  const listed = [...defined.map(withNarrative), packageCapabilityStatement(servedConformanceTypes())];
  resources = [...listed, withNarrative(implementationGuide(listed))];
  return resources;
}

/** package/package.json of the FHIR package. */
export function packageManifest(): Record<string, unknown> {
  return {
    name: PACKAGE_NAME,
    version: common.version,
    canonical: CANONICAL_BASE,
    url: CANONICAL_BASE,
    title: TITLE,
    description: DESCRIPTION,
    fhirVersions: ['4.0.1'],
    dependencies: { 'hl7.fhir.r4.core': '4.0.1' },
    type: 'IG',
    author: common.publisher,
    license: 'UNLICENSED',
    jurisdiction: 'urn:iso:std:iso:3166#AE',
  };
}

/** The file name of a resource in the package: {type}-{id}.json, as the IG publisher names them. */
export function fileNameOf(resource: Resource): string {
  return `${resource.resourceType}-${resource.id ?? ''}.json`;
}

/** package/.index.json (index-version 2): one entry per resource file. */
export function packageIndex(): Record<string, unknown> {
  return {
    'index-version': 2,
    files: packageResources().map((r) => {
      const c = r as { url?: string; version?: string; kind?: string; type?: string };
      return {
        filename: fileNameOf(r),
        resourceType: r.resourceType,
        id: r.id,
        ...(c.url !== undefined ? { url: c.url } : {}),
        ...(c.version !== undefined ? { version: c.version } : {}),
        ...(c.kind !== undefined ? { kind: c.kind } : {}),
        ...(c.type !== undefined ? { type: c.type } : {}),
      };
    }),
  };
}

export interface PackageFile {
  /** Path in the tarball, under package/. */
  path: string;
  content: Buffer;
}

/** The files of the package, sorted by path: the manifest, the index and one file per resource. */
export function packageFiles(): PackageFile[] {
  const json = (value: unknown) => Buffer.from(`${JSON.stringify(value, null, 2)}\n`, 'utf8');
  const files: PackageFile[] = [
    { path: 'package/package.json', content: json(packageManifest()) },
    { path: 'package/.index.json', content: json(packageIndex()) },
    ...packageResources().map((r) => ({ path: `package/${fileNameOf(r)}`, content: json(r) })),
  ];
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export { CAPABILITY_STATEMENT_ID };
