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
import { authenticate } from './middleware.js';
import { audited } from './security.js';

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
  /** A tenant's pre-visit settings (its time zone: the page's day). */
  previsit: (tenant: Tenant) => PrevisitSettings;
  now: () => number;
  /** The audit trail: a guard reset is recorded (docs/auth.md). */
  audit?: AuditTrail;
}

const PAYER = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/;

const pageHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('Content-Security-Policy', PAGE_CSP);
  res.setHeader('Cache-Control', 'no-cache');
  next();
};

/** The /app router: the JSON API first (authenticated), then the static page. */
export function appPageRouter(deps: AppPageDeps): Router {
  const router = express.Router();
  const api = express.Router();
  api.use(authenticate(deps.tenants));
  api.get('/payers', async (_req, res) => {
    res.json(await payerOptions(deps.store, res.locals.tenant as Tenant));
  });
  api.get('/settings', (_req, res) => {
    res.json(deskSettings(res.locals.tenant as Tenant));
  });
  api.get('/visit-types', (_req, res) => {
    res.json({ visitTypes: visitTypeOptions() });
  });
  api.get('/operator', async (_req, res) => {
    res.json(await operatorView(deps.store, res.locals.tenant as Tenant, deps.now()));
  });
  // The appointments of a day (docs/previsit.md); `day` YYYY-MM-DD, default today in the clinic's zone.
  api.get('/appointments', async (req, res) => {
    const tenant = res.locals.tenant as Tenant;
    const day = typeof req.query.day === 'string' && req.query.day !== '' ? req.query.day : undefined;
    res.json(await appointmentsView(deps.store, tenant, deps.previsit(tenant), day, deps.now()));
  });
  // Whose check each recent check is (docs/front-desk.md): `id` repeated, the CER ids listed.
  api.get('/recent-names', async (req, res) => {
    const raw = req.query.id;
    const ids = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).map(String);
    res.json({ names: await recentNames(deps.store, res.locals.tenant as Tenant, ids) });
  });
  api.post(
    '/guards/:payer/reset',
    audited(deps.audit, { action: 'E', interaction: 'operation', operation: 'guard-reset' }),
    async (req, res) => {
      const payer = String(req.params.payer);
      if (!PAYER.test(payer)) throw badRequest('Not a payer code', 'payer');
      await resetGuard(deps.store, res.locals.tenant as Tenant, payer, deps.logger);
      res.status(204).end();
    },
  );
  router.use('/api', api);
  router.use(pageHeaders, express.static(APP_DIR, { index: 'index.html', fallthrough: true }));
  return router;
}
