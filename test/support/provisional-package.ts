/**
 * PROVISIONAL (until the package builder lands): a package.tgz of the conformance resources the
 * service serves today, so the package check can be developed. Snapshot = differential.
 */
import { writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import type { Resource } from 'fhir/r4.js';
import { conformanceResources } from '../../src/mapping/response/index.js';

function header(name: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, 100, 'utf8');
  h.write('0000644\0', 100);
  h.write('0000000\0', 108);
  h.write('0000000\0', 116);
  h.write(size.toString(8).padStart(11, '0') + '\0', 124);
  h.write('00000000000\0', 136);
  h.write('        ', 148);
  h.write('0', 156);
  h.write('ustar\0', 257);
  h.write('00', 263);
  let sum = 0;
  for (const b of h) sum += b;
  h.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
  return h;
}

export function writeProvisionalPackage(path: string, name: string, version: string): void {
  const files: [string, unknown][] = [
    [
      'package/package.json',
      { name, version, fhirVersions: ['4.0.1'], dependencies: { 'hl7.fhir.r4.core': '4.0.1' } },
    ],
  ];
  for (const r of conformanceResources() as (Resource & { differential?: unknown })[]) {
    const copy = r.resourceType === 'StructureDefinition' ? { ...r, snapshot: r.differential } : r;
    files.push([`package/${r.resourceType}-${r.id}.json`, copy]);
  }
  const parts: Buffer[] = [];
  for (const [file, json] of files) {
    const body = Buffer.from(JSON.stringify(json));
    parts.push(header(file, body.length), body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  writeFileSync(path, gzipSync(Buffer.concat(parts)));
}
