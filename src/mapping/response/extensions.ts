/**
 * The extensions of this service on the CER, its insurance entries and the contained Coverage.
 * Definitions: conformance.ts (StructureDefinitions under CANONICAL_BASE). Extension rules:
 * https://hl7.org/fhir/R4/extensibility.html (ext-1: a value or sub-extensions, never both).
 */
import type { Attachment, DocumentReference, Extension } from 'fhir/r4.js';
import type { DocumentEntry, PolicyNetwork, ResultData, WarningEntry } from '../../upstream/contract.js';
import { parseLooseNumber } from '../../upstream/contract.js';
import { attachmentOf, binaryId, contentTypeOf } from './binary.js';
import {
  booleanPart,
  complexExtension,
  extensionUrl,
  fhirText,
  positiveIntPart,
  stringPart,
} from './codes.js';
import { isCalendarDate } from './dates.js';
import { gatekeeperRequired } from './vocabulary.js';

/** How the portal's warning types read: missing or unknown = warning (docs/upstream.md, "Other fields with a rule attached"). */
export function messageTypeOf(entry: WarningEntry): 'warning' | 'information' {
  return entry.message_type?.trim().toLowerCase() === 'information' ? 'information' : 'warning';
}

/** The description of warning `index`'s own screenshot (its contained DocumentReference). */
export function screenshotDescription(type: 'warning' | 'information', index: number): string {
  return `Payer portal screenshot of ${type} message ${index + 1}`;
}

/**
 * warning_messages, each verbatim (displayed as given, never parsed or matched) with its type.
 * A warning's own screenshot, when `screenshots` says where, becomes a contained DocumentReference
 * (stable adapter link) referenced from the message's `screenshot` sub-extension (dom-3).
 */
export function portalMessageParts(
  warnings: WarningEntry[],
  screenshots?: { baseUrl: string; checkId: string },
): { extension: Extension[]; contained: DocumentReference[] } {
  const extension: Extension[] = [];
  const contained: DocumentReference[] = [];
  warnings.forEach((w, i) => {
    const message = fhirText(w.message);
    if (!message) return;
    const type = messageTypeOf(w);
    const given = fhirText(w.message_type);
    let shot: Extension | undefined;
    if (screenshots && w.screenshot) {
      const doc = documentReference(
        `warning-screenshot-${i}`,
        'Payer portal screenshot',
        attachmentOf(
          screenshots.baseUrl,
          binaryId(screenshots.checkId, 'screenshot', i),
          'Payer portal screenshot',
          contentTypeOf(w.screenshot),
        ),
        screenshotDescription(type, i),
      );
      contained.push(doc);
      shot = { url: 'screenshot', valueReference: { reference: `#${doc.id ?? ''}` } };
    }
    const ext = complexExtension('portal-message', [
      { url: 'message', valueString: message },
      { url: 'type', valueCode: type },
      given && given.toLowerCase() !== type ? { url: 'typeAsGiven', valueString: given } : undefined,
      shot,
    ]);
    if (ext) extension.push(ext);
  });
  return { extension, contained };
}

/** warning_messages as portal-message extensions, without screenshots (e.g. per payer of a search-all). */
export function portalMessages(warnings: WarningEntry[]): Extension[] {
  return portalMessageParts(warnings).extension;
}

/**
 * Documents and the screenshot as contained DocumentReferences whose attachment URL is a stable
 * adapter link (never the signed upstream link), each referenced from a CER extension so the
 * contained resource is part of the CER (dom-3, https://hl7.org/fhir/R4/domainresource.html).
 */
export function documentExtensions(
  documents: DocumentEntry[],
  screenshot: string | null | undefined,
  baseUrl: string,
  checkId: string,
): { extension: Extension[]; contained: DocumentReference[] } {
  const contained: DocumentReference[] = documents.map((doc, i) => {
    const title = fhirText(doc.tag) ?? fhirText(doc.original_filename) ?? fhirText(doc.id);
    return documentReference(
      `document-${i}`,
      title ?? 'Payer portal document',
      attachmentOf(
        baseUrl,
        binaryId(checkId, 'document', i),
        title,
        contentTypeOf(doc.original_filename) ?? contentTypeOf(doc.s3_url),
      ),
    );
  });
  const extension: Extension[] = contained.map((d) => ({
    url: extensionUrl('portal-document'),
    valueReference: { reference: `#${d.id ?? ''}` },
  }));
  if (screenshot) {
    contained.push(
      documentReference(
        'screenshot',
        'Payer portal screenshot',
        attachmentOf(
          baseUrl,
          binaryId(checkId, 'screenshot'),
          'Payer portal screenshot',
          contentTypeOf(screenshot),
        ),
      ),
    );
    extension.push({ url: extensionUrl('portal-screenshot'), valueReference: { reference: '#screenshot' } });
  }
  return { extension, contained };
}

