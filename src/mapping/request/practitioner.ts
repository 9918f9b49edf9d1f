/**
 * The people on the request: the treating doctor (CoverageEligibilityRequest.provider ->
 * doctorName, doctorId = the MD licence) and who entered it (enterer -> user_id).
 */
import type { Identifier, Practitioner, PractitionerRole } from 'fhir/r4.js';
import { formatName } from './patient.js';
import {
  resolveReference,
  scopeOf,
  type FoundResource,
  type ResolutionContext,
  type Scope,
  type Target,
} from './references.js';
import { identifierKind } from './tables.js';
import { list } from './submit-body.js';

export interface Doctor {
  name: string;
  /** Licence id (identifier type MD or a licence system); absent when the input has none. */
  licence?: string;
}

const licenceOf = (identifiers: Identifier[] | undefined): string | undefined =>
  list(identifiers)
    .find((i) => identifierKind(i) === 'practitioner-licence' && i.value?.trim())
    ?.value?.trim();

/** doctorName / doctorId from the provider: a Practitioner, a PractitionerRole's practitioner, or a logical reference. */
export async function doctorOf(
  target: Target | undefined,
  requestScope: Scope,
  context: ResolutionContext,
): Promise<Doctor> {
  if (!target) return { name: '' };
  if (target.kind === 'logical') {
    const licence =
      identifierKind(target.identifier) === 'practitioner-licence' ? target.identifier.value : undefined;
    return { name: target.display ?? '', ...(licence ? { licence } : {}) };
  }
  const { resource } = target;
  if (resource.resourceType === 'Practitioner') return fromPractitioner(resource);
  if (resource.resourceType === 'PractitionerRole')
    return fromRole({ ...target, resource }, requestScope, context);
  // An Organization as provider names no doctor.
  return { name: '' };
}

function fromPractitioner(practitioner: Practitioner, fallbackLicence?: string): Doctor {
  const licence = licenceOf(practitioner.identifier) ?? fallbackLicence;
  return { name: formatName(practitioner.name), ...(licence ? { licence } : {}) };
}

async function fromRole(
  found: FoundResource & { resource: PractitionerRole },
  requestScope: Scope,
  context: ResolutionContext,
): Promise<Doctor> {
  const role = found.resource;
  const roleLicence = licenceOf(role.identifier);
  const target = await resolveReference(
    role.practitioner,
    { path: `${found.path}.practitioner`, label: 'doctor', types: ['Practitioner'] },
    scopeOf(found, requestScope),
    context,
  );
  if (!target) {
    const name = role.practitioner?.display ?? '';
    return { name, ...(roleLicence ? { licence: roleLicence } : {}) };
  }
  if (target.kind === 'logical') {
    const own =
      identifierKind(target.identifier) === 'practitioner-licence' ? target.identifier.value : undefined;
    const licence = own ?? roleLicence;
    return { name: target.display ?? '', ...(licence ? { licence } : {}) };
  }
  return fromPractitioner(target.resource as Practitioner, roleLicence);
}

/** user_id: the enterer's identifier, else its server/Bundle id, else the caller's user, else 'fhir-adapter'. */
export function userIdOf(target: Target | undefined, fallback: string | undefined): string {
  const fromTarget =
    target?.kind === 'logical'
      ? target.identifier.value
      : target
        ? (list((target.resource as Practitioner | PractitionerRole).identifier).find((i) => i.value?.trim())
            ?.value ??
          // A contained resource's id is local to the request and names nobody.
          (target.via === 'contained' ? undefined : target.resource.id))
        : undefined;
  return fromTarget?.trim() || fallback || 'fhir-adapter';
}
