/**
 * The search parameters this service defines (https://hl7.org/fhir/R4/searchparameter.html): R4
 * has no `serviced` parameter on CoverageEligibilityRequest, so the service publishes its own,
 * served at /fhir/SearchParameter/{id} and named by the CapabilityStatement (docs/previsit.md).
 */
import type { SearchParameter } from 'fhir/r4.js';
import { canonical } from '../../fhir/canonical.js';
import type { CommonFields } from './operations.js';

export const SERVICED_PARAMETER_ID = 'CoverageEligibilityRequest-serviced';

/** `serviced`: the appointment's start, compared by day in the clinic's time zone. */
export function searchParameterResources(common: CommonFields): SearchParameter[] {
  return [
    {
      resourceType: 'SearchParameter',
      id: SERVICED_PARAMETER_ID,
      url: canonical('SearchParameter', SERVICED_PARAMETER_ID),
      ...common,
      name: 'serviced',
      description:
        "The start of an appointment's service (servicedPeriod.start, or servicedDate at the clinic's day start): a day is the clinic's local day. Matches the tenant's appointments (requests whose service was in the future when they were booked).",
      code: 'serviced',
      base: ['CoverageEligibilityRequest'],
      type: 'date',
      expression: 'CoverageEligibilityRequest.serviced',
      xpathUsage: 'normal',
      comparator: ['eq', 'gt', 'lt', 'ge', 'le'],
    },
  ];
}
