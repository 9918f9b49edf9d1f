/**
 * The CER read lane: `GET /fhir/CoverageEligibilityResponse/{id}`, the request a polling client
 * repeats most, answered on node's own request and response objects, ahead of express. Express's
 * per-request set-up and its route walk cost more than the read itself: the same 46 KB answer
 * took about 300 µs of CPU through the app against about 125 µs here (bench/README.md, figure 2).
 *
 * The lane takes only the plain case, and answers it exactly as the app would (the same
 * operation, readResponse; the same security headers, request id, log line, metrics and
 * AuditEvent; express's own freshness rule): a GET of that path with no query, no body and no
 * If-Modified-Since, an Accept the app serves as FHIR JSON, a caller the app would authenticate,
 * with the read scope, and a 200 or 304 answer. Anything else (HEAD, `_format`, another Accept, a
 * refused or unknown caller, a missing scope, an unknown id, any error) goes to the app before a
 * byte is written, which answers it with its OperationOutcome as before. The lane is off when
 * CORS is configured (the cors middleware's headers stay the app's). test/component/
 * cer-read-lane.test.ts checks that both give the same answers.
 */
import { isStoreUnavailable } from '../checks/store/outage.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import fresh from 'fresh';
import type { CheckService } from '../checks/service.js';
import type { AuditTrail } from '../checks/audit.js';
import type { CerCache } from '../operations/read.js';
import { readResponse } from '../operations/read.js';
import { permits } from '../operations/auth/scopes.js';
import type { FhirAnswer } from '../operations/types.js';
import { FHIR_JSON_CONTENT_TYPE, PLAIN_ACCEPTS } from './fhir-json.js';
import type { FinishedRequest, Identity, Principal } from './middleware.js';
import { markArrival, requestIdOf } from './middleware.js';
import type { Logger } from '../log.js';
import { SECURITY_HEADER_LIST } from './security-headers.js';
import { auditRecords, CER_READ_AUDIT } from './security.js';

const CER = 'CoverageEligibilityResponse';
/** The route as the app names it in logs and metrics. */
const ROUTE = `/fhir/${CER}/:id`;
/** The path with an id the read accepts (src/operations/read.ts); anything else is the app's. */
const PATH = /^\/fhir\/CoverageEligibilityResponse\/([A-Za-z0-9\-.]{1,64})$/;

export interface CerReadLaneDeps {
  identify: (authorization: string | undefined) => Identity | Promise<Identity>;
  checks: CheckService;
  cerCache: CerCache;
  audit?: AuditTrail;
  finished: (done: FinishedRequest) => void;
  logger: Logger;
}

/** A request handler that answers the plain CER read itself, or hands the request to `app`. */
export type Lane = ((req: IncomingMessage, res: ServerResponse, app: () => void) => void) & {
  /** Reads the lane answered (tests check that it was the lane). */
  readonly answered: () => number;
};

export function cerReadLane(deps: CerReadLaneDeps): Lane {
  let answered = 0;
  const lane = (req: IncomingMessage, res: ServerResponse, app: () => void): void => {
    const id = plainRead(req);
    if (id === undefined) {
      app();
      return;
    }
    const started = markArrival(req);
    answer(deps, req, id).then(
      (done) => {
        if (!done) {
          app();
          return;
        }
        try {
          write(deps, req, res, id, done, started);
          answered += 1;
        } catch (error) {
          // As express's error handler: before the answer began the app answers (a 500 included);
          // after, the connection is closed, so a kept-alive client never reads a cut-off body.
          deps.logger.error('the CER read lane failed to write its answer', {
            requestId: done.requestId,
            route: ROUTE,
            error,
          });
          if (res.headersSent) res.destroy();
          else app();
        }
      },
      (error: unknown) => {
        // The app runs the request again and answers it (a 404 of another clinic's id, a 500 of a
        // store that fails again), with its OperationOutcome, log line and AuditEvent. A failure
        // the app's own try gets past is still told to the operator; a store outage (a 503 from
        // the app) is told by the scheduler's one line, not by every read.
        if (!isStoreUnavailable(error))
          deps.logger.warn('the CER read lane handed a read to the app after an error', {
            route: ROUTE,
            error,
          });
        app();
      },
    );
  };
  return Object.assign(lane, { answered: () => answered });
}

/** The CER id of a plain read the lane takes, else undefined. */
function plainRead(req: IncomingMessage): string | undefined {
  if (req.method !== 'GET') return undefined;
  const { headers } = req;
  if (headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined) return undefined;
  if (headers['if-modified-since'] !== undefined) return undefined;
  if (headers.accept !== undefined && !PLAIN_ACCEPTS.has(headers.accept)) return undefined;
  return PATH.exec(req.url ?? '')?.[1];
}

interface Done {
  answer: FhirAnswer;
  principal: Principal;
  requestId: string;
}

/** The read's answer when it is one the lane gives (200 or 304 to a caller with the scope). */
async function answer(deps: CerReadLaneDeps, req: IncomingMessage, id: string): Promise<Done | undefined> {
  const identity = await deps.identify(req.headers.authorization);
  if (!('principal' in identity)) return undefined;
  const { principal } = identity;
  if (principal.scopes !== null && !permits(principal.scopes, CER, ['r'])) return undefined;
  const requestId = requestIdOf(req.headers['x-request-id']);
  const { headers } = req;
  const answer = await readResponse(
    {
      params: { id },
      query: {},
      body: undefined,
      prefer: text(headers.prefer),
      ifNoneMatch: headers['if-none-match'],
      cacheControl: headers['cache-control'],
      tenant: principal.tenant,
      requestId,
    },
    deps.checks,
    deps.cerCache,
  );
  const plain = answer.status === 304 || (answer.status === 200 && answer.rawBody !== undefined);
  return plain ? { answer, principal, requestId } : undefined;
}

/** A header's value as express's req.header gives it (node joins repeated ones with commas). */
function text(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** Writes the answer as express's sendAnswer would (fhir-json.ts), then logs and audits it. */
function write(
  deps: CerReadLaneDeps,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  { answer, principal, requestId }: Done,
  started: bigint,
): void {
  const headers = [...SECURITY_HEADER_LIST, 'X-Request-Id', requestId];
  for (const [name, value] of Object.entries(answer.headers ?? {})) headers.push(name, value);
  const body = answer.rawBody;
  // express's res.send: an answer the request's validators show the client has is a 304, no body.
  const unchanged =
    answer.status === 304 ||
    fresh(req.headers, { etag: answer.headers?.ETag, 'last-modified': answer.headers?.['Last-Modified'] });
  const status = unchanged ? 304 : answer.status;
  if (status === 304 || body === undefined) {
    res.writeHead(status, headers);
    res.end();
  } else {
    // The Content-Type the app's sendAnswer sets (fhir-json.ts).
    headers.push('Content-Type', FHIR_JSON_CONTENT_TYPE, 'Content-Length', String(Buffer.byteLength(body)));
    res.writeHead(status, headers);
    res.end(body);
  }
  res.once('finish', () => {
    deps.finished({ requestId, method: 'GET', route: ROUTE, status, started, tenant: principal.tenant.id });
    if (deps.audit?.enabled) {
      for (const record of auditRecords(CER_READ_AUDIT, principal, status, `${CER}/${id}`, undefined)) {
        deps.audit.record(record);
      }
    }
  });
}
