/**
 * Request id, one log line per request, and bearer-key authentication of tenants.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Tenant } from '../config.js';
import { apiKeyDigest } from '../config.js';
import type { Logger } from '../log.js';
import { OperationOutcomeError, outcome, unauthorized } from '../fhir/outcomes.js';
import type { AccessTokens } from '../operations/auth/access-tokens.js';
import { looksLikeJwt } from '../operations/auth/access-tokens.js';
import type { Scope } from '../operations/auth/scopes.js';
import type { SessionPerson } from '../checks/store/session-store.js';

/**
 * A client's X-Request-Id goes into every log line of its request, so only opaque tokens are
 * taken: letters, digits, "-" and "_", at most 64, with at least one digit (a UUID, "req-123");
 * text such as "ali-hassan" or "0501234567:visit" is replaced by a generated id.
 */
const REQUEST_ID = /^(?=[^0-9]*[0-9])[A-Za-z0-9_-]{1,64}$/;

/** A request's id: its X-Request-Id when that is an opaque token, else a new one. */
export function requestIdOf(given: string | string[] | undefined): string {
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Takes X-Request-Id when it is an opaque token, else generates one; echoes it back. */
export const requestId: RequestHandler = (req, res, next) => {
  const id = requestIdOf(req.header('x-request-id'));
  res.locals.requestId = id;
  res.setHeader('X-Request-Id', id);
  next();
};

/** The route pattern of a request (never its URL, which may carry ids or patient data). */
export function routeOf(req: Request): string {
  const route = req.route as { path?: unknown } | undefined;
  return route ? `${req.baseUrl}${String(route.path)}` : 'unmatched';
}

export type RequestObserver = (method: string, route: string, status: number, seconds: number) => void;

/** What the request log and the request metrics say of one finished request. */
export interface FinishedRequest {
  requestId: string;
  method: string;
  /** The route pattern, never the raw URL (which may carry ids or patient data). */
  route: string;
  status: number;
  /** process.hrtime.bigint() when the request arrived. */
  started: bigint;
  tenant: string | undefined;
}

/**
 * Logs a finished request (one JSON line: method, route, status, duration, tenant) and shows it to
 * the metrics: the express app's requestLog and the CER read lane (src/http/cer-read-lane.ts).
 */
export function requestFinished(
  logger: Logger,
  observe: RequestObserver | undefined,
): (done: FinishedRequest) => void {
  return ({ requestId, method, route, status, started, tenant }) => {
    const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
    observe?.(method, route, status, durationMs / 1000);
    logger.info('request', {
      requestId,
      method,
      route,
      status,
      durationMs: Math.round(durationMs * 100) / 100,
      tenant,
    });
  };
}

/** When a request arrived, set by the first handler that sees it (the CER read lane, or requestLog). */
const ARRIVED = Symbol('arrived');

/**
 * The time a request arrived (process.hrtime.bigint()), marked now if no one marked it before: a
 * read the CER read lane hands to the app is logged and measured from its arrival, the lane's
 * time included.
 */
export function markArrival(req: IncomingMessage): bigint {
  const marked = req as IncomingMessage & { [ARRIVED]?: bigint };
  marked[ARRIVED] ??= process.hrtime.bigint();
  return marked[ARRIVED];
}

/** One JSON log line per request: method, route (the pattern, never the raw URL), status, duration. */
export function requestLog(logger: Logger, observe?: RequestObserver): RequestHandler {
  const finished = requestFinished(logger, observe);
  return (req, res, next) => {
    const started = markArrival(req);
    res.on('finish', () => {
      finished({
        requestId: String(res.locals.requestId),
        method: req.method,
        route: routeOf(req),
        status: res.statusCode,
        started,
        tenant: (res.locals.tenant as Tenant | undefined)?.id,
      });
    });
    next();
  };
}

/** The tenants' key digests, decoded once (not on every request). */
interface KeyDigest {
  tenant: Tenant;
  digest: Buffer;
}

function keyDigests(tenants: readonly Tenant[]): KeyDigest[] {
  return tenants.flatMap((tenant) =>
    tenant.apiKeyHashes.map((hash) => ({ tenant, digest: Buffer.from(hash, 'hex') })),
  );
}

/** Finds the key whose hash matches, comparing every hash in constant time. */
function findKey(digests: readonly KeyDigest[], key: string): KeyDigest | undefined {
  const digest = apiKeyDigest(key);
  let found: KeyDigest | undefined;
  for (const entry of digests) {
    // Every hash is compared, so the time does not tell which tenant (if any) matched.
    if (entry.digest.length === digest.length && timingSafeEqual(digest, entry.digest) && !found) {
      found = entry;
    }
  }
  return found;
}

/**
 * Who made a request (res.locals.principal): a SMART client with its granted scopes, or an API
 * key (all scopes), always of one tenant.
 */
export interface Principal {
  tenant: Tenant;
  /** A SMART client, an API key, or a person signed in to the page (src/http/sessions.ts). */
  kind: 'client' | 'api-key' | 'person';
  /** The client id, the API key's id (`key-` and a prefix of its SHA-256: not the key), or the person's `sub`. */
  id: string;
  /** Granted scopes; null = all (an API key). */
  scopes: Scope[] | null;
  /** A person: who, as the provider named them. */
  person?: SessionPerson;
  /** A person: their roles from the ID token. */
  roles?: readonly string[];
}

/** An API key's id for logs and the audit trail: a prefix of the digest the tenants file holds. */
export function apiKeyId(digest: Buffer): string {
  return `key-${digest.toString('hex').slice(0, 12)}`;
}

export interface AuthenticateOptions {
  /** SMART access tokens, accepted as Bearer beside the API keys. */
  tokens?: AccessTokens;
  /** Counts refused requests (they have no tenant: the operator's log gets a count, docs/auth.md). */
  refused?: (reason: RefusalReason) => void;
  now?: () => number;
}

/**
 * RFC 6750 section 3: an invalid or expired token is `error="invalid_token"` in WWW-Authenticate.
 * https://www.rfc-editor.org/rfc/rfc6750#section-3
 */
const invalidToken = () =>
  new OperationOutcomeError(outcome('login', 'The access token is not valid or has expired'), 401, {
    'WWW-Authenticate': 'Bearer realm="fhir", error="invalid_token"',
  });

/** Why a request was not authenticated (counted for the operator, docs/auth.md). */
export type RefusalReason = 'missing' | 'unknown-key' | 'bad-access-token';

/** Who sent a request, or why no one could be told. */
export type Identity = { principal: Principal } | { refused: RefusalReason; error: OperationOutcomeError };

/**
 * Tells who sent `Authorization: Bearer <api key or SMART access token>`: an API key is looked up
 * first (its digest, in constant time), and at once; a value shaped like a JWT that is no key is
 * verified as an access token (a promise). Used by authenticate and the CER read lane.
 */
export function identifier(
  tenants: readonly Tenant[],
  options: AuthenticateOptions = {},
): (authorization: string | undefined) => Identity | Promise<Identity> {
  const digests = keyDigests(tenants);
  const now = options.now ?? Date.now;
  return (header) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    const credential = match?.[1];
    const found = credential ? findKey(digests, credential) : undefined;
    if (found) {
      return {
        principal: { tenant: found.tenant, kind: 'api-key', id: apiKeyId(found.digest), scopes: null },
      };
    }
    if (credential && options.tokens && looksLikeJwt(credential)) {
      return options.tokens.verify(credential, now()).then((verified): Identity =>
        verified
          ? {
              principal: {
                tenant: verified.tenant,
                kind: 'client',
                id: verified.clientId,
                scopes: verified.scopes,
              },
            }
          : { refused: 'bad-access-token', error: invalidToken() },
      );
    }
    return match
      ? { refused: 'unknown-key', error: unauthorized('The API key is not valid') }
      : { refused: 'missing', error: unauthorized('Send Authorization: Bearer <api key>') };
  };
}

/**
 * `Authorization: Bearer <api key or SMART access token>` (identifier, above); sets
 * res.locals.tenant and res.locals.principal, or answers 401 (login).
 */
export function authenticate(tenants: readonly Tenant[], options: AuthenticateOptions = {}): RequestHandler {
  const identify = identifier(tenants, options);
  const settle = (res: Response, next: NextFunction, identity: Identity) => {
    if ('refused' in identity) {
      options.refused?.(identity.refused);
      next(identity.error);
      return;
    }
    res.locals.tenant = identity.principal.tenant;
    res.locals.principal = identity.principal;
    next();
  };
  return (req, res, next) => {
    const identity = identify(req.header('authorization'));
    if (identity instanceof Promise) {
      identity.then(
        (known) => settle(res, next, known),
        (error: unknown) => next(error),
      );
      return;
    }
    settle(res, next, identity);
  };
}
