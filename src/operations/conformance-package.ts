/**
 * GET /fhir/package.tgz: the service's FHIR NPM package (docs/validation.md), which the HL7
 * validator's `-ig <base>/fhir` fetches. The same bytes `npm run fhir-package` writes: built once,
 * at start-up, from the package's files (src/mapping/conformance/package.ts), never per request.
 */
import { createHash } from 'node:crypto';
import { deterministicTgz } from '../fhir/tarball.js';
import { PACKAGE_NAME, packageFiles } from '../mapping/conformance/package.js';

export interface PackageTarball {
  bytes: Buffer;
  /** A strong ETag: the digest of the bytes. */
  etag: string;
  fileName: string;
}

let built: Promise<PackageTarball> | undefined;

/** The package's .tgz, built on the first call and kept. */
export function packageTarball(): Promise<PackageTarball> {
  built ??= deterministicTgz(packageFiles()).then((bytes) => ({
    bytes,
    etag: `"${createHash('sha256').update(bytes).digest('base64url')}"`,
    fileName: `${PACKAGE_NAME}.tgz`,
  }));
  return built;
}
