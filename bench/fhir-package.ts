/**
 * The FHIR package (docs/validation.md): its size, and what building it costs the service at
 * start-up (the resources with their snapshots, the files, the tgz), cold in a fresh process and
 * then warm (R more builds, median). Snapshot generation is not part of it: `npm run fhir-package`
 * does that, offline, only for what changed (its own output gives the time).
 *
 *   npx tsx bench/fhir-package.ts
 */
import { gunzipSync } from 'node:zlib';
import { machine, quantile, record } from './lib.js';

const R = Number(process.env.R ?? 9);

const t0 = process.hrtime.bigint();
const { packageFiles, packageResources } = await import('../src/mapping/conformance/package.js');
const { deterministicTgz } = await import('../src/fhir/tarball.js');
const t1 = process.hrtime.bigint();
const files = packageFiles();
const t2 = process.hrtime.bigint();
const tgz = await deterministicTgz(files);
const t3 = process.hrtime.bigint();
const ms = (a: bigint, b: bigint) => Number(b - a) / 1e6;

const warm: number[] = [];
for (let i = 0; i < R; i += 1) {
  const start = process.hrtime.bigint();
  await deterministicTgz(packageFiles());
  warm.push(ms(start, process.hrtime.bigint()));
}
warm.sort((a, b) => a - b);
const sd = packageResources().filter((r) => r.resourceType === 'StructureDefinition').length;
const result = {
  machine: machine(),
  files: files.length,
  resources: packageResources().length,
  structureDefinitions: sd,
  tgzBytes: tgz.length,
  tarBytes: gunzipSync(tgz).length,
  jsonBytes: files.reduce((n, f) => n + f.content.length, 0),
  coldMs: { importModules: ms(t0, t1), files: ms(t1, t2), tgz: ms(t2, t3), total: ms(t0, t3) },
  warmTgzMs: { median: quantile(warm, 0.5), min: warm[0], max: warm[warm.length - 1] },
};
console.log(JSON.stringify(result, null, 2));
await record('fhir-package', result);
