/**
 * The express shell: request ids, the request log, /health and /ready, the /fhir router
 * (src/http/fhir-routes.ts), and the one error handler (every error -> OperationOutcome).
 */
import { parse as parseQuery } from 'node:querystring';
import cors from 'cors';
import express from 'express';
import type { Router } from 'express';
import type { Logger } from '../log.js';
import { errorHandler, unknownRoute } from './fhir-json.js';
import type { FhirRoutes } from './fhir-routes.js';
import { requestId, requestLog } from './middleware.js';
import { securityHeaders } from './security-headers.js';
import type { RequestObserver } from './middleware.js';

export interface ReadyReport {
  ready: boolean;
  checks: Record<string, { ok: boolean; detail?: string }>;
}

export interface AppDeps {
  logger: Logger;
  ready: () => Promise<ReadyReport>;
  /** Sees every request's route, status and duration (metrics). */
  observe?: RequestObserver;
  /** Every route under /fhir (src/http/fhir-routes.ts): the router and the routes matched ahead of it. */
  fhir: FhirRoutes;
  /** Registers routes outside /fhir that carry their own auth (e.g. /metrics). */
  extraRoutes?: (app: express.Express) => void;
  /** The front-desk page and its JSON API, mounted at /app (src/http/app-page.ts). */
  appPage?: Router;
  /** Browser origins allowed to call /fhir (CORS_ORIGINS); empty = no CORS headers at all. */
  corsOrigins?: readonly string[];
}

/**
 * CORS for a browser app on another origin (a SMART app inside the EHR): only the configured
 * origins, the headers a FHIR client sends, and the answer headers it must read (Location of a
 * CER, ETag for versioned reads, Content-Location of an async status). Bearer keys, not cookies:
 * no credentials mode. https://fetch.spec.whatwg.org/#http-cors-protocol
 */
function corsFor(origins: readonly string[]) {
  return cors({
    origin: [...origins],
    methods: ['GET', 'POST', 'DELETE'],
    allowedHeaders: [
      'Authorization',
      'Content-Type',
      'Accept',
      'Prefer',
      'If-None-Match',
      'X-Request-Id',
      'Cache-Control',
    ],
    exposedHeaders: [
      'Location',
      'ETag',
      'Content-Location',
      'Last-Modified',
      'Retry-After',
      'X-Progress',
      'X-Request-Id',
    ],
    maxAge: 600,
  });
}

/** Builds the express app. Listening is the caller's job (main.ts, tests on port 0). */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // The 'simple' parser is querystring.parse with maxKeys 1000: the pairs past the 1000th would be
  // dropped silently and a search widened. Every pair is kept; the search refuses too many
  // (operations/search/params.ts, MAX_PAIRS).
  app.set('query parser', (query: string) => parseQuery(query, '&', '=', { maxKeys: 0 }));
  app.use(securityHeaders);
  app.use(requestId);
  app.use(requestLog(deps.logger, deps.observe));

  app.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/ready', async (_req, res) => {
    const report = await deps.ready();
    res.status(report.ready ? 200 : 503).json(report);
  });

  if (deps.corsOrigins?.length) app.use('/fhir', corsFor(deps.corsOrigins));
  // The same route pattern as inside the router (`/fhir` + its path): logs and metrics name it alike.
  for (const route of deps.fhir.direct) app[route.method](`/fhir${route.path}`, ...route.handlers);
  app.use('/fhir', deps.fhir.router);
  if (deps.appPage) app.use('/app', deps.appPage);

  deps.extraRoutes?.(app);
  app.use(unknownRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
