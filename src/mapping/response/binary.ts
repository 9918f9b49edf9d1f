/**
 * Stable ids for portal documents and screenshots. The upstream's links are signed and expire
 * (docs/upstream.md: "Signed links"), so a CER never carries them (the README,
 * Documents and screenshot). It carries `${baseUrl}/fhir/Binary/{binaryId}` instead; that
 * route reads the task again and follows the fresh link (`resolveBinary`).
 *
 * Ids are FHIR ids ([A-Za-z0-9\-.]{1,64}, https://hl7.org/fhir/R4/datatypes.html#id):
 *   {checkId}.s      the result's screenshot (screenshot_key)
 *   {checkId}.s{n}   the screenshot of warning n (warning_messages[n].screenshot)
 *   {checkId}.d{n}   document n (referral_documents[n])
 */
import type { Attachment, CoverageEligibilityResponse, DocumentReference } from 'fhir/r4.js';
import type { DocumentEntry, Envelope } from '../../upstream/contract.js';

export type BinaryKind = 'screenshot' | 'document';

export interface BinaryRef {
  checkId: string;
  kind: BinaryKind;
  index?: number;
}

const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const PATTERN = /^([A-Za-z0-9\-.]+)\.(s|d)(\d{0,6})$/;

/** The stable Binary id of a check's screenshot or document. Throws when the result is not a FHIR id. */
export function binaryId(checkId: string, kind: BinaryKind, index?: number): string {
  if (index !== undefined && (!Number.isInteger(index) || index < 0 || index > 999_999)) {
    throw new RangeError(`binary index out of range: ${index}`);
  }
  if (kind === 'document' && index === undefined) throw new RangeError('a document needs an index');
  if (checkId === '') throw new RangeError('a check id is required');
  const id = `${checkId}.${kind === 'screenshot' ? 's' : 'd'}${index ?? ''}`;
  if (!ID.test(id)) throw new RangeError(`not a valid FHIR id: ${id}`);
  return id;
}

/** The inverse of binaryId; null for anything binaryId does not produce. */
export function parseBinaryId(id: string): BinaryRef | null {
  if (!ID.test(id)) return null;
  const match = PATTERN.exec(id);
  if (!match) return null;
  const [, checkId = '', letter, digits = ''] = match;
  if (digits.length > 1 && digits.startsWith('0')) return null;
  if (letter === 'd') return digits === '' ? null : { checkId, kind: 'document', index: Number(digits) };
  return digits === ''
    ? { checkId, kind: 'screenshot' }
    : { checkId, kind: 'screenshot', index: Number(digits) };
}

/** The documents of a single-payer result: the parsed result's, else the interim ones. */
export function documentsOf(envelope: Envelope): DocumentEntry[] {
  const data = envelope.eligibility_result?.data_dump?.data;
  if (data?.referral_documents?.length) return data.referral_documents;
  return envelope.interim_results?.referral_documents ?? [];
}

/** The screenshot link of a single-payer result: the parsed result's, else the interim one. */
export function screenshotOf(envelope: Envelope): string | undefined {
  const data = envelope.eligibility_result?.data_dump?.data;
  return data?.screenshot_key ?? envelope.interim_results?.screenshot_key ?? undefined;
}

export const CONTENT_TYPES: Readonly<Record<string, string>> = {
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  html: 'text/html',
  htm: 'text/html',
  txt: 'text/plain',
};

/** MIME type from a file name or the path of a link (never its query); undefined when unknown. */
export function contentTypeOf(name: string | null | undefined): string | undefined {
  if (!name) return undefined;
  let path = name;
  // Without a ':' there is no scheme, and the URL parser always fails (https://url.spec.whatwg.org/#scheme-start-state,
  // no base): a plain file name skips the failed parse, whose exception cost more than the rest of a document.
  if (name.includes(':')) {
    try {
      path = new URL(name).pathname;
    } catch {
      // a plain file name
    }
  }
  const extension = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return extension ? CONTENT_TYPES[extension] : undefined;
}

/**
 * The fresh upstream link a Binary id points at, in a freshly read envelope; null when the
 * envelope no longer has it. For the Binary route, which redirects to (or streams) `url`.
 */
export function resolveBinary(
  envelope: Envelope,
  ref: BinaryRef,
): { url: string; contentType?: string; title?: string; filename?: string } | null {
  if (ref.kind === 'document') {
    const doc = documentsOf(envelope)[ref.index ?? -1];
    if (!doc) return null;
    const contentType = contentTypeOf(doc.original_filename) ?? contentTypeOf(doc.s3_url);
    const title = doc.tag ?? doc.original_filename ?? undefined;
    const filename = doc.original_filename ?? undefined;
    return {
      url: doc.s3_url,
      ...(contentType ? { contentType } : {}),
      ...(title ? { title } : {}),
      ...(filename ? { filename } : {}),
    };
  }
  const url =
    ref.index === undefined
      ? screenshotOf(envelope)
      : (envelope.eligibility_result?.data_dump?.data?.warning_messages?.[ref.index]?.screenshot ??
        undefined);
  if (!url) return null;
  const contentType = contentTypeOf(url);
  return { url, ...(contentType ? { contentType } : {}) };
}

/** The Attachment of a contained DocumentReference for a file kept behind the adapter (no signed link). */
export function attachmentOf(baseUrl: string, id: string, title?: string, contentType?: string): Attachment {
  return {
    url: `${baseUrl}/fhir/Binary/${id}`,
    ...(contentType ? { contentType } : {}),
    ...(title ? { title } : {}),
  };
}

/** A document a final answer shows, to be kept (docs/evidence.md). */
export interface AnswerDocument {
  /** Its Binary id. */
  id: string;
  /** The portal's label, as the CER's DocumentReference gives it. */
  label: string;
  filename: string | null;
  contentType: string | null;
}

/**
 * The documents a CER shows behind its Binary links (its contained DocumentReferences, so exactly
 * what a reader of the answer can open), each with the portal's file name from the envelope.
 */
export function answerDocuments(cer: CoverageEligibilityResponse, envelope: Envelope): AnswerDocument[] {
  const found: AnswerDocument[] = [];
  for (const contained of cer.contained ?? []) {
    if (contained.resourceType !== 'DocumentReference') continue;
    const resource = contained as DocumentReference;
    const attachment = resource.content[0]?.attachment;
    const id = /\/fhir\/Binary\/([^/?#]+)$/.exec(attachment?.url ?? '')?.[1];
    const ref = id ? parseBinaryId(id) : null;
    if (!id || !ref || ref.checkId !== cer.id || found.some((d) => d.id === id)) continue;
    const link = resolveBinary(envelope, ref);
    found.push({
      id,
      label: resource.type?.text ?? attachment?.title ?? 'Payer portal document',
      filename: link?.filename ?? null,
      contentType: attachment?.contentType ?? null,
    });
  }
  return found;
}
