/**
 * The documents of a CER in its narrative, and a document that could not be kept (docs/evidence.md):
 * its contained DocumentReference loses the Binary link (the adapter has no copy to serve) and
 * says why in its description, which the narrative shows. Pure functions.
 */
import type { CoverageEligibilityResponse, DocumentReference } from 'fhir/r4.js';
import { extensionUrl } from './codes.js';
import { containedById } from './contained.js';
import { escapeXml } from './xhtml.js';

/** Why a document could not be kept, as the narrative says it. */
export const NOT_KEPT_TEXT = {
  expired: 'its link had expired and the eligibility service no longer gave a fresh one',
  'too-big': 'it is larger than the size this service keeps',
  unavailable: 'the document store did not return it',
} as const;

export type NotKeptWhy = keyof typeof NOT_KEPT_TEXT;

/**
 * The CER with the document behind Binary `binaryId` marked not kept: no link, the reason in its
 * description. The caller renders the narrative again (withNarrative). Unchanged when absent.
 */
export function markNotKept(
  cer: CoverageEligibilityResponse,
  binaryId: string,
  why: NotKeptWhy,
): CoverageEligibilityResponse {
  const suffix = `/fhir/Binary/${binaryId}`;
  const contained = (cer.contained ?? []).map((resource) => {
    if (resource.resourceType !== 'DocumentReference') return resource;
    const doc = resource as DocumentReference;
    const attachment = doc.content[0]?.attachment;
    if (!attachment?.url?.endsWith(suffix)) return resource;
    const { url: _url, ...rest } = attachment;
    const marked: DocumentReference = {
      ...doc,
      description: `Could not be kept: ${NOT_KEPT_TEXT[why]}.`,
      content: [{ ...doc.content[0], attachment: rest }, ...doc.content.slice(1)],
    };
    return marked;
  });
  return { ...cer, contained };
}

/** The documents and screenshots, each with its stable adapter link, then those not kept. */
export function documentsXhtml(cer: CoverageEligibilityResponse): string {
  const refs = [
    ...(cer.extension ?? []).filter((e) => e.url === extensionUrl('portal-document')),
    ...(cer.extension ?? []).filter((e) => e.url === extensionUrl('portal-screenshot')),
  ];
  const items = refs.flatMap((ext) => {
    const doc = containedById<DocumentReference>(cer, ext.valueReference?.reference, 'DocumentReference');
    const attachment = doc?.content[0]?.attachment;
    const title = attachment?.title ?? doc?.description ?? 'Payer portal document';
    if (!attachment?.url) return [];
    return [`<li><a href="${escapeXml(attachment.url)}">${escapeXml(title)}</a></li>`];
  });
  const notKept = (cer.contained ?? []).flatMap((resource) => {
    if (resource.resourceType !== 'DocumentReference') return [];
    const doc = resource as DocumentReference;
    const attachment = doc.content[0]?.attachment;
    if (attachment?.url || !doc.description) return [];
    const title = attachment?.title ?? doc.type?.text ?? 'Payer portal document';
    return [`<li>${escapeXml(title)}: ${escapeXml(doc.description)}</li>`];
  });
  return [
    items.length ? `<p>Documents:</p><ul>${items.join('')}</ul>` : '',
    notKept.length ? `<p>Documents not kept:</p><ul>${notKept.join('')}</ul>` : '',
  ].join('');
}
