/**
 * The front-desk page at /app/ (docs/front-desk.md): the static files of app/ in the repository
 * (plain HTML, CSS and ES modules: no build step, no third-party asset), and its small JSON API
 * under /app/api/, authenticated with the tenant's key like /fhir and scoped to that tenant.
 */
import { fileURLToPath } from 'node:url';
import express from 'express';
import type { RequestHandler, Router } from 'express';
import type { Store } from '../checks/store/appointment-store.js';
import type { PrevisitSettings } from '../checks/previsit.js';
import { appointmentsView } from '../operations/appointments-view.js';
import { recentNames } from '../operations/recent-names.js';
import type { Tenant } from '../config.js';
import { badRequest } from '../fhir/outcomes.js';
import type { Logger } from '../log.js';
import {
  deskSettings,
  operatorView,
  payerOptions,
  resetGuard,
  visitTypeOptions,
} from '../operations/front-desk.js';
import type { AuditTrail } from '../checks/audit.js';
import type { ScheduleRound } from '../checks/store/ehr-schedule-store.js';
import { scheduleView } from '../operations/ehr-schedule-view.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import type { FhirRoutes } from './fhir-routes.js';
import { authenticate } from './middleware.js';
import type { AuthenticateOptions, Principal } from './middleware.js';
import { audited } from './security.js';
import type { ActiveSession, Sessions } from './sessions.js';
import { isOperator, requireOperator, sessionAuth } from './sessions.js';

/** app/ at the repository root, from src/http/ (tsx) and from dist/http/ (compiled) alike. */
export const APP_DIR = fileURLToPath(new URL('../../app/', import.meta.url));

/**
 * The page's own Content-Security-Policy (the API's is default-src 'none'): its scripts, styles
 * and requests from this origin only, no inline script, no plugin, not framed.
 * https://www.w3.org/TR/CSP3/
 */
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "frame-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export interface AppPageDeps {
  tenants: readonly Tenant[];
  store: Store;
  logger: Logger;
  /** EVIDENCE_RETENTION_DAYS: how long the page says kept documents stay. */
  evidenceRetentionDays?: number;
  /** A tenant's pre-visit settings (its time zone: the page's day). */
  previsit: (tenant: Tenant) => PrevisitSettings;
  now: () => number;
  /** The audit trail: a guard reset is recorded (docs/auth.md). */
  audit?: AuditTrail;
  /** Page sessions of people signed in (docs/signin.md); absent: API keys only. */
  sessions?: Sessions;
  /** Counts refused API calls (no tenant to audit them under). */
  refused?: AuthenticateOptions['refused'];
  /**
   * The FHIR routes the page calls under /app/api/fhir ($submit, reads, searches, $estimate,
   * documents), behind the page's own sign-in (session or API key).
   */
  fhir?: FhirRoutes;
  /** Routes beside the API (sign-in, callback, logout, launch), mounted on /app ahead of the page. */
  signIn?: (router: Router) => void;
  /** GET /app/api/launch-context: what a SMART launch opened the page on (docs/smart-launch.md). */
  launchContext?: RequestHandler;
  /** The EHR's schedule (docs/ehr-schedule.md): its last round, and a round now. */
  ehrSchedule?: EhrScheduleControl;
}

/** What the page asks of the worker that reads the EHR's schedule. */
export interface EhrScheduleControl {
  readNow(tenantId: string): Promise<void>;
  lastRound(tenantId: string): Promise<ScheduleRound | null>;
}

const PAYER = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/;

const pageHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('Content-Security-Policy', PAGE_CSP);
  res.setHeader('Cache-Control', 'no-cache');
  next();
};

/**
 * Who calls /app/api: a person's session (cookie, and X-CSRF-Token on every non-GET), else the
 * tenant's API key as Bearer, unless the tenant signs people in with OpenID Connect: then its keys
 * are refused here (machines keep /fhir).
 */
export function appAuthenticate(deps: Pick<AppPageDeps, 'tenants' | 'sessions' | 'refused'>): RequestHandler {
  const bySession = deps.sessions ? sessionAuth(deps.sessions, deps.tenants) : undefined;
  const byKey = authenticate(deps.tenants, deps.refused ? { refused: deps.refused } : {});
  const keyOnly: RequestHandler = (req, res, next) => {
    if (res.locals.sessionEnded && !req.header('authorization')) {
      next(
        new OperationOutcomeError(outcome('login', 'The session has ended: sign in again'), 401, {
          'WWW-Authenticate': 'Bearer realm="app"',
        }),
      );
      return;
    }
    byKey(req, res, (error?: unknown) => {
      const principal = res.locals.principal as Principal | undefined;
      if (error || !principal?.tenant.oidc) {
        next(error);
        return;
      }
      res.locals.principal = undefined;
      res.locals.tenant = undefined;
      deps.refused?.('unknown-key');
      next(
        new OperationOutcomeError(
          outcome('login', 'This clinic signs people in with their clinic account, not an API key'),
          401,
          { 'WWW-Authenticate': 'Bearer realm="app"' },
        ),
      );
    });
  };
  if (!bySession) return keyOnly;
  return (req, res, next) => {
    bySession(req, res, (error?: unknown) => {
      if (error || res.locals.principal) next(error);
      else keyOnly(req, res, next);
    });
  };
}

