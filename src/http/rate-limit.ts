/**
 * Per-tenant rate limit on $submit (issue 6): one client must not flood the upstream, which asks
 * for "a handful of tasks in flight per clinic, not hundreds" (docs/upstream.md, Concurrency and rates).
 * A token bucket per tenant, per replica: `perMinute` tokens, refilled continuously. Beyond it,
 * 429 with Retry-After (https://hl7.org/fhir/R4/http.html#2.21.0.5 lists 429 for throttling).
 */
import type { RequestHandler } from 'express';
import type { Tenant } from '../config.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';

interface Bucket {
  tokens: number;
  at: number;
}

export function submitRateLimit(perMinute: number, now: () => number = Date.now): RequestHandler {
  const buckets = new Map<string, Bucket>();
  const ratePerMs = perMinute / 60_000;
  return (_req, res, next) => {
    const tenant = res.locals.tenant as Tenant | undefined;
    if (!tenant) {
      next();
      return;
    }
    const t = now();
    const bucket = buckets.get(tenant.id) ?? { tokens: perMinute, at: t };
    bucket.tokens = Math.min(perMinute, bucket.tokens + (t - bucket.at) * ratePerMs);
    bucket.at = t;
    buckets.set(tenant.id, bucket);
    if (bucket.tokens < 1) {
      const retryAfter = Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerMs / 1000));
      next(
        new OperationOutcomeError(
          outcome('throttled', `Too many eligibility checks from this clinic; try again in ${retryAfter} s.`),
          429,
          { 'Retry-After': String(retryAfter) },
        ),
      );
      return;
    }
    bucket.tokens -= 1;
    next();
  };
}
