/**
 * The express shell: routing, auth, content negotiation, errors -> OperationOutcome.
 * Domain logic lives in src/fhir and src/checks; routes here only translate.
 */
import express from 'express';
import type { Router } from 'express';
import helmet from 'helmet';
import type { Tenant } from '../config.js';
import type { Logger } from '../log.js';
import { readConformance } from '../operations/conformance-read.js';
import { capabilityStatement } from '../operations/metadata.js';
import type { CapabilityFeatures } from '../operations/metadata.js';
import { errorHandler, negotiate, sendResource, unknownRoute } from './fhir-json.js';
import { authenticate, requestId, requestLog } from './middleware.js';
import type { RequestObserver } from './middleware.js';

export interface ReadyReport {
  ready: boolean;
  checks: Record<string, { ok: boolean; detail?: string }>;
}

export interface AppDeps {
  logger: Logger;
  tenants: readonly Tenant[];
  publicBaseUrl: string;
  version: string;
  features: CapabilityFeatures;
  ready: () => Promise<ReadyReport>;
  /** Sees every request's route, status and duration (metrics). */
  observe?: RequestObserver;
  /** Registers the authenticated FHIR routes (under /fhir). */
  fhirRoutes?: (router: Router) => void;
  /** Registers routes outside /fhir that carry their own auth (e.g. /metrics). */
  extraRoutes?: (app: express.Express) => void;
}

/** Builds the express app. Listening is the caller's job (main.ts, tests on port 0). */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(helmet({ contentSecurityPolicy: { directives: { defaultSrc: ["'none'"] } } }));
  app.use(requestId);
  app.use(requestLog(deps.logger, deps.observe));

  app.get('/health', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/ready', async (_req, res) => {
    const report = await deps.ready();
    res.status(report.ready ? 200 : 503).json(report);
  });

  const metadataDate = new Date().toISOString();
  const fhir = express.Router();
  fhir.use(negotiate);
  fhir.get('/metadata', (_req, res) => {
    sendResource(
      res,
      200,
      capabilityStatement(deps.features, deps.publicBaseUrl, deps.version, metadataDate),
    );
  });
  for (const type of deps.features.conformance) {
    fhir.get(`/${type}/:id`, (req, res) => {
      const answer = readConformance(type, String(req.params.id));
      sendResource(res, answer.status, answer.body, answer.headers);
    });
  }
  fhir.use(authenticate(deps.tenants));
  deps.fhirRoutes?.(fhir);
  app.use('/fhir', fhir);

  deps.extraRoutes?.(app);
  app.use(unknownRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
