/**
 * FHIR JSON in and out: content negotiation, the JSON body parser and the error handler that
 * turns every failure into an OperationOutcome (https://hl7.org/fhir/R4/http.html#mime-type).
 */
import express from 'express';
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { Resource } from 'fhir/r4.js';
import type { Logger } from '../log.js';
import {
  isOperationOutcomeError,
  notAcceptable,
  notFound,
  OperationOutcomeError,
  outcome,
  payloadTooLarge,
  serverError,
  storeUnavailable,
  structureError,
  unsupportedMediaType,
} from '../fhir/outcomes.js';
import type { FhirAnswer } from '../operations/types.js';
import { checkParsedLimits, checkRawDepth, INPUT_LIMITS } from './input-limits.js';
import { routeOf } from './middleware.js';
import { isStoreUnavailable, STORE_RETRY_AFTER_SECONDS } from '../checks/store/outage.js';

export const FHIR_JSON = 'application/fhir+json';

const JSON_FORMATS = new Set(['json', FHIR_JSON, 'application/json', 'application/json+fhir']);

/** The media types an answer can be given in, as req.accepts weighs them. */
const ACCEPTED = [FHIR_JSON, 'application/json', 'application/*+json'];

/**
 * Accept values req.accepts(ACCEPTED) always takes (each names one of them, or anything): the
 * common ones (fetch and curl send `* / *`) are not parsed and weighed on every request, and the
 * CER read lane (cer-read-lane.ts) takes only these.
 */
export const PLAIN_ACCEPTS: ReadonlySet<string> = new Set(['*/*', ...ACCEPTED]);

/**
 * The Content-Type of every FHIR answer, as `res.type(FHIR_JSON)` and express's send (which adds
 * the charset of a string body) made it: set once as text, not looked up and re-parsed per answer.
 */
export const FHIR_JSON_CONTENT_TYPE = `${FHIR_JSON}; charset=utf-8`;

/** `_format` overrides Accept (http.html#mime-type); anything but JSON is 406. */
export const negotiate: RequestHandler = (req, _res, next) => {
  // express 5 parses the query string again on every read of req.query: read once.
  const given = req.query._format;
  // An unencoded "+" (`_format=application/fhir+json`, as the spec writes it) arrives decoded as a space.
  const format = typeof given === 'string' ? given.split(';')[0]?.trim().replace(/ /g, '+') : undefined;
  if (format !== undefined) {
    next(JSON_FORMATS.has(format) ? undefined : notAcceptable());
    return;
  }
  const accept = req.headers.accept;
  if (accept && !PLAIN_ACCEPTS.has(accept) && !req.accepts(ACCEPTED)) {
    next(notAcceptable());
    return;
  }
  next();
};

const jsonParserOf = (limit: number) =>
  express.json({
    limit,
    strict: false,
    type: [FHIR_JSON, 'application/json', 'application/*+json'],
    // Before JSON.parse: a deeply nested body is refused on a scan of its bytes.
    verify: (_req, _res, raw) => checkRawDepth(raw),
  });

/**
 * Parses a FHIR JSON body within the input limits (src/http/input-limits.ts); a body of any other
 * content type is 415.
 */
export const fhirBody: RequestHandler = fhirBodyWithin(INPUT_LIMITS.bodyBytes);

/** The media type of a JSON Patch (RFC 6902), which PATCH takes (https://hl7.org/fhir/R4/http.html#patch). */
export const JSON_PATCH = 'application/json-patch+json';

/** Parses a JSON Patch body within the input limits; any other content type is 415. */
export const jsonPatchBody: RequestHandler = (req, res, next) => {
  if (!req.is(JSON_PATCH)) {
    next(unsupportedMediaType(String(req.headers['content-type'] ?? 'none'), JSON_PATCH));
    return;
  }
  patchParser(req, res, (error?: unknown) => {
    if (error !== undefined) next(error);
    else next();
  });
};

const patchParser = express.json({
  limit: INPUT_LIMITS.bodyBytes,
  strict: false,
  type: JSON_PATCH,
  verify: (_req, _res, raw) => checkRawDepth(raw),
});

/** fhirBody for a batch Bundle (POST /fhir): the same limits but the body size (batchBodyBytes). */
export const batchBody: RequestHandler = fhirBodyWithin(INPUT_LIMITS.batchBodyBytes);

