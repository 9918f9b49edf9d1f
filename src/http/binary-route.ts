/**
 * GET /fhir/Binary/{id}: the kept copy of a document (docs/evidence.md), else the document proxy,
 * which streams a document or the portal screenshot through
 * a link the upstream signed a moment ago (src/operations/binary.ts finds it); the signed link
 * itself is never sent to the client, and only https links or links on the upstream's own origin
 * are fetched (https://hl7.org/fhir/R4/binary.html#rest).
 */
import { pipeline } from 'node:stream/promises';
import type { Response } from 'express';
import { request as httpRequest } from 'undici';
import type { CheckService } from '../checks/service.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import type { Logger } from '../log.js';
import { freshDocumentLink, keptDocument, type FreshResults } from '../operations/binary.js';
import type { EvidenceStore } from '../checks/store/evidence-store.js';
import { allowedDocumentUrl } from '../upstream/documents.js';
import type { FhirRequest } from '../operations/types.js';

export interface DocumentProxyDeps {
  checks: CheckService;
  /** Upstream reads of the last few seconds, shared by the documents of one task. */
  freshResults: FreshResults;
  /**
   * Where document links may point besides any https URL: the upstream's own origin (the sandbox
   * serves its files over http). Anything else is refused, so a wrong or hostile upstream answer
   * cannot make the adapter fetch an internal address for a client.
   */
  documentOrigins: readonly string[];
  /** The kept documents (docs/evidence.md), served ahead of the upstream once kept. */
  evidence: EvidenceStore;
  logger?: Logger;
}

const GENERIC_TYPES = new Set(['application/octet-stream', 'binary/octet-stream']);

/**
 * GET /fhir/Binary/{id}: streams a document or the portal screenshot through a link the upstream
 * signed a moment ago. The signed link itself is never sent to the client.
 */
export async function streamDocument(
  req: FhirRequest,
  res: Response,
  deps: DocumentProxyDeps,
): Promise<void> {
  const kept = await keptDocument(req, deps.evidence);
  if (kept) {
    const { evidence, bytes } = kept;
    res.status(200);
    res.setHeader('Content-Type', evidence.contentType ?? 'application/octet-stream');
    res.setHeader('Cache-Control', 'private, no-store');
    // The bytes never change: their SHA-256 is a strong validator.
    res.setHeader('ETag', `"${evidence.sha256 ?? ''}"`);
    res.setHeader('Content-Disposition', contentDisposition(evidence.filename ?? evidence.label));
    res.end(bytes);
    return;
  }
  const link = await freshDocumentLink(req, deps.checks, deps.freshResults);
  const unavailable = new OperationOutcomeError(
    outcome('transient', 'The document store did not return the document; try again shortly.'),
    502,
    { 'Retry-After': '30' },
  );
  if (!allowedDocumentUrl(link.url, deps.documentOrigins)) {
    deps.logger?.warn('document link refused: not https and not the upstream origin');
    throw unavailable;
  }
  let upstream: Awaited<ReturnType<typeof httpRequest>>;
  try {
    upstream = await httpRequest(link.url, { method: 'GET', headersTimeout: 15_000, bodyTimeout: 30_000 });
  } catch {
    throw unavailable;
  }
  if (upstream.statusCode !== 200) {
    await upstream.body.dump();
    throw unavailable;
  }
  const given = upstream.headers['content-type'];
  const type =
    typeof given === 'string' && !GENERIC_TYPES.has(given.split(';')[0]?.trim().toLowerCase() ?? '')
      ? given
      : (link.contentType ?? 'application/octet-stream');
  res.status(200);
  res.setHeader('Content-Type', type);
  res.setHeader('Cache-Control', 'private, no-store');
  if (link.filename) res.setHeader('Content-Disposition', contentDisposition(link.filename));
  await pipeline(upstream.body, res);
}

/**
 * Content-Disposition for a portal label of any script (Arabic labels are common): an ASCII
 * fallback plus the UTF-8 form of RFC 6266 / RFC 5987, so setHeader never meets a non-Latin-1 byte.
 */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `inline; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}
