/**
 * Which payer the check runs against (request_dump.tpa_name, payerName) and the insurer
 * Reference the CoverageEligibilityResponse carries. The payer code comes from the insurer
 * Organization's identifier typed NIIP (v2-0203), else one in a payer-code system
 * (mappings/payers.json), else its only identifier; or from a logical insurer reference.
 * Any code is passed through: the payer list is the upstream's (the README).
 */
import type { Identifier, Organization, Reference } from 'fhir/r4.js';
import { unprocessable } from '../../fhir/outcomes.js';
import type { Target } from './references.js';
import { identifierKind, isPayerCodeSystem, PAYER_CODE_SYSTEM, payerDisplay } from './tables.js';
import { list } from './submit-body.js';

export interface Payer {
  code: string;
  /** Display name; '' when neither the table nor the input names the payer. */
  name: string;
  /** For CoverageEligibilityResponse.insurer. */
  reference: Reference;
}

/** The upstream's search-all payer code (an assumption, README "Assumptions"). */
export const SEARCH_ALL_CODE = 'ALL';

/** A search-all (`purpose` contains `discovery`) asks every payer. */
export const SEARCH_ALL_PAYER: Payer = {
  code: SEARCH_ALL_CODE,
  name: '',
  reference: { display: 'All payers (search-all)' },
};

/** The payer of a single-payer check; 422 at `insurerPath` when no payer code can be found. */
export function payerOf(target: Target | undefined, insurerPath: string): Payer {
  const code = (target ? payerCode(target) : undefined)?.trim();
  if (!code)
    throw unprocessable(
      'The insurance company has no payer code. Give the insurer Organization an identifier of type NIIP whose value is the payer code (for example DAMAN), or send CoverageEligibilityRequest.purpose "discovery" to search all payers.',
      insurerPath,
      'required',
    );
  const inputName = target?.kind === 'resource' ? (target.resource as Organization).name : target?.display;
  const name = payerDisplay(code) ?? inputName ?? '';
  return {
    code,
    name,
    reference: {
      identifier: { system: PAYER_CODE_SYSTEM, value: code },
      ...(name ? { display: name } : {}),
    },
  };
}

function payerCode(target: Target): string | undefined {
  if (target.kind === 'logical') return target.identifier.value;
  const identifiers = list((target.resource as Organization).identifier).filter(
    (i): i is Identifier & { value: string } => Boolean(i.value?.trim()),
  );
  const chosen =
    identifiers.find((i) => identifierKind(i) === 'payer-code') ??
    identifiers.find((i) => isPayerCodeSystem(i.system)) ??
    (identifiers.length === 1 ? identifiers[0] : undefined);
  return chosen?.value;
}
