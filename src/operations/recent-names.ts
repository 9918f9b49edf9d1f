/**
 * Whose check a row of the front-desk page's recent checks is (docs/front-desk.md, issue 35): the
 * patient's name as the request gave it; else the policy holder's name the payer portal returned
 * (data_dump.data.policy_holder_name, or patient_info's); else the patient identifier masked to
 * its last 4 digits (`ID ending 0010`), never the whole identifier. Tenant-scoped; an id of
 * another tenant or unknown is simply not answered. The CER itself never carries the portal's
 * name (data minimisation, docs/response-mapping.md): this is the page's view of the stored check.
 */
import type { CoverageEligibilityRequest, Patient } from 'fhir/r4.js';
import type { CheckStore } from '../checks/store/check-store.js';
import type { Tenant } from '../config.js';
import { badRequest } from '../fhir/outcomes.js';

export interface RecentName {
  id: string;
  /** What the row shows. */
  text: string;
  /** Where it comes from: the request, the payer portal, or the masked identifier. */
  source: 'request' | 'portal' | 'identifier';
}

/** At most this many ids in one call (the page lists 10). */
export const MAX_RECENT_IDS = 20;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const SHOWN_DIGITS = 4;

function requestName(request: CoverageEligibilityRequest): string | undefined {
  const ref = request.patient?.reference;
  const patient = request.contained?.find(
    (r): r is Patient => r.resourceType === 'Patient' && `#${r.id ?? ''}` === ref,
  );
  const name = patient?.name?.[0];
  const text = name?.text ?? [...(name?.given ?? []), name?.family ?? ''].join(' ');
  return text.trim() || undefined;
}

function requestIdentifier(request: CoverageEligibilityRequest): string | undefined {
  const ref = request.patient?.reference;
  const patient = request.contained?.find(
    (r): r is Patient => r.resourceType === 'Patient' && `#${r.id ?? ''}` === ref,
  );
  return patient?.identifier?.find((i) => i.value)?.value;
}

const textOf = (value: unknown): string | undefined =>
  typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;

/** The policy holder's name in a finished envelope (a single payer's, or the first found payer's of a search). */
function portalName(envelope: unknown): string | undefined {
  if (!envelope || typeof envelope !== 'object') return undefined;
  const e = envelope as {
    eligibility_result?: { data_dump?: { data?: unknown } };
    aggregated_results?: { status?: unknown; data?: unknown }[];
  };
  const datas: unknown[] = [e.eligibility_result?.data_dump?.data];
  for (const entry of e.aggregated_results ?? [])
    if (entry?.status === 'found' || entry?.status === 'member_found') datas.push(entry.data);
  for (const data of datas) {
    if (!data || typeof data !== 'object') continue;
    const d = data as {
      policy_holder_name?: unknown;
      patient_info?: { policy_holder_name?: unknown };
    };
    const name = textOf(d.patient_info?.policy_holder_name) ?? textOf(d.policy_holder_name);
    if (name) return name;
  }
  return undefined;
}

/** `ID ending 0010`: the last digits only; an identifier with fewer digits than that shows none. */
export function maskedIdentifier(value: string | undefined): string {
  const digits = (value ?? '').replace(/\D/g, '');
  return digits.length > SHOWN_DIGITS ? `ID ending ${digits.slice(-SHOWN_DIGITS)}` : 'ID not shown';
}

/** Whose check each id is, in the order asked; ids not of this tenant are left out. */
export async function recentNames(
  store: CheckStore,
  tenant: Tenant,
  ids: readonly string[],
): Promise<RecentName[]> {
  if (ids.length > MAX_RECENT_IDS) throw badRequest(`At most ${MAX_RECENT_IDS} ids`, 'id');
  for (const id of ids) if (!ID.test(id)) throw badRequest('Not a check id', 'id');
  const names: RecentName[] = [];
  for (const id of new Set(ids)) {
    const check = await store.get(tenant.id, id);
    if (!check) continue;
    const typed = requestName(check.request);
    if (typed) {
      names.push({ id, text: typed, source: 'request' });
      continue;
    }
    const portal = portalName(check.envelope);
    names.push(
      portal
        ? { id, text: portal, source: 'portal' }
        : { id, text: maskedIdentifier(requestIdentifier(check.request)), source: 'identifier' },
    );
  }
  return names;
}
