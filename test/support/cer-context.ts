/**
 * The CerContext the mapping tests map upstream envelopes with (src/mapping/types.ts), one place
 * for what several test files wrote out by hand. The response mapper reads the request's purpose,
 * servicedDate/servicedPeriod, id and item only, so a test that needs another request passes those
 * fields in `request`.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import type { CerContext } from '../../src/mapping/types.js';

export const CHECK_ID = '0b6f7a52-3c1d-4e8f-9a2b-5c6d7e8f9a01';
export const BASE_URL = 'https://adapter.example.org';
const NOW = '2026-11-22T10:00:00.000Z';

/**
 * A check for Patient/pat-1 at Daman (by payer code), or across all payers for a search-all, asking
 * benefits and validation (discovery for a search-all) on 2026-11-22.
 */
export function cerContext(
  isSearchAll = false,
  request: Partial<CoverageEligibilityRequest> = {},
): CerContext {
  return {
    checkId: CHECK_ID,
    patient: { reference: 'Patient/pat-1' },
    insurer: isSearchAll
      ? { display: 'All payers' }
      : { identifier: { system: `${CANONICAL_BASE}/payer-code`, value: 'DAMAN' }, display: 'Daman' },
    request: {
      resourceType: 'CoverageEligibilityRequest',
      id: CHECK_ID,
      status: 'active',
      purpose: isSearchAll ? ['discovery'] : ['benefits', 'validation'],
      patient: { reference: 'Patient/pat-1' },
      servicedDate: '2026-11-22',
      created: '2026-11-22',
      insurer: { display: 'Daman' },
      ...request,
    },
    isSearchAll,
    baseUrl: BASE_URL,
    now: NOW,
  };
}

/** A bare benefits check for Patient/p at the insurer named `insurer` (display only), no date of service. */
export function benefitsContext(checkId: string, insurer: string): CerContext {
  return {
    checkId,
    patient: { reference: 'Patient/p' },
    insurer: { display: insurer },
    request: {
      resourceType: 'CoverageEligibilityRequest',
      status: 'active',
      purpose: ['benefits'],
      patient: { reference: 'Patient/p' },
      created: '2026-11-22',
      insurer: { display: insurer },
    },
    isSearchAll: false,
    baseUrl: BASE_URL,
    now: NOW,
  };
}
