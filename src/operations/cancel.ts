/**
 * PATCH /fhir/CoverageEligibilityRequest/{id} (https://hl7.org/fhir/R4/http.html#patch) with a
 * JSON Patch (RFC 6902, application/json-patch+json) that cancels a stored request:
 * `[{"op":"replace","path":"/status","value":"cancelled"}]`. A cancelled appointment's pending
 * re-check is never sent (docs/previsit.md). Any other change to a stored request is refused with a
 * 422 naming the patch operation; a stored request is otherwise what the client sent.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import { z } from 'zod';
import type { PrevisitEvent } from '../checks/previsit.js';
import type { CheckService } from '../checks/service.js';
import { notFound, unprocessable } from '../fhir/outcomes.js';
import { storedRequest } from './read.js';
import { requestNarrative } from '../mapping/request/request-narrative.js';
import type { FhirAnswer, FhirRequest } from './types.js';

export interface CancelDeps {
  checks: CheckService;
  now: () => number;
  onPrevisit?: (event: PrevisitEvent) => void;
}

const CANCEL = z
  .array(
    z.strictObject({ op: z.literal('replace'), path: z.literal('/status'), value: z.literal('cancelled') }),
  )
  .length(1);

/**
 * The one patch this service applies. Anything else is a 422 whose expression names the element
 * the patch would change (its JSON Pointer as FHIRPath: `/status` -> `CoverageEligibilityRequest.status`,
 * `/item/0/category` -> `CoverageEligibilityRequest.item[0].category`), or the request itself for a
 * body that is no JSON Patch.
 */
function parseCancel(body: unknown): void {
  if (CANCEL.safeParse(body).success) return;
  const ops: unknown[] = Array.isArray(body) ? body : [];
  const wrong = ops.find((op) => !CANCEL.element.safeParse(op).success) ?? ops[0];
  const path = (wrong as { path?: unknown } | undefined)?.path;
  throw unprocessable(
    'Only [{"op":"replace","path":"/status","value":"cancelled"}] is accepted: a stored request is otherwise as the client sent it; send a new $submit for another check',
    typeof path === 'string' && /^(\/[A-Za-z0-9_]+)+$/.test(path)
      ? `CoverageEligibilityRequest${path.replace(/\/(\d+)/g, '[$1]').replace(/\//g, '.')}`
      : 'CoverageEligibilityRequest',
    'not-supported',
  );
}

export async function patchRequest(req: FhirRequest, deps: CancelDeps): Promise<FhirAnswer> {
  const id = req.params.id ?? '';
  const stored = await storedRequest(deps.checks, req.tenant.id, id);
  if (!stored) throw notFound(`CoverageEligibilityRequest/${id} is not known`);
  parseCancel(req.body);
  const cancelled: CoverageEligibilityRequest = { ...stored, status: 'cancelled' };
  const request: CoverageEligibilityRequest = { ...cancelled, text: requestNarrative(cancelled) };
  const result = await deps.checks.store.appointments.cancel(req.tenant.id, id, request, deps.now());
  if (!result) throw notFound(`CoverageEligibilityRequest/${id} is not known`);
  if (result.previous === 'scheduled')
    deps.onPrevisit?.({ type: 'recheck-cancelled', tenantId: req.tenant.id });
  return { status: 200, body: request };
}
