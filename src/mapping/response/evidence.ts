/**
 * The documents of a CER in its narrative (docs/evidence.md), and the two states of a document that
 * is not kept, each said in its contained DocumentReference's description, which the narrative
 * and the page show:
 * - not kept yet (a download failed and is tried again): `Not kept yet: <why>; the next try is at
 *   <time>.` The Binary link stays (the next try may keep it), but nothing shows it as kept;
 * - not kept (given up): the Binary link goes (the adapter has no copy to serve), `Could not be
 *   kept: <why>.`
 * Pure functions.
 */
import type { CoverageEligibilityResponse, DocumentReference, Extension } from 'fhir/r4.js';
import { extensionUrl } from './codes.js';
import { containedById } from './contained.js';
import { screenshotDescription } from './extensions.js';
import { escapeXml } from './xhtml.js';

/** Why a document could not be kept, as the narrative says it. */
export const NOT_KEPT_TEXT = {
  expired: 'its link had expired and the eligibility service no longer gave a fresh one',
  refused: 'the payer portal refused its link at every try',
  'too-big': 'it is larger than the size this service keeps',
  unavailable: 'the document store did not return it',
} as const;

export type NotKeptWhy = keyof typeof NOT_KEPT_TEXT;

/** Why a download failed and will be tried again, as the narrative says it. */
export const NOT_KEPT_YET_TEXT = {
  expired: 'the payer portal refused its link',
  unavailable: 'the payer portal did not send it',
} as const;

export type NotKeptYetWhy = keyof typeof NOT_KEPT_YET_TEXT;

/** How the description of a document not kept yet starts (the narrative and the page read it). */
export const NOT_KEPT_YET = 'Not kept yet:';

/** An instant as the narrative writes times: `2026-11-22 09:58 UTC`. */
const utc = (ms: number) => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/** Whether a contained DocumentReference is marked not kept yet. */
export const isNotKeptYet = (doc: DocumentReference | undefined): boolean =>
  doc?.description?.startsWith(NOT_KEPT_YET) ?? false;

/** The contained DocumentReferences of a CER, the one behind Binary `binaryId` replaced by `change`. */
function changingDocument(
  cer: CoverageEligibilityResponse,
  binaryId: string,
  change: (doc: DocumentReference) => DocumentReference,
): CoverageEligibilityResponse {
  const suffix = `/fhir/Binary/${binaryId}`;
  const contained = (cer.contained ?? []).map((resource) => {
    if (resource.resourceType !== 'DocumentReference') return resource;
    const doc = resource as DocumentReference;
    return doc.content[0]?.attachment?.url?.endsWith(suffix) ? change(doc) : resource;
  });
  return { ...cer, contained };
}

/** The contained DocumentReference behind Binary `binaryId`, if the CER links it. */
export function documentOf(
  cer: CoverageEligibilityResponse,
  binaryId: string,
): DocumentReference | undefined {
  const suffix = `/fhir/Binary/${binaryId}`;
  return (cer.contained ?? []).find(
    (r): r is DocumentReference =>
      r.resourceType === 'DocumentReference' &&
      ((r as DocumentReference).content[0]?.attachment?.url?.endsWith(suffix) ?? false),
  );
}

/**
 * The CER with the document behind Binary `binaryId` marked not kept yet: why its download failed
 * and when it is tried again. The caller renders the narrative again. Unchanged when absent.
 */
export function markNotKeptYet(
  cer: CoverageEligibilityResponse,
  binaryId: string,
  why: NotKeptYetWhy,
  nextTryAt: number,
): CoverageEligibilityResponse {
  return changingDocument(cer, binaryId, (doc) => ({
    ...doc,
    description: `${NOT_KEPT_YET} ${NOT_KEPT_YET_TEXT[why]}; the next try is at ${utc(nextTryAt)}.`,
  }));
}

/** The description a document had before it was marked not kept yet (extensions.ts wrote it). */
function firstDescription(cer: CoverageEligibilityResponse, doc: DocumentReference): string | undefined {
  const shot = /^warning-screenshot-(\d+)$/.exec(doc.id ?? '');
  const message = shot
    ? (cer.extension ?? []).find((e: Extension) =>
        e.extension?.some((p) => p.url === 'screenshot' && p.valueReference?.reference === `#${doc.id}`),
      )
    : undefined;
  const type = message?.extension?.find((p) => p.url === 'type')?.valueCode;
  if (shot && (type === 'warning' || type === 'information'))
    return screenshotDescription(type, Number(shot[1]));
  return doc.type?.text;
}

/** The CER with a document marked not kept yet back as it was (it is kept now); else unchanged. */
export function markKept(cer: CoverageEligibilityResponse, binaryId: string): CoverageEligibilityResponse {
  return changingDocument(cer, binaryId, (doc) => {
    if (!isNotKeptYet(doc)) return doc;
    const { description: _note, ...rest } = doc;
    const first = firstDescription(cer, doc);
    return { ...rest, ...(first ? { description: first } : {}) };
  });
}

/**
 * The CER with the document behind Binary `binaryId` marked not kept: no link, the reason in its
 * description. The caller renders the narrative again (withNarrative). Unchanged when absent.
 */
export function markNotKept(
  cer: CoverageEligibilityResponse,
  binaryId: string,
  why: NotKeptWhy,
): CoverageEligibilityResponse {
  return changingDocument(cer, binaryId, (doc) => {
    const attachment = doc.content[0]?.attachment;
    const { url: _url, ...rest } = attachment ?? {};
    return {
      ...doc,
      description: `Could not be kept: ${NOT_KEPT_TEXT[why]}.`,
      content: [{ ...doc.content[0], attachment: rest }, ...doc.content.slice(1)],
    };
  });
}

/**
 * The documents and screenshots, each with its stable adapter link, then those not kept yet (with
 * the next try), then those not kept (with why). One not kept yet is never listed as a link.
 */
export function documentsXhtml(cer: CoverageEligibilityResponse): string {
  const refs = [
    ...(cer.extension ?? []).filter((e) => e.url === extensionUrl('portal-document')),
    ...(cer.extension ?? []).filter((e) => e.url === extensionUrl('portal-screenshot')),
  ];
  const items = refs.flatMap((ext) => {
    const doc = containedById<DocumentReference>(cer, ext.valueReference?.reference, 'DocumentReference');
    const attachment = doc?.content[0]?.attachment;
    const title = attachment?.title ?? doc?.description ?? 'Payer portal document';
    if (!attachment?.url || isNotKeptYet(doc)) return [];
    return [`<li><a href="${escapeXml(attachment.url)}">${escapeXml(title)}</a></li>`];
  });
  const noted = (yet: boolean) =>
    (cer.contained ?? []).flatMap((resource) => {
      if (resource.resourceType !== 'DocumentReference') return [];
      const doc = resource as DocumentReference;
      const attachment = doc.content[0]?.attachment;
      if (!doc.description || (yet ? !isNotKeptYet(doc) : attachment?.url)) return [];
      const title = attachment?.title ?? doc.type?.text ?? 'Payer portal document';
      return [`<li>${escapeXml(title)}: ${escapeXml(doc.description)}</li>`];
    });
  const notYet = noted(true);
  const notKept = noted(false);
  return [
    items.length ? `<p>Documents:</p><ul>${items.join('')}</ul>` : '',
    notYet.length ? `<p>Documents not kept yet:</p><ul>${notYet.join('')}</ul>` : '',
    notKept.length ? `<p>Documents not kept:</p><ul>${notKept.join('')}</ul>` : '',
  ].join('');
}