/** A DocumentReference with no subject or other patient data: type, description and the adapter link. */
function documentReference(
  id: string,
  label: string,
  attachment: Attachment,
  description: string = label,
): DocumentReference {
  return {
    resourceType: 'DocumentReference',
    id,
    status: 'current',
    type: { text: label },
    description,
    content: [{ attachment }],
  };
}

/** is_gatekeeper verbatim, what it means for GP referral, and the portal's own boolean. */
export function gpReferralExtension(network: PolicyNetwork | null | undefined): Extension | undefined {
  const required = gatekeeperRequired(network?.is_gatekeeper);
  return complexExtension('gp-referral-required', [
    stringPart('isGatekeeper', network?.is_gatekeeper),
    booleanPart('required', required),
    booleanPart(
      'specialistReferralFlag',
      network?.is_general_physician_referral_required_for_specialist_referral,
    ),
  ]);
}

/** Multi-card: which card of how many, its number, package and network (docs/upstream.md, Members with several cards). */
export function multiCardExtension(data: ResultData): Extension | undefined {
  const total = parseLooseNumber(data.multi_card_total);
  if (total === null || total <= 1) return undefined;
  return complexExtension('multi-card', [
    positiveIntPart('cardIndex', parseLooseNumber(data.card_index)),
    positiveIntPart('cardTotal', total),
    stringPart('cardNumber', data.card_number),
    stringPart(
      'package',
      data.package_name ?? data.policy_network?.package_name ?? data.policy_network?.package,
    ),
    stringPart('network', data.card_network ?? data.policy_network?.card_network),
  ]);
}

/** The plain statement a multi-card result must carry in `disposition`. */
export function multiCardStatement(data: ResultData): string | undefined {
  const total = parseLooseNumber(data.multi_card_total);
  if (total === null || total <= 1) return undefined;
  const index = parseLooseNumber(data.card_index);
  const pkg =
    fhirText(data.package_name ?? data.policy_network?.package_name ?? data.policy_network?.package) ??
    'not stated';
  const network = fhirText(data.card_network ?? data.policy_network?.card_network) ?? 'not stated';
  const which = index === null ? 'this is one of them' : `this is card ${index}`;
  return `The member holds ${total} cards; ${which} (package ${pkg}, network ${network}). Other cards are not shown.`;
}

function distinct(values: (string | null | undefined)[]): string[] {
  const texts = values.map((v) => fhirText(v)).filter((v): v is string => v !== undefined);
  return texts.filter((v, i) => texts.indexOf(v) === i);
}

function dmyDate(
  value: { DD?: unknown; MM?: unknown; YYYY?: unknown } | null | undefined,
): string | undefined {
  const [d, m, y] = [value?.DD, value?.MM, value?.YYYY].map((v) => parseLooseNumber(v));
  if (d == null || m == null || y == null || y < 1000 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
    return undefined;
  const date = `${y}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
  return isCalendarDate(date) ? date : undefined;
}

/** Policy facts with no core element, on the contained Coverage. No patient name, id or date of birth. */
export function policyDetailsExtension(data: ResultData, periodAsGiven?: string): Extension | undefined {
  const network = data.policy_network;
  const analysis = data.copay_analysis;
  const info = analysis?.new_version_of_copay_analysis?.policy_info;
  const beneficiaryStart = dmyDate(info?.beneficiary_start_date);
  const parts: (Extension | undefined)[] = [
    stringPart('payerName', network?.payer_name ?? network?.payer_name_as_in_text),
    stringPart('isVip', network?.is_vip),
    stringPart('workSiteCovered', network?.work_site_covered),
    stringPart('policyAuthority', network?.policy_authority),
    stringPart('policyJurisdiction', info?.policy_jurisdiction),
    stringPart('networkBillingReference', network?.network_billing_reference),
    stringPart('sponsorId', network?.sponsor_id),
    stringPart('eligibilityId', data.eligibility_id ?? data.patient_info?.eligibility_id),
    beneficiaryStart ? { url: 'beneficiaryStartDate', valueDate: beneficiaryStart } : undefined,
    stringPart('periodAsGiven', periodAsGiven),
    ...distinct([analysis?.waiting_period, info?.waiting_period, network?.waiting_period]).map((v) =>
      stringPart('waitingPeriod', v),
    ),
    ...distinct((network?.all_networks ?? []).map((n) => n.network_name_as_in_text ?? n.network)).map((v) =>
      stringPart('availableNetwork', v),
    ),
    ...distinct([
      ...(analysis?.special_remarks ?? []),
      ...(analysis?.new_version_of_copay_analysis?.general_remarks ?? []),
    ]).map((v) => stringPart('remark', v)),
  ];
  return complexExtension('policy-details', parts);
}
