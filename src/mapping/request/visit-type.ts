/**
 * request_dump.visit_type and extra_args from CoverageEligibilityRequest.item[].category,
 * through mappings/visit-types.json (ex-benefitcategory and this service's own visit-type codes).
 * No category: the table's default. A category the table does not know: 422, since guessing the
 * visit type would ask the payer about the wrong benefit.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import { unprocessable } from '../../fhir/outcomes.js';
import { echo } from '../../fhir/text.js';
import { DEFAULT_VISIT_TYPE, visitTypeOf, type VisitType } from './tables.js';
import { list } from './submit-body.js';

export interface Visit extends VisitType {
  /** True when any item asks about maternity. */
  isMaternity: boolean;
}

/** The visit type of the first item with a category; every categorised item must be known. */
export function visitOf(request: CoverageEligibilityRequest, requestPath: string): Visit {
  const found: VisitType[] = [];
  for (const [index, item] of list(request.item).entries()) {
    if (!item.category) continue;
    const codings = list(item.category.coding);
    let known: VisitType | undefined;
    for (const coding of codings) known ??= visitTypeOf(coding);
    if (!known) {
      const codes = codings.map((c) => `${c.system ?? ''}|${c.code ?? ''}`).join(', ');
      throw unprocessable(
        `The service category ${echo(codes || item.category.text || '(empty)')} is not one the adapter can check. Use an ex-benefitcategory code such as 3 (Consultation) or 69 (Maternity).`,
        `${requestPath}.item[${index}].category`,
        'value',
      );
    }
    found.push(known);
  }
  const first = found[0] ?? DEFAULT_VISIT_TYPE;
  return { ...first, isMaternity: found.some((v) => v.isMaternity === true) };
}