function fhirBodyWithin(limit: number): RequestHandler {
  const jsonParser = jsonParserOf(limit);
  return (req, res, next) => {
    const length = Number(req.headers['content-length'] ?? '0');
    const hasBody = length > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.is([FHIR_JSON, 'application/json', 'application/*+json'])) {
      next(unsupportedMediaType(String(req.headers['content-type'] ?? 'none')));
      return;
    }
    // FHIR JSON is UTF-8 (https://hl7.org/fhir/R4/json.html): another charset is refused before the
    // body is read, so the depth scan of its bytes (UTF-8 only) can never be walked around.
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(String(req.headers['content-type'] ?? ''))?.[1];
    if (hasBody && charset !== undefined && !/^utf-?8$/i.test(charset)) {
      next(unsupportedMediaType(String(req.headers['content-type'])));
      return;
    }
    jsonParser(req, res, (error?: unknown) => {
      if (error !== undefined) {
        next(error);
        return;
      }
      try {
        checkParsedLimits(req.body);
      } catch (limitError) {
        next(limitError);
        return;
      }
      next();
    });
  };
}

/** Writes a FHIR resource with the FHIR JSON content type. */
export function sendResource(res: Response, status: number, body: Resource | undefined, headers = {}): void {
  res.status(status).set(headers);
  if (body === undefined) {
    res.end();
    return;
  }
  // The bytes, not the text: express's send takes a Buffer as it is (a text it would look up the
  // Content-Type's charset of, and measure or convert); the answer is byte for byte the same.
  res.setHeader('Content-Type', FHIR_JSON_CONTENT_TYPE);
  res.send(Buffer.from(JSON.stringify(body)));
}

/** Sends a FhirAnswer from the FHIR core. */
export function sendAnswer(res: Response, answer: FhirAnswer): void {
  if (answer.rawBody !== undefined) {
    res
      .status(answer.status)
      .set(answer.headers ?? {})
      .setHeader('Content-Type', FHIR_JSON_CONTENT_TYPE)
      .send(answer.rawBody);
    return;
  }
  sendResource(res, answer.status, answer.body, answer.headers ?? {});
}

/** Any route the service does not have. */
export const unknownRoute: RequestHandler = (req, _res, next) => {
  next(notFound(`No route for ${req.method} ${req.path}`));
};

interface BodyParserError {
  type?: string;
  status?: number;
  limit?: number;
}

function toOutcomeError(error: unknown, req: Request): OperationOutcomeError | null {
  if (isOperationOutcomeError(error)) return error;
  // The one place a store failure becomes an answer (docs/operations.md, "When the store fails").
  if (isStoreUnavailable(error)) return storeUnavailable(STORE_RETRY_AFTER_SECONDS);
  const e = error as BodyParserError;
  switch (e?.type) {
    case 'entity.parse.failed':
      return structureError('The request body is not valid JSON', '$this');
    case 'entity.too.deep':
      return structureError(`The JSON is nested more than ${INPUT_LIMITS.depth} levels deep`, '$this');
    case 'entity.too.large':
      return payloadTooLarge(`${(e.limit ?? INPUT_LIMITS.bodyBytes) / 1024 / 1024} MiB`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return unsupportedMediaType(String(req.headers['content-type']));
    case 'request.aborted':
      return new OperationOutcomeError(outcome('incomplete', 'The request body was cut off'), 400);
    default:
      if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500) {
        return new OperationOutcomeError(outcome('invalid', 'The request could not be read'), e.status);
      }
      return null;
  }
}

/** The one error handler: every error answer in the service is an OperationOutcome. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const requestId = String(res.locals.requestId ?? 'unknown');
    let known = toOutcomeError(error, req);
    if (!known) {
      logger.error('unhandled error', { requestId, route: routeOf(req), error });
      known = serverError(requestId);
    }
    if (res.headersSent) {
      // The answer began: ending it here could leave a cut-off body on a kept-alive connection,
      // and the client would read the next answer on that connection as the rest of this one.
      // The connection is closed instead, so only this request fails. An answer already written
      // whole is left to be flushed.
      logger.warn('error after the answer began', {
        requestId,
        route: routeOf(req),
        complete: res.writableEnded,
      });
      if (!res.writableEnded) res.destroy();
      return;
    }
    sendResource(res, known.status, known.outcome, known.headers);
  };
}
