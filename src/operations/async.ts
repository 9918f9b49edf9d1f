/**
 * The asynchronous request pattern for $submit with Prefer: respond-async
 * (https://hl7.org/fhir/R4/async.html; R5 async-bundle.html): the status URL answers 202 with
 * X-Progress and Retry-After while the check runs, then 200 with a batch-response Bundle whose
 * entry carries the HTTP status and the CER or OperationOutcome. DELETE stops tracking.
 */
import type { Bundle } from 'fhir/r4.js';
import type { CheckService } from '../checks/service.js';
import { isAnswered } from '../checks/store/check-store.js';
import { answerForCheck, answerWarning } from './check-answer.js';
import { notFound, outcome } from '../fhir/outcomes.js';
import type { FhirAnswer, FhirRequest } from './types.js';

const REASONS: Record<number, string> = {
  200: 'OK',
  409: 'Conflict',
  422: 'Unprocessable Entity',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

async function trackedCheck(req: FhirRequest, checks: CheckService) {
  const id = req.params.id ?? '';
  const check = /^[A-Za-z0-9\-.]{1,64}$/.test(id) ? await checks.get(req.tenant.id, id) : null;
  if (!check || check.asyncStopped) throw notFound(`No asynchronous request ${id}`);
  return check;
}

export async function asyncStatus(
  req: FhirRequest,
  checks: CheckService,
  baseUrl: string,
  pollIntervalMs: number,
): Promise<FhirAnswer> {
  const check = await trackedCheck(req, checks);
  if (!isAnswered(check)) {
    return {
      status: 202,
      headers: {
        'X-Progress': check.upstreamStatus ?? (check.state === 'waiting' ? 'WAITING_FOR_SLOT' : 'STARTING'),
        'Retry-After': String(Math.max(1, Math.ceil(pollIntervalMs / 1000))),
      },
    };
  }
  const answer = answerForCheck(check, baseUrl);
  const warning = answerWarning(answer.body);
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'batch-response',
    entry: [
      {
        resource: answer.body,
        response: {
          status: `${answer.status} ${REASONS[answer.status] ?? ''}`.trim(),
          location: answer.headers?.Location,
          etag: answer.headers?.ETag,
          lastModified: new Date(check.updatedAt).toISOString(),
          ...(warning ? { outcome: warning } : {}),
        },
      },
    ],
  };
  return { status: 200, body: bundle };
}

export async function asyncDelete(req: FhirRequest, checks: CheckService): Promise<FhirAnswer> {
  const check = await trackedCheck(req, checks);
  await checks.store.stopAsyncTracking(check.tenantId, check.id);
  return {
    status: 202,
    body: outcome(
      'informational',
      'Stopped tracking this request. The check at the payer cannot be cancelled; its CoverageEligibilityResponse stays readable.',
      { severity: 'information' },
    ),
  };
}
