/**
 * The FHIR routes: each translates an express request into a FhirRequest, calls the FHIR core,
 * and writes the FhirAnswer. No domain logic here.
 */
import type { Logger } from '../log.js';
import { pipeline } from 'node:stream/promises';
import type { Request, RequestHandler, Response, Router } from 'express';
import { request as httpRequest } from 'undici';
import type { Tenant } from '../config.js';
import type { CheckService } from '../checks/service.js';
import type { UpstreamPort } from '../upstream/port.js';
import { freshDocumentLink } from '../operations/binary.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { asyncDelete, asyncStatus } from '../operations/async.js';
import { readRequest, readResponse } from '../operations/read.js';
import { searchResponses } from '../operations/search.js';
import { submit } from '../operations/submit.js';
import type { SubmitDeps } from '../operations/submit.js';
import type { FhirAnswer, FhirRequest } from '../operations/types.js';
import { fhirBody, sendAnswer } from './fhir-json.js';
import { submitRateLimit } from './rate-limit.js';

export interface FhirRouteDeps {
  checks: CheckService;
  submit: SubmitDeps;
  baseUrl: string;
  pollIntervalMs: number;
  upstream: UpstreamPort;
  submitRatePerMinute: number;
  /**
   * Where document links may point besides any https URL: the upstream's own origin (the sandbox
   * serves its files over http). Anything else is refused, so a wrong or hostile upstream answer
   * cannot make the adapter fetch an internal address for a client.
   */
  documentOrigins?: readonly string[];
  logger?: Logger;
}

const GENERIC_TYPES = new Set(['application/octet-stream', 'binary/octet-stream']);

function allowedDocumentUrl(url: string, origins: readonly string[]): boolean {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || origins.includes(parsed.origin);
  } catch {
    return false;
  }
}

/** Builds the FhirRequest of an express request (after authentication). */
export function toFhirRequest(req: Request, res: Response): FhirRequest {
  return {
    params: req.params as Record<string, string>,
    query: req.query as FhirRequest['query'],
    body: req.body as unknown,
    prefer: req.header('prefer'),
    ifNoneMatch: req.header('if-none-match'),
    tenant: res.locals.tenant as Tenant,
    requestId: String(res.locals.requestId),
  };
}

/** Wraps a FHIR core operation as an express handler. */
export function operation(run: (req: FhirRequest) => Promise<FhirAnswer>): RequestHandler {
  return async (req, res) => {
    sendAnswer(res, await run(toFhirRequest(req, res)));
  };
}

/** Registers the check routes. */
export function checkRoutes(deps: FhirRouteDeps): (router: Router) => void {
  return (router) => {
    router.post(
      '/CoverageEligibilityRequest/$submit',
      submitRateLimit(deps.submitRatePerMinute),
      fhirBody,
      operation((req) => submit(req, deps.submit)),
    );
    router.get(
      '/CoverageEligibilityRequest/:id',
      operation((req) => readRequest(req, deps.checks)),
    );
    router.get(
      '/CoverageEligibilityResponse/:id',
      operation((req) => readResponse(req, deps.checks)),
    );
    router.get(
      '/CoverageEligibilityResponse',
      operation((req) => searchResponses(req, deps.checks, deps.baseUrl)),
    );
    router.get('/Binary/:id', async (req, res) => {
      await streamDocument(req, res, deps);
    });
    router.get(
      '/_async/:id',
      operation((req) => asyncStatus(req, deps.checks, deps.baseUrl, deps.pollIntervalMs)),
    );
    router.delete(
      '/_async/:id',
      operation((req) => asyncDelete(req, deps.checks)),
    );
  };
}

/**
 * GET /fhir/Binary/{id}: streams a document or the portal screenshot through a link the upstream
 * signed a moment ago. The signed link itself is never sent to the client.
 */
async function streamDocument(req: Request, res: Response, deps: FhirRouteDeps): Promise<void> {
  const link = await freshDocumentLink(toFhirRequest(req, res), deps.checks, deps.upstream);
  const unavailable = new OperationOutcomeError(
    outcome('transient', 'The document store did not return the document; try again shortly.'),
    502,
    { 'Retry-After': '30' },
  );
  if (!allowedDocumentUrl(link.url, deps.documentOrigins ?? [])) {
    deps.logger?.warn('document link refused: not https and not the upstream origin');
    throw unavailable;
  }
  let upstream: Awaited<ReturnType<typeof httpRequest>>;
  try {
    upstream = await httpRequest(link.url, { method: 'GET', headersTimeout: 15_000, bodyTimeout: 30_000 });
  } catch {
    throw unavailable;
  }
  if (upstream.statusCode !== 200) {
    await upstream.body.dump();
    throw unavailable;
  }
  const given = upstream.headers['content-type'];
  const type =
    typeof given === 'string' && !GENERIC_TYPES.has(given.split(';')[0]?.trim().toLowerCase() ?? '')
      ? given
      : (link.contentType ?? 'application/octet-stream');
  res.status(200);
  res.setHeader('Content-Type', type);
  res.setHeader('Cache-Control', 'private, no-store');
  if (link.filename) res.setHeader('Content-Disposition', contentDisposition(link.filename));
  await pipeline(upstream.body, res);
}

/**
 * Content-Disposition for a portal label of any script (Arabic labels are common): an ASCII
 * fallback plus the UTF-8 form of RFC 6266 / RFC 5987, so setHeader never meets a non-Latin-1 byte.
 */
export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `inline; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}
