/**
 * GET /metrics (Prometheus text format), optionally behind a bearer token.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type express from 'express';
import type { Metrics } from '../metrics.js';
import { unauthorized } from '../fhir/outcomes.js';

function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(a), digest(b));
}

export function metricsRoute(metrics: Metrics, token: string | null): (app: express.Express) => void {
  return (app) => {
    app.get('/metrics', async (req, res, next) => {
      if (token) {
        const given = /^Bearer\s+(\S+)$/i.exec(req.header('authorization') ?? '')?.[1];
        if (!given || !sameSecret(given, token)) {
          next(unauthorized('GET /metrics needs Authorization: Bearer <METRICS_TOKEN>'));
          return;
        }
      }
      res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    });
  };
}