/** Passes a request already authenticated by appAuthenticate (the page's FHIR routes). */
export const alreadyAuthenticated: RequestHandler = (_req, res, next) => {
  if (res.locals.principal) next();
  else next(new OperationOutcomeError(outcome('login', 'Sign in first'), 401));
};

/** The /app router: the sign-in routes, the JSON API (authenticated), then the static page. */
export function appPageRouter(deps: AppPageDeps): Router {
  const router = express.Router();
  deps.signIn?.(router);
  const api = express.Router();
  api.use(appAuthenticate(deps));
  // Who is signed in (docs/signin.md): a session only; an API key has none (401).
  api.get('/session', (_req, res, next) => {
    const session = res.locals.session as ActiveSession | undefined;
    if (!session) {
      next(new OperationOutcomeError(outcome('login', 'No session: sign in first'), 401));
      return;
    }
    res.setHeader('Cache-Control', 'no-store');
    res.json({
      name: session.person.name,
      roles: session.roles,
      tenant: session.tenantId,
      expiresAt: new Date(session.endsAt).toISOString(),
      csrfToken: session.csrfToken,
      operator: isOperator(res.locals.principal as Principal),
    });
  });
  api.get('/payers', async (_req, res) => {
    res.json(await payerOptions(deps.store, res.locals.tenant as Tenant));
  });
  api.get('/settings', (_req, res) => {
    res.json(deskSettings(res.locals.tenant as Tenant, deps.evidenceRetentionDays));
  });
  api.get('/visit-types', (_req, res) => {
    res.json({ visitTypes: visitTypeOptions() });
  });
  api.get(
    '/operator',
    audited(deps.audit, { action: 'R', interaction: 'read', operation: 'operator-view' }),
    requireOperator,
    async (_req, res) => {
      const tenant = res.locals.tenant as Tenant;
      const round =
        tenant.ehrSchedule && deps.ehrSchedule ? await deps.ehrSchedule.lastRound(tenant.id) : null;
      res.json({
        ...(await operatorView(deps.store, tenant, deps.now())),
        ehrSchedule: scheduleView(tenant, round),
      });
    },
  );
  // "Read the schedule now" (docs/ehr-schedule.md): the clinic's next round is due at once.
  api.post(
    '/ehr-schedule/rounds',
    audited(deps.audit, { action: 'E', interaction: 'operation', operation: 'ehr-schedule-read' }),
    requireOperator,
    async (_req, res) => {
      const tenant = res.locals.tenant as Tenant;
      if (!tenant.ehrSchedule || !deps.ehrSchedule)
        throw new OperationOutcomeError(
          outcome('not-found', 'This clinic does not read its schedule from an EHR (no ehrSchedule)'),
          404,
        );
      await deps.ehrSchedule.readNow(tenant.id);
      res.status(202).json({ status: 'started' });
    },
  );
  // The appointments of a day (docs/previsit.md); `day` YYYY-MM-DD, default today in the clinic's zone.
  api.get(
    '/appointments',
    audited(deps.audit, { action: 'E', interaction: 'search-type', operation: 'appointments' }),
    async (req, res) => {
      const tenant = res.locals.tenant as Tenant;
      const day = typeof req.query.day === 'string' && req.query.day !== '' ? req.query.day : undefined;
      res.json(await appointmentsView(deps.store, tenant, deps.previsit(tenant), day, deps.now()));
    },
  );
  // Whose check each recent check is (docs/front-desk.md): `id` repeated, the CER ids listed.
  api.get(
    '/recent-names',
    audited(deps.audit, { action: 'R', interaction: 'read', operation: 'recent-names' }),
    async (req, res) => {
      const raw = req.query.id;
      const ids = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map(String);
      res.json({ names: await recentNames(deps.store, res.locals.tenant as Tenant, ids) });
    },
  );
  api.post(
    '/guards/:payer/reset',
    audited(deps.audit, { action: 'E', interaction: 'operation', operation: 'guard-reset' }),
    requireOperator,
    async (req, res) => {
      const payer = String(req.params.payer);
      if (!PAYER.test(payer)) throw badRequest('Not a payer code', 'payer');
      await resetGuard(deps.store, res.locals.tenant as Tenant, payer, deps.logger);
      res.status(204).end();
    },
  );
  if (deps.launchContext) {
    api.get(
      '/launch-context',
      audited(deps.audit, { action: 'R', interaction: 'read', operation: 'launch-context' }),
      deps.launchContext,
    );
  }
  if (deps.fhir) {
    for (const route of deps.fhir.direct) api[route.method](`/fhir${route.path}`, ...route.handlers);
    api.use('/fhir', deps.fhir.router);
  }
  router.use('/api', api);
  router.use(pageHeaders, express.static(APP_DIR, { index: 'index.html', fallthrough: true }));
  return router;
}
