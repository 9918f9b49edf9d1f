/**
 * The HTTP side: the express app with every route (FHIR, the front-desk page, metrics, tokens, CDS
 * Hooks), and ahead of it the CER read lane for the plain read (src/http/cer-read-lane.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express } from 'express';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { CheckService } from '../checks/service.js';
import type { Store } from '../checks/store/appointment-store.js';
import { createApp } from '../http/app.js';
import { alreadyAuthenticated, appPageRouter, type EhrScheduleControl } from '../http/app-page.js';
import { jwksRoute } from '../http/jwks-route.js';
import { Sessions } from '../http/sessions.js';
import { launchContextRoute, smartLaunchRoutes } from '../http/smart-launch.js';
import { oidcRoutes } from '../http/oidc.js';
import { cerReadLane, type Lane } from '../http/cer-read-lane.js';
import { fhirRoutes } from '../http/fhir-routes.js';
import type { FhirRouteDeps } from '../http/fhir-routes.js';
import { metricsRoute } from '../http/metrics-route.js';
import { identifier, requestFinished } from '../http/middleware.js';
import type { RequestObserver } from '../http/middleware.js';
import { createFhirKitResolver } from '../mapping/request/resolver.js';
import { FreshResults } from '../operations/binary.js';
import { conformanceTypes } from '../operations/conformance-read.js';
import { CerCache } from '../operations/read.js';
import type { UpstreamPort } from '../upstream/port.js';
import { readiness } from './readiness.js';
import type { Security } from './security.js';

export interface HttpSide {
  app: Express;
  /** Absent when CORS is configured: the cors middleware's headers are the app's. */
  readLane?: Lane;
  /** What the HTTP server calls for each request. */
  handle: (req: IncomingMessage, res: ServerResponse) => void;
}

export interface HttpContext {
  config: Config;
  logger: Logger;
  store: Store;
  upstream: UpstreamPort;
  upstreamUrl: string;
  metrics: Metrics;
  checks: CheckService;
  security: Security;
  /** Wakes the delivery of subscription notifications (a Subscription was written). */
  wakeNotifications: () => void;
  /** Reads each clinic's schedule from its EHR: the operator's "read now" and last round. */
  ehrSchedule?: EhrScheduleControl;
  version: string;
  baseUrl: string;
  now: () => number;
}

export function buildHttp(context: HttpContext): HttpSide {
  const { config, logger, store, upstream, metrics, checks, security, baseUrl, now } = context;
  const { audit } = security;
  const observe: RequestObserver = (method, route, status, seconds) =>
    metrics.httpDuration.observe({ method, route, status: String(status) }, seconds);
  const cerCache = new CerCache();
  const access = { tokens: security.tokens, refused: security.refused, now, audit, auditStore: audit };
  const sessions = new Sessions({
    store: store.sessions,
    idleMs: config.sessionIdleMinutes * 60_000,
    maxMs: config.sessionMaxHours * 3_600_000,
    secure: baseUrl.startsWith('https:'),
    now,
  });
  const fhirDeps: FhirRouteDeps = {
    tenants: config.tenants,
    version: context.version,
    features: {
      checks: true,
      conformance: conformanceTypes(),
      documents: true,
      cors: config.corsOrigins.length > 0,
      subscriptions: true,
      smartTokenUrl: `${baseUrl}/auth/token`,
      auditEvents: true,
    },
    subscriptions: { store, baseUrl, now, wake: context.wakeNotifications },
    checks,
    baseUrl,
    submitRatePerMinute: config.submitRatePerMinute,
    pollIntervalMs: config.pollIntervalMs,
    cerCache,
    security: access,
    freshResults: new FreshResults(upstream),
    documentOrigins: [new URL(context.upstreamUrl).origin],
    evidence: store.evidence,
    logger,
    onPrevisit: metrics.onPrevisit,
    submit: {
      checks,
      baseUrl,
      submitWaitMs: config.submitWaitMs,
      maxWaitMs: 60_000,
      resolver: config.sourceFhirBaseUrl ? createFhirKitResolver(config.sourceFhirBaseUrl) : undefined,
      now,
    },
  };
  // The page's copy of the check routes (/app/api/fhir): no subscriptions, no AuditEvent search,
  // behind the page's sign-in (a person's session, or an API key of a tenant without oidc).
  const { subscriptions: _subscriptions, ...pageFhirDeps } = fhirDeps;
  const pageFhir = fhirRoutes({
    ...pageFhirDeps,
    security: { audit },
    authenticateWith: alreadyAuthenticated,
  });
  const signInWithOidc = oidcRoutes({
    tenants: config.tenants,
    sessions,
    baseUrl,
    logger,
    audit,
    refused: security.refused,
  });
  const app = createApp({
    logger,
    ready: () => readiness(store, upstream),
    observe,
    extraRoutes: (express) => {
      metricsRoute(metrics, config.metricsToken)(express);
      jwksRoute(config.tenants)(express);
      security.routes(express);
    },
    corsOrigins: config.corsOrigins,
    appPage: appPageRouter({
      tenants: config.tenants,
      store,
      logger,
      now,
      audit,
      previsit: (tenant) => checks.previsitSettings(tenant),
      evidenceRetentionDays: config.evidenceRetentionDays ?? 730,
      sessions,
      refused: security.refused,
      fhir: pageFhir,
      signIn: (router) => {
        signInWithOidc(router);
        router.use(smartLaunchRoutes({ tenants: config.tenants, sessions, store, baseUrl, audit }));
      },
      launchContext: launchContextRoute(store),
      ...(context.ehrSchedule ? { ehrSchedule: context.ehrSchedule } : {}),
    }),
    fhir: fhirRoutes(fhirDeps),
  });

  // The plain CER read is answered ahead of express (src/http/cer-read-lane.ts); the cors
  // middleware's headers are the app's, so with CORS configured every request goes to the app.
  const readLane =
    config.corsOrigins.length === 0
      ? cerReadLane({
          identify: identifier(config.tenants, access),
          checks,
          cerCache,
          audit,
          finished: requestFinished(logger, observe),
          logger,
        })
      : undefined;
  const handle = readLane
    ? (req: IncomingMessage, res: ServerResponse) => {
        readLane(req, res, () => {
          app(req, res);
        });
      }
    : (req: IncomingMessage, res: ServerResponse) => {
        app(req, res);
      };
  return readLane ? { app, readLane, handle } : { app, handle };
}
