/**
 * The narrative of a stored CoverageEligibilityRequest (https://hl7.org/fhir/R4/narrative.html,
 * dom-6): what was asked, of whom and for when, in a few lines: status, purpose, insurer, date of
 * service, the service categories asked about and when the client made it. Never the patient: no
 * name, identifier or birth date (the request carries them; the narrative need not repeat them).
 */
import type {
  CodeableConcept,
  CoverageEligibilityRequest,
  Narrative,
  Organization,
  Reference,
} from 'fhir/r4.js';
import { escapeXml, generatedNarrative } from '../../fhir/xhtml.js';
import { visitTypeOf } from './tables.js';

/** A category as named: its text or display, else what the visit-type table asks the portal about, else its code. */
function conceptText(concept: CodeableConcept | undefined): string | undefined {
  if (!concept) return undefined;
  const coding = concept.coding?.[0];
  return (
    concept.text ?? coding?.display ?? (coding ? (visitTypeOf(coding)?.title ?? coding.code) : undefined)
  );
}

/** The insurer as named: its contained Organization's name or identifier, else the reference's own. */
function insurerName(request: CoverageEligibilityRequest): string | undefined {
  const insurer: Reference | undefined = request.insurer;
  if (!insurer) return undefined;
  const ref = insurer.reference;
  const contained = ref?.startsWith('#')
    ? (request.contained?.find((r) => r.resourceType === 'Organization' && `#${r.id ?? ''}` === ref) as
        Organization | undefined)
    : undefined;
  return (
    contained?.name ??
    contained?.identifier?.[0]?.value ??
    insurer.display ??
    insurer.identifier?.value ??
    (ref?.startsWith('#') ? undefined : ref)
  );
}

function servicedText(request: CoverageEligibilityRequest): string | undefined {
  if (request.servicedDate) return request.servicedDate;
  const period = request.servicedPeriod;
  if (!period?.start && !period?.end) return undefined;
  return `${period.start ?? '?'} to ${period.end ?? '?'}`;
}

function row(label: string, value: string | undefined): string {
  return value ? `<li>${label}: ${escapeXml(value)}</li>` : '';
}

export function requestNarrative(request: CoverageEligibilityRequest): Narrative {
  const asked = (request.item ?? [])
    .map((item) => conceptText(item.category))
    .filter((t): t is string => t !== undefined);
  const purpose = (request.purpose ?? []).join(', ');
  return generatedNarrative(
    `<p><b>Eligibility request</b> (${escapeXml(request.status ?? 'unknown status')}${
      purpose ? `; ${escapeXml(purpose)}` : ''
    })</p><ul>${row('Insurer', insurerName(request))}${row('Date of service', servicedText(request))}${row(
      'Asked about',
      asked.length > 0 ? asked.join(', ') : 'the whole plan',
    )}${row('Made by the client', request.created)}</ul>`,
  );
}
