/**
 * Batch: POST /fhir with a Bundle of type `batch` whose entries are $submit requests
 * (https://hl7.org/fhir/R4/http.html#transaction: a batch's entries are processed independently,
 * the answer is a `batch-response` with one entry per request, in the same order, each with
 * `response.status`, `location` and, for a failure, `outcome`). Answered at once: every check is
 * accepted (queued, reused, found by its identifier, or refused) and none is waited for; the
 * scheduler runs them within the tenant's maxInFlight like any other. docs/batch-and-reuse.md.
 */
import { randomUUID } from 'node:crypto';
import type { Bundle, BundleEntry, FhirResource, OperationOutcome } from 'fhir/r4.js';
import type { BatchEntry, Check } from '../checks/store/check-store.js';
import { isAnswered } from '../checks/store/check-store.js';
import { parseCacheControl } from '../fhir/cache-control.js';
import { isOperationOutcomeError, notFound, OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { parsePrefer } from '../fhir/prefer.js';
import type { CheckInput } from '../mapping/types.js';
import { parseSubmit } from '../mapping/request/parse-submit.js';
import { asyncStatus } from './async.js';
import { answerForCheck, answerWarning, reusedAnswer } from './check-answer.js';
import { parseOptionsOf, type SubmitDeps } from './submit.js';
import type { FhirAnswer, FhirRequest } from './types.js';

/** Entries of one batch at most (a front desk's next day; more: 413 and nothing stored). */
export const MAX_BATCH_ENTRIES = 500;

/** The one request an entry may make. */
const SUBMIT_PATH = 'CoverageEligibilityRequest/$submit';

/**
 * An entry's request.url names $submit: relative to the FHIR base (`CoverageEligibilityRequest/$submit`,
 * with or without a leading `/` or `/fhir/`), or absolute under this service's base
 * (https://hl7.org/fhir/R4/bundle-definitions.html#Bundle.entry.request.url: "relative to the
 * server base URL" is the usual form; an absolute one is not forbidden).
 */
function isSubmitUrl(url: string, baseUrl: string): boolean {
  return [SUBMIT_PATH, `/${SUBMIT_PATH}`, `/fhir/${SUBMIT_PATH}`, `${baseUrl}/fhir/${SUBMIT_PATH}`].includes(
    url,
  );
}

const REASONS: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  422: 'Unprocessable Entity',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

function statusLine(status: number): string {
  return `${status} ${REASONS[status] ?? ''}`.trim();
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An entry refused before any check: what a single $submit would have answered. */
interface Refused {
  status: number;
  outcome: OperationOutcome;
}

/** The entries of a batch Bundle; 400 for anything else, 413 past MAX_BATCH_ENTRIES. */
function batchEntries(body: unknown): unknown[] {
  if (!isObject(body) || body.resourceType !== 'Bundle')
    throw new OperationOutcomeError(
      outcome('structure', 'POST /fhir takes a Bundle of type batch', { expression: ['Bundle'] }),
      400,
    );
  if (body.type !== 'batch')
    throw new OperationOutcomeError(
      outcome(
        'not-supported',
        'Only a Bundle of type batch is processed here (no transaction, no other type)',
        {
          expression: ['Bundle.type'],
        },
      ),
      400,
    );
  const entries = body.entry ?? [];
  if (!Array.isArray(entries))
    throw new OperationOutcomeError(
      outcome('structure', 'Bundle.entry must be an array', { expression: ['Bundle.entry'] }),
      400,
    );
  if (entries.length > MAX_BATCH_ENTRIES)
    throw new OperationOutcomeError(
      outcome('too-costly', `A batch holds at most ${MAX_BATCH_ENTRIES} entries; split it into several`, {
        expression: ['Bundle.entry'],
      }),
      413,
    );
  return entries;
}

/** Whether an entry is a $submit; else what is wrong with it. */
function entryRequestProblem(entry: unknown, index: number, baseUrl: string): Refused | null {
  const at = `Bundle.entry[${index}]`;
  const refuse = (
    status: number,
    code: 'structure' | 'not-supported' | 'required',
    text: string,
    path: string,
  ) => ({
    status,
    outcome: outcome(code, text, { expression: [path] }),
  });
  if (!isObject(entry)) return refuse(400, 'structure', 'A batch entry must be an object', at);
  const request = entry.request;
  if (!isObject(request))
    return refuse(400, 'required', 'A batch entry needs request.method and request.url', `${at}.request`);
  if (request.method !== 'POST')
    return refuse(
      405,
      'not-supported',
      'Only POST CoverageEligibilityRequest/$submit is processed in a batch',
      `${at}.request.method`,
    );
  if (typeof request.url !== 'string' || !isSubmitUrl(request.url, baseUrl))
    return refuse(
      400,
      'not-supported',
      'Only POST CoverageEligibilityRequest/$submit is processed in a batch',
      `${at}.request.url`,
    );
  if (entry.resource === undefined)
    return refuse(400, 'required', 'The entry has no resource to submit', `${at}.resource`);
  return null;
}

function refusedOf(error: unknown): Refused {
  if (!isOperationOutcomeError(error)) throw error;
  return { status: error.status, outcome: error.outcome };
}

/** Runs a batch of $submit entries: the batch-response at once, or 202 with Prefer: respond-async. */
export async function batch(req: FhirRequest, deps: SubmitDeps): Promise<FhirAnswer> {
  const entries = batchEntries(req.body);
  const prefer = parsePrefer(req.prefer);
  const allowance = parseCacheControl(req.cacheControl);
  // Parsed one after the other (the validator is CPU work), then accepted together: the inserts of
  // one turn are one commit on SQLite. One entry's failure is its own answer, never the batch's.
  const parsed: Array<CheckInput | Refused> = [];
  for (const [index, entry] of entries.entries()) {
    const problem = entryRequestProblem(entry, index, deps.baseUrl);
    if (problem) {
      parsed.push(problem);
      continue;
    }
    try {
      parsed.push(await parseSubmit((entry as { resource: unknown }).resource, parseOptionsOf(req, deps)));
    } catch (error) {
      parsed.push(refusedOf(error));
    }
  }
  const accepted = await Promise.all(
    parsed.map(async (item): Promise<{ check: Check; reused: boolean } | Refused> => {
      if ('status' in item) return item;
      try {
        // A batch entry is background work, unless its priority is stat (docs/queue.md).
        const { check, reused } = await deps.checks.accept(req.tenant, item, allowance, 'batch-entry');
        return { check, reused: reused === true };
      } catch (error) {
        return refusedOf(error);
      }
    }),
  );
  const id = randomUUID();
  const now = deps.now();
  await deps.checks.store.insertBatch({
    id,
    tenantId: req.tenant.id,
    createdAt: now,
    entries: accepted.map((a): BatchEntry => ('check' in a ? { checkId: a.check.id } : a)),
  });
  if (prefer.respondAsync) {
    const status = `${deps.baseUrl}/fhir/_async/${id}`;
    return {
      status: 202,
      body: outcome('informational', `Batch accepted; poll ${status} for the result`, {
        severity: 'information',
      }),
      headers: { 'Content-Location': status },
    };
  }
  const answers = accepted.map((a) =>
    'check' in a
      ? a.reused
        ? reusedAnswer(a.check, deps.baseUrl, now)
        : answerForCheck(a.check, deps.baseUrl)
      : a,
  );
  return {
    status: 200,
    body: batchResponse(id, answers),
    headers: { Location: `${deps.baseUrl}/fhir/_async/${id}` },
  };
}

/** One batch-response entry of an answer (http.html#transaction-response). */
function responseEntry(answer: FhirAnswer | Refused): BundleEntry<FhirResource> {
  // A refused entry: its OperationOutcome both as the entry's resource and as response.outcome
  // (http.html#transaction-response puts it in the latter; clients also read the former).
  if ('outcome' in answer)
    return {
      resource: answer.outcome,
      response: { status: statusLine(answer.status), outcome: answer.outcome },
    };
  const headers = answer.headers ?? {};
  const response = {
    status: statusLine(answer.status),
    ...(headers.Location ? { location: headers.Location } : {}),
    ...(headers.ETag ? { etag: headers.ETag } : {}),
  };
  // A check refused (a guard, an upstream outcome): its OperationOutcome as the entry's outcome,
  // the CER with outcome error readable at the location.
  if (answer.body?.resourceType === 'OperationOutcome')
    return { resource: answer.body as FhirResource, response: { ...response, outcome: answer.body } };
  const warning = answerWarning(answer.body);
  return {
    ...(answer.body ? { resource: answer.body as FhirResource } : {}),
    response: { ...response, ...(warning ? { outcome: warning } : {}) },
  };
}

function batchResponse(id: string, answers: Array<FhirAnswer | Refused>): Bundle {
  return {
    resourceType: 'Bundle',
    id,
    type: 'batch-response',
    ...(answers.length ? { entry: answers.map(responseEntry) } : {}),
  };
}

/**
 * GET /fhir/_async/{id} for a check ($submit with respond-async) or a batch: a batch answers 202
 * with `X-Progress: <final> of <checks> checks final` while any of its checks runs, then 200 with
 * the batch-response as it stands (https://hl7.org/fhir/R4/async.html).
 */
export async function asyncStatusOrBatch(
  req: FhirRequest,
  deps: SubmitDeps,
  pollIntervalMs: number,
): Promise<FhirAnswer> {
  const id = req.params.id ?? '';
  const stored = /^[A-Za-z0-9\-.]{1,64}$/.test(id)
    ? await deps.checks.store.getBatch(req.tenant.id, id)
    : null;
  if (!stored) return asyncStatus(req, deps.checks, deps.baseUrl, pollIntervalMs);
  const ids = stored.entries.flatMap((e) => (e.checkId ? [e.checkId] : []));
  const byId = new Map<string, Check>();
  // The entries name at most MAX_BATCH_ENTRIES checks; read in pages of 100.
  const unique = [...new Set(ids)];
  for (let start = 0; start < unique.length; start += 100) {
    const { checks } = await deps.checks.store.search(
      req.tenant.id,
      { ids: [unique.slice(start, start + 100)] },
      { count: 100, offset: 0, total: false },
    );
    for (const check of checks) byId.set(check.id, check);
  }
  const final = ids.filter((checkId) => {
    const check = byId.get(checkId);
    return check === undefined || isAnswered(check);
  }).length;
  if (final < ids.length)
    return {
      status: 202,
      headers: {
        'X-Progress': `${final} of ${ids.length} checks final`,
        'Retry-After': String(Math.max(1, Math.ceil(pollIntervalMs / 1000))),
      },
    };
  const answers = stored.entries.map((entry): FhirAnswer | Refused => {
    if (!entry.checkId)
      return { status: entry.status ?? 400, outcome: entry.outcome ?? outcome('invalid', 'Refused') };
    const check = byId.get(entry.checkId);
    // Purged by retention since: the entry says so rather than invent an answer.
    if (!check)
      return { status: 404, outcome: notFound(`Check ${entry.checkId} is no longer stored`).outcome };
    return answerForCheck(check, deps.baseUrl);
  });
  return { status: 200, body: batchResponse(stored.id, answers) };
}
