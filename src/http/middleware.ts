/**
 * Request id, one log line per request, and bearer-key authentication of tenants.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { Tenant } from '../config.js';
import { hashApiKey } from '../config.js';
import type { Logger } from '../log.js';
import { unauthorized } from '../fhir/outcomes.js';

/**
 * A client's X-Request-Id goes into every log line of its request, so only opaque tokens are
 * taken: letters, digits, "-" and "_", at most 64, with at least one digit (a UUID, "req-123");
 * text such as "ali-hassan" or "0501234567:visit" is replaced by a generated id.
 */
const REQUEST_ID = /^(?=[^0-9]*[0-9])[A-Za-z0-9_-]{1,64}$/;

/** Takes X-Request-Id when it is an opaque token, else generates one; echoes it back. */
export const requestId: RequestHandler = (req, res, next) => {
  const given = req.header('x-request-id');
  const id = given && REQUEST_ID.test(given) ? given : randomUUID();
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

/** One JSON log line per request: method, route (the pattern, never the raw URL), status, duration. */
export function requestLog(logger: Logger, observe?: RequestObserver): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
      const route = routeOf(req);
      observe?.(req.method, route, res.statusCode, durationMs / 1000);
      logger.info('request', {
        requestId: String(res.locals.requestId),
        method: req.method,
        route,
        status: res.statusCode,
        durationMs: Math.round(durationMs * 100) / 100,
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

/** Finds the tenant whose key hash matches, comparing every hash in constant time. */
function findTenant(digests: readonly KeyDigest[], key: string): Tenant | undefined {
  const digest = Buffer.from(hashApiKey(key), 'hex');
  let found: Tenant | undefined;
  for (const entry of digests) {
    // Every hash is compared, so the time does not tell which tenant (if any) matched.
    if (entry.digest.length === digest.length && timingSafeEqual(digest, entry.digest) && !found) {
      found = entry.tenant;
    }
  }
  return found;
}

/** `Authorization: Bearer <api key>`; sets res.locals.tenant or answers 401 (login). */
export function authenticate(tenants: readonly Tenant[]): RequestHandler {
  const digests = keyDigests(tenants);
  return (req, res, next) => {
    const header = req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const tenant = match?.[1] ? findTenant(digests, match[1]) : undefined;
    if (!tenant) {
      next(unauthorized(match ? 'The API key is not valid' : 'Send Authorization: Bearer <api key>'));
      return;
    }
    res.locals.tenant = tenant;
    next();
  };
}
